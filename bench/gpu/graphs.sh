#!/bin/sh
# One device call: the trainer with CUDA graphs, checked, then timed beside the PyTorch
# peer, and the attention variants at seq 2048. In this order, each part within a budget
# (the whole call ends before LB_GRAPHS_BUDGET_S seconds, default 525: a part that no longer
# fits is skipped and says so in the table):
#
#  1. checks: build/tests/test_gpu_ops (every kernel against the fp64 reference; AdamW's
#     device scalars; graph segments captured, replayed and dropped), TESTS=gpu_train with
#     graphs off and on (LAYOUTBENCH_CUDA_GRAPHS; the trainer on the GPU follows the CPU),
#     TESTS=gpu_graphs (graphs on against off for every checkpointing mode, and tp 2 and 4,
#     pp, dp with ZeRO-1 and 2 as ranks sharing the GPU through the staged communicator,
#     against graphs off, one GPU rank and the CPU). Meanwhile, in the background, the
#     PyTorch peer compiles its strongest recipe's two settings once (global batch 1, two
#     steps) so that their timed runs later find torch.compile's caches warm; the timed
#     parts wait for it to end;
#  2. train: our trainer with --cuda-graphs 0 and 1 at seq 2048 (global batch 16) and seq
#     8192 (global batch 4), micro-batch 1, Llama-13B width cut to 8 layers, vocabulary
#     32000, cudnn attention, fused norm, lr 1e-4, 3 warm-up and 8 timed steps, the losses
#     checked finite and falling; with graphs, every rank must say it captured and
#     replayed, and no capture may have failed;
#  3. peer: bench/peer_torch.py compiled with its bf16 recipe (bf16 parameters and
#     gradients, fp32 master copy: the strongest) at both settings, lr 1e-4, the same steps;
#     ours and the peer read one token file (`peer_torch.py --make-data`: a Markov chain,
#     so that both losses fall) where python3 has torch to write it;
#  4. tp: tp 2 and tp 4 as ranks on the one GPU (staged), graphs 0 and 1 (4 layers, global
#     batch 4, seq 2048): the compute time (forward + backward less the host-timed
#     collectives) is where graphs show;
#  5. sweep: build/bench/bench_attn (cuDNN's attention at one sequence of 2048 tokens, 40
#     heads of 128: every graph variant and engine configuration, checked and timed, for
#     up to a minute; the fastest, and what the trainer's plans reach);
#  6. peer, its autocast recipe at both settings (compiled cold);
#  7. sweep-alt: the sweep again with PyTorch's own cuDNN (LB_ALT_CUDNN, or found in its
#     venv), when there is time.
#
# Prints a table last: each part's seconds and result; per run the step time (mean and
# std of the timed steps), MFU by the paper's count (PaLM, 6N + 12 L h s, N with the
# embedding) and without the input embedding (Megatron's and torchtitan's), the "gaps" (the
# step's wall time less its forward, backward and optimizer GPU times: where the GPU waited
# for the host), what the graphs did, peak memory, the losses; our graphs-on step against
# the peer's recipes (ours / theirs, step time). Writes four files under $OUT (or
# $BUILD/graphs): table.txt (the table), sweep.log (bench_attn's lines), runs.tsv (one row
# per run), clocks.tsv (per run of ours and the peer: the SM clock and board power that
# nvidia-smi read every 200 ms while the GPU was busy, and the clock-event reasons seen),
# logs.tgz (every log and run log). Exit 0 when every part that ran passed.
#
# Env: BUILD (default build), OUT, LB_GRAPHS_BUDGET_S (525), LB_GRAPHS_PARTS (default
# "checks sweep train tp peer sweep-alt"; any subset, run in the order above), LB_ALT_CUDNN (a
# directory with another libcudnn.so.9 for sweep-alt). Runs from the repository root with
# the binaries already built (no compiler needed).
set -u
BUILD=${BUILD:-build}
OUTD=${OUT:-$BUILD/graphs}
BUDGET=${LB_GRAPHS_BUDGET_S:-525}
PARTS=${LB_GRAPHS_PARTS:-checks sweep train tp peer sweep-alt}
TRAIN="$BUILD/layoutbench-train"
. "$(dirname "$0")/env.sh"
mkdir -p "$OUTD" || exit 1
work=$(mktemp -d) || exit 1
logs="$work/logs"
mkdir -p "$logs"
rows="$work/parts.tsv" runs="$work/runs.tsv"
: >"$rows"
: >"$runs"
t_start=$(date +%s)
deadline=$((t_start + BUDGET))
RESERVE=15 # for the table and the tarball
rc=0
bg=

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
left() { echo $((deadline - RESERVE - $(date +%s))); }
# limit WANT MIN: seconds a command may take (WANT, or what is left), or nothing when less
# than MIN is left
limit() {
	l=$(left)
	[ "$l" -ge "$2" ] || return 1
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
part() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$rows"; }
skip() { part "$1" 0 "skipped: $2"; }

timeout 30 nvidia-smi -L >"$logs/device.txt" 2>&1
timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv \
	>>"$logs/device.txt" 2>&1
date -u '+%Y-%m-%d %H:%M:%S UTC' >>"$logs/device.txt"
git rev-parse --short=12 HEAD >>"$logs/device.txt" 2>/dev/null
# the SM clock and the board power while a run is timed: whether the kernels, timed one
# at a time elsewhere, run slower back to back because the clock falls (its reasons: the
# power cap is bit 0x4, thermal 0x20/0x40)
smi_q="timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
timeout 20 nvidia-smi --query-gpu="$smi_q" --format=csv,noheader,nounits >/dev/null 2>&1 ||
	smi_q="timestamp,clocks.sm,power.draw,temperature.gpu"
smi_pid=
smi_start() { # FILE
	smi_pid=
	command -v nvidia-smi >/dev/null 2>&1 || return 0
	nvidia-smi --query-gpu="$smi_q" --format=csv,noheader,nounits -lms 200 >"$1" 2>/dev/null &
	smi_pid=$!
}
smi_stop() { # NAME G FILE: a row of clocks.tsv from the busy samples (power above 40% of
	# the largest read in the run)
	[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null && wait "$smi_pid" 2>/dev/null
	smi_pid=
	[ -s "$3" ] || return 0
	awk -F ', *' -v name="$1" -v g="$2" '
		$2 + 0 > 0 { n++; clk[n] = $2 + 0; pw[n] = $3 + 0; tmp[n] = $4 + 0; why[n] = $5
			if ($3 + 0 > pmax) pmax = $3 + 0 }
		function med(a, m,   i, j, t, b) { for (i = 1; i <= m; i++) b[i] = a[i]
			for (i = 2; i <= m; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--)
				b[j + 1] = b[j]; b[j + 1] = t }
			return m % 2 ? b[(m + 1) / 2] : (b[m / 2] + b[m / 2 + 1]) / 2 }
		END { m = 0; capped = 0; reasons = ""
			for (i = 1; i <= n; i++) if (pw[i] > 0.4 * pmax) { m++; c[m] = clk[i]; p[m] = pw[i]
				t[m] = tmp[i]; if (why[i] != "" && why[i] !~ /^0x0+$/) {
					if (index(" " reasons " ", " " why[i] " ") == 0) reasons = reasons " " why[i] }
				if (why[i] ~ /^0x/ && substr(why[i], length(why[i]), 1) ~ /[4567cdefCDEF]/) capped++ }
			if (!m) exit
			lo = c[1]; for (i = 1; i <= m; i++) if (c[i] < lo) lo = c[i]
			printf "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%s\n", name, g, m, med(c, m), lo,
				med(p, m), med(t, m), capped, reasons == "" ? "-" : substr(reasons, 2) }' \
		"$3" >>"$work/clocks.tsv"
}
have_torch=0
timeout 90 python3 -c 'import torch' 2>/dev/null && have_torch=1
recipe_flag=0
[ "$have_torch" = 1 ] && timeout 90 python3 bench/peer_torch.py --help 2>/dev/null |
	grep -q -- '--recipe' && recipe_flag=1
# one token file for both sides (a Markov chain, so that both losses fall: the peer's
# default uniform random ids leave its loss flat), where the peer can write it; else each
# side its own data, and the table says so
data_ours= data_peer= data_said="each side its own data (ours: the synthetic stream; the peer: uniform random ids)"
if [ "$have_torch" = 1 ] && timeout 120 python3 bench/peer_torch.py --make-data "$work/tokens.u16" \
	--vocab 32000 --data-tokens 400000 >"$logs/make-data.log" 2>&1; then
	data_ours="--data $work/tokens.u16 --data-dtype u16" data_peer="--data $work/tokens.u16"
	data_said="both sides on one token file (bench/peer_torch.py --make-data: 400000 ids of a Markov chain over 32000)"
fi
export TORCHINDUCTOR_CACHE_DIR="$work/inductor" TORCHINDUCTOR_FX_GRAPH_CACHE=1
export TORCHINDUCTOR_AUTOGRAD_CACHE=1

model="--model llama-13b --layers 8 --vocab 32000"
# the peer's settings, one a line: recipe_seq_gbs (the strongest recipe first)
peer_sets() {
	if [ "$recipe_flag" = 1 ]; then
		printf '%s\n' bf16_2048_16 bf16_8192_4 autocast_2048_16 autocast_8192_4
	else
		printf '%s\n' -_2048_16 -_8192_4
	fi
}
peer_args() { [ "$1" = - ] || printf -- '--recipe %s' "$1"; }
# the settings run first (and compiled once during the checks): the strongest recipe's
peer_first() { if [ "$recipe_flag" = 1 ]; then peer_sets | grep '^bf16'; else peer_sets; fi; }

# 1. checks, with the peer's compile warm-up in the background
if has peer && [ "$have_torch" = 1 ]; then
	(
		for s in $(peer_first); do
			set -- $(echo "$s" | tr '_' ' ')
			timeout -k 10 200 python3 bench/peer_torch.py --mode compile $(peer_args "$1") \
				$data_peer --seq-len "$2" --global-batch 1 --micro-batch 1 --steps 2 --warmup 1 \
				--lr 1e-4 >"$logs/peer-warm-$1-$2.log" 2>&1 &
			echo $! >"$work/warm.pid"
			wait $!
		done
	) &
	bg=$!
fi
if has checks; then
	t0=$(date +%s)
	if lim=$(limit 150 30); then
		timeout -k 10 "$lim" "$BUILD/tests/test_gpu_ops" >"$logs/test_gpu_ops.log" 2>&1
		st=$?
		[ "$st" = 0 ] || rc=1
		part "checks: test_gpu_ops" "$(($(date +%s) - t0))" \
			"exit $st: $(grep -E '^\[  (PASSED|FAILED)' "$logs/test_gpu_ops.log" | tr '\n' ' ')"
	else
		skip "checks: test_gpu_ops" "no time"
	fi
	# gpu_train with graphs off and on (LAYOUTBENCH_CUDA_GRAPHS), then gpu_graphs
	for t in gpu_train:0 gpu_train:1 gpu_graphs:0; do
		test=${t%:*} g=${t#*:}
		name="checks: TESTS=$test"
		[ "$test" = gpu_train ] && name="$name, graphs $g"
		log="$logs/tests-$test-$g.log"
		t0=$(date +%s)
		if lim=$(limit 240 60); then
			LAYOUTBENCH_CUDA_GRAPHS=$g BUILD=$BUILD TESTS=$test LB_REQUIRE_GPU=1 LB_FUZZ=0 \
				timeout -k 10 "$lim" sh tests/run.sh >"$log" 2>&1
			st=$?
			cp "$BUILD/test-logs/$test.log" "$logs/$test-$g-detail.log" 2>/dev/null
			[ "$st" = 0 ] || rc=1
			part "$name" "$(($(date +%s) - t0))" "exit $st: $(tail -n 1 "$log")"
		else
			skip "$name" "no time"
		fi
	done
fi

# 2. the attention sweep
sweep() { # name extra-env...
	name=$1
	shift
	t0=$(date +%s)
	if lim=$(limit 80 45); then
		env "$@" timeout -k 10 "$lim" "$BUILD/bench/bench_attn" --max-s $((lim - 20)) \
			>"$logs/$name.log" 2>&1
		st=$?
		[ "$st" = 0 ] || rc=1
		tr=$(awk -F '\t' '/^TRAINER/ { print $5 }' "$logs/$name.log")
		be=$(awk -F '\t' '/^BEST\tfwd\+bwd/ { print $4 " (fwd " f ", bwd " b ")" }
			/^BEST\tforward/ { f = $4 " by " $5 } /^BEST\tbackward/ { b = $4 " by " $5 }' \
			"$logs/$name.log")
		part "$name: attention S2048 nh40 D128" "$(($(date +%s) - t0))" \
			"exit $st; trainer's plans ${tr:-?}; fastest ${be:-?}"
	else
		skip "$name" "no time"
	fi
}
# the background warm-up must not share the GPU with the timed runs
if [ -n "$bg" ]; then
	t0=$(date +%s)
	while kill -0 "$bg" 2>/dev/null && [ "$(left)" -gt 200 ]; do sleep 2; done
	if kill -0 "$bg" 2>/dev/null; then
		kill "$bg" 2>/dev/null                          # no next setting
		kill "$(cat "$work/warm.pid" 2>/dev/null)" 2>/dev/null # the one compiling
		part "peer compile warm-up" "$(($(date +%s) - t0))" "stopped (no time left to wait)"
	else
		part "peer compile warm-up (waited)" "$(($(date +%s) - t0))" \
			"$(grep -h '^peer=' "$logs"/peer-warm-*.log 2>/dev/null | wc -l) of $(peer_first | wc -l) settings compiled"
	fi
	wait "$bg" 2>/dev/null
	bg=
fi

# one run of ours -> a row of runs.tsv: name graphs dir (stderr in dir.err)
V=32000 H=5120 N=2865320960 L=8
ours() {
	name=$1 g=$2 d=$3 ranks=$4
	shift 4
	t0=$(date +%s)
	if ! lim=$(limit 180 50); then
		skip "$name graphs $g" "no time"
		return
	fi
	rm -rf "$d"
	smi_start "$d.smi"
	timeout -k 10 "$lim" "$TRAIN" "$@" --device cuda --quiet --cuda-graphs "$g" --run-dir "$d" \
		>"$d.out" 2>"$d.err"
	st=$?
	smi_stop "$name" "$g" "$d.smi"
	gr=$(grep -h "cuda graphs:" "$d.err" | head -n 1 | sed 's/.*cuda graphs: //')
	row=$(awk -v name="$name" -v g="$g" -v st="$st" -v V="$V" -v H="$H" -v gr="${gr:--}" \
		-v ranks="$ranks" '
		function num(key,   r) { if (match($0, "\"" key "\":[-0-9.eE+]+")) {
			r = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3); return r + 0 }
			return -1 }
		/"type":"header"/ { flops = num("flops_per_step"); peak = num("peak_tflops")
			tok = num("tokens_per_step") }
		/"type":"step"/ { loss[++n] = num("loss"); mem = num("peak_mem_bytes")
			if ($0 ~ /"warmup":false/) { t = num("time_s"); s += t; ss += t * t; c++
				f = num("forward_s"); b = num("backward_s"); o = num("optimizer_s")
				ph += (f > 0 ? f : 0) + (b > 0 ? b : 0) + (o > 0 ? o : 0)
				comp += (f > 0 ? f : 0) + (b > 0 ? b : 0); cm = num("comm_exposed_s")
				if (cm > 0) comm += cm } }
		/"type":"end"/ { cls = $0; sub(/.*"status":"/, "", cls); sub(/".*/, "", cls) }
		END {
			ok = (st == 0 && cls == "ok" && c > 0 && loss[n] == loss[n] && loss[n] < loss[1])
			if (!ok) { printf "%s\t%s\tFAIL(exit %s, %s, losses %s -> %s)\n", name, g, st, cls,
				loss[1], loss[n]; exit }
			m = s / c; sd = (c > 1) ? sqrt((ss - c * m * m) / (c - 1)) : 0; if (sd != sd) sd = 0
			# ranks sharing the one GPU: no MFU against the peak of that GPU
			noemb = flops - 6 * V * H * tok
			mf = (ranks > 1 || flops <= 0) ? "-" : sprintf("%.2f", 100 * flops / m / (peak * 1e12))
			me = (ranks > 1 || flops <= 0) ? "-" : sprintf("%.2f", 100 * noemb / m / (peak * 1e12))
			printf "%s\t%s\t%.4f\t%.4f\t%s\t%s\t%.1f\t%.4f\t%.4f\t%.1f\t%.4f->%.4f\t%s\n",
				name, g, m, sd, mf, me, 1000 * (m - ph / c), comp / c, comm / c,
				mem / 1073741824, loss[1], loss[n], gr }' "$d"/run-*.jsonl 2>/dev/null)
	[ -n "$row" ] || row=$(printf '%s\t%s\tFAIL(exit %s, no run log)' "$name" "$g" "$st")
	printf '%s\n' "$row" >>"$runs"
	case "$row" in *FAIL*) rc=1 ;; esac
	# every rank captured and replayed, and no capture failed
	if [ "$g" = 1 ] && { [ "$(grep -c 'cuda graphs:' "$d.err")" != "$ranks" ] ||
		grep -q 'warning: CUDA graph' "$d.err"; }; then
		rc=1
		part "$name graphs 1" "-" "FAIL: graphs not used on every rank, or a capture failed: $(grep -h 'CUDA graph' "$d.err" | head -n 1)"
	fi
	part "$name graphs $g" "$(($(date +%s) - t0))" "exit $st"
}

# the peer: one compiled run per setting given (recipe_seq_gbs)
peer_runs() {
	for s in "$@"; do
		set -- $(echo "$s" | tr '_' ' ')
		name="torch $1 compile s$2 gbs$3"
		[ "$1" = - ] && name="torch autocast compile s$2 gbs$3"
		t0=$(date +%s)
		if ! lim=$(limit 200 45); then
			skip "$name" "no time"
			continue
		fi
		smi_start "$logs/peer-$1-$2.smi"
		timeout -k 10 "$lim" python3 bench/peer_torch.py --mode compile $(peer_args "$1") \
			$data_peer --seq-len "$2" --global-batch "$3" --micro-batch 1 --steps 11 --warmup 3 \
			--lr 1e-4 >"$logs/peer-$1-$2.log" 2>&1
		st=$?
		smi_stop "$name" - "$logs/peer-$1-$2.smi"
		line=$(grep '^peer=' "$logs/peer-$1-$2.log" | tail -n 1)
		row=$(echo "$line" | awk -v name="$name" -v st="$st" -v N="$N" -v V="$V" -v H="$H" \
			-v L="$L" -v S="$2" '
			function f(k,   r) { r = $0; if (!match(r, k "=[^ ]*")) return ""
				return substr(r, RSTART + length(k) + 1, RLENGTH - length(k) - 1) }
			{ t = f("step_s"); if (t == "" || t + 0 <= 0 || f("status") != "") {
				printf "%s\t-\tFAIL(exit %s, %s)\n", name, st, $0 == "" ? "no peer= line" : $0
				exit }
			  peak = 989e12; tok = f("tokens_per_s") + 0
			  paper = 6 * N + 12 * L * H * S; noemb = paper - 6 * V * H
			  printf "%s\t-\t%.4f\t%s\t%.2f\t%.2f\t-\t-\t-\t%s\t%s->%s\t-\n", name, t,
				f("std_s"), 100 * tok * paper / peak, 100 * tok * noemb / peak,
				f("peak_mem_gib"), f("loss_first"), f("loss_last") }')
		printf '%s\n' "$row" >>"$runs"
		case "$row" in *FAIL*) rc=1 ;; esac
		part "$name" "$(($(date +%s) - t0))" "exit $st"
	done
}
peer_part() { # which: first (the strongest recipe) or rest
	has peer || return 0
	if [ "$have_torch" != 1 ]; then
		[ "$1" = first ] && skip "peer" "python3 has no torch"
		return 0
	fi
	if [ "$recipe_flag" != 1 ]; then
		[ "$1" = first ] && part "peer" "-" "bench/peer_torch.py has no --recipe: its one recipe (autocast) only" &&
			peer_runs $(peer_sets)
		return 0
	fi
	if [ "$1" = first ]; then
		peer_runs $(peer_first)
	else
		peer_runs $(peer_sets | grep -v '^bf16')
	fi
}

# 3. our trainer, graphs 0 and 1, side by side
if has train; then
	for set in "2048 16" "8192 4"; do
		set -- $set
		for g in 0 1; do
			ours "ours s$1 gbs$2" "$g" "$work/s$1-g$g" 1 $model --seq-len "$1" \
				--global-batch "$2" --micro-batch 1 --attention cudnn --norm fused \
				--lr 1e-4 --steps 11 --warmup 3 $data_ours
		done
	done
fi

# 4. the peer's strongest recipe, then tensor parallelism as ranks on the one GPU, then
# the peer's other recipe
peer_part first

if has tp; then
	for tp in 2 4; do
		for g in 0 1; do
			ours "tp$tp staged 4 layers s2048 gbs4" "$g" "$work/tp$tp-g$g" "$tp" \
				--model llama-13b --layers 4 --vocab 32000 --seq-len 2048 \
				--global-batch 4 --micro-batch 1 --attention cudnn --norm fused \
				--lr 1e-4 --steps 6 --warmup 2 --tp "$tp" --nproc-per-node "$tp" \
				--gpu-comm staged
		done
	done
fi
has sweep && sweep sweep
peer_part rest


# 6. the sweep with PyTorch's cuDNN
if has sweep-alt; then
	alt=${LB_ALT_CUDNN:-}
	[ -z "$alt" ] && [ "$have_torch" = 1 ] &&
		alt=$(timeout 60 python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
	if [ -n "$alt" ] && [ -f "$alt/libcudnn.so.9" ]; then
		sweep sweep-alt LD_LIBRARY_PATH="$alt:${LD_LIBRARY_PATH:-}"
	else
		skip "sweep-alt" "no other libcudnn.so.9 (LB_ALT_CUDNN)"
	fi
fi
if [ -n "$bg" ]; then # the warm-up, when no timed part waited for it
	kill "$bg" 2>/dev/null
	kill "$(cat "$work/warm.pid" 2>/dev/null)" 2>/dev/null
	wait "$bg" 2>/dev/null
fi

# the table
{
	echo "CUDA graphs, one device call: $(head -n 1 "$logs/device.txt"), $(tail -n 2 "$logs/device.txt" | tr '\n' ' ')"
	echo "data: $data_said"
	echo
	printf '%-58s %5s  %s\n' part s result
	awk -F '\t' '{ printf "%-58s %5s  %s\n", $1, $2, $3 }' "$rows"
	echo
	printf '| %-34s | %1s | %7s | %6s | %5s | %6s | %6s | %8s | %7s | %5s | %-15s | %s\n' \
		run g "step s" "std s" "MFU%" "MFU%-e" "gaps ms" "compute" "comm s" GiB loss "graphs"
	while IFS='	' read -r n g t sd mfu mfue gaps comp comm mem loss gr; do
		case "$t" in FAIL*) printf '| %-34s | %1s | %s\n' "$n" "$g" "$t"; continue ;; esac
		printf '| %-34s | %1s | %7s | %6s | %5s | %6s | %6s | %8s | %7s | %5s | %-15s | %s\n' \
			"$n" "$g" "$t" "$sd" "$mfu" "$mfue" "$gaps" "$comp" "$comm" "$mem" "$loss" "$gr"
	done <"$runs"
	echo
	echo "MFU%: the paper's count (6N + 12 L h s, N with the embedding); MFU%-e: without the input"
	echo "embedding; gaps: wall time less the GPU time of forward, backward and optimizer; compute:"
	echo "forward + backward GPU time less the host-timed collectives (s per step)"
	if [ -s "$work/clocks.tsv" ]; then
		echo
		printf '| %-34s | %1s | %7s | %6s | %6s | %5s | %4s | %6s | %s\n' run g samples \
			"SM MHz" "lowest" W "degC" capped reasons
		awk -F '\t' '{ printf "| %-34s | %1s | %7s | %6s | %6s | %5s | %4s | %6s | %s\n", $1, $2,
			$3, $4, $5, $6, $7, $8, $9 }' "$work/clocks.tsv"
		echo
		echo "clocks: nvidia-smi every 200 ms while the run drew over 40% of its largest power;"
		echo "SM MHz and W medians; capped: samples whose clock-event reasons hold the power cap (0x4)"
	fi
	awk -F '\t' '
		$1 ~ /^ours s/ && $2 == 1 && $3 + 0 > 0 { split($1, a, " "); ours[a[2]] = $3 }
		$1 ~ /^ours s/ && $2 == 0 && $3 + 0 > 0 { split($1, a, " "); off[a[2]] = $3 }
		$1 ~ /^torch / && $3 + 0 > 0 { split($1, a, " "); peer[a[2] " " a[4]] = $3 }
		END {
			for (k in off) if (k in ours)
				printf "graphs at %s: %.4f -> %.4f s a step (%.2f%% faster)\n", k, off[k],
					ours[k], 100 * (off[k] / ours[k] - 1)
			for (k in peer) { split(k, b, " "); if (b[2] in ours)
				printf "ours (graphs 1) / torch %s compile at %s: %.3fx\n", b[1], b[2],
					peer[k] / ours[b[2]] } }' "$runs" | sort
} >"$work/table.txt"
cp "$work/table.txt" "$OUTD/table.txt"
cp "$runs" "$OUTD/runs.tsv"
[ -s "$work/clocks.tsv" ] && cp "$work/clocks.tsv" "$OUTD/clocks.tsv"
[ -f "$logs/sweep.log" ] && cp "$logs/sweep.log" "$OUTD/sweep.log"
for d in "$work"/s*-g* "$work"/tp*-g*; do
	[ -d "$d" ] && cp "$d"/run-*.jsonl "$logs/$(basename "$d").jsonl" 2>/dev/null
	[ -f "$d.err" ] && cp "$d.err" "$logs/$(basename "$d").err"
	[ -f "$d.smi" ] && cp "$d.smi" "$logs/$(basename "$d").smi"
done
cp -r "$BUILD/test-logs" "$logs/test-logs" 2>/dev/null
tar -czf "$OUTD/logs.tgz" -C "$work" logs 2>/dev/null
rm -rf "$work"
echo
cat "$OUTD/table.txt"
exit "$rc"
