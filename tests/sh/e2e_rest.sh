#!/bin/sh
# End to end through slurmrestd (JWT over TCP; then the quickstart's status through the
# unix socket): the quickstart sweep, a cancelled job classed and resubmitted. The time
# limit, oom and launch-error cases run in e2e_slurm.sh (the same scheduler underneath).
# Skips (77) unless LB_SLURM_TESTS=1 and the cluster and its REST env file are there.
LB_E2E_EXECUTOR=rest LB_E2E_FAILURES=0 exec sh tests/sh/e2e_local.sh
