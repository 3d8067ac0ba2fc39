#!/bin/sh
# The step-time predictions through the command line (docs/prediction.md): plan's columns
# and --sort, a GPU without a machine said so, --machine; submit --top K; report --figure
# predicted on the published H200 runs; calibrate's errors, and a table made by
# calibrate --kernels predicting in plan; calibrate naming the runs over the pipeline bound.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- plan: sorted by predicted MFU, best first; the layouts that do not fit last
"$LB" plan paper-13b-2k --sort mfu --format csv >"$tmp/sorted.csv" 2>"$tmp/sorted.err" ||
	bad "plan --sort mfu: $(cat "$tmp/sorted.err")"
head -n 1 "$tmp/sorted.csv" | grep -q ',reason,predicted_step_s,predicted_mfu,predicted_gpu_hours$' ||
	bad "csv header: $(head -n 1 "$tmp/sorted.csv")"
awk -F, 'NR > 1 { m = $(NF - 1)
	if (m == "") { gone = 1; next }
	if (gone) { print "a predicted row after the unpredicted ones: line " NR; bad = 1 }
	if (prev != "" && m + 0 > prev + 0) { print "line " NR ": mfu " m " after " prev; bad = 1 }
	prev = m; n++ }
	END { if (n != 64) { print n " predicted rows, want 64"; bad = 1 }; exit bad }' "$tmp/sorted.csv" ||
	bad "plan --sort mfu is not by predicted MFU"
grep -q "^predicted on machine 'a100-paper' (calibrated): 64 of 64 ok layouts" "$tmp/sorted.err" ||
	bad "summary: $(cat "$tmp/sorted.err")"
"$LB" plan paper-13b-2k --sort time --format csv 2>/dev/null | awk -F, 'NR > 1 && $(NF - 2) != "" {
	if (prev != "" && $(NF - 2) + 0 < prev + 0) { print "time not rising at line " NR; exit 1 }
	prev = $(NF - 2) }' || bad "plan --sort time"
"$LB" plan paper-13b-2k --machine h100-nominal | tail -n 1 |
	grep -q "^predicted on machine 'h100-nominal' (nominal tables, uncalibrated)" ||
	bad "--machine h100-nominal is not said uncalibrated"
"$LB" plan paper-13b-2k --machine no-such >/dev/null 2>"$tmp/err" && bad "--machine no-such accepted"
grep -q "^error: --machine: unknown machine 'no-such' (shipped: a100-nominal" "$tmp/err" ||
	bad "unknown machine: $(cat "$tmp/err")"
# a GPU nothing is shipped for: said, not guessed; the table has no prediction columns
sed 's/"gpu": "A100"/"gpu": "L40S"/' sweeps/specs/paper-13b-2k.json >"$tmp/l40s.json"
"$LB" plan "$tmp/l40s.json" >"$tmp/l40s.out" 2>&1 || bad "plan of an L40S spec"
grep -q "^no step-time prediction: no machine is shipped for GPU 'L40S'" "$tmp/l40s.out" ||
	bad "L40S: $(tail -n 1 "$tmp/l40s.out")"
head -n 1 "$tmp/l40s.out" | grep -q "step_s" && bad "L40S table has prediction columns"
"$LB" plan "$tmp/l40s.json" --sort mfu >/dev/null 2>"$tmp/err" && bad "--sort mfu without a machine"
grep -q "^error: --sort mfu: no step-time prediction" "$tmp/err" || bad "sort error: $(cat "$tmp/err")"
# a CPU sweep: nothing predicted, nothing said
"$LB" plan quickstart 2>&1 | grep -q "predict" && bad "a CPU sweep speaks of predictions"

# ---- submit --top K: the K best predicted, the same as plan --sort mfu's first K
top3=$("$LB" plan paper-13b-2k --sort mfu --format csv 2>/dev/null | awk -F, 'NR > 1 && NR <= 4 { print $1 }' | tr '\n' ' ')
(cd "$tmp" && "$OLDPWD/$LB" submit paper-13b-2k --dry-run --executor local --top 3 --db "$tmp/s.db") >"$tmp/top.out" 2>&1 ||
	bad "submit --top 3: $(cat "$tmp/top.out")"
grep -q "^top 3 of 64 layout(s) by predicted MFU on machine 'a100-paper' (calibrated)" "$tmp/top.out" ||
	bad "submit --top: $(head -n 1 "$tmp/top.out")"
got=$(awk '/^a0:/ { for (i = 2; i <= NF; i++) printf "%s ", $i }' "$tmp/top.out")
[ "$got" = "$top3" ] || bad "submit --top 3 chose [$got], plan --sort mfu ranks [$top3]"
"$LB" submit quickstart --dry-run --executor local --top 2 --db "$tmp/q.db" >/dev/null 2>"$tmp/err" &&
	bad "submit --top of a CPU sweep"
