#!/bin/sh
# Successive halving through slurmrestd against the single-node cluster of
# scripts/slurm-local.sh: the steps of tests/sh/halving_local.sh. Skips (77) unless
# LB_SLURM_TESTS=1, slurmctld answers and SLURMRESTD_URL is set.
LB_HALVING_EXECUTOR=rest exec sh tests/sh/halving_local.sh
