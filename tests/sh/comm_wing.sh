#!/bin/sh
# The communicators are a wing of the harness of their own (harness/comm/comm.h): every
# communicator source (comm*, bootstrap*, groups*) lives in harness/comm/, and the wing
# includes only itself and common/, so that the model, the trainer and the launcher use
# it and it uses nothing of theirs. The check is first shown to fail on planted files.

# check DIR: print every file or include against the rule under DIR; exit 1 if any
check() {
	(cd "$1" && {
		find harness -type f \( -name 'comm*' -o -name 'bootstrap*' -o -name 'groups*' \) \
			! -path 'harness/comm/*' 2>/dev/null | sed 's|$|: a communicator outside harness/comm/|'
		find harness/comm -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
			2>/dev/null | sort | while read -r f; do
			sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
				while read -r inc; do
					case $inc in
					harness/comm/* | common/*) ;;
					*) echo "$f: #include \"$inc\"" ;;
					esac
				done
		done
	} | sort | awk '{ print } END { exit NR > 0 }')
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/harness/comm" "$tmp/harness/cuda"
printf '#include "harness/comm/comm.h"\n#include "common/util.h"\n#include "harness/train.h"\n' \
	>"$tmp/harness/comm/comm_x.c"
printf '#include <stdio.h>\n' >"$tmp/harness/cuda/comm_y.cu"
if check "$tmp" >"$tmp/out"; then
	echo "FAIL: the check missed a planted communicator outside the wing"
	exit 1
fi
printf '%s\n' 'harness/comm/comm_x.c: #include "harness/train.h"' \
	'harness/cuda/comm_y.cu: a communicator outside harness/comm/' >"$tmp/want"
if ! cmp -s "$tmp/out" "$tmp/want"; then
	echo "FAIL: the check on planted files said:"
	cat "$tmp/out"
	exit 1
fi

if ! check . >"$tmp/bad"; then
	echo "FAIL: the communicators' wing (harness/comm/) is not whole, or includes the rest of the harness:"
	cat "$tmp/bad"
	exit 1
fi
echo "the communicators are a wing of their own: $(ls harness/comm | wc -l) files"