grep -q "error: --top needs step-time predictions" "$tmp/err" || bad "top cpu: $(cat "$tmp/err")"
"$LB" submit paper-13b-2k --dry-run --machine h200 >/dev/null 2>&1
[ $? = 2 ] || bad "submit --machine without --top is not a usage error"

# ---- report --figure predicted on the published H200 runs
"$LB" collect --db "$tmp/h.db" --sweep h200-1gpu docs/results/h200/runs docs/results/h200/healthy/runs \
	docs/results/h200/cudnn/runs docs/results/h200/memory/runs >/dev/null 2>&1 || bad "collect"
"$LB" report --db "$tmp/h.db" --sweep h200-1gpu --figure predicted >"$tmp/pred.md" 2>"$tmp/err" ||
	bad "report --figure predicted: $(cat "$tmp/err")"
grep -q '^| h200-1gpu | h200 | 174 | 174 | 0 | ' "$tmp/pred.md" || bad "predicted scores: $(grep '^| h200-1gpu | h200' "$tmp/pred.md")"
[ "$(grep -c '^| h200-1gpu | [0-9a-f]\{16\} |' "$tmp/pred.md")" = 174 ] || bad "not every run listed"
grep -q '^h200-1gpu: runs whose loss rose (diverged): 103 shown (no healthy run of their layout), 58 left out' "$tmp/pred.md" ||
	bad "the diverged runs are not counted"
"$LB" report --db "$tmp/h.db" --sweep h200-1gpu --figure predicted --format csv >"$tmp/pred.csv" 2>/dev/null ||
	bad "report --figure predicted --format csv"
head -n 1 "$tmp/pred.csv" | grep -q '^sweep,machine,layout_id,label,micro_batch,tp,pp,dp,sequence_parallel,checkpointing,attention,norm,measured_step_s,predicted_step_s,relative_error$' ||
	bad "csv header: $(head -n 1 "$tmp/pred.csv")"
[ "$(wc -l <"$tmp/pred.csv")" = 175 ] || bad "csv rows: $(wc -l <"$tmp/pred.csv")"
"$LB" report --db "$tmp/h.db" --figure predicted --format html --out "$tmp/rep" >/dev/null 2>"$tmp/err" ||
	bad "report --figure predicted --format html: $(cat "$tmp/err")"
if command -v gnuplot >/dev/null || [ -n "${LB_GNUPLOT:-}" ]; then
	[ "$(grep -c '<svg' "$tmp/rep/predicted.html")" = 1 ] || bad "the html has no scatter"
else
	grep -q "No plot" "$tmp/rep/predicted.html" || bad "the html says nothing of its missing plot"
fi
"$LB" report --db "$tmp/h.db" --figure kernels --machine h200 >/dev/null 2>&1
[ $? = 2 ] || bad "report --machine with another figure is not a usage error"

# ---- calibrate: errors name the fault; a measured table predicts in plan
"$LB" calibrate >/dev/null 2>"$tmp/err" && bad "calibrate without input"
grep -q "nothing to calibrate: give --sweep NAME" "$tmp/err" || bad "no input: $(cat "$tmp/err")"
"$LB" calibrate --db "$tmp/h.db" --sweep no-such >/dev/null 2>"$tmp/err" && bad "calibrate of an unknown sweep"
grep -q "no sweep 'no-such'" "$tmp/err" || bad "unknown sweep: $(cat "$tmp/err")"
"$LB" calibrate --db "$tmp/h.db" --sweep h200-1gpu --fit speed >/dev/null 2>"$tmp/err" && bad "--fit speed"
grep -q "fit: unknown term 'speed' (terms: gemm_scale" "$tmp/err" || bad "--fit: $(cat "$tmp/err")"
printf 'a,b\n' >"$tmp/k.csv"
"$LB" calibrate --machine h100-nominal --kernels "$tmp/k.csv" >/dev/null 2>"$tmp/err" && bad "bad kernels csv"
grep -q "not bench_kernels --csv output" "$tmp/err" || bad "kernels csv: $(cat "$tmp/err")"
"$LB" calibrate --machine h100-nominal --kernels docs/results/h200/targets/kernels.csv --name mine \
	--out "$tmp/mine.json" >/dev/null 2>&1 || bad "calibrate --kernels"
"$LB" plan h200-1gpu --machine "$tmp/mine.json" | tail -n 1 |
	grep -q "^predicted on machine 'mine' (measured tables, uncalibrated): 160 of 160 ok layouts" ||
	bad "plan with a made table: $("$LB" plan h200-1gpu --machine "$tmp/mine.json" | tail -n 1)"
