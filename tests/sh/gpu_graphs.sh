#!/bin/sh
# The trainer with CUDA graphs on the GPU (--cuda-graphs 1; make test-gpu runs it; on a
# machine without a GPU, or with a build without CUDA, it skips with the reason).
#
#  1. The tiny model, 12 steps, graphs on against graphs off: every step within 2% (the
#     GPU suites' bound; both run the same kernels with the same algorithms, so they differ
#     only where atomics add in another order: expect far less), for flash and, on a
#     model widened to head dim 64 with grouped-query heads, cuDNN's attention, each with
#     no, selective and full checkpointing; each graphs-on run says on stderr that it
#     captured segments and replayed them, and warns of no failed capture.
#  2. Ranks sharing the GPU through the staged communicator (the graphs cut at every
#     collective): tp 2 and tp 4 with and without sequence parallelism, tp 2 with pp 2 and
#     SP, dp 2 with ZeRO-1 (the reduction hook inside the last backward) and ZeRO-2 (its
#     backward without graphs), 6 steps each, graphs on within 2% of graphs off and of
#     the single-rank GPU run, and within 3% of the CPU's single-rank run (gpu_train.sh's
#     bound against the CPU).
BUILD=${BUILD:-build}
TRAIN="$(pwd)/$BUILD/layoutbench-train"

[ -x "$TRAIN" ] || { echo "error: '$TRAIN' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
export NCCL_NVLS_ENABLE=0
unset LAYOUTBENCH_CUDA_GRAPHS

"$TRAIN" --model tiny --seq-len 16 --global-batch 1 --micro-batch 1 --steps 1 --warmup 0 \
	--quiet --device cuda --run-dir "$tmp/probe" >"$tmp/probe.out" 2>"$tmp/probe.err"
rc=$?
if [ "$rc" != 0 ]; then
	why=$(grep -o "built without the CUDA backend\|no CUDA device[^(]*" "$tmp/probe.err" | head -n 1 | sed "s/ *$//")
	if [ -n "$why" ] && [ "${LB_REQUIRE_GPU:-0}" != 1 ]; then
		echo "skip: the GPU tests need a GPU: $why"
		exit 77
	fi
	cat "$tmp/probe.err"
	echo "FAIL: the GPU probe run exited $rc"
	exit 1
fi

losses() { grep '"type":"step"' "$1"/run-*.jsonl | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
# name A B bound steps: every step of A within bound (relative) of B's
compare() {
	losses "$2" >"$tmp/a" && losses "$3" >"$tmp/b"
	paste "$tmp/a" "$tmp/b" | awk -v name="$1" -v m="$4" -v want="$5" '
		{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); n++
		  if (r > w) { w = r; at = NR } }
		END { if (n != want) { printf "FAIL: %s: %d steps, want %d\n", name, n, want; exit 1 }
		      printf "%-64s worst %.6f at step %d\n", name, w, at
		      if (w > m) { print "FAIL: " name; exit 1 } }' || fail=1
}
# dir flags...: one run; its stderr in dir.err
run() {
	d=$1
	shift
	"$TRAIN" "$@" --quiet --run-dir "$d" >"$d.out" 2>"$d.err" ||
		{ echo "FAIL: $* exited $?"; tail -n 5 "$d.err"; fail=1; return 1; }
	tail -n 1 "$d"/run-*.jsonl | grep -q '"type":"end","status":"ok"' ||
		{ echo "FAIL: $*: the run did not end ok"; fail=1; return 1; }
}
# dir name: the graphs-on run captured and replayed on every rank, and no capture failed
graphs_used() {
	if grep -q "warning: CUDA graph" "$1.err"; then
		echo "FAIL: $2: a capture failed:"
		grep "warning: CUDA graph" "$1.err" | head -n 3
		fail=1
	fi
	grep "cuda graphs:" "$1.err" | awk -v name="$2" -v ranks="$3" '
		{ n++; for (i = 1; i <= NF; i++) { if ($i == "captured,") c = $(i - 2); if ($i == "replayed,") r = $(i - 1) }
		  if (c + 0 < 1 || r + 0 < 1) bad = 1 }
		END { if (n != ranks || bad) { printf "FAIL: %s: %d summary lines (want %d), or a rank without captures and replays\n", name, n, ranks; exit 1 } }' ||
		fail=1
}

# 1. graphs on against off, one rank
tiny="--model tiny --seq-len 64 --global-batch 8 --micro-batch 2 --steps 12 --warmup 1 --device cuda"
wide="--hidden 256 --heads 4 --kv-heads 2 --lr 0.001"
for a in flash cudnn; do
	extra=
	[ "$a" = cudnn ] && extra=$wide
	for c in none selective full; do
		name="$a/fused/$c"
		d0="$tmp/g0-$a-$c" d1="$tmp/g1-$a-$c"
		run "$d0" $tiny $extra --attention "$a" --checkpointing "$c" --cuda-graphs 0 || continue
		run "$d1" $tiny $extra --attention "$a" --checkpointing "$c" --cuda-graphs 1 || continue
		graphs_used "$d1" "$name" 1
		compare "graphs on vs off, $name" "$d1" "$d0" 0.02 12
	done
done

# 2. ranks sharing the GPU (staged communicator)
lay="--model tiny --seq-len 32 --global-batch 8 --micro-batch 1 --steps 6 --warmup 1"
run "$tmp/cpu" $lay --device cpu
run "$tmp/one" $lay --device cuda
for l in "2 1 1 0 0" "2 1 1 1 0" "4 1 1 0 0" "4 1 1 1 0" "2 2 1 1 0" "1 1 2 0 1" "1 1 2 0 2"; do
	set -- $l
	n=$(($1 * $2 * $3))
	name="tp$1 pp$2 dp$3 sp$4 zero$5"
	flags="--tp $1 --pp $2 --dp $3 --sequence-parallel $4 --zero-stage $5 --nproc-per-node $n --gpu-comm staged --device cuda"
	d0="$tmp/r0-$1-$2-$3-$4-$5" d1="$tmp/r1-$1-$2-$3-$4-$5"
	run "$d0" $lay $flags --cuda-graphs 0 || continue
	run "$d1" $lay $flags --cuda-graphs 1 || continue
	graphs_used "$d1" "$name" "$n"
	compare "$name: graphs on vs off" "$d1" "$d0" 0.02 6
	compare "$name: graphs on vs the single GPU rank" "$d1" "$tmp/one" 0.02 6
	compare "$name: graphs on vs the CPU" "$d1" "$tmp/cpu" 0.03 6
done

[ "$fail" = 0 ] && echo "ok: the trainer with CUDA graphs equals the trainer without them"
exit "$fail"
