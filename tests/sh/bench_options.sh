#!/bin/sh
# The benchmarks read their lines with the one parser (common/cmdline.h): --help prints
# the usage and one line per option from their tables, a bad value is a usage error (exit
# 2) with the error line and the usage, as for every layoutbench command.
BUILD=${BUILD:-build}
for b in bench_colls bench_kernels; do
	[ -x "$BUILD/bench/$b" ] || { echo "error: '$BUILD/bench/$b' not built (make $BUILD/bench/$b)"; exit 1; }
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect RC PATTERN CMD...: CMD exits RC and its stderr (stdout for rc 0) matches PATTERN
expect() {
	want=$1 pat=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	f="$tmp/err"
	[ "$want" = 0 ] && f="$tmp/out"
	if [ $rc != "$want" ] || ! grep -q -- "$pat" "$f"; then
		echo "FAIL: $*: exit $rc (want $want), $(cat "$tmp/out" "$tmp/err")"
		fail=1
	fi
}
B="$BUILD/bench"
expect 0 "^usage: bench_colls \[--comm shm|staged|nccl\] \[--nproc N\]" "$B/bench_colls" --help
expect 0 "^  --op all|all_reduce|reduce_scatter|all_gather|sendrecv " "$B/bench_colls" --help
expect 2 "^error: --op: unknown value 'x' (expected all, all_reduce, reduce_scatter, all_gather or sendrecv)$" \
	"$B/bench_colls" --op x
expect 2 "^usage: bench_colls " "$B/bench_colls" --op x
expect 2 "^error: flag '--min-bytes' expects a byte count from 4 " "$B/bench_colls" --min-bytes 2
expect 2 "^error: unknown flag '--bogus'$" "$B/bench_colls" --bogus
expect 0 "^usage: bench_kernels \[--csv FILE\] \[--iters N\] \[--only SUBSTR\]" "$B/bench_kernels" --help
expect 2 "^error: flag '--iters' expects a whole number from 1 to 1000, got '0'$" \
	"$B/bench_kernels" --iters 0
expect 2 "^error: flag '--csv' needs a value$" "$B/bench_kernels" --csv
[ $fail = 0 ] && echo "benchmark options: ok"
exit $fail
