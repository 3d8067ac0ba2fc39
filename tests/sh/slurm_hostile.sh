#!/bin/sh
# Hostile spec values never reach a shell: every spec string that goes into a job script
# is either refused with a clear error, or rendered inert (the script is run with a fake
# srun and a fake trainer; the value must arrive verbatim and nothing may execute).
# Tokens (SLURM_JWT, SLURMRESTD_TOKEN) must appear nowhere: not in output, scripts, logs,
# the job's environment or the database.
set -u
BUILD=${BUILD:-build}
LB="$(pwd)/$BUILD/layoutbench"
[ -x "$LB" ] || { echo "no $LB (make BUILD=$BUILD first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# a value that would create $P if any shell evaluated it
P="$tmp/pwned"

spec() { # name partition account qos env-name sbatch-extra device
	cat <<EOF
{"name": $1, "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8},
 "run": {"steps": 2, "warmup": 1},
 "cluster": {"partition": $2, "account": $3, "qos": $4, "gpus_per_node": 1,
   "env": {$5: "1"}, "sbatch_extra": [$6], "device": $7}}
EOF
}
json() { # a JSON string literal of $1 (backslash, quote and newline escaped)
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' |
		awk 'BEGIN { ORS = ""; printf "\"" } { if (NR > 1) printf "\\n"; printf "%s", $0 }
			END { printf "\"" }'
}

# 1. hostile names, partitions, accounts, qos, env names, sbatch options, device: refused
n=0
for field in name partition account qos envname extra device; do
	for v in "x;touch $P" "\$(touch $P)" "\`touch $P\`" "x' ; touch $P ; '" "a b" "x
touch $P"; do
		j=$(json "$v")
		name='"h"' part='"p"' acct='"a"' qos='"q"' envn='"E"' extra='"--mem=1"' dev='"cpu"'
		case $field in
		name) name=$j ;; partition) part=$j ;; account) acct=$j ;; qos) qos=$j ;;
		envname) envn=$j ;; extra) extra=$j ;; device) dev=$j ;;
		esac
		spec "$name" "$part" "$acct" "$qos" "$envn" "$extra" "$dev" >"$tmp/s.json"
		rm -rf "$tmp/r"
		if "$LB" plan "$tmp/s.json" --render "$tmp/r" >/dev/null 2>"$tmp/err"; then
			bad "cluster $field $(printf '%s' "$v" | head -c 40) was accepted"
		elif ! grep -q '^error: ' "$tmp/err"; then
			bad "cluster $field: no 'error: ' message: $(cat "$tmp/err")"
		fi
		n=$((n + 1))
	done
done
echo "ok: $n hostile names, partitions, accounts, qos, env names, sbatch options, devices refused"

# 2. hostile env values (allowed: any text but newlines) arrive verbatim and run nothing
cat >"$tmp/srun" <<'EOF'
#!/bin/sh
# fake srun: drop srun options, run the command
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
exec "$@"
EOF
cat >"$tmp/train" <<'EOF'
#!/bin/sh
# fake trainer: record the environment value and the arguments
printf '%s' "$ODD" >"$LAYOUTBENCH_RUN_DIR/odd.txt"
printf '%s\n' "$@" >"$LAYOUTBENCH_RUN_DIR/args.txt"
EOF
chmod +x "$tmp/srun" "$tmp/train"
i=0
for v in "x;touch $P" "\$(touch $P)" "\`touch $P\`" "x'; touch $P; '" "x\"; touch $P; \"" \
	"\\\$(touch $P)\\" "%A %a \${HOME} \$HOME ~ * ?"; do
	i=$((i + 1))
	j=$(json "$v")
	cat >"$tmp/v.json" <<EOF
{"name": "hostile-env", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8},
 "run": {"steps": 2, "warmup": 1},
 "cluster": {"gpus_per_node": 1, "env": {"ODD": $j}, "setup": ["true"], "device": "cpu"}}
