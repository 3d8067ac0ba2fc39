#!/bin/sh
# bench/gpu/boundary.sh without a GPU: a stand-in trainer (a shell script that writes the
# run logs a GPU run would, from the plan) plays an 80 GiB GPU. The probe must read the
# GPU's memory from the first run's header, choose the four layouts planned closest below
# it and the four closest above (each at least 0.25 GiB away), run each through its job
# script, find the verdicts right (exit 0) and print its table last; with a device that
# fits 1 GiB less than its header says, some layout planned to fit runs out of memory: a
# WRONG verdict, exit 1. Also: scripts rendered elsewhere (LB_BOUNDARY_SCRIPTS, no CLI on
# the GPU host), a GPU whose memory the spec does not reach, and no GPU at all (exit 2).
set -u
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
GIB=1073741824
"$LB" plan memory-boundary --format json 2>/dev/null |
	awk '/"id":/ { id = $2; gsub(/[",]/, "", id) } /"mem_gib":/ { m = $2; sub(/,$/, "", m); print id "\t" m }' \
	>"$tmp/planned.tsv"
[ "$(wc -l <"$tmp/planned.tsv")" = 510 ] || bad "the plan has $(wc -l <"$tmp/planned.tsv") layouts, want 510"
# the stand-in: --model tiny is the probe run (a header with the device's memory); any
# other layout fits when its plan is at most FAKE_FIT_GIB, else fails as an OOM
cat >"$tmp/train" <<'SH'
#!/bin/sh
dir= tiny= cuda=
while [ $# -gt 0 ]; do
	case "$1" in --run-dir) dir=$2; shift ;; --model) [ "$2" = tiny ] && tiny=1; shift ;; --device) [ "$2" = cuda ] && cuda=1; shift ;; esac
	shift
done
[ -n "$FAKE_NO_GPU" ] && [ -n "$cuda" ] && { echo "error: no CUDA device" >&2; exit 1; }
mkdir -p "$dir"
log="$dir/run-20261205T120000Z-fake-$$.jsonl"
id=${LAYOUTBENCH_LAYOUT:-0000000000000000}
printf '{"type":"header","format":"layoutbench-runlog","version":1,"run_uid":"fake-%s","layout_id":"%s","device":{"name":"Fake GPU","sm_count":1,"mem_bytes":%s,"compute_capability":"9.0"}}\n' "$$" "$id" "$FAKE_MEM" >"$log"
[ -n "$tiny" ] && { echo '{"type":"end","status":"ok"}' >>"$log"; exit 0; }
planned=$(awk -F '\t' -v id="$id" '$1 == id { print $2 }' "$FAKE_PLAN")
if awk -v p="$planned" -v f="$FAKE_FIT_GIB" 'BEGIN { exit !(p <= f) }'; then
	for s in 0 1; do
		printf '{"type":"step","step":%d,"warmup":%s,"time_s":1,"peak_mem_bytes":%.0f,"device_peak_mem_bytes":%.0f}\n' \
			"$s" "$([ $s = 0 ] && echo true || echo false)" "$(awk -v p="$planned" 'BEGIN { print (p - 1) * 1073741824 }')" \
			"$(awk -v p="$planned" 'BEGIN { print (p + 0.25) * 1073741824 }')" >>"$log"
	done
	echo '{"type":"end","status":"ok","exit_code":0}' >>"$log"
	exit 0
fi
echo '{"type":"end","status":"failed","class":"oom","message":"out of memory","exit_code":3}' >>"$log"
exit 3
SH
chmod +x "$tmp/train"
export LAYOUTBENCH_TRAIN="$tmp/train" FAKE_PLAN="$tmp/planned.tsv" FAKE_MEM=$((80 * GIB)) FAKE_FIT_GIB=80 FAKE_NO_GPU=

