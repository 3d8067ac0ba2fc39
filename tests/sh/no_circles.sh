#!/bin/sh
# No two product files depend on each other in a loop: file A depends on file B when A's
# object uses a name that B's object defines (what the linker resolves, so a function
# called through a header counts, a type or a macro does not). Every group of files that
# reach each other is printed, and the check fails on any group not in the list of known
# ones below, each with why it is still there. The check is first shown to fail on a
# planted loop.
set -u
BUILD=${BUILD:-build}
[ -d "$BUILD/obj" ] || { echo "error: '$BUILD/obj' not built (make BUILD=$BUILD)"; exit 1; }
command -v nm >/dev/null 2>&1 || { echo "nm not installed (Debian package binutils)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Loops not broken yet: a group whose every member matches the pattern (a shell case
# pattern per line) is known.
known='harness/cuda/*.o'

# edges DIR: "A B" for every object A under DIR that uses a name object B defines
edges() {
	find "$1" -name '*.o' ! -path '*/gen/*' ! -name main.o ! -name train_main.o | sort |
		while read -r o; do
			f=${o#"$1"/}
			nm -g --defined-only "$o" 2>/dev/null |
				awk -v f="$f" 'NF == 3 && $2 ~ /[TDRBCV]/ { print "D", $3, f }'
			nm -u "$o" 2>/dev/null | awk -v f="$f" '{ print "U", $NF, f }'
		done | awk '$1 == "D" { def[$2] = $3; next } { use[$3 SUBSEP $2] = 1 }
			END { for (k in use) { split(k, p, SUBSEP); if ((p[2] in def) && def[p[2]] != p[1])
				print p[1], def[p[2]] } }' | sort -u
}

# groups: read "A B" edges, print each group of two or more files that reach each other
# (members sorted, one group a line)
groups() {
	awk '{ n[$1] = 1; n[$2] = 1; r[$1, $2] = 1 }
	     END {
		for (k in n) for (i in n) if (r[i, k]) for (j in n) if (r[k, j]) r[i, j] = 1
		for (i in n) { g = ""; c = 0
			for (j in n) if (i == j || (r[i, j] && r[j, i])) { g = g " " j; c++ }
			if (c > 1) print g }
	     }' | while read -r line; do printf '%s\n' $line | sort | tr '\n' ' '; echo; done | sort -u
}

# unknown: read groups, print those with a member outside every known pattern
unknown() {
	while read -r g; do
		ok=1
		for m in $g; do
			hit=0
			for p in $known; do
				# shellcheck disable=SC2254
				case $m in $p) hit=1 ;; esac
			done
			[ $hit = 1 ] || ok=0
		done
		[ $ok = 1 ] || echo "$g"
	done
}

printf 'a.o b.o\nb.o c.o\nc.o a.o\nc.o d.o\n' | groups >"$tmp/planted"
[ "$(cat "$tmp/planted")" = "a.o b.o c.o " ] ||
	{ echo "FAIL: the check missed a planted loop: $(cat "$tmp/planted")"; exit 1; }

edges "$BUILD/obj" | groups >"$tmp/groups"
unknown <"$tmp/groups" >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
	echo "FAIL: files that depend on each other in a loop (move what both need below them):"
	sed 's/^/  /' "$tmp/bad"
	exit 1
fi
echo "no loops between files but the known ones: $(wc -l <"$tmp/groups") group(s) under $known"
