#!/bin/sh
# The trainer ships no benchmark: the CUDA backend's benchmarks (bench/cuda_bench.h,
# built from bench/*.cu) are linked into the benchmarks and the tests, never into
# layoutbench-train. Every function bench/cuda_bench.h declares must be absent from the
# trainer's symbols.
BUILD=${BUILD:-build}
train=$BUILD/layoutbench-train
[ -x "$train" ] || { echo "skip: no $train (run make all)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "skip: no nm (binutils) to read the trainer's symbols"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
names=$(sed -n 's/^[a-z][a-z ]*[ *]\(lb_cuda_[a-z_0-9]*\)(.*/\1/p' bench/cuda_bench.h)
[ -n "$names" ] || { echo "FAIL: no lb_cuda_* function read from bench/cuda_bench.h"; exit 1; }
nm "$train" >"$tmp/syms" || { echo "FAIL: nm cannot read $train"; exit 1; }
bad=0
for n in $names; do
	if grep -q " $n\$" "$tmp/syms"; then
		echo "FAIL: the trainer holds the benchmark $n (bench/cuda_bench.h): link bench/*.cu into the benchmarks and tests only"
		bad=1
	fi
done
[ $bad = 0 ] || exit 1
echo "ok: the trainer holds none of the $(echo "$names" | wc -l) benchmark functions"
