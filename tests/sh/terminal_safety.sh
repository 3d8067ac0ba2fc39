#!/bin/sh
# What run logs and specs hold never acts on a terminal or breaks JSON: a run log's label
# and message with escape sequences are shown as \xHH by `sql` (a table always; CSV on a
# terminal, kept exact in a file), by `report` on a terminal and in the collector's
# warnings; a spec description with
# bytes that are not UTF-8 gives valid JSON from `plan --format json` (\ufffd).
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
FIX=tests/fixtures/runlogs

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
case "$LB" in /*) ;; *) LB="$PWD/$LB" ;; esac
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
esc=$(printf '\033')
ok=$FIX/run-20261202T120000Z-node1-1001-ok.jsonl

# a run whose label and end message carry escape sequences (as JSON escapes in the log)
sed -e 's/"job_id":"4242_3"}/"job_id":"4242_3","label":"\\u001b[2J\\u001b[31mred\\u0007"}/' \
	-e 's/"type":"end","status":"ok"/"type":"end","status":"ok","message":"\\u001b]0;owned\\u0007done"/' \
	"$ok" >"$tmp/run-evil.jsonl"
grep -q 'u001b\[31mred' "$tmp/run-evil.jsonl" || { echo "FAIL: the test log was not made"; exit 1; }
"$LB" collect --db "$tmp/r.db" "$tmp/run-evil.jsonl" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: collect"; exit 1; }
raw=$("$LB" sql --db "$tmp/r.db" --format csv "SELECT label FROM runs WHERE run_uid LIKE '%1001-ok'" | tail -n 1)
case "$raw" in *"$esc[31m"*) ;; *) echo "FAIL: the label was not stored as written"; fail=1 ;; esac

# the collector's warnings quote what a log holds: shown, not done
sed 's/node1-1001-ok/node1-1002-ok/' "$ok" >"$tmp/run-evil2.jsonl"
printf '%s\n' '{"type":"step","step":9,"warmup":false,"time_s":"\u001b[2Jx"}' >>"$tmp/run-evil2.jsonl"
"$LB" collect --db "$tmp/r.db" "$tmp/run-evil2.jsonl" >/dev/null 2>"$tmp/err"
grep -q "$esc" "$tmp/err" && { echo "FAIL: collect's warning holds a raw ESC"; fail=1; }
grep -qF "'time_s': expected a number, got \"\x1b[2Jx\"" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: collect's warning: value not shown"; fail=1; }

# sql's table: escaped, whatever the output is
"$LB" sql --db "$tmp/r.db" "SELECT label, message FROM runs WHERE label IS NOT NULL" >"$tmp/table" 2>&1
grep -q "$esc" "$tmp/table" && { echo "FAIL: sql's table holds a raw ESC"; od -c "$tmp/table" | head; fail=1; }
grep -qF '\x1b[2J\x1b[31mred\x07' "$tmp/table" || { cat "$tmp/table"; echo "FAIL: sql's table: label not shown as \\x1b"; fail=1; }
grep -qF '\x1b]0;owned\x07done' "$tmp/table" || { cat "$tmp/table"; echo "FAIL: sql's table: message not shown"; fail=1; }
# CSV into a file: the data exact
"$LB" sql --db "$tmp/r.db" --format csv "SELECT label FROM runs" >"$tmp/csv"
grep -q "$esc" "$tmp/csv" || { echo "FAIL: CSV into a file changed the data"; fail=1; }

# on a terminal (script(1) gives the command one): CSV, TSV and the report escaped
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
	for f in csv tsv; do
		script -qec "'$LB' sql --db '$tmp/r.db' --format $f 'SELECT label FROM runs'" /dev/null >"$tmp/tty.$f" 2>&1
		grep -q "$esc\[31m" "$tmp/tty.$f" && { echo "FAIL: sql --format $f on a terminal sent ESC"; fail=1; }
		grep -qF '\x1b[31mred' "$tmp/tty.$f" || { cat "$tmp/tty.$f"; echo "FAIL: sql --format $f on a terminal: not shown"; fail=1; }
	done
	for f in md csv; do
		script -qec "'$LB' report --db '$tmp/r.db' --figure kernels --format $f" /dev/null >"$tmp/rep.$f" 2>&1
		grep -q "$esc\[31m" "$tmp/rep.$f" && { echo "FAIL: report --format $f on a terminal sent ESC"; fail=1; }
		grep -qF '\x1b[31mred' "$tmp/rep.$f" || { cat "$tmp/rep.$f"; echo "FAIL: report --format $f on a terminal: label not shown"; fail=1; }
	done
else
	echo "note: no script(1): the terminal checks are not run"
fi

# plan --format json: a description that is not UTF-8 still makes valid JSON
printf '{"name": "bad-utf8", "description": "caf\351 \377\376 ok \303\251", "model": "tiny",
 "fixed": {"seq_len": 64, "global_batch": 8, "micro_batch": 1, "tp": 1, "pp": 1, "dp": 1},
 "cluster": {"gpus_per_node": 1, "gpu": "cpu", "device": "cpu"}}\n' >"$tmp/spec.json"
"$LB" plan "$tmp/spec.json" --format json >"$tmp/plan.json" 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: plan"; fail=1; }
iconv -f UTF-8 -t UTF-8 "$tmp/plan.json" >/dev/null 2>&1 || { echo "FAIL: plan --format json is not UTF-8"; fail=1; }
grep -qF '"caf\ufffd \ufffd\ufffd ok é"' "$tmp/plan.json" || { grep description "$tmp/plan.json"; echo "FAIL: plan json: description"; fail=1; }
if command -v python3 >/dev/null; then
	python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$tmp/plan.json" ||
		{ echo "FAIL: plan --format json is not valid JSON"; fail=1; }
fi

[ $fail = 0 ] && echo "terminal safety: ok"
exit $fail
