#!/bin/sh
# Run every test: the cmocka unit binaries, then each tests/sh/*.sh script (golden,
# integration, end-to-end; a script exits 0 pass, 77 skip, else fail), then a short fuzz
# run. Ends with one summary line: "N passed, N failed, N skipped".
# Env: BUILD (build folder), TESTS (a pattern to select tests by name).
BUILD=${BUILD:-build}
export BUILD
pass=0 fail=0 skip=0 failed=""
sel=${TESTS:-}
logdir="$BUILD/test-logs"
mkdir -p "$logdir"
run_one() { # name cmd...
	name=$1
	shift
	case "$name" in *"$sel"*) ;; *) return 0 ;; esac
	t0=$(date +%s.%N)
	"$@" >"$logdir/$name.log" 2>&1
	rc=$?
	dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) pass=$((pass + 1)); printf '  PASS  %-40s %6ss\n' "$name" "$dt" ;;
	77) skip=$((skip + 1)); printf '  SKIP  %-40s (%s)\n' "$name" "$(tail -n 1 "$logdir/$name.log")" ;;
	*) fail=$((fail + 1)); failed="$failed $name"
	   printf '  FAIL  %-40s (exit %d; log %s)\n' "$name" "$rc" "$logdir/$name.log"
	   tail -n 30 "$logdir/$name.log" | sed 's/^/        | /' ;;
	esac
}
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done
for t in tests/sh/*.sh; do
	[ -f "$t" ] || continue
	run_one "$(basename "$t" .sh)" sh "$t"
done
if [ -f tests/fuzz/run.sh ] && [ "${LB_FUZZ:-1}" = 1 ]; then
	run_one fuzz-short env FUZZ_TIME="${FUZZ_SHORT_TIME:-5}" sh tests/fuzz/run.sh
fi
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
