#!/bin/sh
# Every shipped spec (sweeps/specs/*.json) plans in every format; every rejected layout
# carries a reason; the embedded copy of a spec (plan NAME) plans like the file; the
# required specs exist; bad invocations fail with the right exit status.
BUILD=${BUILD:-build}
LB="$BUILD/layoutbench"
if [ ! -x "$LB" ]; then
	echo "plan_specs: $LB is not built (make BUILD=$BUILD all)"
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
for name in paper-13b-2k paper-13b-8k paper-30b-2k paper-30b-8k paper-65b-2k paper-13b-2k-sp \
	paper-13b-8k-sp paper-30b-2k-sp paper-30b-8k-sp quickstart h200-1gpu h200-attention h200-1gpu-memory \
	memory-boundary; do
	[ -f "sweeps/specs/$name.json" ] || { echo "FAIL: sweeps/specs/$name.json is missing"; fail=1; }
done
n=0
for spec in sweeps/specs/*.json; do
	name=$(basename "$spec" .json)
	n=$((n + 1))
	for fmt in table csv json; do
		if ! "$LB" plan "$spec" --format "$fmt" >"$tmp/$name.$fmt" 2>"$tmp/$name.$fmt.err"; then
			echo "FAIL: plan $spec --format $fmt:"
			cat "$tmp/$name.$fmt.err"
			fail=1
		fi
	done
	# csv: every row's status is ok, oom (with a reason) or invalid: <reason>
	awk -v spec="$spec" '
	function split_csv(line, out,    n, i, c, q, f) {
		n = 0; f = ""; q = 0
		for (i = 1; i <= length(line); i++) {
			c = substr(line, i, 1)
			if (q) { if (c == "\"") { if (substr(line, i + 1, 1) == "\"") { f = f c; i++ } else q = 0 } else f = f c }
			else if (c == "\"") q = 1
			else if (c == ",") { out[++n] = f; f = "" }
			else f = f c
		}
		out[++n] = f
		return n
	}
	NR == 1 {
		if ($0 !~ /^id,model,seq_len,global_batch,gpus,micro_batch,tp,pp,dp,sequence_parallel,zero_stage,checkpointing,attention,norm,mem_gib,status(,|$)/) {
			print "FAIL: " spec ": csv header: " $0; bad = 1
		}
		next
	}
	{
		n = split_csv($0, f)
		st = f[16]; reason = f[18]
		if (st == "ok") ok++
		else if (st == "oom" && reason ~ /^needs [0-9.]+ GiB of [0-9.]+ GiB$/) oom++
		else if (st ~ /^invalid: ./) inv++
		else { print "FAIL: " spec ": line " NR ": status \"" st "\" reason \"" reason "\""; bad = 1 }
		if (f[1] !~ /^[0-9a-f]+$/ || length(f[1]) != 16) { print "FAIL: " spec ": line " NR ": id " f[1]; bad = 1 }
		if (seen[f[1]]++) { print "FAIL: " spec ": line " NR ": id " f[1] " listed twice"; bad = 1 }
	}
	END {
		if (NR < 2) { print "FAIL: " spec ": no layouts"; bad = 1 }
		printf "%s: %d ok, %d oom, %d invalid\n", spec, ok, oom, inv
		exit bad
	}' "$tmp/$name.csv" || fail=1
	# the summary line agrees with the rows
	grep -q "^plan '$name': [0-9]* layouts: " "$tmp/$name.csv.err" ||
		{ echo "FAIL: $spec: no summary on stderr"; fail=1; }
	grep -q "^plan '$name': " "$tmp/$name.table" || { echo "FAIL: $spec: no summary in the table"; fail=1; }
	# the embedded copy plans like the file
	if ! "$LB" plan "$name" --format csv >"$tmp/$name.embedded" 2>/dev/null ||
		! cmp -s "$tmp/$name.csv" "$tmp/$name.embedded"; then
		echo "FAIL: 'plan $name' (embedded) differs from 'plan $spec' (rebuild to refresh the embedded copy)"
		fail=1
	fi
done
[ $n -ge 11 ] || { echo "FAIL: only $n specs"; fail=1; }
# stdin
"$LB" plan - --format csv <sweeps/specs/quickstart.json >"$tmp/stdin.csv" 2>/dev/null &&
	cmp -s "$tmp/stdin.csv" "$tmp/quickstart.csv" || { echo "FAIL: plan - (stdin)"; fail=1; }
# usage and spec errors
"$LB" plan >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: plan without a spec should exit 2"; fail=1; }
"$LB" plan quickstart --format xml >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: --format xml should exit 2"; fail=1; }
"$LB" plan quickstart --bogus >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: an unknown option should exit 2"; fail=1; }
printf '{"name": "x", "model": "tiny", "grid": {"tp": [1, "two"]}}' >"$tmp/bad.json"
"$LB" plan "$tmp/bad.json" >/dev/null 2>"$tmp/bad.err"
[ $? = 1 ] || { echo "FAIL: a bad spec should exit 1"; fail=1; }
grep -q "^error: $tmp/bad.json: grid.tp\[1\]: expected a positive integer, got \"two\"$" "$tmp/bad.err" ||
	{ echo "FAIL: bad spec message: $(cat "$tmp/bad.err")"; fail=1; }
"$LB" plan no-such-spec >/dev/null 2>"$tmp/none.err"
[ $? = 1 ] && grep -q "'no-such-spec': no such file" "$tmp/none.err" ||
	{ echo "FAIL: unknown spec name: $(cat "$tmp/none.err")"; fail=1; }
[ $fail = 0 ] && echo "all $n shipped specs plan"
exit $fail
