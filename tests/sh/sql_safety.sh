#!/bin/sh
# The database is safe to read and to open at once: `sql` refuses statements that would
# change the database (DROP, DELETE, ATTACH, ...) unless --write is given; a user without
# write access to the folder or the file reads it (sql), and with --write is told which
# permission is missing (the file, its -wal or -shm, its folder); a schema older than the binary's
# is not migrated by a reader but named; four collects started at once on a new database
# all succeed and leave what one collect leaves; `import DIR` names the mistake and leaves
# no empty database behind.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
FIX=tests/fixtures/runlogs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
case "$LB" in /*) ;; *) LB="$PWD/$LB" ;; esac
tmp=$(mktemp -d) || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
fail=0
# the run logs that collect without an error (1010 is a newer format, refused on purpose)
logs=$(ls "$FIX"/run-*.jsonl | grep -v -e newer)

# 1. sql is read-only unless --write
db="$tmp/w.db"
"$LB" collect --db "$db" $logs >/dev/null 2>&1 || { echo "FAIL: collect"; exit 1; }
n_steps=$("$LB" sql --db "$db" --format csv "SELECT count(*) FROM steps" | tail -n 1)
for q in "DROP TABLE steps" "DELETE FROM runs" "ATTACH '$tmp/other.db' AS o" \
	"SELECT 1; UPDATE runs SET status = 'ok'" "PRAGMA user_version = 1" "VACUUM INTO '$tmp/v.db'"; do
	if "$LB" sql --db "$db" "$q" >"$tmp/out" 2>"$tmp/err"; then
		echo "FAIL: sql '$q' succeeded without --write"
		fail=1
	fi
	grep -q "^error: query: 'sql' is read-only: '.*' would change the database (use --write to allow it)$" \
		"$tmp/err" || { cat "$tmp/err"; echo "FAIL: sql '$q': refusal message"; fail=1; }
done
grep -q "'VACUUM INTO '$tmp/v.db'' would change" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: statement not named"; fail=1; }
[ ! -e "$tmp/other.db" ] && [ ! -e "$tmp/v.db" ] || { echo "FAIL: a refused statement made a file"; fail=1; }
got=$("$LB" sql --db "$db" --format csv "SELECT count(*) FROM steps" | tail -n 1)
[ "$got" = "$n_steps" ] || { echo "FAIL: steps $got after refused statements, want $n_steps"; fail=1; }
"$LB" report --db "$db" --figure best >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: report after refused statements"; fail=1; }
# reads still work, several statements and transactions too
"$LB" sql --db "$db" --format csv "BEGIN; SELECT count(*) AS n FROM runs; COMMIT" >"$tmp/out" 2>"$tmp/err" &&
	[ "$(cat "$tmp/out")" = "n
9" ] || { cat "$tmp/out" "$tmp/err"; echo "FAIL: read in a transaction"; fail=1; }
"$LB" help sql | grep -q -- "--write" || { echo "FAIL: 'help sql' does not name --write"; fail=1; }
# --write allows it
"$LB" sql --db "$db" --write "DELETE FROM steps WHERE step = 0" 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: --write"; fail=1; }
got=$("$LB" sql --db "$db" --format csv "SELECT count(*) FROM steps WHERE step = 0" | tail -n 1)
[ "$got" = 0 ] || { echo "FAIL: --write did not write ($got)"; fail=1; }

# 2. a read-only folder and file: readers need no write access
ro="$tmp/ro"
mkdir "$ro"
"$LB" collect --db "$ro/r.db" $logs >/dev/null 2>&1 || { echo "FAIL: collect (ro)"; exit 1; }
chmod 555 "$ro"
chmod 444 "$ro/r.db"
as_user=""
if [ "$(id -u)" = 0 ]; then # root ignores file modes: read as nobody
	if setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
		as_user="setpriv --reuid=nobody --regid=nogroup --clear-groups"
	elif setpriv --reuid=nobody --regid=nobody --clear-groups true 2>/dev/null; then
		as_user="setpriv --reuid=nobody --regid=nobody --clear-groups"
	fi
fi
runas() { # cmd... (as the unprivileged user when we are root)
	if [ -n "$as_user" ]; then
		$as_user "$@"
	elif [ "$(id -u)" = 0 ]; then
		cmd=""
		for a in "$@"; do cmd="$cmd '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"; done
		su nobody -s /bin/sh -c "$cmd"
	else
		"$@"
	fi
}
if [ "$(id -u)" = 0 ] && [ -z "$as_user" ] && ! su nobody -s /bin/sh -c true 2>/dev/null; then
	skip_ro="as root, neither setpriv nor su can run as 'nobody': read-only folder checks not run"
fi
if [ -z "${skip_ro:-}" ]; then
	if runas test -w "$ro"; then
		skip_ro="'$ro' is writable to the test user: read-only folder checks not run"
	else
		runas "$LB" sql --db "$ro/r.db" --format csv "SELECT count(*) AS n FROM runs" >"$tmp/out" 2>"$tmp/err"
		[ "$(cat "$tmp/out")" = "n
9" ] || { cat "$tmp/out" "$tmp/err"; echo "FAIL: sql on a read-only folder"; fail=1; }
		if runas "$LB" sql --db "$ro/r.db" --write "DELETE FROM steps" 2>"$tmp/err"; then
			echo "FAIL: --write on a read-only folder succeeded"
			fail=1
		fi
		grep -q "needs write access" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: --write on a read-only folder: message"; fail=1; }
		# report is a reader too
		runas "$LB" report --db "$ro/r.db" --figure best --format md >"$tmp/rep" 2>"$tmp/err" ||
			{ cat "$tmp/err"; echo "FAIL: report on a read-only folder"; fail=1; }
		grep -q "^## Best layouts" "$tmp/rep" || { echo "FAIL: report on a read-only folder: output"; fail=1; }
		ls "$ro" >"$tmp/ls"
		[ "$(cat "$tmp/ls")" = r.db ] || { cat "$tmp/ls"; echo "FAIL: files appeared in the read-only folder"; fail=1; }
		# --write where the user may not write the file or its -wal/-shm (another user's
		# database, open elsewhere): the missing permission named, never "use --write"
		chmod 755 "$ro"
		touch "$ro/r.db-wal" "$ro/r.db-shm"
		chmod 444 "$ro/r.db-wal" "$ro/r.db-shm"
		chmod 555 "$ro"
		want="^error: database '$ro/r.db': no write permission on '$ro/r.db' (owner uid [0-9]*, mode 0444); writing needs write access to the database, its -wal and -shm files and its folder"
		runas "$LB" sql --db "$ro/r.db" --write "DELETE FROM steps" >/dev/null 2>"$tmp/err" &&
			{ echo "FAIL: --write on a read-only file succeeded"; fail=1; }
		grep -q "$want" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: --write on a read-only file with -wal/-shm: message"; fail=1; }
		grep -q "use --write" "$tmp/err" && { echo "FAIL: --write was given, the message asks for it"; fail=1; }
		chmod 777 "$ro"
		chmod 666 "$ro/r.db"
		runas "$LB" sql --db "$ro/r.db" --write "DELETE FROM steps" >/dev/null 2>"$tmp/err" &&
			{ echo "FAIL: --write with a read-only -wal succeeded"; fail=1; }
		grep -q "^error: database '$ro/r.db': no write permission on '$ro/r.db-wal' (owner uid [0-9]*, mode 0444)" "$tmp/err" ||
			{ cat "$tmp/err"; echo "FAIL: --write with a read-only -wal: message"; fail=1; }
		rm -f "$ro/r.db-wal" "$ro/r.db-shm"
	fi
fi
chmod 755 "$ro"
chmod 644 "$ro/r.db"

# an older schema: readers refuse with the fix, and do not migrate
old="$tmp/old.db"
cp "$ro/r.db" "$old"
"$LB" sql --db "$old" --write "PRAGMA user_version = 0" || { echo "FAIL: set user_version"; fail=1; }
cp "$old" "$tmp/old.copy"
if "$LB" sql --db "$old" "SELECT 1" >/dev/null 2>"$tmp/err"; then
	echo "FAIL: sql read a version-0 database"
	fail=1
fi
grep -q "^error: database '$old': schema version 0 is older than this layoutbench's [0-9]*; run 'layoutbench collect' (or any writing command) once with write access to upgrade it$" \
	"$tmp/err" || { cat "$tmp/err"; echo "FAIL: older-schema message"; fail=1; }
cmp -s "$old" "$tmp/old.copy" || { echo "FAIL: a reader changed the version-0 file"; fail=1; }

# 3. four collects at once on a new database, five times: all succeed, same result as one
dump() { # db
	"$LB" sql --db "$1" --format csv "SELECT run_uid, layout_id, sweep, status, failure_class,
	  n_steps, step_time_mean FROM run_summary ORDER BY run_uid;
	  SELECT count(*) FROM steps; SELECT count(*) FROM layouts; SELECT name FROM sweeps ORDER BY name;
	  PRAGMA user_version"
}
"$LB" collect --db "$tmp/one.db" $logs >/dev/null 2>&1 || { echo "FAIL: one collect"; exit 1; }
dump "$tmp/one.db" >"$tmp/one.dump"
for t in 1 2 3 4 5; do
	db="$tmp/par$t.db"
	pids=""
	for k in 1 2 3 4; do
		"$LB" collect --db "$db" $logs >"$tmp/par$t.$k.out" 2>"$tmp/par$t.$k.err" &
		pids="$pids $!"
	done
	k=0
	for p in $pids; do
		k=$((k + 1))
		wait "$p" || { grep error "$tmp/par$t.$k.err"; echo "FAIL: try $t: collect $k failed"; fail=1; }
	done
	dump "$db" >"$tmp/par$t.dump"
	diff -u "$tmp/one.dump" "$tmp/par$t.dump" || { echo "FAIL: try $t: parallel collects differ from one"; fail=1; }
done

# 4. import of a folder: the fix in the message, no database left behind
mkdir "$tmp/csvs"
if "$LB" import --format paper --db "$tmp/imp.db" "$tmp/csvs" >/dev/null 2>"$tmp/err"; then
	echo "FAIL: import of a folder succeeded"
	fail=1
fi
grep -q "^error: import: '$tmp/csvs' is a folder: name the CSV files (e.g. $tmp/csvs/\*.csv)$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: import folder message"; fail=1; }
for f in "$tmp/imp.db" "$tmp/imp.db-wal" "$tmp/imp.db-shm"; do
	[ ! -e "$f" ] || { echo "FAIL: failed import left '$f'"; fail=1; }
done
"$LB" import --format paper --db "$tmp/imp.db" "$tmp/missing.csv" >/dev/null 2>&1
[ ! -e "$tmp/imp.db" ] || { echo "FAIL: failed import (missing file) left the database"; fail=1; }
# an existing database is kept when an import fails
if "$LB" import --format paper --db "$tmp/one.db" "$tmp/csvs" >/dev/null 2>&1; then
	echo "FAIL: import of a folder succeeded (existing db)"
	fail=1
fi
[ -e "$tmp/one.db" ] || { echo "FAIL: failed import removed an existing database"; fail=1; }

[ "$fail" = 0 ] || exit 1
if [ -n "${skip_ro:-}" ]; then
	echo "$skip_ro"
	exit 77
fi
echo "sql_safety: ok"
