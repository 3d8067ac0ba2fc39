#!/bin/sh
# scripts/slurm-local.sh must not overwrite a slurm.conf it did not write (a developer on a
# real cluster node): `check` refuses a foreign file, accepts its own, a missing one, CI=true
# and LB_SLURM_LOCAL_FORCE=1. Only the check runs: no daemon is touched.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
chk() { env -u CI -u LB_SLURM_LOCAL_FORCE LB_SLURM_CONF="$tmp/slurm.conf" "$@" \
	sh scripts/slurm-local.sh check >"$tmp/out" 2>&1; }
chk || { echo "FAIL: refused a missing slurm.conf"; fail=1; }
printf 'ClusterName=production\n' >"$tmp/slurm.conf"
if chk; then
	echo "FAIL: accepted a foreign slurm.conf"
	fail=1
fi
grep -q "^error: slurm-local: .* was not written by this script" "$tmp/out" ||
	{ echo "FAIL: no clear refusal: $(cat "$tmp/out")"; fail=1; }
chk CI=true || { echo "FAIL: CI=true refused"; fail=1; }
chk LB_SLURM_LOCAL_FORCE=1 || { echo "FAIL: LB_SLURM_LOCAL_FORCE=1 refused"; fail=1; }
printf '# written by layoutbench scripts/slurm-local.sh\nClusterName=x\n' >"$tmp/slurm.conf"
chk || { echo "FAIL: refused its own slurm.conf"; fail=1; }
[ "$fail" = 0 ] && echo "ok: the guard refuses only foreign configurations"
exit $fail
