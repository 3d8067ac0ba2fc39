#!/bin/sh
# Run every test: the cmocka unit binaries, then each tests/sh/*.sh script (golden,
# integration, end-to-end; a script exits 0 pass, 77 skip, else fail), then a short fuzz
# run. Ends with one summary line: "N passed, N failed, N skipped".
# A cmocka binary exits 0 when its tests skipped (skip()); its summary says so
# ("[  PASSED  ] 0 test(s)." and "[  SKIPPED ] N test(s)"), so a binary that passed no test
# and skipped some is counted as skipped, with the message printed before its first skip
# as the reason; one that passed some and skipped others passes, its skips named on its
# line and again before the summary ("passed with tests skipped: NAME (N) ...").
# Env: BUILD (build folder), TESTS (a pattern to select tests by name).
BUILD=${BUILD:-build}
export BUILD
pass=0 fail=0 skip=0 failed="" partial=""
sel=${TESTS:-}
logdir="$BUILD/test-logs"
mkdir -p "$logdir"
# cmocka_skips LOG: after a unit binary exited 0, sets rc=77 and reason when it passed no
# test and skipped some, or note (the skipped count) when it passed some and skipped some.
cmocka_skips() {
	reason=""
	nskip=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*/\1/p' "$1" | head -n 1)
	[ -n "$nskip" ] && [ "$nskip" -gt 0 ] || return 0
	npass=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$1" | head -n 1)
	# the reason: the line the test printed just before its first "[  SKIPPED ] name"
	reason=$(awk '/^\[  SKIPPED \] [^0-9]/ { print prev; exit } { prev = $0 }' "$1")
	case "$reason" in "[ RUN"*|"") reason="$nskip test(s) skipped" ;; esac
	if [ "${npass:-0}" = 0 ]; then
		rc=77
	else
		note="  ($nskip skipped: $reason)"
		partial="$partial $name ($nskip)"
		reason=""
	fi
}
run_one() { # kind name cmd...
	kind=$1
	name=$2
	shift 2
	case "$name" in *"$sel"*) ;; *) return 0 ;; esac
	t0=$(date +%s.%N)
	"$@" >"$logdir/$name.log" 2>&1
	rc=$?
	note="" reason=""
	[ $rc = 0 ] && [ "$kind" = unit ] && cmocka_skips "$logdir/$name.log"
	dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) pass=$((pass + 1)); printf '  PASS  %-40s %6ss%s\n' "$name" "$dt" "$note" ;;
	77) skip=$((skip + 1)); printf '  SKIP  %-40s (%s)\n' "$name" "${reason:-$(tail -n 1 "$logdir/$name.log")}" ;;
	*) fail=$((fail + 1)); failed="$failed $name"
	   printf '  FAIL  %-40s (exit %d; log %s)\n' "$name" "$rc" "$logdir/$name.log"
	   tail -n 30 "$logdir/$name.log" | sed 's/^/        | /' ;;
	esac
}
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one unit "$(basename "$t")" env CMOCKA_MESSAGE_OUTPUT=stdout "$t"
done
for t in tests/sh/*.sh; do
	[ -f "$t" ] || continue
	run_one sh "$(basename "$t" .sh)" sh "$t"
done
if [ -f tests/fuzz/run.sh ] && [ "${LB_FUZZ:-1}" = 1 ]; then
	run_one fuzz fuzz-short env FUZZ_TIME="${FUZZ_SHORT_TIME:-5}" sh tests/fuzz/run.sh
fi
[ -n "$partial" ] && echo "passed with tests skipped:$partial"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
