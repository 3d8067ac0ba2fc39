#!/bin/sh
# The command line from its tables (each beside its command; cli/commands.c the registry,
# common/cmdline.c the parser): the README's command table is
# `layoutbench help --markdown` to the letter; every command named by `help` answers
# `--help` with its usage (so cli/main.c has a function for each); a usage error exits 2
# with an error line and the usage line, the same way in every command.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# the README's table, from its header line to the first line that is not a table row
awk '/^\| command \| what it does \|$/ { on = 1 } on && !/^\|/ { exit } on' README.md >"$tmp/readme"
"$LB" help --markdown >"$tmp/generated" || { echo "FAIL: help --markdown exited $?"; fail=1; }
[ -s "$tmp/readme" ] || { echo "FAIL: no command table in README.md"; fail=1; }
if ! diff -u "$tmp/readme" "$tmp/generated"; then
	echo "FAIL: README.md's command table is not 'layoutbench help --markdown' (paste it in)"
	fail=1
fi

cmds=$("$LB" help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ -n "$cmds" ] || { echo "FAIL: 'help' lists no command"; fail=1; }
for c in $cmds; do
	"$LB" "$c" --help >"$tmp/h" 2>&1 || { echo "FAIL: '$c --help' exited $?"; fail=1; }
	grep -q "^usage: layoutbench $c" "$tmp/h" || { echo "FAIL: '$c --help': $(cat "$tmp/h")"; fail=1; }
	"$LB" help "$c" | cmp -s - "$tmp/h" || { echo "FAIL: 'help $c' differs from '$c --help'"; fail=1; }
	# an unknown option: exit 2, an error line, the usage line
	"$LB" "$c" --no-such-option >"$tmp/o" 2>"$tmp/e"
	rc=$?
	[ $rc = 2 ] || { echo "FAIL: '$c --no-such-option' exited $rc, want 2"; fail=1; }
	grep -q "^error: unknown option '--no-such-option'$" "$tmp/e" &&
		grep -q "^usage: layoutbench $c" "$tmp/e" ||
		{ echo "FAIL: '$c --no-such-option': $(cat "$tmp/e")"; fail=1; }
done

# both spellings of a value; a bad number names the range
for a in "--format=csv" "--format csv"; do
	# shellcheck disable=SC2086
	"$LB" plan quickstart $a >"$tmp/p" 2>/dev/null || { echo "FAIL: plan $a exited $?"; fail=1; }
	head -n 1 "$tmp/p" | grep -q '^id,model,' || { echo "FAIL: plan $a: not csv"; fail=1; }
done
"$LB" submit quickstart --throttle 2x --dry-run 2>"$tmp/e"
[ $? = 2 ] && grep -q "^error: option '--throttle' expects a whole number from 0 to 1000000, got '2x'$" "$tmp/e" ||
	{ echo "FAIL: --throttle 2x: $(cat "$tmp/e")"; fail=1; }

[ $fail = 0 ] && echo "cli usage: ok"
exit $fail
