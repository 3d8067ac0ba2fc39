#!/bin/sh
# `plan --format json` streams its entries as the table does: on a 16,000-point grid its
# peak memory (GNU time's maximum resident set) stays within a quarter (plus 4 MiB) of
# the table's, where building the whole document first took about six times as much;
# the output is one valid JSON document with every entry.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
[ -x /usr/bin/time ] || { echo "no /usr/bin/time (apt-get install time)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/big.json" <<'EOF2'
{"name": "big", "model": "llama-13b",
 "fixed": {"gpus": 64, "zero_stage": 1},
 "grid": {"micro_batch": [1, 2, 4, 8, 16], "tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8],
          "global_batch": [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144],
          "seq_len": [512, 1024, 2048, 4096, 8192],
          "checkpointing": ["none", "full"], "attention": ["naive", "flash"]},
 "cluster": {"gpus_per_node": 8, "gpu_mem_gib": 80, "gpu": "A100"}}
EOF2
fail=0
# under AddressSanitizer (make asan) freed blocks wait in a quarantine and count as
# resident: keep none, so that the peak is what the program holds
ASAN_OPTIONS="quarantine_size_mb=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export ASAN_OPTIONS
for f in table json; do
	/usr/bin/time -f '%M' -o "$tmp/rss.$f" "$LB" plan "$tmp/big.json" --format $f \
		>"$tmp/out.$f" 2>"$tmp/err.$f" || { echo "FAIL: plan --format $f: $(cat "$tmp/err.$f")"; fail=1; }
done
t=$(tail -n 1 "$tmp/rss.table")
j=$(tail -n 1 "$tmp/rss.json")
echo "peak resident memory: table $t KiB, json $j KiB"
[ "$j" -le $((t + t / 4 + 4096)) ] || { echo "FAIL: json needs $j KiB, the table $t KiB"; fail=1; }
if command -v python3 >/dev/null; then
	n=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["entries"]))' "$tmp/out.json") ||
		{ echo "FAIL: not valid JSON"; fail=1; }
	[ "$n" = 16000 ] || { echo "FAIL: $n entries, want 16000"; fail=1; }
fi
[ $fail = 0 ] && echo "plan json streams: ok"
exit $fail
