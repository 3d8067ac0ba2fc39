#!/bin/sh
# The core names no backend: what only the GPU can do is an optional member of the ops
# and comm tables (harness/ops.h, harness/comm/comm.h), so outside the CUDA backend
# (harness/cuda/, the GPU communicator harness/comm/comm_cuda.*) and the backend registry
# (harness/registry.c), no product file tests LB_WITH_CUDA or calls the backend by name
# (lb_ops_cuda, lb_comm_cuda_*, lbc_*); and no product file, the backend's included, shares
# a mutable variable with another (an `extern` declaration of anything but a constant, a
# function, a kernel's dynamic shared memory or libc's environ): what one file's state
# tells the others goes through a function. The check is first shown to fail on planted
# files.

# check DIR: print every place against the rule under DIR; exit 1 if any
check() {
	(cd "$1" && find common sweeps harness results slurm report cli \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f 2>/dev/null |
		sort | while read -r f; do
			case $f in
			harness/cuda/* | harness/comm/comm_cuda.* | harness/registry.c) ;;
			*)
				grep -n 'LB_WITH_CUDA' "$f" | sed "s|^|$f:|"
				case $f in
				*.c) grep -n '\blb_ops_cuda *(\|\blb_comm_cuda_[a-z_]* *(\|\blbc_[a-z_]* *(' "$f" |
					sed "s|^|$f:|" ;;
				esac
				;;
			esac
			# extern data that is not const (a function's declaration has a '(')
			grep -n '^[[:space:]]*extern[[:space:]]' "$f" | grep -v '(' |
				grep -v 'extern[[:space:]]*\("C"[[:space:]]*\)\{0,1\}const[[:space:]]' |
				grep -v 'extern[[:space:]]*"C"[[:space:]]*{' |
				grep -v 'extern[[:space:]]*__shared__[[:space:]]' |
				grep -v 'extern[[:space:]]*char[[:space:]]*\*\*environ;' | sed "s|^|$f:|"
		done) | awk '{ print } END { exit NR > 0 }'
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/harness/cuda" "$tmp/harness/comm" "$tmp/common"
printf '#ifdef LB_WITH_CUDA\n#endif\n' >"$tmp/harness/x.c"
printf 'static void f(void) { lb_comm_cuda_set_name(0, "tp"); }\n' >"$tmp/harness/y.c"
printf 'extern int lb_current_tag;\nextern const int lb_n;\nint f(void);\n' >"$tmp/common/z.h"
printf 'extern cudaStream_t lbc_stream;\n' >"$tmp/harness/cuda/s.cuh"
printf '#ifdef LB_WITH_CUDA\n#endif\nextern const int a;\nextern char **environ;\n' >"$tmp/harness/registry.c"
printf '#ifdef LB_WITH_CUDA\n#endif\nextern "C" {\nextern "C" const int b;\n' >"$tmp/harness/cuda/k.cu"
printf '\textern __shared__ float dws[];\n' >>"$tmp/harness/cuda/k.cu"
printf 'static int g(void) { return lbc_x(); }\n' >"$tmp/harness/comm/comm_cuda.cu"
if check "$tmp" >"$tmp/out"; then
	echo "FAIL: the check missed planted names of the backend"
	exit 1
fi
for want in 'harness/x.c:1:#ifdef LB_WITH_CUDA' \
	'harness/y.c:1:static void f(void) { lb_comm_cuda_set_name(0, "tp"); }' \
	'common/z.h:1:extern int lb_current_tag;' \
	'harness/cuda/s.cuh:1:extern cudaStream_t lbc_stream;'; do
	grep -qxF "$want" "$tmp/out" || { echo "FAIL: '$want' not found in:"; cat "$tmp/out"; exit 1; }
done
if [ "$(wc -l <"$tmp/out")" -ne 4 ]; then
	echo "FAIL: the check named what the rule allows:"
	cat "$tmp/out"
	exit 1
fi

if ! check . >"$tmp/bad"; then
	echo "FAIL: the core names the CUDA backend (use an optional member of the ops or comm table), or files share a mutable variable (read it through a function):"
	cat "$tmp/bad"
	exit 1
fi
echo "the core calls the backend through its tables"
