#!/bin/sh
# The report looked at in a real browser: Debian's chromium, headless, loads the HTML
# report of three databases (the paper's eight sheets, with Figure 4's sixteen series; the
# published H200 runs, kept though diverged (--keep-diverged, as published), with the phases
# figure and two sequence lengths in one sweep; our
# CPU runs, without a peak) and a script run inside the page (in the test's copy only: the
# report itself has no scripts) reads back what a reader sees. For every figure with runs:
# the page has its heading and its plot; the plot is named for the figure and shows the
# figure's title, a y axis title and an x axis title; the plot is drawn at its own size
# (not shrunk to the page) so that no text is below 10 px; Figure 4 gives each series a
# colour of its own; the phases plot names every run differently. A figure without runs
# says so and has no plot; the memory figure is a table (no plot).
# chromium missing: installed with apt-get when CI=true (as root), else the test skips.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
DATA=${LB_PAPER_DATA:-../shared/paper-data}
MIN_FONT_PX=10

[ -x "$LB" ] || { echo "error: '$LB' not built (make BUILD=$BUILD)"; exit 1; }
command -v "${LB_GNUPLOT:-gnuplot}" >/dev/null 2>&1 ||
	{ echo "gnuplot not installed (apt-get install gnuplot-nox)"; exit 77; }
browser() {
	for b in chromium chromium-browser chromium-headless-shell; do
		command -v "$b" 2>/dev/null && return 0
	done
	return 1
}
CHROMIUM=$(browser)
if [ -z "$CHROMIUM" ] && [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
	echo "installing chromium (CI)"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get install -y -qq --no-install-recommends chromium ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }; } \
		>/dev/null 2>&1
	CHROMIUM=$(browser)
	[ -n "$CHROMIUM" ] || { echo "FAIL: could not install chromium"; exit 1; }
fi
[ -n "$CHROMIUM" ] || { echo "chromium not installed (apt-get install chromium)"; exit 77; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# The page as a browser shows it: chromium loads a copy of it with the probe appended and
# prints the DOM after the load; the probe's findings are the lines of <pre id="probe">.
cat >"$tmp/probe.js" <<'EOF'
<script>
(function () {
	var out = [];
	var sections = document.querySelectorAll('section');
	out.push('page sections=' + sections.length + ' h1=' + document.querySelectorAll('h1').length);
	sections.forEach(function (sec) {
		var h2 = sec.querySelector('h2'), svg = sec.querySelector('svg');
		var head = 'figure ' + sec.id + ' h2=' + (h2 ? h2.textContent : '');
		if (!svg) {
			out.push(head + ' | svg=0 empty=' +
				 (sec.textContent.indexOf('No runs for this figure.') >= 0 ? 1 : 0));
			return;
		}
		var scale = svg.getBoundingClientRect().width / svg.width.baseVal.value;
		var min = 1e9, fills = {};
		svg.querySelectorAll('text').forEach(function (t) {
			var s = t.textContent.trim();
			if (!s)
				return;
			var px = parseFloat(getComputedStyle(t).fontSize) * scale;
			if (px < min)
				min = px;
			out.push('text ' + sec.id + ' ' + s);
		});
		svg.querySelectorAll('path, rect, polygon').forEach(function (p) {
			var f = getComputedStyle(p).fill;
			if (f && f !== 'none' && f !== 'rgb(255, 255, 255)' && f !== 'rgb(0, 0, 0)')
				fills[f] = 1;
		});
		var name = svg.querySelector('title');
		out.push(head + ' | svg=1 scale=' + scale.toFixed(3) + ' minfont=' + min.toFixed(1) +
			 ' fills=' + Object.keys(fills).length + ' name=' + (name ? name.textContent : ''));
	});
	var pre = document.createElement('pre');
	pre.id = 'probe';
	pre.textContent = out.join('\n');
	document.body.appendChild(pre);
})();
</script>
EOF

# look NAME PAGE: load PAGE in chromium; the probe's lines in $tmp/NAME.probe
look() {
	cp "$2" "$tmp/$1.html"
	cat "$tmp/probe.js" >>"$tmp/$1.html"
	mkdir -p "$tmp/profile-$1"
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$tmp/profile-$1" --window-size=1400,1000 --dump-dom \
		"file://$tmp/$1.html" >"$tmp/$1.dom" 2>"$tmp/$1.err"
	rc=$?
	if [ $rc != 0 ] || ! grep -q '</html>' "$tmp/$1.dom"; then
		tail -n 5 "$tmp/$1.err"
		echo "FAIL: $1: chromium did not load the page (exit $rc)"
		fail=1
		return 1
	fi
	# the probe's <pre>, its entities undone
	sed -n '/<pre id="probe">/,/<\/pre>/p' "$tmp/$1.dom" |
		sed -e 's/.*<pre id="probe">//' -e 's/<\/pre>.*//' \
		    -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&quot;/"/g' -e 's/&amp;/\&/g' >"$tmp/$1.probe"
	grep -q '^page sections=[1-9]' "$tmp/$1.probe" || { echo "FAIL: $1: the probe saw no figure"; fail=1; return 1; }
	return 0
}

# check NAME YLABEL: every figure of page NAME, as the probe saw it
check() {
	grep '^figure ' "$tmp/$1.probe" >"$tmp/$1.figs"
	while IFS= read -r line; do
		id=$(echo "$line" | cut -d' ' -f2)
		title=$(echo "$line" | sed -e 's/^figure [^ ]* h2=//' -e 's/ | .*//')
		[ -n "$title" ] || { echo "FAIL: $1 $id: no heading"; fail=1; }
		case "$line" in
		*"| svg=0 empty=1") continue ;; # no runs: said so, no plot
		"figure memory "*"| svg=0"*) continue ;; # a table: peaks against the model
		*"| svg=0"*) echo "FAIL: $1 $id: runs but no plot"; fail=1; continue ;;
		esac
		scale=$(echo "$line" | sed 's/.* scale=\([^ ]*\) .*/\1/')
		minfont=$(echo "$line" | sed 's/.* minfont=\([^ ]*\) .*/\1/')
		name=$(echo "$line" | sed 's/.* name=//')
		awk -v s="$scale" 'BEGIN { exit !(s >= 0.99) }' ||
			{ echo "FAIL: $1 $id: the plot is shrunk to $scale of its size"; fail=1; }
		awk -v m="$minfont" -v want="$MIN_FONT_PX" 'BEGIN { exit !(m >= want) }' ||
			{ echo "FAIL: $1 $id: text of $minfont px (want >= $MIN_FONT_PX)"; fail=1; }
		[ "$name" = "$title" ] || { echo "FAIL: $1 $id: the plot is named '$name'"; fail=1; }
		grep -qxF "text $id $title" "$tmp/$1.probe" ||
			{ echo "FAIL: $1 $id: the plot has no title '$title'"; fail=1; }
		ylabel=$2
		xlabel='per group: model, sequence length, GPUs'
		if [ "$id" = phases ]; then
			ylabel='seconds per step (mean, rank 0)'
			xlabel='run: kernels, checkpointing'
		fi
		grep -qxF "text $id $ylabel" "$tmp/$1.probe" ||
			{ echo "FAIL: $1 $id: no y axis title '$ylabel'"; fail=1; }
		grep "^text $id " "$tmp/$1.probe" | grep -qF "$xlabel" ||
			{ echo "FAIL: $1 $id: no x axis title ('$xlabel')"; fail=1; }
	done <"$tmp/$1.figs"
	n=$(wc -l <"$tmp/$1.figs")
	[ "$n" = 9 ] || { echo "FAIL: $1: $n figures on the page, want 9"; fail=1; }
	echo "$1: $n figures checked"
}

