#!/bin/sh
# No product file (every folder but tests/) is longer than 1,000 lines without a reason: a
# longer file says in its opening comment, in a paragraph that starts "Why one file:", why
# it is not split. The check is first shown to fail on a planted file.
MAX=1000

DIRS='bench cli common harness report results slurm sweeps'

# check DIR: print every product file of DIR over MAX lines without the reason; exit 1 if any
check() {
	(cd "$1" && find $DIRS -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
		sort | while read -r f; do
			n=$(wc -l <"$f")
			[ "$n" -gt $MAX ] || continue
			# the opening comment: from the first line to the first line that closes it
			awk 'NR == 1 && !/^\/\*/ { exit 1 } { print } /\*\// { exit }' "$f" |
				grep -q '^ \* Why one file: ' || echo "$f: $n lines, and no 'Why one file:' in its opening comment"
		done) | awk '{ print } END { exit NR > 0 }'
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for d in $DIRS; do mkdir -p "$tmp/$d"; done
{ printf '/*\n * Long.\n */\n'; seq 1001; } >"$tmp/report/long.c"
{ printf '/*\n * Long.\n *\n * Why one file: a reason.\n */\n'; seq 1001; } >"$tmp/harness/why.c"
{ printf '/*\n * Long.\n */\n/* Why one file: too late */\n'; seq 1001; } >"$tmp/harness/late.c"
seq 999 >"$tmp/harness/short.c"
if check "$tmp" >"$tmp/out"; then
	echo "FAIL: the check missed a planted long file"
	exit 1
fi
printf '%s\n' "harness/late.c: 1005 lines, and no 'Why one file:' in its opening comment" \
	"report/long.c: 1004 lines, and no 'Why one file:' in its opening comment" >"$tmp/want"
cmp -s "$tmp/out" "$tmp/want" || { echo "FAIL: the check on planted files said:"; cat "$tmp/out"; exit 1; }

if ! check . >"$tmp/bad"; then
	echo "FAIL: files over $MAX lines without a reason (split them, or say why in the opening comment: 'Why one file: ...'):"
	cat "$tmp/bad"
	exit 1
fi
echo "ok: every product file over $MAX lines says why it is one file"
