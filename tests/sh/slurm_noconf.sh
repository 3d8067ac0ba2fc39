#!/bin/sh
# Without a Slurm configuration (no slurm.conf, or a SLURM_CONF that cannot be read),
# `submit --dry-run` still prints the arrays (a dry run needs no cluster; arrays split at
# Slurm's default MaxArraySize) and makes no file; a real submit through libslurm fails
# with layoutbench's own error naming the fixes (SLURM_CONF, --executor rest,
# --executor local), at once, before any database is made, rather than in libslurm's
# fatal() (which exits the process, leaving the database's -wal and -shm files behind).
set -u
LB=${BUILD:-build}/layoutbench
root=$(pwd)
grep -q 'WITH_SLURM=1' "${BUILD:-build}/gen/config.txt" 2>/dev/null || {
	echo "built without libslurm"
	exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cd "$tmp" || exit 1
case "$LB" in /*) ;; *) LB="$root/$LB" ;; esac
fixes="set SLURM_CONF to the cluster's slurm.conf, submit through slurmrestd with --executor rest, or run on this machine with --executor local"

# each case: the environment that hides the configuration
run_case() { # label env-assignment...
	label=$1
	shift
	mkdir -p "$tmp/$label" && cd "$tmp/$label" || exit 1
	env "$@" "$LB" submit "$root/sweeps/specs/paper-13b-2k.json" --dry-run >out 2>err
	rc=$?
	[ $rc = 0 ] || { echo "FAIL ($label): the dry run exited $rc: $(cat err)"; fail=1; }
	grep -q "^dry run: sweep 'paper-13b-2k', executor slurm: 64 layout(s) in 1 array(s)" out ||
		{ echo "FAIL ($label): the dry run printed: $(head -n 3 out)"; fail=1; }
	grep -q "arrays split at Slurm's default, 1001" err ||
		{ echo "FAIL ($label): no note on the unknown MaxArraySize: $(cat err)"; fail=1; }
	[ -z "$(ls -A | grep -v '^out$\|^err$')" ] ||
		{ echo "FAIL ($label): the dry run made files: $(ls -A)"; fail=1; }
	t0=$(date +%s)
	env "$@" "$LB" submit quickstart --executor slurm --db x.db >out 2>err
	rc=$?
	[ $(($(date +%s) - t0)) -lt 10 ] || { echo "FAIL ($label): the submit took $(($(date +%s) - t0)) s"; fail=1; }
	[ $rc = 1 ] || { echo "FAIL ($label): submit exited $rc, want 1"; fail=1; }
	grep -q "^error: slurm: .*$fixes" err ||
		{ echo "FAIL ($label): submit said: $(cat err)"; fail=1; }
	! grep -q "fatal" err || { echo "FAIL ($label): libslurm's fatal() reached the user"; fail=1; }
	for f in x.db x.db-wal x.db-shm; do
		[ ! -e "$f" ] || { echo "FAIL ($label): the failed submit left $f behind"; fail=1; }
	done
	cd "$tmp" || exit 1
}
run_case unreadable SLURM_CONF=/nonexistent/slurm.conf
# libslurm's own search (no SLURM_CONF) finds nothing only where this machine has none
if [ ! -e /etc/slurm/slurm.conf ] && [ ! -e /run/slurm/conf/slurm.conf ]; then
	run_case none -u SLURM_CONF
else
	echo "note: this machine has a slurm.conf; only the unreadable SLURM_CONF was tried"
fi
exit $fail
