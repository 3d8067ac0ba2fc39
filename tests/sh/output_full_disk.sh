#!/bin/sh
# An output that does not fit on the disk is an error, never a cut-off file with exit 0:
# `report --out DIR` (HTML, markdown) on a full file system exits 1 with the OS's reason
# and the path, leaves no partial report.html (an older one stays as it was) and no
# temporary file; `sql` and `report` into /dev/full exit 1 and say why. The limit is the
# kernel's per-process file size (ulimit -f, EFBIG) and /dev/full (ENOSPC), which need no
# mount; as root, where a tmpfs can be mounted, also a real full file system.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
FIX=tests/fixtures/runlogs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
case "$LB" in /*) ;; *) LB="$PWD/$LB" ;; esac
tmp=$(mktemp -d) || exit 1
mnt=""
trap '[ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
logs=$(ls "$FIX"/run-*.jsonl | grep -v -e newer)
db="$tmp/r.db"
"$LB" collect --db "$db" $logs >/dev/null 2>&1 || { echo "FAIL: collect"; exit 1; }
# a reader's -shm must fit under the file-size limit below: make it now
"$LB" sql --db "$db" "SELECT 1" >/dev/null || { echo "FAIL: sql"; exit 1; }

expect_fail() { # label path-of-out: after the command ran, exit 1, the reason, no "wrote"
	[ "$rc" = 1 ] || { cat "$tmp/err"; echo "FAIL: $1: exit $rc, want 1"; fail=1; }
	grep -q "^wrote" "$tmp/err" && { echo "FAIL: $1: says 'wrote'"; fail=1; }
}

# 1. HTML report past a file-size limit (64 KiB; the page is larger): the old page stays
mkdir "$tmp/out"
echo "old report" >"$tmp/out/report.html"
sh -c "trap '' XFSZ; ulimit -f 128; exec \"$LB\" report --db \"$db\" --figure all --format html --out \"$tmp/out\"" \
	>/dev/null 2>"$tmp/err"
rc=$?
expect_fail "html past the limit"
grep -q "^error: cannot write '$tmp/out/report.html': File too large$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: html past the limit: message"; fail=1; }
[ "$(cat "$tmp/out/report.html")" = "old report" ] || { echo "FAIL: html past the limit: the old report was changed"; fail=1; }
[ "$(ls "$tmp/out")" = report.html ] || { ls "$tmp/out"; echo "FAIL: html past the limit: files left behind"; fail=1; }
# the same without a limit: written whole
"$LB" report --db "$db" --figure all --format html --out "$tmp/out" >/dev/null 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: html"; fail=1; }
tail -c 8 "$tmp/out/report.html" | grep -q '</html>' || { echo "FAIL: html: not whole"; fail=1; }

# 2. stdout on a full device
"$LB" report --db "$db" --figure all --format md >/dev/full 2>"$tmp/err"
rc=$?
expect_fail "markdown to /dev/full"
grep -q "^error: cannot write the report to standard output: No space left on device$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: markdown to /dev/full: message"; fail=1; }
for f in table csv tsv; do
	"$LB" sql --db "$db" --format $f "SELECT * FROM steps" >/dev/full 2>"$tmp/err"
	rc=$?
	expect_fail "sql --format $f to /dev/full"
	[ "$(cat "$tmp/err")" = "error: cannot write the result to standard output: No space left on device" ] ||
		{ cat "$tmp/err"; echo "FAIL: sql --format $f to /dev/full: message"; fail=1; }
done
"$LB" help >/dev/full 2>"$tmp/err"
rc=$?
expect_fail "help to /dev/full"

# 3. a real full file system (root, where a tmpfs can be mounted)
if [ "$(id -u)" = 0 ] && mkdir "$tmp/tmpfs" && mount -t tmpfs -o size=256k tmpfs "$tmp/tmpfs" 2>/dev/null; then
	mnt="$tmp/tmpfs"
	dd if=/dev/zero of="$mnt/filler" bs=1k count=200 2>/dev/null
	for f in html md; do
		"$LB" report --db "$db" --figure all --format $f --out "$mnt/rep" >/dev/null 2>"$tmp/err"
		rc=$?
		if [ $f = html ]; then # 98 KB in 56 KB of room
			expect_fail "tmpfs: $f"
			grep -q "^error: cannot write '$mnt/rep/report.$f': No space left on device$" "$tmp/err" ||
				{ cat "$tmp/err"; echo "FAIL: tmpfs: $f: message"; fail=1; }
			[ -e "$mnt/rep/report.$f" ] && { echo "FAIL: tmpfs: a partial report.$f"; fail=1; }
		else # the markdown fits: written whole
			[ $rc = 0 ] || { cat "$tmp/err"; echo "FAIL: tmpfs: $f"; fail=1; }
		fi
	done
	[ "$(ls "$mnt/rep")" = report.md ] || { ls "$mnt/rep"; echo "FAIL: tmpfs: files left behind"; fail=1; }
	# the disk full to the last block: the markdown fails too, the one written stays
	cp "$mnt/rep/report.md" "$tmp/report.md"
	dd if=/dev/zero of="$mnt/filler2" bs=1k 2>/dev/null
	"$LB" report --db "$db" --figure all --format md --out "$mnt/rep" >/dev/null 2>"$tmp/err"
	rc=$?
	expect_fail "tmpfs: full: md"
	grep -q "^error: cannot write '$mnt/rep/report.md': No space left on device$" "$tmp/err" ||
		{ cat "$tmp/err"; echo "FAIL: tmpfs: full: md: message"; fail=1; }
	cmp -s "$tmp/report.md" "$mnt/rep/report.md" || { echo "FAIL: tmpfs: full: the older report.md changed"; fail=1; }
	[ "$(ls "$mnt/rep")" = report.md ] || { ls "$mnt/rep"; echo "FAIL: tmpfs: full: files left behind"; fail=1; }
	umount "$mnt" && mnt=""
fi

[ $fail = 0 ] && echo "output on a full disk: ok"
exit $fail
