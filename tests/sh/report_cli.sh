#!/bin/sh
# End-to-end test of `layoutbench report` on our own runs: three CPU run logs
# (tests/golden/report/runs: unknown peak, one OOM) collected into a temporary database;
# MFU must read n/a (never invented) with TFLOP/s per GPU shown and used for ranking, in
# CSV (empty MFU), markdown and HTML. Also: usage errors (exit 2), a missing database
# (exit 1), --sweep, LAYOUTBENCH_DB, --out for each format, and `--figure all` CSV sections.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
RUNS=tests/golden/report/runs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
db="$tmp/r.db"
cp -r "$RUNS" "$tmp/runs"

if ! "$LB" collect --db "$db" "$tmp/runs" >"$tmp/collect.out" 2>&1; then
	cat "$tmp/collect.out"
	echo "error: collect failed"
	exit 1
fi

# usage errors: exit 2 with the usage line
for args in "" "--figure nope" "--figure kernels --format pdf" "--figure" "--bogus x --figure all"; do
	# shellcheck disable=SC2086
	"$LB" report --db "$db" $args >"$tmp/u.out" 2>"$tmp/u.err"
	rc=$?
	[ $rc = 2 ] || { echo "FAIL: 'report $args' exited $rc, want 2"; fail=1; }
	grep -q '^usage: layoutbench report' "$tmp/u.err" || { echo "FAIL: no usage for '$args'"; fail=1; }
	grep -q '^error: ' "$tmp/u.err" || { echo "FAIL: no error line for '$args'"; fail=1; }
done
# a missing database: exit 1, says what to do, creates nothing
"$LB" report --db "$tmp/none.db" --figure all 2>"$tmp/m.err"
[ $? = 1 ] || { echo "FAIL: missing db exit status"; fail=1; }
grep -q "^error: database '$tmp/none.db' not found" "$tmp/m.err" || { cat "$tmp/m.err"; echo "FAIL: missing db message"; fail=1; }
[ -e "$tmp/none.db" ] && { echo "FAIL: report created a database"; fail=1; }

# unknown peak: CSV MFU empty (and its sd, and MFU without the embedding), ranked by
# TFLOP/s; the step time's spread over the steady-state steps all the same (0.2 s and
# 0.3 s: sd 0.05; 0.5 s twice: 0); the fixtures' constant loss is flat
"$LB" report --db "$db" --figure kernels --format csv >"$tmp/k.csv" || fail=1
cat >"$tmp/k.want" <<'EOF'
group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_parallel,model,seq_len,gpus,tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps,mfu_no_embed,health
cpu-sweep,flash+unfused,,2,1,1,none,2,0,tiny,128,2,0.002,,0.25,0.05,3,,flat
cpu-sweep,flash+fused,,1,1,1,none,2,0,tiny,128,2,0.001,,0.5,0,3,,flat
EOF
diff -u "$tmp/k.want" "$tmp/k.csv" || { echo "FAIL: kernels csv"; fail=1; }
"$LB" report --db "$db" --figure best --format csv >"$tmp/b.csv" || fail=1
grep -q '^tiny/128/2,flash+unfused,,2,1,1,none,' "$tmp/b.csv" || { cat "$tmp/b.csv"; echo "FAIL: best by TFLOP/s"; fail=1; }

# markdown: n/a and TFLOP/s per GPU, the step time and its sd; the group named by model,
# sequence length and GPUs
LAYOUTBENCH_DB="$db" "$LB" report --figure kernels >"$tmp/k.md" || { echo "FAIL: LAYOUTBENCH_DB"; fail=1; }
grep -qx '### tiny, seq 128, 2 GPUs (sweep cpu-sweep)' "$tmp/k.md" || { cat "$tmp/k.md"; echo "FAIL: md group"; fail=1; }
grep -qF '| flash+unfused | n/a | n/a | - | 0.002 | 0.25 | 0.05 | 2 | 1 | 1 | 2 | off | none | flat |' "$tmp/k.md" || { cat "$tmp/k.md"; echo "FAIL: md n/a row"; fail=1; }
grep -qF '| flash+fused | n/a | n/a | - | 0.001 | 0.5 | 0 | 1 | 1 | 1 | 2 | off | none | flat |' "$tmp/k.md" || { echo "FAIL: md second row"; fail=1; }

# --sweep
# a sweep the database does not know: exit 1, the known ones named, nothing on stdout
"$LB" report --db "$db" --sweep nope --figure kernels --format csv >"$tmp/s.csv" 2>"$tmp/s.err"
[ $? = 1 ] || { echo "FAIL: --sweep nope does not exit 1"; fail=1; }
[ -s "$tmp/s.csv" ] && { echo "FAIL: --sweep nope shows rows"; fail=1; }
grep -q "^error: no sweep 'nope' in database '$db' (known: cpu-sweep)$" "$tmp/s.err" ||
	{ echo "FAIL: --sweep nope message: $(cat "$tmp/s.err")"; fail=1; }
