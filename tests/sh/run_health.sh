#!/bin/sh
# Run health end to end: the CPU trainer trains the tiny preset three times in one sweep,
# at its default rate (the loss falls: ok), at lr 1e-9 (it stays: flat) and, with naive
# attention, at lr 1 (it rises: diverged); collected, `sql` shows each run's health,
# `status` counts them and lists the diverged run with its loss, the report leaves the
# diverged run out and says so (markdown; stderr beside CSV), and --keep-diverged keeps
# and marks it. With --peak-tflops the live line shows MFU under both conventions.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
TRAIN="$BUILD/layoutbench-train"

[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "error: '$LB' or '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/r.db"
bad() { echo "FAIL: $*"; fail=1; }

train() { # name, then trainer flags
	name=$1
	shift
	LAYOUTBENCH_SWEEP=health-sweep "$TRAIN" --model tiny --seq-len 32 --global-batch 4 \
		--steps 8 --warmup 1 --peak-tflops 0.01 --run-dir "$tmp/runs/$name" "$@" \
		>"$tmp/$name.out" 2>&1 || bad "trainer $name: $(tail -n 3 "$tmp/$name.out")"
}
train ok
train flat --lr 1e-9
train rose --lr 1 --attention naive
# the live line: the paper's MFU, then the count without the input embedding lookup
grep -Eq '^step 8/8 loss [0-9.]+ time [0-9.]+ s [0-9]+ tok/s [0-9.]+ TFLOP/s MFU [0-9.]+% \([0-9.]+% without the embedding lookup\)$' \
	"$tmp/ok.out" || bad "live line without both MFUs: $(tail -n 1 "$tmp/ok.out")"
awk '/^step 8\/8/ { a = $13; b = $14; sub(/%/, "", a); sub(/^\(/, "", b); sub(/%/, "", b)
	if (!(b + 0 < a + 0)) exit 1 }' "$tmp/ok.out" || bad "MFU without the embedding is not below the paper's"

"$LB" collect --db "$db" "$tmp/runs" >"$tmp/collect.out" 2>&1 || bad "collect: $(cat "$tmp/collect.out")"
grep -q "3 new runs.*0 warnings, 0 errors" "$tmp/collect.out" || bad "collect: $(cat "$tmp/collect.out")"
got=$("$LB" sql --db "$db" --format tsv "SELECT group_concat(health, ' ') FROM (SELECT health
	FROM run_summary ORDER BY attention, loss_last_quarter)" | tail -n 1)
[ "$got" = "ok flat diverged" ] || bad "health: got '$got', want 'ok flat diverged'"
got=$("$LB" sql --db "$db" --format tsv "SELECT count(*) FROM run_summary WHERE
	mfu_no_embed < mfu AND mfu_no_embed > 0.9 * mfu" | tail -n 1)
[ "$got" = 3 ] || bad "mfu_no_embed of $got runs beside mfu, want 3"

"$LB" status --db "$db" --sweep health-sweep >"$tmp/status.out" 2>&1 || bad "status: $(cat "$tmp/status.out")"
grep -q '^  health ok 1, flat 1, diverged 1, unknown 0 (runs that ended ok)$' "$tmp/status.out" ||
	bad "status counts: $(cat "$tmp/status.out")"
grep -Eq '^  diverged [0-9a-f]{16}  run [^ ]+  loss 5\.[0-9]+ -> [0-9.e+]+$' "$tmp/status.out" ||
	bad "status lists no diverged run: $(cat "$tmp/status.out")"
grep -Eq '^  flat ' "$tmp/status.out" || bad "status lists no flat run: $(cat "$tmp/status.out")"

# the report: the naive bar is DIVERGED, one run left out; kept, it is marked
"$LB" report --db "$db" --figure kernels >"$tmp/k.md" 2>"$tmp/k.err" || bad "report"
grep -q '^1 diverged run left out' "$tmp/k.md" || bad "no left-out note: $(cat "$tmp/k.md")"
grep -q '^| naive+fused | DIVERGED |' "$tmp/k.md" || bad "no DIVERGED bar: $(cat "$tmp/k.md")"
grep -Eq '^\| flash\+fused \| [0-9.]+ \| [0-9.]+ \|.* \| (ok|flat) \|$' "$tmp/k.md" ||
	bad "the flash bar: $(cat "$tmp/k.md")"
"$LB" report --db "$db" --figure kernels --keep-diverged >"$tmp/kk.md" || bad "report --keep-diverged"
grep -q 'left out' "$tmp/kk.md" && bad "--keep-diverged still leaves runs out"
grep -Eq '^\| naive\+fused \| [0-9.]+ \|.* \| diverged \|$' "$tmp/kk.md" ||
	bad "the kept diverged run is not marked: $(cat "$tmp/kk.md")"
"$LB" report --db "$db" --figure all --format csv >"$tmp/all.csv" 2>"$tmp/all.err" || bad "report csv"
grep -q "^report: figure 'kernels': 1 diverged run left out (--keep-diverged keeps them)$" "$tmp/all.err" ||
	bad "csv: no note on stderr: $(cat "$tmp/all.err")"
grep -q "^report: figure 'phases'" "$tmp/all.err" && bad "the phases figure left a run out"
# best: the view and the rule over the rows agree, and neither is the diverged run
"$LB" report --db "$db" --figure best --format csv >"$tmp/b1.csv" 2>"$tmp/b1.err" || bad "best"
"$LB" report --db "$db" --sweep health-sweep --figure best --format csv >"$tmp/b2.csv" 2>/dev/null || bad "best --sweep"
cmp -s "$tmp/b1.csv" "$tmp/b2.csv" || bad "best from the view and from the rows differ"
grep -q 'diverged' "$tmp/b1.csv" && bad "best is a diverged run: $(cat "$tmp/b1.csv")"
grep -q "^report: figure 'best': 1 diverged run left out" "$tmp/b1.err" || bad "best: no note: $(cat "$tmp/b1.err")"
[ $fail = 0 ] && echo "run_health: all checks passed"
exit $fail
