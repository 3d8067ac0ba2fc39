#!/bin/sh
# layoutbench-train's refusals and failure classes, end to end: usage errors exit 2 with
# no run log (bad flag, impossible layout with lb_layout_check's reason, a rank count
# other than tp*pp*dp, cuda in a CPU build, or no GPU in a CUDA one); --mem-limit makes an oom (exit 3, end record class
# oom); a huge learning rate diverges (exit 5); SIGTERM ends the run as killed (143);
# a good run ends ok with one step line per step; --help lists layout and trainer flags.
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
tiny="--model tiny --seq-len 32 --global-batch 2 --micro-batch 1 --steps 3 --warmup 1 --quiet"

expect() { # name want-rc cmd...
	name=$1 want=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" = "$want" ] || { echo "FAIL: $name: exit $rc, want $want"; cat "$tmp/err"; fail=1; }
}
last_end() { # dir -> the end record of the only log in dir
	tail -n 1 "$1"/run-*.jsonl
}

expect bad-flag 2 "$TRAIN" --bogus 1
grep -q "^error: unknown flag '--bogus'" "$tmp/err" || { echo "FAIL: bad-flag message"; fail=1; }
expect bad-value 2 "$TRAIN" --lr fast
expect impossible 2 "$TRAIN" --model tiny --heads 3 --run-dir "$tmp/none"
grep -q "^error: 3 heads do not divide hidden=64$" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: layout reason"; fail=1; }
expect tp2 2 "$TRAIN" --tp 2 --gpus-per-node 2 --run-dir "$tmp/none"
grep -q "^error: --nproc-per-node 1: the layout has tp\*pp\*dp=2 rank(s); start that many (--nproc-per-node 2) or run under srun -n 2$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: tp=2 rank count message"; fail=1; }
[ -e "$tmp/none" ] && { echo "FAIL: a usage error wrote a run log"; fail=1; }
# --device cuda: a CPU-only build refuses it as a usage error; a CUDA build on a machine
# without a GPU ends the run as an error that names the missing device
"$TRAIN" $tiny --device cuda --run-dir "$tmp/cuda" >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without the CUDA backend" "$tmp/err"; then
	[ "$rc" = 2 ] || { echo "FAIL: cuda in a CPU build: exit $rc, want 2"; fail=1; }
	grep -q "^error: --device cuda: this layoutbench-train was built without the CUDA backend (nvcc was not found at build time); rebuild with 'make CUDA_HOME=DIR' where DIR holds bin/nvcc, or run with --device cpu$" "$tmp/err" ||
		{ cat "$tmp/err"; echo "FAIL: cuda message"; fail=1; }
elif grep -q "no CUDA device" "$tmp/err"; then
	[ "$rc" = 1 ] || { echo "FAIL: cuda without a GPU: exit $rc, want 1"; fail=1; }
	last_end "$tmp/cuda" | grep -q '"status":"failed","class":"error"' ||
		{ echo "FAIL: cuda without a GPU: end record"; last_end "$tmp/cuda"; fail=1; }
else
	[ "$rc" = 0 ] || { echo "FAIL: cuda: exit $rc"; cat "$tmp/err"; fail=1; }
fi
expect help 0 "$TRAIN" --help
for f in --model --seq-len --checkpointing --device --run-dir --data --data-dtype --lr \
	--weight-decay --clip --mem-limit --nproc-per-node --comm-timeout; do
	grep -q -- "$f" "$tmp/out" || { echo "FAIL: --help does not list $f"; fail=1; }
done

# ok
expect ok 0 "$TRAIN" $tiny --run-dir "$tmp/ok"
[ "$(grep -c '"type":"step"' "$tmp"/ok/run-*.jsonl)" = 3 ] || { echo "FAIL: ok: step lines"; fail=1; }
last_end "$tmp/ok" | grep -q '"status":"ok","class":null' || { echo "FAIL: ok: end record"; fail=1; }

# oom by --mem-limit, and by the environment
expect oom 3 "$TRAIN" $tiny --mem-limit 200K --run-dir "$tmp/oom"
last_end "$tmp/oom" | grep -q '"status":"failed","class":"oom".*"exit_code":3' ||
	{ last_end "$tmp/oom"; echo "FAIL: oom end record"; fail=1; }
# the message says what was held, which limit, and only advice that can still help
last_end "$tmp/oom" | grep -q 'the next allocation would pass the --mem-limit of 204800 bytes); lower the micro-batch' && {
	last_end "$tmp/oom"; echo "FAIL: oom advice at micro-batch 1"; fail=1; }
last_end "$tmp/oom" | grep -q 'bytes = 0.00 GiB held; the next allocation would pass the --mem-limit of 204800 bytes); checkpoint activations' ||
	{ last_end "$tmp/oom"; echo "FAIL: oom message"; fail=1; }
expect oom-ckpt 3 "$TRAIN" $tiny --checkpointing full --mem-limit 200K --run-dir "$tmp/oom3"
last_end "$tmp/oom3" | grep -q 'split the model (tp, pp)' ||
	{ last_end "$tmp/oom3"; echo "FAIL: oom advice with checkpointing"; fail=1; }
expect oom-env 3 env LAYOUTBENCH_MEM_LIMIT=200K "$TRAIN" $tiny --run-dir "$tmp/oom2"

# diverged
expect diverged 5 "$TRAIN" $tiny --lr 1e30 --clip 0 --run-dir "$tmp/div"
last_end "$tmp/div" | grep -q '"class":"diverged".*"exit_code":5' ||
	{ last_end "$tmp/div"; echo "FAIL: diverged end record"; fail=1; }

# a token file with an id >= vocab: class error, the message names the offset
i=0
: >"$tmp/tok.u16"
while [ $i -lt 40 ]; do
	if [ $i = 30 ]; then printf '\054\001' >>"$tmp/tok.u16"; else printf '\007\000' >>"$tmp/tok.u16"; fi
	i=$((i + 1))
done
expect data-ok 0 "$TRAIN" $tiny --seq-len 4 --data "$tmp/tok.u16" --run-dir "$tmp/dataok"
expect data-bad 1 "$TRAIN" $tiny --seq-len 8 --data "$tmp/tok.u16" --run-dir "$tmp/data"
last_end "$tmp/data" | grep -q '"class":"error","message":"data file .*token id 300 at token offset 30 (byte offset 60) is >= vocab 256","rank":0,"exit_code":1' ||
	{ last_end "$tmp/data"; echo "FAIL: data error end record"; fail=1; }

# killed by SIGTERM
"$TRAIN" --model tiny --seq-len 32 --steps 100000 --quiet --run-dir "$tmp/kill" 2>/dev/null &
pid=$!
i=0
while [ $i -lt 50 ] && ! grep -q '"type":"step"' "$tmp"/kill/run-*.jsonl 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] || { echo "FAIL: killed: exit $rc, want 143"; fail=1; }
last_end "$tmp/kill" | grep -q '"class":"killed".*"exit_code":143' ||
	{ last_end "$tmp/kill"; echo "FAIL: killed end record"; fail=1; }

[ $fail = 0 ] && echo "train failures: ok"
exit $fail