# 1. the paper's sheets
if ls "$DATA"/*.csv >/dev/null 2>&1; then
	"$LB" import --format paper --db "$tmp/paper.db" "$DATA"/*.csv >"$tmp/import.out" 2>&1 ||
		{ cat "$tmp/import.out"; echo "FAIL: import"; exit 1; }
	"$LB" report --db "$tmp/paper.db" --figure all --format html --out "$tmp/paper" 2>/dev/null ||
		{ echo "FAIL: report (paper)"; fail=1; }
	if look paper "$tmp/paper/report.html"; then
		check paper 'MFU [%]'
		# Figure 4: sixteen (TP, PP) series, sixteen colours
		fills=$(sed -n 's/^figure tp-pp .* fills=\([0-9]*\) .*/\1/p' "$tmp/paper.probe")
		[ "${fills:-0}" -ge 16 ] || { echo "FAIL: paper tp-pp: $fills colours for 16 series"; fail=1; }
		# the groups are named by model, sequence length and GPUs, not by file name
		grep -qxF 'text tp-pp 256 GPUs' "$tmp/paper.probe" || { echo "FAIL: paper tp-pp: group names"; fail=1; }
		grep -q '^text tp-pp .*bfloat16' "$tmp/paper.probe" && { echo "FAIL: paper tp-pp: a file name under the axis"; fail=1; }
	fi
else
	echo "note: paper data not found in '$DATA'; its page not checked"
fi

# 2. the published H200 runs: one sweep, two sequence lengths, a repeated layout
"$LB" collect --db "$tmp/h200.db" docs/results/h200/runs >"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect"; exit 1; }
"$LB" report --db "$tmp/h200.db" --keep-diverged --figure all --format html --out "$tmp/h200" 2>/dev/null ||
	{ echo "FAIL: report (h200)"; fail=1; }
if look h200 "$tmp/h200/report.html"; then
	check h200 'MFU [%]'
	# two groups per figure: the two sequence lengths are not set side by side as one
	grep -qxF 'text kernels seq 2048' "$tmp/h200.probe" && grep -qxF 'text kernels seq 8192' "$tmp/h200.probe" ||
		{ echo "FAIL: h200 kernels: the sequence lengths are not two groups"; fail=1; }
	# 162 runs, 162 names (two runs each of two layouts included)
	grep '^text phases .* #[0-9]*$' "$tmp/h200.probe" | sort >"$tmp/runs"
	[ "$(wc -l <"$tmp/runs")" = 162 ] || { cat "$tmp/runs"; echo "FAIL: h200 phases: not 162 run names"; fail=1; }
	[ -z "$(uniq -d "$tmp/runs")" ] || { uniq -d "$tmp/runs"; echo "FAIL: h200 phases: two runs share a name"; fail=1; }
fi

# 3. our CPU runs: no peak, so the y axis is TFLOP/s
mkdir -p "$tmp/cpu-runs"
cp tests/golden/report/runs/*.jsonl "$tmp/cpu-runs/"
"$LB" collect --db "$tmp/cpu.db" "$tmp/cpu-runs" >"$tmp/collect.out" 2>&1 ||
	{ cat "$tmp/collect.out"; echo "FAIL: collect (cpu)"; exit 1; }
"$LB" report --db "$tmp/cpu.db" --figure all --format html --out "$tmp/cpu" 2>/dev/null ||
	{ echo "FAIL: report (cpu)"; fail=1; }
look cpu "$tmp/cpu/report.html" && check cpu 'TFLOP/s per GPU (model FLOPs)'

[ $fail = 0 ] && echo "report_browser: all checks passed ($("$CHROMIUM" --version 2>/dev/null | head -n 1))"
exit $fail