# a calibration written, then used by name of its file
"$LB" calibrate --db "$tmp/h.db" --sweep h200-1gpu --machine "$tmp/mine.json" --name mycal \
	--out "$tmp/mycal.json" >"$tmp/cal.out" 2>&1 || bad "calibrate: $(tail -n 3 "$tmp/cal.out")"
grep -q "^| h200-1gpu | 1[0-9]\{2\} |" "$tmp/cal.out" || bad "calibrate report has no score row"
grep -q '"base": "'"$tmp"'/mine.json"' "$tmp/mycal.json" || bad "the calibration does not name its base"
"$LB" plan h200-1gpu --machine "$tmp/mycal.json" | tail -n 1 | grep -q "^predicted on machine 'mycal' (calibrated)" ||
	bad "plan with the calibration"
# ---- calibrate names the runs a pipeline cannot make (the pipeline bound): a sheet where
# micro-batch 8 of a two-stage layout takes 1.65x micro-batch 1 (1F1B allows 1.108x at
# 64 samples a rank), and one where it takes 1.05x
sheet() { # file, seconds at micro-batch 8
	{
		echo "llama_13B_bfloat16_64_GPUs_fixture,,,,,,,,,,,"
		echo "Trial ID,World Size,Average Step Time,Average Step Time * World size,Average TFlops Megatron,Average TFlops Aleph Alpha,Average MFU,activation_checkpointing_type,kernel,micro_batch_size,model_parallel_size,pipe_parallel_size"
		echo "1,64,44.0,2816,0,0,0.40,every_layer,flash_attention2,1,1,2"
		echo "2,64,$2,0,0,0,0.30,every_layer,flash_attention2,8,1,2"
		echo "3,64,45.0,2880,0,0,0.39,every_layer,flash_attention2,1,2,1"
		echo "4,64,43.0,2752,0,0,0.41,every_layer,flash_attention2,2,2,1"
	} >"$1"
}
mkdir -p "$tmp/over" "$tmp/within"
sheet "$tmp/over/llama_13B_bfloat16_64_GPUs_fixture.csv" 72.6
sheet "$tmp/within/llama_13B_bfloat16_64_GPUs_fixture.csv" 46.2
for c in over within; do
	"$LB" import --format paper --db "$tmp/$c.db" "$tmp/$c"/*.csv >/dev/null 2>&1 || bad "import the $c sheet"
	"$LB" calibrate --db "$tmp/$c.db" --sweep llama_13B_bfloat16_64_GPUs_fixture --machine a100-nominal \
		--fit gemm_scale --out "$tmp/$c.json" >"$tmp/$c.out" 2>&1 || bad "calibrate the $c sheet: $(tail -n 3 "$tmp/$c.out")"
done
grep -q '^| llama_13B_bfloat16_64_GPUs_fixture | flash_attention2 | [0-9a-f]* | 1 | 2 | 32 | full | 1 -> 8 | 44 -> 72.6 | 1.650 | 1.108 | +49.0% |$' \
	"$tmp/over.out" || bad "calibrate does not name the run over the pipeline bound: $(grep -A4 'pipeline bound' "$tmp/over.out")"
grep -q '^llama_13B_bfloat16_64_GPUs_fixture: 1 pairs with a pipeline, 1 over the bound$' "$tmp/over.out" ||
	bad "calibrate does not count the pair over the bound"
grep -q '^the pipeline bound: all 1 pairs of runs that differ in the micro-batch only hold it within 5%$' \
	"$tmp/within.out" || bad "a pair within the bound: $(grep -i 'pipeline' "$tmp/within.out")"
grep -q 'runs a pipeline cannot make' "$tmp/within.out" && bad "a pair within the bound is named over it"
# the report's predicted figure lists the same pair (markdown and HTML), and none for the other
"$LB" report --db "$tmp/over.db" --figure predicted --machine a100-nominal >"$tmp/over.md" 2>&1 ||
	bad "report --figure predicted of the over sheet"
grep -q '^| llama_13B_bfloat16_64_GPUs_fixture | flash_attention2 | [0-9a-f]* | 1 | 2 | 32 | full | 1 -> 8 | 44 -> 72.6 | 1.650 | 1.108 | +49.0% |$' \
	"$tmp/over.md" || bad "the report does not list the pair over the pipeline bound"
"$LB" report --db "$tmp/over.db" --figure predicted --machine a100-nominal --format html \
	--out "$tmp/over.html.d" >/dev/null 2>&1
grep -q '<h3>Runs a pipeline cannot make</h3>' "$tmp/over.html.d/predicted.html" ||
	bad "the HTML report has no pipeline-bound table"
"$LB" report --db "$tmp/within.db" --figure predicted --machine a100-nominal >"$tmp/within.md" 2>&1
grep -q 'Runs a pipeline cannot make' "$tmp/within.md" && bad "the report names a pair within the bound"
[ $fail = 0 ] && echo "predictions on the command line: ok"
exit $fail
