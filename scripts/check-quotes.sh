#!/bin/sh
# Every figure the documentation quotes, recomputed from its evidence: for each entry of a
# quote list (default docs/results/quotes.tsv), the quoted text must be in its file, the
# figure in the text, and the figure must be what the entry's query computes from the
# published run logs (collected into a temporary database) or the published peer output;
# a speed figure must come from runs whose health is ok (docs/schema.md, "Run health").
#
# Usage: sh scripts/check-quotes.sh [LIST]
# Env: LB, the layoutbench binary (default build/layoutbench).
#
# The list: UTF-8 text, one entry per line, six fields separated by tabs; lines that are
# empty or start with '#' are comments.
#
#   file    the quoting file, from the repository's root (README.md, docs/performance.md,
#           docs/results/h200/README.md, ...)
#   quote   text that appears in it verbatim (on one line of it), holding the figure
#   value   the figure as quoted (e.g. 64.3): in quote as a whole number (no digit or '.'
#           either side), and exactly the text the query returns
#   kind    speed: a figure that depends on how fast runs went (MFU, step time, TFLOP/s,
#           a ratio of them): the query returns a second column, the health of the run(s)
#           the figure comes from, which must be exactly "ok" (an aggregate over several
#           runs returns group_concat(DISTINCT health), which is "ok" only when all are);
#           other: a figure that does not (memory, counts of layouts or runs); peer: from
#           peer output, a second column, if the query returns one, must be "ok" (the
#           peer table's health column: its status where not ok, 'flat' where its last
#           loss is not 1% below its first, else ok)
#   source  logs:DIR[,DIR...]  run-log folders, collected into one database (`layoutbench
#                              collect`) whose views the query reads (run_summary, ...);
#           peer:FILE[,FILE...] bench/peer_torch.py output: a --json-out file (one JSON
#                              object), or a file of its summary lines (peer=torch ...
#                              key=value, as round.sh's peer.tsv), each line an object of
#                              its keys; one table peer (file, line, j, health) with the object in
#                              j as JSON text: json_extract(j, '$.mfu'), and health
#   query   one SQL statement (no tab); the first row's first column is the figure,
#           formatted as quoted (printf('%.1f', 100 * mfu))
#
# Exit 0 when every entry holds; 1 when one does not (each named, with what its evidence
# says); 2 on a malformed list.
set -u
LB=${LB:-build/layoutbench}
list=${1:-docs/results/quotes.tsv}
[ -x "$LB" ] || { echo "error: '$LB' not found (make, or set LB)" >&2; exit 2; }
[ -f "$list" ] || { echo "error: quote list '$list' not found" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
TAB=$(printf '\t')
fail=0 n=0
: >"$tmp/dbs"

# the database of a source (made once per distinct source, remembered in $tmp/dbs: this
# runs in a command substitution's subshell): prints its path
db_of() { # source
	hit=$(awk -F '\t' -v s="$1" '$1 == s { print $2; exit }' "$tmp/dbs")
	if [ -n "$hit" ]; then
		printf '%s\n' "$hit"
		return 0
	fi
	db="$tmp/q$(($(wc -l <"$tmp/dbs") + 1)).db"
	kind=${1%%:*}
	paths=${1#*:}
	old_ifs=$IFS
	IFS=,
	# shellcheck disable=SC2086
	set -- $paths
	IFS=$old_ifs
	case "$kind" in
	logs)
		for d in "$@"; do
			[ -e "$d" ] || { echo "no run logs at '$d'" >"$tmp/why"; return 1; }
		done
		"$LB" collect --db "$db" "$@" </dev/null >"$tmp/collect.out" 2>&1 ||
			{ { echo "collect failed:"; cat "$tmp/collect.out"; } >"$tmp/why"; return 1; }
		grep -q ' 0 errors$' "$tmp/collect.out" ||
			{ { echo "collect:"; cat "$tmp/collect.out"; } >"$tmp/why"; return 1; }
		;;
	peer)
		# a results database of no runs (collect of an empty folder makes one), plus the
		# peer table
		mkdir -p "$tmp/none"
		"$LB" collect --db "$db" "$tmp/none" </dev/null >/dev/null 2>"$tmp/why" || return 1
		# health: the run's status where it is not ok (oom, ...), else 'flat' where its last
		# loss is not 1% below its first (uniform random tokens leave it there: its times
		# are not those of a model that learns), else ok
		"$LB" sql --db "$db" --write "CREATE TABLE peer (file TEXT, line INTEGER, j TEXT,
			health TEXT GENERATED ALWAYS AS (CASE
			WHEN coalesce(json_extract(j, '\$.status'), 'ok') <> 'ok' THEN json_extract(j, '\$.status')
			WHEN json_extract(j, '\$.loss_last') > 0.99 * json_extract(j, '\$.loss_first') THEN 'flat'
			ELSE 'ok' END) VIRTUAL)" </dev/null >/dev/null 2>"$tmp/why" || return 1
		for f in "$@"; do
			[ -f "$f" ] || { echo "no peer output '$f'" >"$tmp/why"; return 1; }
			if [ "$(sed -n '/[^[:space:]]/{s/^[[:space:]]*//p;q;}' "$f" | cut -c1)" = "{" ]; then
				printf '%s\t1\t%s\n' "$f" "$(tr '\n' ' ' <"$f")"
			else # summary lines: key=value tokens from "peer=" on, as a JSON object
				awk -v f="$f" '{ p = index($0, "peer="); if (!p) next
					n = split(substr($0, p), t, " "); o = ""
					for (i = 1; i <= n; i++) { e = index(t[i], "="); if (!e) continue
						k = substr(t[i], 1, e - 1); v = substr(t[i], e + 1)
						if (v !~ /^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$/) { gsub(/["\\]/, "", v); v = "\"" v "\"" }
						o = o (o == "" ? "" : ",") "\"" k "\":" v }
					printf "%s\t%d\t{%s}\n", f, NR, o }' "$f"
			fi
		done >"$tmp/peer.tsv"
		while IFS="$TAB" read -r f l j; do
			q=$(printf '%s' "$j" | sed "s/'/''/g")
			fq=$(printf '%s' "$f" | sed "s/'/''/g")
			"$LB" sql --db "$db" --write "INSERT INTO peer VALUES ('$fq', $l, json('$q'))" \
				</dev/null >/dev/null 2>"$tmp/why" || return 1
		done <"$tmp/peer.tsv"
		;;
	*)
		echo "source '$1': expected logs:DIR[,DIR...] or peer:FILE[,FILE...]" >"$tmp/why"
		return 1
		;;
	esac
	printf '%s\t%s\n' "$1" "$db" >>"$tmp/dbs"
	printf '%s\n' "$db"
}

