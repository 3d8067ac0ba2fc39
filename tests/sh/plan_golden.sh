#!/bin/sh
# Golden tests of `layoutbench plan`: the quickstart and paper-13b-2k specs in every
# format, compared with tests/golden/plan/<spec>.<format> (diff -u). For csv and json the
# summary goes to stderr and is compared as <spec>.<format>.summary.
# The memory model's tuning changes these files on purpose; regenerate them with
#   make all && LB_UPDATE_GOLDEN=1 BUILD=build sh tests/sh/plan_golden.sh
# and review the diff before committing.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
dir=tests/golden/plan
if [ ! -x "$LB" ]; then
	echo "plan_golden: $LB is not built (make BUILD=$BUILD all)"
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
for spec in quickstart paper-13b-2k; do
	for fmt in table csv json; do
		if ! "$LB" plan "sweeps/specs/$spec.json" --format "$fmt" >"$tmp/out" 2>"$tmp/err"; then
			echo "FAIL: layoutbench plan sweeps/specs/$spec.json --format $fmt exited non-zero:"
			cat "$tmp/err"
			fail=1
			continue
		fi
		golden="$dir/$spec.$fmt"
		if [ "${LB_UPDATE_GOLDEN:-0}" = 1 ]; then
			mkdir -p "$dir"
			cp "$tmp/out" "$golden"
			[ "$fmt" = table ] || cp "$tmp/err" "$golden.summary"
			echo "updated $golden"
			continue
		fi
		if ! diff -u "$golden" "$tmp/out"; then
			echo "FAIL: $golden differs (regenerate: LB_UPDATE_GOLDEN=1 sh $0)"
			fail=1
		fi
		if [ "$fmt" != table ] && ! diff -u "$golden.summary" "$tmp/err"; then
			echo "FAIL: $golden.summary differs"
			fail=1
		fi
	done
done
[ $fail = 0 ] && echo "plan golden files match"
exit $fail
