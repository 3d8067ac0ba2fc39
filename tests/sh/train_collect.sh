#!/bin/sh
# The trainer's run log is what the collector reads: train the tiny preset into a temp
# run directory, `layoutbench collect` it, and find the run in `report --figure best`;
# a peak given with --peak-tflops is recorded and gives MFU; a pipeline of two stages with
# an explicit split and two virtual stages each is collected under its own layout id,
# with no warning; a spec's run.lr and run.clip reach the trainer through its job script
# and the run log's header.
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
LAYOUTBENCH_SWEEP=train-collect "$TRAIN" --model tiny --seq-len 32 --global-batch 4 \
	--micro-batch 2 --steps 4 --warmup 1 --quiet --run-dir "$tmp/runs" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: training exited $?"; exit 1; }
"$LB" collect --db "$tmp/r.db" "$tmp/runs" >"$tmp/out" 2>&1 ||
	{ cat "$tmp/out"; echo "FAIL: collect refused the trainer's log"; fail=1; }
grep -q "1 new run.*4 steps; 0 warnings, 0 errors" "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: collect summary"; fail=1; }
uid=$(basename "$tmp"/runs/run-*.jsonl .jsonl | sed 's/^run-//')
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT status, n_steps FROM run_summary WHERE run_uid = '$uid'" | tail -n 1)
[ "$got" = "ok,3" ] || { echo "FAIL: run_summary: got '$got', want 'ok,3' (warmup excluded)"; fail=1; }
"$LB" report --db "$tmp/r.db" --figure best >"$tmp/report" 2>&1 ||
	{ cat "$tmp/report"; echo "FAIL: report --figure best"; fail=1; }
grep -q "^| tiny | 32 | 1 | n/a |" "$tmp/report" || { cat "$tmp/report"; echo "FAIL: the run is not in the report"; fail=1; }

# a GPU the peak table lacks: --peak-tflops gives the peak the run log records, and MFU
# follows from it (here on the CPU, where the table has none and MFU is otherwise null)
LAYOUTBENCH_SWEEP=train-peak "$TRAIN" --model tiny --seq-len 32 --global-batch 4 \
	--micro-batch 2 --steps 3 --warmup 1 --quiet --peak-tflops 0.5 --run-dir "$tmp/peak" \
	2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: training with --peak-tflops exited $?"; fail=1; }
grep -q '"peak_tflops":0.5,' "$tmp"/peak/run-*.jsonl || { echo "FAIL: the run log has no peak 0.5"; fail=1; }
"$LB" collect --db "$tmp/r.db" "$tmp/peak" >/dev/null 2>&1 || { echo "FAIL: collect the peak run"; fail=1; }
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT peak_tflops, mfu > 0 FROM run_summary WHERE sweep = 'train-peak'" | tail -n 1)
[ "$got" = "0.5,1" ] || { echo "FAIL: with --peak-tflops 0.5, run_summary has '$got'"; fail=1; }

# a spec's optimizer settings (run.lr, run.clip) reach the trainer through the job script
# (run by hand, without Slurm) and its run log's header says what it trained with; the
# weight decay not given stays the trainer's default
cat >"$tmp/optim.json" <<'EOF2'
{"name": "optim", "model": "tiny", "fixed": {"seq_len": 32, "global_batch": 4, "micro_batch": 2},
 "run": {"steps": 3, "warmup": 1, "lr": 0.0005, "clip": 0},
 "cluster": {"device": "cpu", "gpus_per_node": 1}}
EOF2
LAYOUTBENCH_RUNS="$tmp/lbruns" "$LB" plan "$tmp/optim.json" --render "$tmp/optim" >/dev/null 2>&1 ||
	{ echo "FAIL: plan --render of a spec with run.lr"; fail=1; }
LAYOUTBENCH_TRAIN="$TRAIN" SLURM_ARRAY_TASK_ID=0 bash "$tmp/optim/a0.sbatch" >"$tmp/optim.out" 2>&1 ||
	{ cat "$tmp/optim.out"; echo "FAIL: the job script with run.lr exited $?"; fail=1; }
head -n 1 "$tmp"/lbruns/optim/*/run-*.jsonl | grep -q '"optimizer":{"lr":0.0005,"weight_decay":0.1,"clip":0}' ||
	{ head -c 600 "$tmp"/lbruns/optim/*/run-*.jsonl; echo "FAIL: the run log does not carry run.lr and run.clip"; fail=1; }
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT mfu IS NULL FROM run_summary WHERE sweep = 'train-collect'" | tail -n 1)
[ "$got" = 1 ] || { echo "FAIL: without a peak the CPU run's MFU is '$got', want NULL"; fail=1; }

# the pipeline's shape in the header: the collector computes the same id from it
LAYOUTBENCH_SWEEP=train-pipe "$TRAIN" --model tiny-deep --seq-len 16 --global-batch 4 \
	--micro-batch 1 --steps 2 --warmup 1 --quiet --pp 2 --virtual-stages 2 \
	--stage-layers 1,3,2,2 --nproc-per-node 2 --run-dir "$tmp/pipe" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: the interleaved run exited $?"; fail=1; }
"$LB" collect --db "$tmp/r.db" "$tmp/pipe" >"$tmp/out" 2>&1 ||
	{ cat "$tmp/out"; echo "FAIL: collect the interleaved run"; fail=1; }
grep -q "0 warnings, 0 errors" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: collect warned"; fail=1; }
want=$(head -n 1 "$tmp"/pipe/run-*.jsonl | sed 's/.*"layout_id":"\([0-9a-f]*\)".*/\1/')
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT l.layout_id FROM runs r JOIN layouts l USING (layout_id) WHERE r.sweep = 'train-pipe'" \
	2>&1 | tail -n 1)
[ -n "$want" ] && [ "$got" = "$want" ] || { echo "FAIL: layout id '$got', the header's '$want'"; fail=1; }
got=$("$LB" sql --db "$tmp/r.db" --format csv \
	"SELECT pp, virtual_stages, stage_layers FROM run_summary WHERE sweep = 'train-pipe'" | tail -n 1)
[ "$got" = '2,2,"[1,3,2,2]"' ] || { echo "FAIL: run_summary's pipeline shape '$got'"; fail=1; }

[ $fail = 0 ] && echo "train collect: ok"
exit $fail