"$LB" report --db "$db" --sweep=cpu-sweep --figure=kernels --format=csv >"$tmp/s2.csv" || fail=1
cmp -s "$tmp/s2.csv" "$tmp/k.csv" || { echo "FAIL: --sweep cpu-sweep"; fail=1; }

# --figure all as CSV on stdout: nine sections (phases, then memory, last)
"$LB" report --db "$db" --figure all --format csv >"$tmp/all.csv" || fail=1
[ "$(grep -c '^# figure: ' "$tmp/all.csv")" = 9 ] || { echo "FAIL: csv sections"; fail=1; }
# the memory figure: every run of ours that fit or ran out of memory, its peak against the
# trainer's model for its layout (these fixtures' peaks are made up: the model's figure is
# what is checked, and the OOM run's row)
"$LB" report --db "$db" --figure memory --format csv >"$tmp/mem.csv" || fail=1
head -n 1 "$tmp/mem.csv" | grep -qx 'group,run_id,label,micro_batch,tp,pp,dp,sequence_parallel,checkpointing,attention,norm,peak_mem_mib,model_mem_mib,error_pct,status,model,seq_len,gpus,planned_mem_mib,device_peak_mem_mib,device_minus_planned_mib' ||
	{ head -n 1 "$tmp/mem.csv"; echo "FAIL: memory csv header"; fail=1; }
grep -q ',flash,fused,,8.737,,oom,tiny,128,2,8.737,,$' "$tmp/mem.csv" ||
	{ cat "$tmp/mem.csv"; echo "FAIL: memory: the OOM run's row (no peak, the model's 8.737 MiB, planned the same on the CPU, no device reading)"; fail=1; }
[ "$(grep -c '^group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_parallel,model,seq_len,gpus,tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps,mfu_no_embed,health$' "$tmp/all.csv")" = 7 ] ||
	{ echo "FAIL: csv section headers"; fail=1; }

# --out: md to report.md, html to report.html; nothing on stdout
"$LB" report --db "$db" --figure all --out "$tmp/o" >"$tmp/o.out" 2>/dev/null || fail=1
[ -s "$tmp/o/report.md" ] && [ ! -s "$tmp/o.out" ] || { echo "FAIL: md --out"; fail=1; }
if command -v "${LB_GNUPLOT:-gnuplot}" >/dev/null 2>&1; then
	"$LB" report --db "$db" --figure all --format html --out "$tmp/o/" 2>"$tmp/h.err" || { cat "$tmp/h.err"; fail=1; }
	page="$tmp/o/report.html"
	# --out DIR/ names the file with one slash
	grep -qx "wrote $tmp/o/report.html" "$tmp/h.err" || { cat "$tmp/h.err"; echo "FAIL: --out DIR/ path"; fail=1; }
	# gnuplot's tooltips (<title>) have no literal \n: a group reads "tiny, seq 128, 2 GPUs"
	grep -F '<title>' "$page" | grep -qF '\n' && { echo "FAIL: a tooltip shows a literal \\n"; fail=1; }
	grep -qF '<title>tiny, seq 128, ' "$page" || { grep -F '<title>' "$page" | head -3; echo "FAIL: group tooltip"; fail=1; }
	grep -q 'TFLOP/s per GPU (model FLOPs)' "$page" || { echo "FAIL: plot axis is not TFLOP/s"; fail=1; }
	grep -q '<td class="num">n/a</td>' "$page" || { echo "FAIL: html n/a"; fail=1; }
	grep -q '<td class="num">0.002</td>' "$page" || { echo "FAIL: html TFLOP/s"; fail=1; }
	grep -q 'MFU \[%\]' "$page" && { echo "FAIL: plot claims MFU without a peak"; fail=1; }
	# seqpar has no runs: a figure with no plot, still a heading
	grep -q '<h2>Figure 5: sequence parallelism</h2>' "$page" || { echo "FAIL: empty figure heading"; fail=1; }
fi
# a gnuplot that runs and fails: exit 1, the page still written with its tables
LB_GNUPLOT=false "$LB" report --db "$db" --figure kernels --format html >"$tmp/f.html" 2>"$tmp/f.err"
[ $? = 1 ] || { echo "FAIL: failing gnuplot exit status"; fail=1; }
grep -q "gnuplot exited with status 1" "$tmp/f.err" || { cat "$tmp/f.err"; echo "FAIL: failing gnuplot message"; fail=1; }
grep -q '<td class="num">0.002</td>' "$tmp/f.html" || { echo "FAIL: page without plots lacks tables"; fail=1; }
# an unwritable --out: exit 1 with the path named
"$LB" report --db "$db" --figure kernels --out /proc/nope 2>"$tmp/w.err"
[ $? = 1 ] || { echo "FAIL: unwritable --out exit status"; fail=1; }
grep -q "/proc/nope" "$tmp/w.err" || { echo "FAIL: unwritable --out message"; fail=1; }

[ $fail = 0 ] && echo "report_cli: all checks passed"
exit $fail
