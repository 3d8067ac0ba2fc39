#!/bin/sh
# The CUDA code builds for the A100 (sm_80) as well as for the H100/H200 (sm_90a, which
# `make` builds): `make cuda-arch` compiles every .cu file (the trainer's and the
# benchmarks') to an sm_80 cubin, ptxas included, in a build folder of its own (the main
# build's configuration stays as it is).
# Hopper-only code outside its __CUDA_ARCH__ guard (a vector atomic, a cluster intrinsic,
# an sm_90 PTX instruction) fails here, on a machine without a GPU, rather than on an
# A100 cluster's first build. Skips where there is no nvcc.
set -u
BUILD=${BUILD:-build}
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
if ! [ -x "$NVCC" ]; then
	echo "skip: no nvcc at $NVCC (set CUDA_HOME): the CUDA code is not built here"
	exit 77
fi
# a make of its own: none of the calling make's settings, which reach here through MAKEFLAGS
# and the environment (make asan's SAN=1 leaves CUDA out)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SAN -u CFLAGS -u WITH_CUDA make -s --no-print-directory \
	-j "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)" \
	BUILD="$BUILD/arch-check" CUDA_ALT_ARCH=80 cuda-arch 2>&1 ||
	{ echo "FAIL: the CUDA code does not build for sm_80 (A100); see the errors above"; exit 1; }
# one cubin per .cu file of the tree (a cubin of a file since moved or removed is left out)
n=0
for f in $(find harness bench -name '*.cu' | sort); do
	[ -f "$BUILD/arch-check/cubin/sm_80/${f%.cu}.cubin" ] ||
		{ echo "FAIL: no sm_80 cubin of $f: make cuda-arch left it out"; exit 1; }
	n=$((n + 1))
done
echo "ok: $n CUDA sources build for sm_80"
