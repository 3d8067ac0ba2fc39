#!/bin/sh
# Where a step's time goes, from bench_kernels' table: each kernel's time alone (the CSV's
# time_us) times its count per step for the bench model (Llama-13B width cut to 8 layers,
# vocabulary 32000, 2865320960 parameters, no checkpointing), summed by kind of work, at
# seq 2048 with 16 micro-batches of 1 and seq 8192 with 4 (global batches 16 and 4); the
# step times of a timing round (bench/gpu/round.sh) give the rest: launch gaps, kernels
# slower under sustained load than alone, the small kernels the table has no row for.
#
#   sh bench/gpu/breakdown.sh KERNELS_CSV [ATTN [STEP_2048 STEP_8192]]
#
# ATTN: the attention kernel whose rows count (cudnn, the default; flash; or fused, whose
# backward row is attn.probs.bwd). Counts per micro-batch, L layers: every GEMM row of
# qkv, out, gateup and down (forward, dgrad, wgrad) L times, head once; attention forward
# and backward L times; the fused RMSNorm forward and backward 2L + 1 times; RoPE and
# SwiGLU forward and backward L times each; the residual add 2L times (the backward adds
# into the residual gradient in the norm's backward); the embedding and the three
# cross-entropy passes once. Per step: AdamW over the parameters (the "adamw" row, n 100M,
# scaled), and the gradient norm and the zeroing of the main gradients, estimated as one
# read and one write of their 4 bytes a parameter at AdamW's bandwidth (no row of their
# own). Exit 2 on a missing or malformed table (a row it needs absent, or a time that is
# no positive number), naming the row.
set -u
csv=${1:-}
attn=${2:-cudnn}
s2=${3:-}
s8=${4:-}
[ -n "$csv" ] && [ -r "$csv" ] || {
	echo "usage: breakdown.sh KERNELS_CSV [ATTN [STEP_2048 STEP_8192]] (bench_kernels --csv FILE writes the table)" >&2
	exit 2
}
case $attn in
cudnn | flash) fwd=attn.$attn.fwd bwd=attn.$attn.bwd ;;
fused) fwd=attn.fused.fwd bwd=attn.probs.bwd ;;
*) echo "breakdown.sh: attention '$attn' unknown: cudnn, flash or fused" >&2; exit 2 ;;
esac
awk -F, -v fwd="$fwd" -v bwd="$bwd" -v s2="$s2" -v s8="$s8" '
function need(k, t,   v) {
	if (!((k SUBSEP t) in us)) { printf "breakdown.sh: %s: no row %s at T%s\n", FILENAME, k, t > "/dev/stderr"; bad = 1; return 0 }
	return us[k, t]
}
NR == 1 { if ($1 != "kernel" || $3 != "time_us") { print "breakdown.sh: " FILENAME ": not a bench_kernels CSV (header " $0 ")" > "/dev/stderr"; exit 2 } next }
{
	# the tokens of the row: T2048 ..., n ... (T2048 x H5120), B1 S2048 ... (attention)
	t = "any"
	if (match($2, /(^|\()T[0-9]+/)) { t = substr($2, RSTART, RLENGTH); sub(/^\(?T/, "", t) }
	else if (match($2, /^B1 S[0-9]+/)) t = substr($2, 5, RLENGTH - 4)
	if (!($3 + 0 > 0)) { printf "breakdown.sh: %s line %d: %s: time %s is no positive number\n", FILENAME, NR, $1, $3 > "/dev/stderr"; exit 2 }
	if (!(($1 SUBSEP t) in us)) us[$1, t] = $3 + 0
	if ($1 == "adamw") gbs = $6 + 0
}
END {
	L = 8; N = 2865320960
	split("2048 8192", T, " "); split("16 4", mbs, " "); split("qkv out gateup down", lay, " ")
	nk = split("GEMMs (cuBLASLt)|attention|RMSNorm, SwiGLU, RoPE, adds|embedding, cross-entropy|optimizer (AdamW; gradient norm and zeroing estimated)", kind, "|")
	for (i = 1; i <= 2; i++) {
		t = T[i]; m = mbs[i]
		g = 0
		for (l = 1; l <= 4; l++)
			g += L * (need("gemm." lay[l] ".fwd", t) + need("gemm." lay[l] ".dgrad", t) + need("gemm." lay[l] ".wgrad", t))
		g += need("gemm.head.fwd", t) + need("gemm.head.dgrad", t) + need("gemm.head.wgrad", t)
		a = L * (need(fwd, t) + need(bwd, t))
		e = (2 * L + 1) * (need("rmsnorm.fused.fwd", t) + need("rmsnorm.fused.bwd", t)) + \
		    L * (need("rope.fwd", t) + need("rope.bwd", t) + need("swiglu.fwd", t) + need("swiglu.bwd", t)) + \
		    2 * L * need("add", t)
		x = need("embed.fwd", t) + need("embed.bwd", t) + need("xent.max", t) + need("xent.sum", t) + need("xent.grad", t)
		ms[1, i] = m * g / 1000; ms[2, i] = m * a / 1000; ms[3, i] = m * e / 1000; ms[4, i] = m * x / 1000
	}
	if (!(("adamw" SUBSEP "any") in us) || gbs <= 0) { print "breakdown.sh: " FILENAME ": no adamw row" > "/dev/stderr"; exit 2 }
	if (bad) exit 2
	opt = us["adamw", "any"] * N / 1e8 / 1000 + 2 * 4 * N / (gbs * 1e9) * 1000
	ms[5, 1] = ms[5, 2] = opt
	step[1] = s2 * 1000; step[2] = s8 * 1000
	printf "| work | seq 2048, mb 1, 16 per step%s | seq 8192, mb 1, 4 per step%s |\n| --- | ---: | ---: |\n", \
		s2 != "" ? sprintf(" (%s s)", s2) : "", s8 != "" ? sprintf(" (%s s)", s8) : ""
	for (k = 1; k <= nk; k++) {
		printf "| %s |", kind[k]
		for (i = 1; i <= 2; i++) {
			sum[i] += ms[k, i]
			if (step[i] > 0) printf " %.0f ms, %.1f%% |", ms[k, i], 100 * ms[k, i] / step[i]
			else printf " %.0f ms |", ms[k, i]
		}
		printf "\n"
	}
	printf "| sum of the kernels alone |"
	for (i = 1; i <= 2; i++)
		if (step[i] > 0) printf " %.0f ms, %.1f%% |", sum[i], 100 * sum[i] / step[i]; else printf " %.0f ms |", sum[i]
	printf "\n"
	if (step[1] > 0 && step[2] > 0)
		printf "| rest (launch gaps, sustained load, kernels without a row) | %.0f ms, %.1f%% | %.0f ms, %.1f%% |\n", \
			step[1] - sum[1], 100 * (step[1] - sum[1]) / step[1], step[2] - sum[2], 100 * (step[2] - sum[2]) / step[2]
}' "$csv"
