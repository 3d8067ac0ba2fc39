#!/bin/sh
# The table of docs/memory-model.md, "Planned, counted and the device's own peak", from a
# results database: one row per layout with runs of ours that fit or ran out of memory
# (the report's memory figure, `layoutbench report --figure memory`), with what the planner
# plans for it (the trainer's model, plus on a GPU the 1 GiB it reserves for the CUDA
# runtime), the peak the trainer's allocator counted, the device's own reading of its
# peak (cudaMemGetInfo's used memory, as nvidia-smi shows it; "-" where the run did not
# record it) and what happened on the device. Rows by sweep, then planned memory.
#
# Usage: sh scripts/memory-table.sh [--usable GIB] DB [SWEEP ...]
#   --usable GIB  the memory the planner plans against (a spec's cluster.gpu_mem_gib,
#                 e.g. 139.8 on an H200): adds the plan's verdict (fits / oom) and exits 1
#                 when a layout planned to fit ran out of memory, or one planned not to fit
#                 ran (the table is printed first all the same)
#   SWEEP ...     only these sweeps (default every sweep with such runs)
# Env: LB, the layoutbench binary (default build/layoutbench).
set -u
LB=${LB:-build/layoutbench}
usable=
if [ "${1:-}" = --usable ]; then
	usable=${2:-}
	case "$usable" in '' | *[!0-9.]* | *.*.*)
		echo "error: --usable '$usable': expected GiB as a number, e.g. 139.8" >&2; exit 2 ;;
	esac
	shift 2
fi
[ $# -ge 1 ] || { echo "usage: sh scripts/memory-table.sh [--usable GIB] DB [SWEEP ...]" >&2; exit 2; }
db=$1
shift
[ -x "$LB" ] || { echo "error: '$LB' not found (make, or set LB)" >&2; exit 2; }
[ -f "$db" ] || { echo "error: database '$db' not found" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
for s in "$@"; do
	printf '%s\n' "$s" >>"$tmp/sweeps"
done
"$LB" report --db "$db" --figure memory --format csv >"$tmp/mem.csv" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; exit 2; }
"$LB" sql --db "$db" --format tsv "SELECT r.id, r.layout_id, r.sweep, l.n_layers, l.vocab,
	l.seq_len, l.micro_batch, l.checkpointing, l.attention, l.norm FROM runs r JOIN layouts l
	ON l.layout_id = r.layout_id WHERE r.source = 'run'" >"$tmp/layouts.tsv" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; exit 2; }
awk -v usable="$usable" -v sweeps="$tmp/sweeps" '
# one CSV line into f[1..n] (RFC 4180 quoting, as the report writes it)
function csv(line, f,   n, i, c, q, cur) {
	n = 0; cur = ""; q = 0
	for (i = 1; i <= length(line); i++) {
		c = substr(line, i, 1)
		if (q) {
			if (c == "\"" && substr(line, i + 1, 1) == "\"") { cur = cur "\""; i++ }
			else if (c == "\"") q = 0
			else cur = cur c
		} else if (c == "\"") q = 1
		else if (c == ",") { f[++n] = cur; cur = "" }
		else cur = cur c
	}
	f[++n] = cur
	return n
}
function gib(mib) { return mib == "" ? "-" : sprintf("%.2f", mib / 1024) }
BEGIN {
	FS = "\t"
	while ((getline s < sweeps) > 0) { want[s] = 1; nwant++ }
}
FILENAME ~ /layouts.tsv$/ { if (FNR > 1) { lay[$1] = $2; info[$2] = $0 }; next }
FNR == 1 { ncol = csv($0, h); for (i = 1; i <= ncol; i++) col[h[i]] = i; next }
{
	csv($0, f)
	id = f[col["run_id"]]; L = lay[id]
	if (L == "") next
	split(info[L], x, "\t")
	if (nwant && !(x[3] in want)) next
	if (!(L in planned)) { order[++nl] = L; planned[L] = f[col["planned_mem_mib"]] }
	if (f[col["status"]] == "ok") {
		ran[L] = 1
		c = f[col["peak_mem_mib"]]
		if (c != "" && (counted[L] == "" || c + 0 > counted[L] + 0)) counted[L] = c
	} else oom[L] = 1
	d = f[col["device_peak_mem_mib"]]
	if (d != "" && (device[L] == "" || d + 0 > device[L] + 0)) device[L] = d
}
END {
	# rows by sweep, then planned memory
	for (i = 1; i <= nl; i++) { split(info[order[i]], x, "\t"); key[i] = sprintf("%s\t%020.3f\t%s", x[3], planned[order[i]], order[i]) }
	for (i = 2; i <= nl; i++) for (j = i; j > 1 && key[j - 1] > key[j]; j--) { t = key[j]; key[j] = key[j - 1]; key[j - 1] = t }
	printf "| sweep | layers | vocab | seq | mbs | checkpointing | attention | norm | planned GiB |"
	if (usable != "") printf " plan (%s GiB) |", usable
	printf " counted GiB | device GiB | device - planned GiB | on the device |\n"
	printf "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |"
	if (usable != "") printf " --- |"
	printf " ---: | ---: | ---: | --- |\n"
	for (i = 1; i <= nl; i++) {
		split(key[i], k, "\t"); L = k[3]; split(info[L], x, "\t")
		outcome = ran[L] ? "ran" : "out of memory"
		diff = (device[L] != "" && planned[L] != "") ? sprintf("%+.2f", (device[L] - planned[L]) / 1024) : "-"
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |", x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], gib(planned[L])
		if (usable != "") {
			fits = planned[L] / 1024 <= usable + 0
			printf " %s |", fits ? "fits" : "oom"
			if (fits != (ran[L] ? 1 : 0)) wrong++
		}
		printf " %s | %s | %s | %s |\n", ran[L] ? gib(counted[L]) : "-", gib(device[L]), diff, outcome
	}
	if (usable != "")
		printf "\n%d layouts: %d planned to fit, %d planned not to; %d wrong verdicts\n", nl, nfit_count(), nl - nfit_count(), wrong
	exit wrong ? 1 : 0
}
function nfit_count(   i, n, k) { n = 0; for (i = 1; i <= nl; i++) { split(key[i], k, "\t"); if (planned[k[3]] / 1024 <= usable + 0) n++ }; return n }
' "$tmp/layouts.tsv" "$tmp/mem.csv"
