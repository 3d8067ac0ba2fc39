#!/bin/sh
# Every function a product library exports is called by someone: a name that no other
# object uses (nm) and that stands in the sources only where it is declared and where it
# is defined (its header and its file) is dead code, and this fails naming it. The check
# is first shown to fail on a planted one.
set -u
BUILD=${BUILD:-build}
for lib in libcommon libcli libharness; do
	[ -f "$BUILD/$lib.a" ] || { echo "error: '$BUILD/$lib.a' not built (make BUILD=$BUILD)"; exit 1; }
done
command -v nm >/dev/null 2>&1 || { echo "nm not installed (Debian package binutils)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# want NAME...: the names to look for; dead DIR: print each of them that stands at most
# twice, as a whole word, in DIR's C and CUDA sources (tests and benchmarks included: a
# name they call is alive)
want() { printf '%s\n' "$@" >"$tmp/want"; }
dead() {
	(cd "$1" && grep -rhoE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
		--include='*.def' '[A-Za-z_][A-Za-z0-9_]*' . 2>/dev/null) |
		awk 'FNR == NR { want[$1] = 1; next } $1 in want { n[$1]++ }
		     END { for (s in want) if (n[s] <= 2) print s }' "$tmp/want" -
}

mkdir -p "$tmp/tree/common"
printf 'int lb_planted(void);\nint lb_used(void);\n' >"$tmp/tree/common/x.h"
printf 'int lb_planted(void) { return 1; }\nint lb_used(void) { return 2; }\n' >"$tmp/tree/common/x.c"
printf 'int f(void) { return lb_used(); }\n' >"$tmp/tree/common/y.c"
want lb_planted lb_used
[ "$(dead "$tmp/tree")" = lb_planted ] ||
	{ echo "FAIL: the check missed a planted dead export"; exit 1; }

nm -g --defined-only "$BUILD/libcommon.a" "$BUILD/libcli.a" "$BUILD/libharness.a" 2>/dev/null |
	awk 'NF == 3 && $2 == "T" { print $3 }' | grep -v '^_Z' | sort -u >"$tmp/syms"
# the names another object uses are alive (a name made by the preprocessor is one)
find "$BUILD/obj" -name '*.o' -exec nm -u {} + 2>/dev/null | awk '{ print $NF }' | sort -u >"$tmp/used"
comm -23 "$tmp/syms" "$tmp/used" >"$tmp/want"
dead . | sort >"$tmp/dead"
if [ -s "$tmp/dead" ]; then
	echo "FAIL: exported and never called (remove them, or make them static):"
	sed 's/^/  /' "$tmp/dead"
	exit 1
fi
echo "every export is called: $(wc -l <"$tmp/syms") checked"
