#!/bin/sh
# A build without libslurm and libcurl still builds, and its slurm and rest executors say
# exactly how to get them; the local executor still works (dry run here). Built again in the
# same folder where libslurm is installed, it links libslurm: no stale configuration.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
B="$tmp/build"
if ! make --no-print-directory BUILD="$B" WITH_SLURM=0 WITH_CURL=0 "$B/layoutbench" \
	>"$tmp/make.log" 2>&1; then
	tail -n 30 "$tmp/make.log"
	echo "FAIL: the build without libslurm and libcurl failed"
	exit 1
fi
fail=0
cd "$tmp" || exit 1
"$B/layoutbench" submit quickstart --executor slurm --db "$tmp/x.db" >out 2>err
rc=$?
want='error: layoutbench was built without Slurm support (install libslurm-dev and rebuild)'
[ $rc != 0 ] || { echo "FAIL: submit --executor slurm succeeded without libslurm"; fail=1; }
grep -qxF "$want" err || { echo "FAIL: slurm executor said: $(cat err)"; fail=1; }
SLURMRESTD_URL=http://127.0.0.1:9 SLURMRESTD_TOKEN=x "$B/layoutbench" submit quickstart \
	--executor rest --db "$tmp/x.db" >out 2>err
rc=$?
want='error: layoutbench was built without slurmrestd support (install libcurl4-openssl-dev and rebuild)'
[ $rc != 0 ] || { echo "FAIL: submit --executor rest succeeded without libcurl"; fail=1; }
grep -qxF "$want" err || { echo "FAIL: rest executor said: $(cat err)"; fail=1; }
"$B/layoutbench" submit quickstart --executor local --dry-run --db "$tmp/x.db" >out 2>err ||
	{ echo "FAIL: local dry run: $(cat err)"; fail=1; }
grep -q "^dry run: sweep 'quickstart', executor local: [0-9]* layout" out ||
	{ echo "FAIL: local dry run printed: $(cat out)"; fail=1; }
# the same folder built again with what this machine has: a build must not stay stale
# when its detected configuration changes (say libslurm-dev was installed since)
cd - >/dev/null || exit 1
if [ -f /usr/include/slurm/slurm.h ]; then
	if ! make --no-print-directory BUILD="$B" "$B/layoutbench" >"$tmp/make2.log" 2>&1; then
		tail -n 30 "$tmp/make2.log"
		echo "FAIL: the rebuild with libslurm failed"
		exit 1
	fi
	grep -q "^WITH_SLURM=1 " "$B/gen/config.txt" ||
		{ echo "FAIL: config.txt: $(cat "$B/gen/config.txt")"; fail=1; }
	ldd "$B/layoutbench" | grep -q libslurm ||
		{ echo "FAIL: the rebuild in the same folder is still without libslurm (stale build)"; fail=1; }
fi
[ "$fail" = 0 ] && echo "ok: both messages exact, local executor available, rebuilt when libslurm appears"
exit $fail
