#!/bin/sh
# A cluster.gpu the peak table does not know ("A1OO", a misspelling of A100) is planned
# with a warning naming the GPUs it knows (its runs' MFU would have no peak); a known name,
# the driver's long name, or a spec that gives cluster.peak_tflops plans without one; no
# shipped spec warns.
set -u
. tests/sh/lib/cli_tmp.sh
spec() { # cluster-json
	printf '{"name": "g", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8}, "cluster": {"gpu_mem_gib": 80, %s}}\n' "$1" >s.json
}
spec '"gpu": "A1OO"'
"$LB" plan s.json >out 2>err || { cat err; echo "FAIL: A1OO: plan failed"; fail=1; }
grep -qx "warning: plan 'g': cluster.gpu 'A1OO' is not a GPU layoutbench knows, so its runs' MFU will have no peak (known: GH200, H200 NVL, H200, H100 NVL, H100 PCIe, H100, A100, B200, L40S, MI300X, MI250X, V100; a misspelling? or set cluster.peak_tflops)" err ||
	{ cat err; echo "FAIL: A1OO: no warning naming the known GPUs"; fail=1; }
for c in '"gpu": "A100"' '"gpu": "NVIDIA H100 80GB HBM3"' '"gpu": "A1OO", "peak_tflops": 312'; do
	spec "$c"
	"$LB" plan s.json >out 2>err
	! grep -q "cluster.gpu '" err || { cat err; echo "FAIL: $c: warned"; fail=1; }
done
for s in "$root"/sweeps/specs/*.json; do
	"$LB" plan "$s" >/dev/null 2>err
	! grep -q "cluster.gpu '" err || { cat err; echo "FAIL: $(basename "$s") warns about its GPU"; fail=1; }
done
exit $fail
