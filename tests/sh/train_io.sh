#!/bin/sh
# layoutbench-train on a full disk and on SIGHUP: a run log that cannot take its next line
# (the kernel's per-process file-size limit, EFBIG, as a full disk's ENOSPC; as root on a
# small tmpfs too) ends the run with exit 7 (io_error), the reason and the path on stderr,
# the log cut back to whole lines and, where the end record still fits, that record
# (class io_error); it never exits 0 with its log cut short. SIGHUP (a closed terminal)
# ends a run as SIGTERM does: exit 129, an end record of class killed; through the
# launcher of several ranks too.
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"
LB="$(pwd)/$BUILD/layoutbench"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
mnt=""
trap '[ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
long="--model tiny --seq-len 32 --global-batch 2 --micro-batch 1 --steps 400 --warmup 1 --quiet"

check_io() { # label dir: exit 7, the message, whole lines, the end record if any
	[ "$rc" = 7 ] || { cat "$tmp/err"; echo "FAIL: $1: exit $rc, want 7"; fail=1; }
	grep -q "cannot write run log '$2/run-[^']*\.jsonl': $3 (class io_error)" "$tmp/err" ||
		{ cat "$tmp/err"; echo "FAIL: $1: message"; fail=1; }
	log=$(ls "$2"/run-*.jsonl)
	[ "$(tail -c 1 "$log" | od -An -c | tr -d ' ')" = '\n' ] || { echo "FAIL: $1: the log ends inside a line"; fail=1; }
	"$LB" collect --db "$tmp/$1.db" "$log" >"$tmp/cout" 2>&1 ||
		{ cat "$tmp/cout"; echo "FAIL: $1: the log does not collect"; fail=1; }
	grep -q ' 0 warnings, 0 errors$' "$tmp/cout" || { cat "$tmp/cout"; echo "FAIL: $1: the log has a broken line"; fail=1; }
	steps=$(grep -c '"type":"step"' "$log")
	[ "$steps" -ge 1 ] && [ "$steps" -lt 400 ] || { echo "FAIL: $1: $steps steps"; fail=1; }
	if grep -q '"type":"end"' "$log"; then
		tail -n 1 "$log" | grep -q '"status":"failed","class":"io_error".*"exit_code":7' ||
			{ tail -n 1 "$log"; echo "FAIL: $1: end record"; fail=1; }
	fi
}

# 1. a file-size limit of 4 KiB: the header and some steps fit
sh -c "trap '' XFSZ; ulimit -f 8; exec \"$TRAIN\" $long --run-dir \"$tmp/lim\"" >/dev/null 2>"$tmp/err"
rc=$?
check_io limit "$tmp/lim" "File too large"

# 2. a full tmpfs (root, where one can be mounted); two ranks through the launcher too
# (its end record from rank 0's report; the file-size limit would stop their shared
# memory as well)
if [ "$(id -u)" = 0 ] && mkdir "$tmp/tmpfs" && mount -t tmpfs -o size=64k tmpfs "$tmp/tmpfs" 2>/dev/null; then
	mnt="$tmp/tmpfs"
	dd if=/dev/zero of="$mnt/filler" bs=1k count=52 2>/dev/null
	"$TRAIN" $long --run-dir "$mnt/run" >/dev/null 2>"$tmp/err"
	rc=$?
	check_io tmpfs "$mnt/run" "No space left on device"
	rm -rf "$mnt/run"
	"$TRAIN" $long --dp 2 --gpus-per-node 2 --nproc-per-node 2 --run-dir "$mnt/run2" >/dev/null 2>"$tmp/err"
	rc=$?
	check_io tmpfs-launcher "$mnt/run2" "No space left on device"
	umount "$mnt" && mnt=""
fi

# 3. SIGHUP: killed, with its end record (one rank, and two through the launcher)
hup() { # label dir trainer-args...: start, wait for a step, SIGHUP, check
	label=$1 dir=$2
	shift 2
	"$TRAIN" --model tiny --seq-len 32 --steps 100000 --quiet --run-dir "$dir" "$@" 2>/dev/null &
	pid=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q '"type":"step"' "$dir"/run-*.jsonl 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -HUP $pid
	wait $pid
	rc=$?
	[ $rc = 129 ] || { echo "FAIL: $label: exit $rc, want 129"; fail=1; }
	tail -n 1 "$dir"/run-*.jsonl | grep -q '"status":"failed","class":"killed".*"exit_code":129' ||
		{ tail -n 1 "$dir"/run-*.jsonl; echo "FAIL: $label: end record"; fail=1; }
}
hup sighup "$tmp/hup"
tail -n 1 "$tmp"/hup/run-*.jsonl | grep -q 'stopped by signal 1 (SIGHUP)' || { echo "FAIL: sighup: message"; fail=1; }
hup sighup-launcher "$tmp/hup2" --dp 2 --gpus-per-node 2 --nproc-per-node 2

[ $fail = 0 ] && echo "train io: ok"
exit $fail
