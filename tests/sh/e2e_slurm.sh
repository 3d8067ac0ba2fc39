#!/bin/sh
# End to end through libslurm against the single-node cluster of scripts/slurm-local.sh:
# the quickstart sweep, injected failures (time limit, oom, launch error, cancel) classed,
# and resubmitted to completion. The steps are those of tests/sh/e2e_local.sh.
# Skips (77) unless LB_SLURM_TESTS=1 and slurmctld answers.
LB_E2E_EXECUTOR=slurm exec sh tests/sh/e2e_local.sh