EOF
	rm -rf "$tmp/r" "$tmp/runs"
	if ! LAYOUTBENCH_RUNS="$tmp/runs" LAYOUTBENCH_TRAIN="$tmp/train" \
		"$LB" plan "$tmp/v.json" --render "$tmp/r" >/dev/null 2>"$tmp/err"; then
		bad "env value $i refused: $(cat "$tmp/err")"
		continue
	fi
	SLURM_ARRAY_TASK_ID=0 SLURM_JOB_ID=1 LB_SRUN="$tmp/srun" bash "$tmp/r/a0.sbatch" \
		>"$tmp/out" 2>&1 || bad "env value $i: script failed: $(cat "$tmp/out")"
	got=$(cat "$tmp"/runs/hostile-env/*/odd.txt 2>/dev/null)
	[ "$got" = "$v" ] || bad "env value $i arrived as '$got', not '$v'"
	[ -e "$P" ] && { bad "env value $i executed something"; rm -f "$P"; }
done
echo "ok: $i hostile env values arrived verbatim, nothing executed"

# 3. a hostile runs folder or trainer path
for r in "$tmp/a;touch $P" "$tmp/\$(touch $P)" "$tmp/a b"; do
	if LAYOUTBENCH_RUNS="$r" "$LB" plan quickstart --render "$tmp/r2" >/dev/null 2>"$tmp/err"; then
		bad "runs folder '$r' accepted"
	fi
	grep -q "^error: " "$tmp/err" || bad "runs folder '$r': no error message"
done
rm -rf "$tmp/r3" "$tmp/runs3"
LAYOUTBENCH_RUNS="$tmp/runs3" LAYOUTBENCH_TRAIN="$tmp/t'\$(touch $P)" \
	"$LB" plan quickstart --render "$tmp/r3" >/dev/null 2>&1 || bad "odd trainer path refused"
SLURM_ARRAY_TASK_ID=0 LB_SRUN="$tmp/srun" bash "$tmp/r3/a0.sbatch" >"$tmp/out3" 2>&1
[ $? = 127 ] || bad "a missing (odd) trainer path does not exit 127"
grep -q "not found" "$tmp/out3" || bad "a missing trainer is not named: $(cat "$tmp/out3")"
[ -e "$P" ] && bad "the trainer path executed something"
echo "ok: hostile runs folders refused, an odd trainer path is inert"

# 4. tokens never leave the process: local executor, fake trainer dumps its environment
cat >"$tmp/train-env" <<'EOF'
#!/bin/sh
env >"$LAYOUTBENCH_RUN_DIR/env.txt"
exit 1
EOF
chmod +x "$tmp/train-env"
T1=tok-jwt-5f3a9c T2=tok-rest-77b1e0
(
	cd "$tmp" || exit 1
	SLURM_JWT=$T1 SLURMRESTD_TOKEN=$T2 LAYOUTBENCH_TRAIN="$tmp/train-env" \
		"$LB" submit quickstart --executor local --db "$tmp/t.db" --runs "$tmp/truns" \
		--wait --quiet >"$tmp/sub.out" 2>&1
	SLURM_JWT=$T1 SLURMRESTD_TOKEN=$T2 "$LB" status --db "$tmp/t.db" >>"$tmp/sub.out" 2>&1
	SLURM_JWT=$T1 SLURMRESTD_TOKEN=$T2 "$LB" submit quickstart --executor rest \
		--rest-url http://127.0.0.1:9 --db "$tmp/t2.db" --runs "$tmp/truns" \
		--force >>"$tmp/sub.out" 2>&1
	SLURM_JWT=$T1 "$LB" submit quickstart --executor rest --rest-url http://127.0.0.1:9 \
		--db "$tmp/t2.db" --runs "$tmp/truns" --force >>"$tmp/sub.out" 2>&1
	true
)
ls "$tmp"/truns/quickstart/*/env.txt >/dev/null 2>&1 || bad "the fake trainer never ran"
if grep -rl -e "$T1" -e "$T2" "$tmp/truns" "$tmp/sub.out" "$tmp"/t.db* 2>/dev/null; then
	bad "a token leaked into the files above"
fi
grep -q "SLURM_JOB_ID=" "$tmp"/truns/quickstart/*/env.txt || bad "no SLURM_JOB_ID in the job"
echo "ok: tokens in no output, script, log, job environment or database"
[ "$fail" = 0 ] && echo "all hostile-value checks passed"
exit $fail
