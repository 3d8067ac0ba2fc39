#!/bin/sh
# The memory boundary probe: does the planner's line between "fits" and "out of memory"
# hold on this GPU? It plans the shipped spec memory-boundary (Llama-13B width, seq 4096,
# micro-batch 2, 1-30 layers x vocabulary 16000-48000: 510 layouts planned from 12 to
# 209 GiB) against the memory of the GPU it finds, runs the LB_BOUNDARY_N (4) layouts
# planned closest below that memory and the 4 closest above it (each at least
# LB_BOUNDARY_GAP_GIB, 0.25, from it) through their job scripts for 2 steps each, and
# checks that each planned to fit ran (the run log ends ok) and each planned not to fit
# ended as a classed OOM (class oom, exit 3). It prints a table last (planned, the
# trainer's counted peak, the device's own reading, the outcome, the verdict) and exits 1
# on a wrong verdict, 2 when it cannot run (no GPU, no plan). About 3 minutes on an H200.
#
#   BUILD=build [OUT=DIR] sh bench/gpu/boundary.sh
#
# The GPU's memory is what the CUDA runtime reports as its total (the run log header's
# device.mem_bytes of a first tiny run: 139.8 GiB on an H200, the figure the H200 specs
# plan against); LB_BOUNDARY_USABLE_GIB overrides it. The plan and the job scripts come
# from $BUILD/layoutbench where it runs on this host; where it does not (a GPU host with
# the trainer alone), render them where the CLI is and carry the folder:
#
#   build/layoutbench plan memory-boundary --render boundary-scripts &&
#     build/layoutbench plan memory-boundary --format json >boundary-scripts/plan.json
#   LB_BOUNDARY_SCRIPTS=boundary-scripts sh bench/gpu/boundary.sh       # on the GPU host
#
# Writes to $OUT (default $BUILD/boundary): device.txt (what the GPU reported), plan.tsv
# (index, layout id, planned GiB, side for the chosen eight), verdicts.tsv, table.md, the
# run logs under runs/ (collect them with `layoutbench collect OUT/runs`; then
# `sh scripts/memory-table.sh --usable GIB DB memory-boundary` is the table of
# docs/memory-model.md), and each task's output under logs/.
# Env: LAYOUTBENCH_TRAIN (default $BUILD/layoutbench-train), LB_BOUNDARY_SPEC (default
# memory-boundary), LB_BOUNDARY_N, LB_BOUNDARY_GAP_GIB, LB_BOUNDARY_USABLE_GIB,
# LB_BOUNDARY_SCRIPTS, LB_BOUNDARY_TASK_S (a task's time limit, default 120).
set -u
BUILD=${BUILD:-build}
OUTD=${OUT:-$BUILD/boundary}
LB=${LB:-$BUILD/layoutbench}
TRAIN=${LAYOUTBENCH_TRAIN:-$BUILD/layoutbench-train}
SPEC=${LB_BOUNDARY_SPEC:-memory-boundary}
N=${LB_BOUNDARY_N:-4}
GAP=${LB_BOUNDARY_GAP_GIB:-0.25}
TASK_S=${LB_BOUNDARY_TASK_S:-120}
. "$(dirname "$0")/env.sh"
case "$N" in '' | *[!0-9]* | 0) echo "error: LB_BOUNDARY_N '$N': expected a positive integer" >&2; exit 2 ;; esac
case "$GAP" in '' | *[!0-9.]* | *.*.*) echo "error: LB_BOUNDARY_GAP_GIB '$GAP': expected GiB as a number" >&2; exit 2 ;; esac
[ -x "$TRAIN" ] || { echo "error: no trainer '$TRAIN' (make, or set LAYOUTBENCH_TRAIN)" >&2; exit 2; }
TRAIN=$(cd "$(dirname "$TRAIN")" && pwd)/$(basename "$TRAIN")
export LAYOUTBENCH_TRAIN="$TRAIN"
rm -rf "$OUTD/runs" "$OUTD/logs" "$OUTD/probe"
mkdir -p "$OUTD/runs" "$OUTD/logs" || exit 2
OUTD=$(cd "$OUTD" && pwd)
t0=$(date +%s)

