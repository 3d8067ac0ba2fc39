#!/bin/sh
# Includes follow the flow (README, "Layout of the code"): common <- sweeps, harness,
# results <- slurm, report <- cli. A file of a room may include its own room and the rooms
# before it, nothing else: common/ only common/; sweeps/, harness/ and results/ also
# common/; slurm/ and report/ also sweeps/, harness/ and results/; cli/ anything. tests/
# and bench/ are not rooms. The check is first shown to fail on a planted include.

# check DIR: print every include against the flow under DIR; exit 1 if any
check() {
	(cd "$1" && find common sweeps harness results slurm report cli \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f 2>/dev/null |
		sort | while read -r f; do
			room=${f%%/*}
			case $room in
			common) ok="common" ;;
			sweeps | harness | results) ok="common $room" ;;
			slurm | report) ok="common sweeps harness results $room" ;;
			*) continue ;;
			esac
			sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/.*/\1 &/p' "$f" |
				while read -r inc line; do
					case $inc in
					common | sweeps | harness | results | slurm | report | cli) ;;
					*) continue ;;
					esac
					case " $ok " in *" $inc "*) ;; *) echo "$f: $line" ;; esac
				done
		done) | awk '{ print } END { exit NR > 0 }'
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/sweeps" "$tmp/common"
printf '#include "common/util.h"\n#include "slurm/render.h"\n' >"$tmp/sweeps/x.c"
printf '#include "common/util.h"\n' >"$tmp/common/y.c"
if check "$tmp" >"$tmp/out"; then
	echo "FAIL: the check missed a planted include of slurm/ in sweeps/"
	exit 1
fi
grep -q '^sweeps/x.c: #include "slurm/render.h"$' "$tmp/out" || { echo "FAIL: $(cat "$tmp/out")"; exit 1; }

if ! check . >"$tmp/bad"; then
	echo "FAIL: includes against the flow (common <- sweeps, harness, results <- slurm, report <- cli):"
	cat "$tmp/bad"
	exit 1
fi
echo "includes follow the flow"
