#!/bin/sh
# The quoted figures never drift from their evidence: scripts/check-quotes.sh on fixtures
# (tests/fixtures/quotes: a page, two run logs, one healthy and one diverged, and peer
# output as JSON and as summary lines) passes a list whose every entry holds and fails
# each entry of a list with one fault each (a figure that drifted from its logs, a speed
# figure from a diverged run, a speed query without the runs' health, a quote not in its
# file, a figure not in its quote, a peer run that did not end ok, run logs that are not
# there, a peer figure from a run whose loss stayed flat), naming each; a malformed list
# is a usage error; then the published list, docs/results/quotes.tsv, against the
# published logs.
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
export LB
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
F=tests/fixtures/quotes

sh scripts/check-quotes.sh "$F/quotes.tsv" >"$tmp/good.out" 2>&1 || bad "entries that hold: $(cat "$tmp/good.out")"
grep -q '^quotes: 7 checked against their evidence, all hold$' "$tmp/good.out" || bad "good: $(cat "$tmp/good.out")"

sh scripts/check-quotes.sh "$F/bad.tsv" >"$tmp/bad.out" 2>&1
[ $? = 1 ] || bad "faulty entries do not exit 1: $(cat "$tmp/bad.out")"
[ "$(grep -c '^FAIL: ' "$tmp/bad.out")" = 8 ] || bad "want one FAIL per faulty entry: $(cat "$tmp/bad.out")"
while IFS= read -r want; do
	grep -qF -- "$want" "$tmp/bad.out" || bad "no '$want' in: $(cat "$tmp/bad.out")"
done <<'WANT'
'still says **62.6%** for': the evidence gives 62.5, the text says 62.6
'went faster, 65.1%, and': comes from runs whose health is 'ok,diverged', not ok
'reached **62.5%** MFU': a speed figure's query must return the runs' health as its second column
'reached **62.4%** MFU': the text is not in tests/fixtures/quotes/doc.md
'reached **62.5%** MFU': the quote does not hold the figure '62'
'The sweep has 2 runs.': the peer run's health is 'oom', not ok
'Autocast compiled: 50.0% MFU.': the peer run's health is 'flat', not ok
no run logs at 'tests/fixtures/quotes/no-such-runs'
WANT

printf 'README.md\tsome text\t1\tspeed\tlogs:x\n' >"$tmp/five.tsv"
sh scripts/check-quotes.sh "$tmp/five.tsv" >"$tmp/five.out" 2>&1
[ $? = 2 ] && grep -q "five.tsv:1: 5 fields, want 6 (file, quote, value, kind, source, query)" "$tmp/five.out" ||
	bad "a malformed list: $(cat "$tmp/five.out")"
printf 'README.md\tsome text\t1\tfast\tlogs:x\tSELECT 1\n' >"$tmp/kind.tsv"
sh scripts/check-quotes.sh "$tmp/kind.tsv" >"$tmp/kind.out" 2>&1
[ $? = 2 ] && grep -q "kind 'fast': expected speed, other or peer" "$tmp/kind.out" || bad "a bad kind: $(cat "$tmp/kind.out")"

# the published list
sh scripts/check-quotes.sh >"$tmp/pub.out" 2>&1 || { cat "$tmp/pub.out"; bad "docs/results/quotes.tsv: a quoted figure does not hold"; }
grep -q 'all hold$' "$tmp/pub.out" || bad "published: $(cat "$tmp/pub.out")"
[ $fail = 0 ] && echo "quotes: all checks passed"
exit $fail