# 1. the GPU: a tiny first run, whose log header says what the CUDA runtime reports
"$TRAIN" --model tiny --seq-len 64 --global-batch 1 --micro-batch 1 --steps 1 --warmup 0 \
	--device cuda --quiet --run-dir "$OUTD/probe" >"$OUTD/logs/probe.log" 2>&1 ||
	{ cat "$OUTD/logs/probe.log" >&2; echo "error: the trainer cannot run on a GPU here (--device cuda); the probe needs one" >&2; exit 2; }
hdr=$(head -n 1 "$OUTD"/probe/run-*.jsonl)
gpu=$(printf '%s\n' "$hdr" | sed -n 's/.*"device":{"name":"\([^"]*\)".*/\1/p')
mem=$(printf '%s\n' "$hdr" | sed -n 's/.*"device":{[^}]*"mem_bytes":\([0-9]*\).*/\1/p')
[ -n "$mem" ] || { echo "error: the probe run's header has no device.mem_bytes: $hdr" >&2; exit 2; }
usable=${LB_BOUNDARY_USABLE_GIB:-$(awk -v b="$mem" 'BEGIN { printf "%.2f", b / 1073741824 }')}
case "$usable" in '' | *[!0-9.]* | *.*.*) echo "error: LB_BOUNDARY_USABLE_GIB '$usable': expected GiB as a number" >&2; exit 2 ;; esac
printf 'gpu\t%s\nmem_bytes\t%s\nusable_gib\t%s\n' "$gpu" "$mem" "$usable" >"$OUTD/device.txt"
echo "boundary: $gpu, $mem bytes: planning against $usable GiB"

# 2. the plan and the job scripts (rendered here, or carried)
if [ -n "${LB_BOUNDARY_SCRIPTS:-}" ]; then
	scripts=$LB_BOUNDARY_SCRIPTS
	[ -f "$scripts/a0.sbatch" ] && [ -f "$scripts/plan.json" ] ||
		{ echo "error: LB_BOUNDARY_SCRIPTS '$scripts' lacks a0.sbatch or plan.json (render them with the two commands at the top of this script)" >&2; exit 2; }
	runs_of_script=$(sed -n "s/^run_dir='\(.*\)'\/'[^']*'\/\"\$layout\"$/\1/p" "$scripts/a0.sbatch")
	runs_of_script=${runs_of_script:-runs}
else
	"$LB" version >/dev/null 2>&1 ||
		{ echo "error: '$LB' does not run on this host; render the plan elsewhere and set LB_BOUNDARY_SCRIPTS (see the top of this script)" >&2; exit 2; }
	scripts="$OUTD/scripts"
	rm -rf "$scripts"
	runs_of_script="$OUTD/runs"
	LAYOUTBENCH_RUNS="$runs_of_script" "$LB" plan "$SPEC" --render "$scripts" >"$OUTD/logs/render.log" 2>&1 &&
		"$LB" plan "$SPEC" --format json >"$scripts/plan.json" 2>>"$OUTD/logs/render.log" ||
		{ cat "$OUTD/logs/render.log" >&2; echo "error: cannot plan '$SPEC'" >&2; exit 2; }
fi
[ "$(grep -c '^[0-9]*) layout=' "$scripts/a0.sbatch")" -gt 0 ] ||
	{ echo "error: '$scripts/a0.sbatch' has no layouts" >&2; exit 2; }
# index, layout id, planned GiB of every rendered layout (the plan's order is the array's)
sed -n 's/^\([0-9]*\)) layout=\([0-9a-f]*\)$/\1\t\2/p' "$scripts/a0.sbatch" >"$OUTD/index.tsv"
awk '/"id":/ { id = $2; gsub(/[",]/, "", id) } /"mem_gib":/ { m = $2; sub(/,$/, "", m); print id "\t" m }' \
	"$scripts/plan.json" >"$OUTD/planned.tsv"
# the chosen: N below (planned <= usable - gap), closest first; N above (>= usable + gap)
awk -F '\t' -v u="$usable" -v gap="$GAP" -v n="$N" '
	NR == FNR { mem[$1] = $2; next }
	($2 in mem) { m = mem[$2] + 0
		if (m <= u - gap) print $1 "\t" $2 "\t" mem[$2] "\tbelow\t" (u - m)
		else if (m >= u + gap) print $1 "\t" $2 "\t" mem[$2] "\tabove\t" (m - u) }' \
	"$OUTD/planned.tsv" "$OUTD/index.tsv" | sort -t "$(printf '\t')" -k4,4 -k5,5g -k1,1n |
	awk -F '\t' -v n="$N" '{ if (c[$4]++ < n) print $1 "\t" $2 "\t" $3 "\t" $4 }' >"$OUTD/plan.tsv"
