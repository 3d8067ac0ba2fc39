#!/bin/sh
# bench/gpu/breakdown.sh, the step's time by kind of work from bench_kernels' table, on a
# made-up table where every kernel takes 1000 us (adamw 2000 us at 4000 GB/s): the counts
# per step give known sums (GEMMs: 8 layers x 12 + 3 head rows = 99 ms a micro-batch, x16
# at seq 2048 and x4 at 8192); the step times give the rest; a table without a row it
# needs, a time that is no number, or no table at all is a usage error naming the problem.
set -u
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
csv="$tmp/k.csv"
echo "kernel,shape,time_us,work,unit,achieved,ceiling,pct_of_ceiling,check,size_copy_gbps,pct_of_size_copy" >"$csv"
for t in 2048 8192; do
	for l in qkv out gateup down head; do
		for p in fwd dgrad wgrad; do
			echo "gemm.$l.$p,T$t m1 n1 k1 NT,1000,1,TFLOP/s,1,1,100,ok,," >>"$csv"
		done
	done
	for k in attn.cudnn.fwd attn.cudnn.bwd attn.flash.fwd attn.flash.bwd; do
		echo "$k,B1 S$t nh40 D128 causal,1000,1,TFLOP/s,1,1,100,ok,," >>"$csv"
	done
	for k in rmsnorm.fused.fwd rmsnorm.fused.bwd rope.fwd rope.bwd swiglu.fwd swiglu.bwd \
		embed.fwd embed.bwd xent.max xent.sum xent.grad; do
		echo "$k,T$t H5120,1000,1,GB/s,1,1,100,ok,1,100" >>"$csv"
	done
	echo "add,n 1 (T$t x H5120),1000,1,GB/s,1,1,100,ok,1,100" >>"$csv"
done
echo "adamw,n 100M,2000,1,GB/s,4000,4000,100,ok,1,100" >>"$csv"
sh bench/gpu/breakdown.sh "$csv" cudnn 2 1 >"$tmp/out" 2>"$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: breakdown.sh on a whole table"; fail=1; }
# per micro-batch: GEMMs 99 ms; attention 16; norms 34 + RoPE/SwiGLU 32 + adds 16 = 82;
# embedding and cross-entropy 5. Optimizer: 2 ms x 28.65 + 8 x 2865320960 B / 4000 GB/s
# = 57.3 + 5.7 = 63 ms.
for want in "| GEMMs (cuBLASLt) | 1584 ms, 79.2% | 396 ms, 39.6% |" \
	"| attention | 256 ms, 12.8% | 64 ms, 6.4% |" \
	"| RMSNorm, SwiGLU, RoPE, adds | 1312 ms, 65.6% | 328 ms, 32.8% |" \
	"| embedding, cross-entropy | 80 ms, 4.0% | 20 ms, 2.0% |" \
	"| optimizer (AdamW; gradient norm and zeroing estimated) | 63 ms, 3.2% | 63 ms, 6.3% |" \
	"| rest (launch gaps, sustained load, kernels without a row) | -1295 ms, -64.8% | 129 ms, 12.9% |"; do
	grep -qxF "$want" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: breakdown.sh: no line '$want'"; fail=1; }
done
grep -v '^attn.cudnn.bwd,B1 S8192' "$csv" >"$tmp/miss.csv"
sh bench/gpu/breakdown.sh "$tmp/miss.csv" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] && grep -q "no row attn.cudnn.bwd at T8192" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: a missing row: exit $rc, want 2 naming the row"; fail=1; }
sed 's/^rope.fwd,T2048 H5120,1000,/rope.fwd,T2048 H5120,fast,/' "$csv" >"$tmp/bad.csv"
sh bench/gpu/breakdown.sh "$tmp/bad.csv" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] && grep -q "rope.fwd: time fast is no positive number" "$tmp/err" ||
	{ cat "$tmp/err"; echo "FAIL: a malformed time: exit $rc, want 2 naming it"; fail=1; }
sh bench/gpu/breakdown.sh "$tmp/none.csv" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: no table: want exit 2"; fail=1; }
sh bench/gpu/breakdown.sh "$csv" nope >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: an unknown attention: want exit 2"; fail=1; }
[ "$fail" = 0 ] && echo "ok: breakdown.sh sums a made-up table as counted"
exit "$fail"
