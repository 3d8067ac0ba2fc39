#!/bin/sh
# --db at a folder, or under a folder that does not exist, is named for what it is (SQLite
# says "unable to open database file" or "disk I/O error", as root too), by every command
# that opens the database; and a submit whose spec or job scripts are refused checks them
# before any database is made, so it leaves none behind.
set -u
. tests/sh/lib/cli_tmp.sh
mkdir adir
check() { # want-substring command...
	want=$1
	shift
	"$@" >out 2>err
	rc=$?
	[ $rc = 1 ] || { echo "FAIL: '$*' exited $rc, want 1"; fail=1; }
	grep -qF -- "$want" err || { echo "FAIL: '$*' said '$(cat err)', want '$want'"; fail=1; }
}
folder="error: database 'adir' is a folder, not a database file (give a file: --db adir/results.db)"
missing="error: database 'nowhere/x.db': its folder 'nowhere' does not exist (create it: mkdir -p 'nowhere'; or give another --db)"
# shellcheck disable=SC2086 # $cmd is one word
for cmd in status cancel collect; do # commands that make the database
	check "$folder" "$LB" $cmd --db adir
	check "$missing" "$LB" $cmd --db nowhere/x.db
done
check "$folder" "$LB" report --figure all --db adir # and ones that only read it
check "$folder" "$LB" sql --write --db adir "SELECT 1"
check "$folder" "$LB" sql --db adir "SELECT 1"
check "$folder" "$LB" submit quickstart --executor local --db adir
check "$missing" "$LB" submit quickstart --executor local --db nowhere/x.db
[ ! -e nowhere ] || { echo "FAIL: a command made the folder 'nowhere'"; fail=1; }

# refused before a database is made: the spec (a sweep name) and its job scripts (a
# trainer path the renderer refuses)
printf '{"name": "..", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8}, "cluster": {"device": "cpu"}}\n' >dots.json
check "sweep name '..' starts with '.'" "$LB" submit dots.json --executor local --db x.db
check "trainer path" env LAYOUTBENCH_TRAIN="$(printf 'a\nb')" "$LB" submit quickstart --executor local --db x.db
for f in x.db x.db-wal x.db-shm; do
	[ ! -e "$f" ] || { echo "FAIL: a refused submit left $f"; fail=1; }
done
exit $fail