nb=$(grep -c 'below$' "$OUTD/plan.tsv")
na=$(grep -c 'above$' "$OUTD/plan.tsv")
if [ "$nb" -lt "$N" ] || [ "$na" -lt "$N" ]; then
	range=$(awk -F '\t' 'NR == 1 || $2 < lo { lo = $2 } NR == 1 || $2 > hi { hi = $2 } END { print lo "-" hi }' "$OUTD/planned.tsv")
	echo "error: '$SPEC' has $nb layout(s) planned at least $GAP GiB below $usable GiB and $na above, want $N each (its layouts span $range GiB): a spec whose layouts reach this GPU's memory (LB_BOUNDARY_SPEC)" >&2
	exit 2
fi

# 3. each chosen layout through its job script, 2 steps
while IFS="$(printf '\t')" read -r i id planned side; do
	ts=$(date +%s)
	SLURM_ARRAY_TASK_ID=$i timeout "$TASK_S" bash "$scripts/a0.sbatch" </dev/null \
		>"$OUTD/logs/task-$i.log" 2>&1
	echo "boundary: index $i layout $id planned $planned GiB ($side): exit $? in $(($(date +%s) - ts)) s"
done <"$OUTD/plan.tsv"
if [ "$runs_of_script" != "$OUTD/runs" ]; then
	for d in "$runs_of_script"/*/; do [ -d "$d" ] && cp -r "$d" "$OUTD/runs/"; done
fi

# 4. the verdicts from the run logs: planned to fit -> ended ok; planned not to -> class oom
wrong=0
: >"$OUTD/verdicts.tsv"
while IFS="$(printf '\t')" read -r i id planned side; do
	log=$(ls -t "$OUTD"/runs/*/"$id"/run-*.jsonl 2>/dev/null | head -n 1)
	if [ -z "$log" ]; then
		outcome="no run log" counted=- device=-
	else
		end=$(grep '"type":"end"' "$log" | tail -n 1)
		counted=$(awk -F '"peak_mem_bytes":' 'NF > 1 { v = $2 + 0; if (v > m) m = v } END { if (m) printf "%.2f", m / 1073741824; else print "-" }' "$log")
		device=$(awk -F '"device_peak_mem_bytes":' 'NF > 1 { v = $2 + 0; if (v > m) m = v } END { if (m) printf "%.2f", m / 1073741824; else print "-" }' "$log")
		case "$end" in
		*'"status":"ok"'*) outcome="ran" ;;
		*'"class":"oom"'*) outcome="out of memory" ;;
		'') outcome="no end record" ;;
		*) outcome="failed: $(printf '%s\n' "$end" | sed -n 's/.*"class":"\([^"]*\)".*/\1/p')" ;;
		esac
	fi
	if { [ "$side" = below ] && [ "$outcome" = ran ]; } || { [ "$side" = above ] && [ "$outcome" = "out of memory" ]; }; then
		verdict=right
	else
		verdict=WRONG
		wrong=$((wrong + 1))
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$id" "$planned" "$side" "$counted" "$device" "$outcome" "$verdict" >>"$OUTD/verdicts.tsv"
done <"$OUTD/plan.tsv"

# 5. the table, last
{
	echo "| layout | planned GiB | plan ($usable GiB) | counted GiB | device GiB | device - planned GiB | on the device | verdict |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | --- | --- |"
	sort -t "$(printf '\t')" -k3,3g "$OUTD/verdicts.tsv" | awk -F '\t' '{
		d = ($6 == "-") ? "-" : sprintf("%+.2f", $6 - $3)
		printf "| %s | %.2f | %s | %s | %s | %s | %s | %s |\n", $2, $3, $4 == "below" ? "fits" : "oom", $5, $6, d, $7, $8 }'
	echo
	echo "$gpu: $((2 * N)) layouts around $usable GiB, $wrong wrong verdict(s), $(($(date +%s) - t0)) s"
} >"$OUTD/table.md"
cat "$OUTD/table.md"
[ "$wrong" = 0 ]
