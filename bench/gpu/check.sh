#!/bin/sh
# One call on a GPU machine: every GPU test (the ops against the fp64 reference, the GPU
# communicator, the trainer against the CPU, the parallel equivalence suite and its
# failures: make test-gpu), the communicator benchmark on this machine (staged ranks
# sharing GPU 0, and NCCL with one rank per GPU there is), and the trainer's speed at the
# main one-GPU setting (Llama-13B width, 8 layers, seq 2048, micro-batch 1, global batch
# 16). Full logs go to $OUT (or $BUILD/gpu-check); a short table is printed last. Exit 0
# when every part passed.
#
# Where the build was made elsewhere (the binaries carried to the GPU host): BUILD names
# its folder; $BUILD/lib, when present, is put on LD_LIBRARY_PATH (the unit tests' cmocka).
set -u
BUILD=${BUILD:-build}
OUTD=${OUT:-$BUILD/gpu-check}
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
rc=0
rows="$OUTD/table.tsv"
: >"$rows"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nvidia-smi -L >"$OUTD/device.txt" 2>&1

part() { # name seconds: what the part took and how it ended
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$rows"
}

# 1. the GPU tests
t0=$(date +%s)
BUILD=$BUILD TESTS=gpu LB_REQUIRE_GPU=1 LB_FUZZ=0 timeout "${LB_CHECK_TEST_S:-420}" \
	sh tests/run.sh >"$OUTD/tests.log" 2>&1
st=$?
[ "$st" = 0 ] || rc=1
tar -czf "$OUTD/test-logs.tgz" -C "$BUILD" test-logs 2>/dev/null
part "tests (make test-gpu)" "$(($(date +%s) - t0))" "$(tail -n 1 "$OUTD/tests.log") (exit $st)"
grep -E '^  (PASS|FAIL|SKIP)' "$OUTD/tests.log" | sed 's/^/  /'
grep -E '^(fault|ok:|FAIL)' "$BUILD/test-logs/gpu_parallel.log" 2>/dev/null | sed 's/^/  /'

# 2. the communicator benchmark
t0=$(date +%s)
colls="$BUILD/bench/bench_colls"
if [ -x "$colls" ]; then
	: >"$OUTD/colls.log"
	for c in "staged 2" "nccl ${ngpu:-0}"; do
		set -- $c
		[ "$2" -ge 1 ] || continue
		echo "### bench_colls --comm $1 --nproc $2" >>"$OUTD/colls.log"
		timeout 60 "$colls" --comm "$1" --nproc "$2" --max-bytes 268435456 --iters 5 \
			>>"$OUTD/colls.log" 2>&1 || { rc=1; echo "FAIL: bench_colls $c" >>"$OUTD/colls.log"; }
		b=$(grep '^RESULT' "$OUTD/colls.log" | tail -n 1)
		part "bench_colls $1 x$2" "$(($(date +%s) - t0))" "${b:-no RESULT line}"
	done
fi

# 3. the trainer's speed at the main setting (one run; make bench-gpu has the whole table)
t0=$(date +%s)
d="$OUTD/s2k-mb1"
"$BUILD/layoutbench-train" --model llama-13b --layers 8 --vocab 32000 --seq-len 2048 \
	--global-batch 16 --micro-batch 1 --steps 8 --warmup 3 --lr 1e-4 --device cuda --quiet \
	--run-dir "$d" >"$d.log" 2>&1
st=$?
mfu=$(awk '
	function num(key,   r) { if (match($0, "\"" key "\":[-0-9.eE+]+")) {
		r = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3); return r + 0 }
		return -1 }
	/"type":"header"/ { flops = num("flops_per_step"); peak = num("peak_tflops") }
	/"type":"step"/ && /"warmup":false/ { s += num("time_s"); c++ }
	END { if (c) printf "%.1f%% MFU (%.3f s/step over %d steps)", 100 * flops / (s / c) / (peak * 1e12), s / c, c }' \
	"$d"/run-*.jsonl 2>/dev/null)
[ "$st" = 0 ] && [ -n "$mfu" ] || rc=1
part "13B-width 8 layers, seq 2048, mb 1" "$(($(date +%s) - t0))" "${mfu:-FAIL} (exit $st)"
tar -czf "$OUTD/runs.tgz" -C "$OUTD" s2k-mb1 s2k-mb1.log 2>/dev/null && rm -rf "$d" "$d.log"

echo
printf '%-40s %6s  %s\n' part seconds result
awk -F '\t' '{ printf "%-40s %6s  %s\n", $1, $2, $3 }' "$rows"
exit "$rc"
