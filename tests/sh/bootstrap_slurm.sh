#!/bin/sh
# The multi-node bootstrap's PMI2 way under real Slurm: `srun --mpi=pmi2 -n 3` starts
# test_bootstrap as three tasks, and every task gets task 0's bytes through Slurm's PMI2
# key-value space (harness/comm/bootstrap.h); the file way is tested by test_bootstrap itself.
# Skips (77) unless LB_SLURM_TESTS=1 and slurmctld answers (scripts/slurm-local.sh
# start). Needs libpmi2.so.0 (libpmi2-0-dev, which scripts/slurm-local.sh installs) and
# Slurm's mpi/pmi2 plugin (slurm-wlm-basic-plugins).
BUILD=${BUILD:-build}
T="$(pwd)/$BUILD/tests/test_bootstrap"

. tests/sh/lib/need_slurm.sh
[ -x "$T" ] || { echo "error: '$T' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d /tmp/lb-boot-slurm.XXXXXX) || exit 1
chmod 777 "$tmp"
trap 'rm -rf "$tmp"' EXIT

out=$(cd "$tmp" && timeout 120 srun --mpi=pmi2 -n 3 -N 1 -t 2 "$T" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "FAIL: srun --mpi=pmi2: exit $rc"; exit 1; }
n=$(printf '%s\n' "$out" | grep -c '^pmi2 rank [0-2] of 3: ok$')
[ "$n" = 3 ] || { echo "FAIL: $n of 3 tasks got task 0's bytes through PMI2"; exit 1; }
echo "ok: 3 srun tasks exchanged rank 0's bytes through PMI2"
