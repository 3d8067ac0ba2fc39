#!/bin/sh
# One device call of a GPU round: the parts named, in order, within one time budget, each
# part's output packed into one file under $OUT (a call brings back few files), a table of
# the parts printed last.
#
#   sh bench/gpu/session.sh PART...
#
# Parts:
#   tests    make test-gpu (tests/run.sh TESTS=gpu with LB_REQUIRE_GPU=1) on the binaries in
#            $BUILD: tests.tgz (its log and every test's log)
#   graphs   bench/gpu/graphs.sh with LB_GRAPHS_PARTS (default "train peer": ours beside
#            PyTorch's recipes, one token file for both, clocks and power sampled):
#            graphs.tgz
#   halving  bench/gpu/halving.sh for the time left (resumes a halving already begun, on
#            this machine or from the state carried in $LB_HALVING_BUILD/halving; it stops
#            its worker when its time is spent, so no job of it runs beside a later part):
#            halving.tgz (its output and state/, to carry into the next call)
#
# Env: LB_SESSION_TESTS (the tests part's pattern, default gpu), BUILD (default carry/build: the trainer, the GPU tests, the benchmarks),
# LB_HALVING_BUILD (default carry/hbin: a CLI built without Slurm, curl and CUDA, the
# trainer, lib/), LB_ROUND_S (the call's budget, default 560), LB_HALVING_ARGS (passed on:
# e.g. "--top 16"), LB_HALVING_SPEC (default h200-1gpu-halving). Exit 0 when every part
# passed (a halving not yet done passes).
set -u
[ $# -ge 1 ] || { echo "usage: sh bench/gpu/session.sh tests|graphs|halving..." >&2; exit 2; }
BUILD=${BUILD:-carry/build}
HB=${LB_HALVING_BUILD:-carry/hbin}
OUTD=${OUT:-build/session}
t_start=$(date +%s)
deadline=$((t_start + ${LB_ROUND_S:-560}))
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
rows="$OUTD/session.tsv"
: >"$rows"
rc=0
part() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$rows"; }
# pack NAME: the part's folder $OUTD/NAME into $OUTD/NAME.tgz (a call brings back few files)
pack() { tar -czf "$OUTD/$1.tgz" -C "$OUTD" "$1" && rm -rf "$OUTD/$1"; }

for p in "$@"; do
	t0=$(date +%s)
	case $p in
	tests)
		w="$OUTD/tests"
		mkdir -p "$w"
		BUILD=$BUILD TESTS=${LB_SESSION_TESTS:-gpu} LB_REQUIRE_GPU=1 LB_FUZZ=0 \
			timeout $((deadline - t0 - 10)) sh tests/run.sh >"$w/tests.log" 2>&1
		st=$?
		[ "$st" = 0 ] || rc=1
		cp -r "$BUILD/test-logs" "$w/" 2>/dev/null
		part tests "$(($(date +%s) - t0))" "$(tail -n 1 "$w/tests.log") (exit $st)"
		pack tests
		;;
	graphs)
		w="$OUTD/graphs"
		left=$((deadline - t0 - 10))
		mkdir -p "$w"
		OUT=$w BUILD=$BUILD LB_GRAPHS_BUDGET_S=$left \
			LB_GRAPHS_PARTS="${LB_GRAPHS_PARTS:-train peer}" sh bench/gpu/graphs.sh \
			>"$w/graphs.out" 2>&1
		st=$?
		[ "$st" = 0 ] || rc=1
		part graphs "$(($(date +%s) - t0))" "exit $st"
		pack graphs
		;;
	halving)
		w="$OUTD/halving"
		left=$((deadline - t0 - 15))
		if [ "$left" -lt 60 ]; then
			part halving 0 "skipped: ${left} s left"
			continue
		fi
		mkdir -p "$w"
		OUT=$w BUILD=$HB sh bench/gpu/halving.sh "$left" "${LB_HALVING_SPEC:-h200-1gpu-halving}" \
			>"$w/halving.out" 2>&1
		st=$?
		[ "$st" = 0 ] || rc=1
		part halving "$(($(date +%s) - t0))" "$(tail -n 1 "$w/halving.out") (exit $st)"
		pack halving
		;;
	*)
		echo "error: unknown part '$p' (tests, graphs or halving)" >&2
		exit 2
		;;
	esac
done
echo
printf '%-10s %6s  %s\n' part seconds result
awk -F '\t' '{ printf "%-10s %6s  %s\n", $1, $2, $3 }' "$rows"
exit "$rc"
