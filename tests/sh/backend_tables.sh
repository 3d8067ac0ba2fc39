#!/bin/sh
# The core names no backend: what only the GPU can do is an optional member of the ops
# and comm tables (harness/ops.h, harness/comm.h), so outside the CUDA backend
# (harness/cuda/, the GPU communicator harness/comm_cuda.h) and the backend registry
# (harness/registry.c), no product file tests LB_WITH_CUDA or calls the backend by name
# (lb_ops_cuda, lb_comm_cuda_*, lbc_*). The check is first shown to fail on planted files.

# check DIR: print every place against the rule under DIR; exit 1 if any
check() {
	(cd "$1" && find common sweeps harness results slurm report cli \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f 2>/dev/null |
		sort | while read -r f; do
			case $f in
			harness/cuda/* | harness/comm_cuda.h | harness/registry.c) ;;
			*)
				grep -n 'LB_WITH_CUDA' "$f" | sed "s|^|$f:|"
				case $f in
				*.c) grep -n '\blb_ops_cuda *(\|\blb_comm_cuda_[a-z_]* *(\|\blbc_[a-z_]* *(' "$f" |
					sed "s|^|$f:|" ;;
				esac
				;;
			esac
		done) | awk '{ print } END { exit NR > 0 }'
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/harness/cuda" "$tmp/harness/comm" "$tmp/common"
printf '#ifdef LB_WITH_CUDA\n#endif\n' >"$tmp/harness/x.c"
printf 'static void f(void) { lb_comm_cuda_set_name(0, "tp"); }\n' >"$tmp/harness/y.c"
printf '#ifdef LB_WITH_CUDA\n#endif\n' >"$tmp/harness/registry.c"
printf '#ifdef LB_WITH_CUDA\n#endif\n' >"$tmp/harness/cuda/k.cu"
printf 'static int g(void) { return lbc_x(); }\n' >"$tmp/harness/comm_cuda.h"
if check "$tmp" >"$tmp/out"; then
	echo "FAIL: the check missed planted names of the backend"
	exit 1
fi
for want in 'harness/x.c:1:#ifdef LB_WITH_CUDA' \
	'harness/y.c:1:static void f(void) { lb_comm_cuda_set_name(0, "tp"); }'; do
	grep -qxF "$want" "$tmp/out" || { echo "FAIL: '$want' not found in:"; cat "$tmp/out"; exit 1; }
done
if [ "$(wc -l <"$tmp/out")" -ne 2 ]; then
	echo "FAIL: the check named what the rule allows:"
	cat "$tmp/out"
	exit 1
fi

if ! check . >"$tmp/bad"; then
	echo "FAIL: the core names the CUDA backend (use an optional member of the ops or comm table):"
	cat "$tmp/bad"
	exit 1
fi
echo "the core calls the backend through its tables"
