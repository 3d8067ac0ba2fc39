#!/bin/sh
# `collect` loses nothing, doubles nothing and never hangs: a symbolic link to a runs
# folder, a linked log and a link back up (a loop) are followed, each file read once; a
# folder it cannot read, a link to a log that is gone, and a FIFO given by name are errors
# that name them, a FIFO named like a log inside a folder a warning (never opened);
# four collects of one folder at once print no "already collected" per file, and leave
# what one collect leaves; a database on a full disk stops the collect with one error
# (not one per file), and a later collect reads on to the same result.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
FIX=tests/fixtures/runlogs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
case "$LB" in /*) ;; *) LB="$PWD/$LB" ;; esac
tmp=$(mktemp -d) || exit 1
mnt=""
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
fail=0
ok=$FIX/run-20261202T120000Z-node1-1001-ok.jsonl

# N logs of the ok run, each its own run (uid), in folders of ten under $1
make_logs() { # dir n
	i=0
	while [ $i -lt "$2" ]; do
		d="$1/d$((i / 10))"
		mkdir -p "$d"
		sed "s/node1-1001-ok/node1-$((5000 + i))-ok/" "$ok" >"$d/run-$((5000 + i)).jsonl"
		i=$((i + 1))
	done
}
dump() { # db
	"$LB" sql --db "$1" --format csv "SELECT r.run_uid, r.layout_id, r.sweep, r.status, s.n_steps,
	  s.step_time_mean, r.log_bytes, r.bytes_ingested, r.log_hash FROM run_summary s JOIN runs r
	  USING (run_uid) ORDER BY r.run_uid; SELECT count(*) FROM steps; SELECT count(*) FROM layouts" ||
		{ echo "FAIL: dump of '$1'" >&2; fail=1; }
}

# 1. links: a linked runs folder, a linked log, a link back up; each log once
mkdir -p "$tmp/real/a" "$tmp/elsewhere"
cp "$ok" "$tmp/real/a/"
sed 's/node1-1001-ok/node1-1101-ok/' "$ok" >"$tmp/elsewhere/run-1101.jsonl"
ln -s "$tmp/elsewhere/run-1101.jsonl" "$tmp/real/a/run-1101.jsonl"
ln -s "$tmp/real" "$tmp/real/a/up"
ln -s "$tmp/real" "$tmp/runs-link"
timeout 60 "$LB" collect --db "$tmp/l.db" "$tmp/runs-link" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || { cat "$tmp/err"; echo "FAIL: collect of a linked folder exited $rc"; fail=1; }
want='collected 2 files: 2 new runs, 0 updated, 0 unchanged; 14 steps; 0 warnings, 0 errors'
[ "$(cat "$tmp/out")" = "$want" ] || { cat "$tmp/out" "$tmp/err"; echo "FAIL: linked folder: summary"; fail=1; }

# 2. a FIFO named like a log: a warning in a folder, an error by name; never a hang
mkdir "$tmp/fifo"
cp "$ok" "$tmp/fifo/"
mkfifo "$tmp/fifo/run-20261202T999999Z-x-1.jsonl"
timeout 20 "$LB" collect --db "$tmp/f.db" "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 124 ] && { echo "FAIL: collect hung on a FIFO"; fail=1; }
[ $rc = 0 ] || { cat "$tmp/err"; echo "FAIL: folder with a FIFO exited $rc"; fail=1; }
grep -q "^warning: '$tmp/fifo/run-20261202T999999Z-x-1.jsonl': not a regular file; skipped$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: FIFO in a folder: warning"; fail=1; }
grep -q '^collected 1 file: 1 new run' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: FIFO in a folder: the log"; fail=1; }
timeout 20 "$LB" collect --db "$tmp/f.db" "$tmp/fifo/run-20261202T999999Z-x-1.jsonl" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || { echo "FAIL: a FIFO by name exited $rc, want 1"; fail=1; }
grep -q "^error: '$tmp/fifo/run-20261202T999999Z-x-1.jsonl': not a regular file; a run log is one$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: FIFO by name: message"; fail=1; }

# 3. a link to a log that is gone: an error that names it
mkdir "$tmp/dangling"
ln -s "$tmp/nowhere/run-1.jsonl" "$tmp/dangling/run-20261202T120000Z-gone-1.jsonl"
"$LB" collect --db "$tmp/d.db" "$tmp/dangling" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || { echo "FAIL: a dangling log link exited $rc, want 1"; fail=1; }
grep -q "^error: '$tmp/dangling/run-20261202T120000Z-gone-1.jsonl': No such file or directory$" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: dangling link: message"; fail=1; }

# 4. a folder the user cannot read: an error that names it (as root, as 'nobody')
as_user=""
if [ "$(id -u)" = 0 ]; then
	for g in nogroup nobody; do
		if setpriv --reuid=nobody --regid=$g --clear-groups true 2>/dev/null; then
			as_user="setpriv --reuid=nobody --regid=$g --clear-groups"
			break
		fi
	done
fi
if [ "$(id -u)" != 0 ] || [ -n "$as_user" ]; then
	mkdir -p "$tmp/locked/open" "$tmp/locked/shut" "$tmp/udb"
	cp "$ok" "$tmp/locked/open/"
	sed 's/node1-1001-ok/node1-1201-ok/' "$ok" >"$tmp/locked/shut/run-1201.jsonl"
	chmod 777 "$tmp/udb"
	chmod 000 "$tmp/locked/shut"
	$as_user "$LB" collect --db "$tmp/udb/u.db" "$tmp/locked" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	chmod 755 "$tmp/locked/shut"
	[ $rc = 1 ] || { cat "$tmp/out" "$tmp/err"; echo "FAIL: an unreadable folder exited $rc, want 1"; fail=1; }
	grep -q "^error: cannot read folder '$tmp/locked/shut': Permission denied$" "$tmp/err" ||
		{ cat "$tmp/err"; echo "FAIL: unreadable folder: message"; fail=1; }
	grep -q '^collected 1 file: 1 new run.*1 error$' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: unreadable folder: summary"; fail=1; }
else
	echo "note: as root without setpriv: the unreadable-folder check is not run"
fi

# 5. four collects of one folder at once: no per-file "already collected", the result of one
make_logs "$tmp/many" 120
"$LB" collect --db "$tmp/one.db" "$tmp/many" >/dev/null 2>&1 || { echo "FAIL: one collect"; fail=1; }
dump "$tmp/one.db" >"$tmp/one.dump"
for t in 1 2 3; do
	db="$tmp/par$t.db"
	"$LB" collect --db "$db" "$ok" >/dev/null 2>&1 # the database exists: all start at once
	"$LB" sql --db "$db" --write "DELETE FROM steps; DELETE FROM run_stats; DELETE FROM runs" >/dev/null
	pids=""
	for k in 1 2 3 4; do
		"$LB" collect --db "$db" "$tmp/many" >"$tmp/par$t.$k.out" 2>"$tmp/par$t.$k.err" &
		pids="$pids $!"
	done
	k=0
	for p in $pids; do
		k=$((k + 1))
		wait "$p" || { cat "$tmp/par$t.$k.err"; echo "FAIL: try $t: collect $k failed"; fail=1; }
		if grep -q "already collected" "$tmp/par$t.$k.err"; then
			echo "FAIL: try $t: collect $k: $(grep -c "already collected" "$tmp/par$t.$k.err") 'already collected' lines"
			fail=1
		fi
		[ "$(grep -c . "$tmp/par$t.$k.err")" -le 1 ] ||
			{ cat "$tmp/par$t.$k.err"; echo "FAIL: try $t: collect $k: more than one line on stderr"; fail=1; }
	done
	dump "$db" >"$tmp/par$t.dump"
	diff "$tmp/one.dump" "$tmp/par$t.dump" >/dev/null || { diff -u "$tmp/one.dump" "$tmp/par$t.dump" | head -20; echo "FAIL: try $t: parallel collects differ from one"; fail=1; }
done

# 6. a full disk under the database: one error, the collect stopped; nothing lost after
full_disk() { # label cmd... : run cmd; check one error and the stop
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = 1 ] || { echo "FAIL: $label: collect on a full disk exited $rc, want 1"; fail=1; }
	n=$(grep -c '^error:' "$tmp/err")
	[ "$n" = 1 ] || { head -5 "$tmp/err"; echo "FAIL: $label: $n errors, want one"; fail=1; }
	grep -q "^error: database '.*': .*; collect stopped: fix the cause and collect again" "$tmp/err" ||
		{ cat "$tmp/err"; echo "FAIL: $label: message"; fail=1; }
}
mkdir "$tmp/fdb"
"$LB" collect --db "$tmp/fdb/r.db" "$ok" >/dev/null 2>&1 # a database with its schema
label="file-size limit"
full_disk sh -c "trap '' XFSZ; ulimit -f 200; exec \"$LB\" collect --db \"$tmp/fdb/r.db\" \"$tmp/many\""
"$LB" collect --db "$tmp/fdb/r.db" "$tmp/many" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: collect after the limit"; fail=1; }
"$LB" sql --db "$tmp/fdb/r.db" --write "DELETE FROM run_stats WHERE run_id IN (SELECT id FROM runs WHERE run_uid LIKE '%1001-ok');
  DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE run_uid LIKE '%1001-ok');
  DELETE FROM runs WHERE run_uid LIKE '%1001-ok'" >/dev/null
dump "$tmp/fdb/r.db" | sed 's|/fdb/|/|' >"$tmp/fdb.dump"
diff "$tmp/one.dump" "$tmp/fdb.dump" >/dev/null || { diff -u "$tmp/one.dump" "$tmp/fdb.dump" | head; echo "FAIL: after a full disk, runs lost or doubled"; fail=1; }
# a real full file system, where this machine lets root mount one
if [ "$(id -u)" = 0 ] && mkdir "$tmp/tmpfs" && mount -t tmpfs -o size=600k tmpfs "$tmp/tmpfs" 2>/dev/null; then
	mnt="$tmp/tmpfs"
	label="tmpfs"
	full_disk "$LB" collect --db "$mnt/r.db" "$tmp/many"
	umount "$mnt" && mnt=""
fi

[ $fail = 0 ] && echo "collect integrity: ok"
exit $fail