# an 80 GiB GPU whose device fits what is planned: eight right verdicts
OUT="$tmp/ok" sh bench/gpu/boundary.sh >"$tmp/ok.out" 2>&1 || bad "an honest GPU: exit $?: $(tail -n 15 "$tmp/ok.out")"
grep -q '^boundary: Fake GPU, 85899345920 bytes: planning against 80.00 GiB$' "$tmp/ok.out" || bad "the GPU's memory: $(head -n 3 "$tmp/ok.out")"
[ "$(grep -c '| fits | .* | ran | right |$' "$tmp/ok.out")" = 4 ] || bad "four planned to fit that ran: $(cat "$tmp/ok.out")"
[ "$(grep -c '| oom | .* | out of memory | right |$' "$tmp/ok.out")" = 4 ] || bad "four planned OOMs: $(cat "$tmp/ok.out")"
tail -n 1 "$tmp/ok.out" | grep -q '^Fake GPU: 8 layouts around 80.00 GiB, 0 wrong verdict(s), ' || bad "the last line: $(tail -n 1 "$tmp/ok.out")"
# the chosen are the closest on each side, at least 0.25 GiB away
awk -F '\t' '$4 == "below" && ($3 > 79.75 || $3 < 76) { print "below: " $0; bad = 1 }
	$4 == "above" && ($3 < 80.25 || $3 > 84) { print "above: " $0; bad = 1 } END { exit bad }' "$tmp/ok/plan.tsv" ||
	bad "the chosen layouts are not the nearest: $(cat "$tmp/ok/plan.tsv")"
want=$(awk -F '\t' '$2 <= 79.75' "$tmp/planned.tsv" | sort -t "$(printf '\t')" -k2,2gr | head -n 4 | cut -f 2 | sort -g | tr '\n' ' ')
got=$(awk -F '\t' '$4 == "below" { print $3 }' "$tmp/ok/plan.tsv" | sort -g | tr '\n' ' ')
[ "$want" = "$got" ] || bad "below: got '$got', want '$want'"
grep -q '| +0.25 |' "$tmp/ok.out" || bad "device - planned: $(cat "$tmp/ok.out")"
[ "$(ls "$tmp"/ok/runs/memory-boundary/*/run-*.jsonl | wc -l)" = 8 ] || bad "run logs: $(ls -R "$tmp/ok/runs")"

# the device fits 1 GiB less than planned: a layout planned to fit runs out of memory
FAKE_FIT_GIB=79 OUT="$tmp/w" sh bench/gpu/boundary.sh >"$tmp/w.out" 2>&1
[ $? = 1 ] || bad "a wrong verdict does not exit 1: $(tail -n 12 "$tmp/w.out")"
grep -q '| fits | - | - | - | out of memory | WRONG |$' "$tmp/w.out" || bad "no WRONG row: $(cat "$tmp/w.out")"

# scripts rendered where the CLI is, carried to a host without it
LAYOUTBENCH_RUNS="$tmp/carried-runs" "$LB" plan memory-boundary --render "$tmp/sc" >/dev/null 2>&1 &&
	"$LB" plan memory-boundary --format json >"$tmp/sc/plan.json" 2>/dev/null || bad "render"
LB=/nonexistent LB_BOUNDARY_SCRIPTS="$tmp/sc" OUT="$tmp/c" sh bench/gpu/boundary.sh >"$tmp/c.out" 2>&1 ||
	bad "carried scripts: $(tail -n 12 "$tmp/c.out")"
[ "$(grep -c '| right |$' "$tmp/c.out")" = 8 ] || bad "carried scripts: $(cat "$tmp/c.out")"
LB=/nonexistent OUT="$tmp/n" sh bench/gpu/boundary.sh >"$tmp/n.out" 2>&1
[ $? = 2 ] && grep -q "does not run on this host; render the plan elsewhere and set LB_BOUNDARY_SCRIPTS" "$tmp/n.out" ||
	bad "no CLI, no scripts: $(cat "$tmp/n.out")"

# a GPU beyond the spec's reach, and no GPU
LB_BOUNDARY_USABLE_GIB=500 OUT="$tmp/big" sh bench/gpu/boundary.sh >"$tmp/big.out" 2>&1
[ $? = 2 ] && grep -q "has 4 layout(s) planned at least 0.25 GiB below 500 GiB and 0 above, want 4 each (its layouts span 12.33-209.03 GiB)" "$tmp/big.out" ||
	bad "a GPU the spec does not reach: $(cat "$tmp/big.out")"
FAKE_NO_GPU=1 OUT="$tmp/none" sh bench/gpu/boundary.sh >"$tmp/none.out" 2>&1
[ $? = 2 ] && grep -q "the trainer cannot run on a GPU here" "$tmp/none.out" || bad "no GPU: $(cat "$tmp/none.out")"
[ $fail = 0 ] && echo "boundary_probe: all checks passed"
exit $fail
