#!/bin/sh
# One prefix per module: no two product files export functions or data under the same
# prefix (the name's first two words, "lb_schedule" of lb_schedule_build), so that a name
# says where it is defined. The families that span several files of one room stand in the
# list below with why; anything else fails naming the prefix and its files. The check is
# first shown to fail on a planted pair.
set -u
BUILD=${BUILD:-build}
[ -d "$BUILD/obj" ] || { echo "error: '$BUILD/obj' not built (make BUILD=$BUILD)"; exit 1; }
command -v nm >/dev/null 2>&1 || { echo "nm not installed (Debian package binutils)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Prefixes shared on purpose, each a family of files:
#   cmd_            every command's struct, in its stage's folder (cli/commands.c lists them)
#   lb_comm         the communicators and their users (harness/comm*.c, the GPU one)
#   lb_ops          the ops table's backends (harness/ops_cpu.c, harness/cuda/)
#   lb_cuda         the CUDA backend's files (harness/cuda/)
#   lb_train        the trainer, one file per concern (harness/train.h)
#   lb_memory       the memory model: the estimate (common/model.c) and the trainer's
#                   (common/memory_trainer.c)
#   lb_machine      the machine description (common/predict.c) and its files
#                   (common/machine.c)
#   results_health  run health: the pure verdict (results/health.c) and its rows
#                   (results/health_db.c)
shared='cmd lb_comm lb_ops lb_cuda lb_train lb_memory lb_machine results_health lbc_comm lbc_stream lbc_lt'

# clashes: read "NAME FILE" lines, print "PREFIX: FILE FILE..." for a prefix of two files
# or more that is not in $shared
clashes() {
	awk -v shared=" $shared " '{ n = split($1, p, "_"); pre = n > 1 ? p[1] "_" p[2] : p[1]
		if (p[1] == "cmd") pre = "cmd"
		if (index(shared, " " pre " ")) next
		if (!((pre, $2) in seen)) { seen[pre, $2] = 1; files[pre] = files[pre] " " $2; c[pre]++ } }
		END { for (k in c) if (c[k] > 1) print k ":" files[k] }' | sort
}

printf 'lb_x_a a.o\nlb_x_b b.o\nlb_y_a a.o\ncmd_p c.o\ncmd_q d.o\n' | clashes >"$tmp/planted"
[ "$(cat "$tmp/planted")" = "lb_x: a.o b.o" ] ||
	{ echo "FAIL: the check missed a planted clash: $(cat "$tmp/planted")"; exit 1; }

# objects of sources that are in the tree now (an object left behind by a moved file is not)
find "$BUILD/obj" -name '*.o' ! -path '*/gen/*' ! -name main.o ! -name train_main.o | sort |
	while read -r o; do
		s=${o#"$BUILD"/obj/}
		s=${s%.o}
		[ -f "$s.c" ] || [ -f "$s.cu" ] || continue
		nm -g --defined-only "$o" 2>/dev/null |
			awk -v f="${o#"$BUILD"/obj/}" 'NF == 3 && $2 ~ /[TDRB]/ && $3 !~ /^_Z/ { print $3, f }'
	done | clashes >"$tmp/bad"
if [ -s "$tmp/bad" ]; then
	echo "FAIL: a prefix defined in several files (rename one, or give the family its reason above):"
	sed 's/^/  /' "$tmp/bad"
	exit 1
fi
echo "one prefix per module"