lineno=0
while IFS= read -r line || [ -n "$line" ]; do
	lineno=$((lineno + 1))
	case "$line" in '' | '#'*) continue ;; esac
	nf=$(printf '%s\n' "$line" | awk -F '\t' '{ print NF }')
	[ "$nf" = 6 ] || { echo "error: $list:$lineno: $nf fields, want 6 (file, quote, value, kind, source, query) separated by tabs" >&2; exit 2; }
	file=$(printf '%s\n' "$line" | cut -f 1)
	quote=$(printf '%s\n' "$line" | cut -f 2)
	value=$(printf '%s\n' "$line" | cut -f 3)
	kind=$(printf '%s\n' "$line" | cut -f 4)
	src=$(printf '%s\n' "$line" | cut -f 5)
	query=$(printf '%s\n' "$line" | cut -f 6)
	case "$kind" in speed | other | peer) ;; *)
		echo "error: $list:$lineno: kind '$kind': expected speed, other or peer" >&2; exit 2 ;;
	esac
	case "$kind:$src" in speed:logs:* | other:logs:* | peer:peer:*) ;; *)
		echo "error: $list:$lineno: a '$kind' figure from '$src' (speed and other: logs:DIR, peer: peer:FILE)" >&2; exit 2 ;;
	esac
	n=$((n + 1))
	what="$file:'$quote'"
	if [ ! -f "$file" ]; then
		echo "FAIL: $what: no file '$file'"; fail=1; continue
	fi
	grep -qF -- "$quote" "$file" || { echo "FAIL: $what: the text is not in $file (quote it as the file has it)"; fail=1; }
	printf '%s\n' "$quote" | awk -v v="$value" '{
		s = $0; found = 0
		while ((i = index(s, v)) > 0) {
			b = i > 1 ? substr(s, i - 1, 1) : ""; a = substr(s, i + length(v), 1)
			if (b !~ /[0-9.]/ && a !~ /[0-9]/ && !(a == "." && substr(s, i + length(v) + 1, 1) ~ /[0-9]/)) { found = 1; break }
			s = substr(s, i + 1)
		}
		exit !found }' || { echo "FAIL: $what: the quote does not hold the figure '$value'"; fail=1; }
	if ! db=$(db_of "$src"); then
		echo "FAIL: $what: $src: $(cat "$tmp/why")"; fail=1; continue
	fi
	if ! "$LB" sql --db "$db" --format tsv "$query" </dev/null >"$tmp/out" 2>"$tmp/err"; then
		echo "FAIL: $what: the query fails: $(cat "$tmp/err")"; fail=1; continue
	fi
	row=$(sed -n 2p "$tmp/out")
	got=$(printf '%s\n' "$row" | cut -f 1)
	health=$(printf '%s\n' "$row" | awk -F '\t' '{ print (NF > 1 ? $2 : "") }')
	ncol=$(sed -n 1p "$tmp/out" | awk -F '\t' '{ print NF }')
	if [ -z "$row" ]; then
		echo "FAIL: $what: the query returns no row"; fail=1; continue
	fi
	[ "$got" = "$value" ] || { echo "FAIL: $what: the evidence gives $got, the text says $value"; fail=1; }
	case "$kind" in
	speed)
		[ "$ncol" -ge 2 ] || { echo "FAIL: $what: a speed figure's query must return the runs' health as its second column"; fail=1; continue; }
		[ "$health" = ok ] || { echo "FAIL: $what: comes from runs whose health is '${health:-unknown}', not ok"; fail=1; }
		;;
	peer)
		[ "$ncol" -lt 2 ] || [ "$health" = ok ] ||
			{ echo "FAIL: $what: the peer run's health is '${health:-unknown}', not ok"; fail=1; }
		;;
	esac
done <"$list"
echo "quotes: $n checked against their evidence, $([ $fail = 0 ] && echo "all hold" || echo "some do not")"
exit $fail
