#!/bin/sh
# Successive halving through libslurm against the single-node cluster of
# scripts/slurm-local.sh: known speeds, equal layouts, failures and resuming, the steps of
# tests/sh/halving_local.sh. Skips (77) unless LB_SLURM_TESTS=1 and slurmctld answers.
LB_HALVING_EXECUTOR=slurm exec sh tests/sh/halving_local.sh
