#!/bin/sh
# scripts/memory-table.sh on fixture run logs (tests/fixtures/memory: GPU runs of the tiny
# preset, one with the device's reading, one from before it, one out of memory, one of
# another sweep): the table equals tests/golden/memory/table.md (planned = the model plus
# the 1 GiB GPU reserve; counted; the device's reading and its distance to the plan; the
# outcome); with --usable between the plans the verdicts are right (exit 0), with a
# smaller one wrong and counted (exit 1); SWEEP filters; a bad --usable is a usage error.
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. tests/sh/lib/golden.sh
bad() { echo "FAIL: $*"; fail=1; }
export LB
"$LB" collect --db "$tmp/r.db" tests/fixtures/memory >"$tmp/c.out" 2>&1 || bad "collect: $(cat "$tmp/c.out")"
grep -q "4 new runs.*0 warnings, 0 errors" "$tmp/c.out" || bad "collect: $(cat "$tmp/c.out")"
sh scripts/memory-table.sh --usable 1.0365 "$tmp/r.db" >"$tmp/t.md" || bad "a right verdict called wrong: $(cat "$tmp/t.md")"
golden tests/golden/memory/table.md "$tmp/t.md" "the memory table of the fixtures"
sh scripts/memory-table.sh --usable 1.0 "$tmp/r.db" >"$tmp/w.md" && bad "wrong verdicts exit 0"
grep -q '^4 layouts: 0 planned to fit, 4 planned not to; 3 wrong verdicts$' "$tmp/w.md" ||
	bad "wrong verdicts not counted: $(tail -n 2 "$tmp/w.md")"
sh scripts/memory-table.sh "$tmp/r.db" fixture-other >"$tmp/o.md" || bad "one sweep"
[ "$(grep -c '^| fixture-' "$tmp/o.md")" = 1 ] && grep -q '^| fixture-other | 4 | 256 | 64 | 1 | full |' "$tmp/o.md" ||
	bad "the sweep filter: $(cat "$tmp/o.md")"
grep -q 'plan (' "$tmp/o.md" && bad "a plan column without --usable"
sh scripts/memory-table.sh --usable lots "$tmp/r.db" >/dev/null 2>"$tmp/u.err"
[ $? = 2 ] && grep -q "^error: --usable 'lots': expected GiB as a number" "$tmp/u.err" || bad "bad --usable: $(cat "$tmp/u.err")"
[ $fail = 0 ] && echo "memory_table: all checks passed"
exit $fail
