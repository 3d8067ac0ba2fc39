#!/bin/sh
# One rule for sweep names, applied when the spec is read: '.', '..', '-rf', '.hidden'
# are refused by plan, plan --render and submit alike, with the same message, and the
# failed submit leaves no database (so no sweep row); a name the rule allows passes all
# three. The rule itself: lb_sweep_name_check (common/util.h, test_common_util).
set -u
. tests/sh/lib/cli_tmp.sh
spec() { # name
	printf '{"name": "%s", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8}, "cluster": {"device": "cpu"}}\n' "$1" >s.json
}
for n in . .. -rf .hidden; do
	spec "$n"
	want="error: s.json: name: sweep name '$n' starts with '$(printf '%.1s' "$n")': a sweep name is 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or a digit"
	for cmd in "plan s.json" "plan s.json --render scripts" "submit s.json --executor local --db x.db"; do
		# shellcheck disable=SC2086 # the command and its flags
		"$LB" $cmd >out 2>err
		rc=$?
		[ $rc = 1 ] || { echo "FAIL: name '$n': '$cmd' exited $rc"; fail=1; }
		[ "$(cat err)" = "$want" ] || { echo "FAIL: name '$n': '$cmd' said '$(cat err)', want '$want'"; fail=1; }
	done
	for f in x.db scripts runs; do
		[ ! -e "$f" ] || { echo "FAIL: name '$n': a refused spec left '$f'"; fail=1; rm -rf "$f"; }
	done
done
spec "a..b-c"
"$LB" plan s.json >/dev/null 2>err || { echo "FAIL: 'a..b-c' refused by plan: $(cat err)"; fail=1; }
"$LB" plan s.json --render scripts >/dev/null 2>err ||
	{ echo "FAIL: 'a..b-c' refused by --render: $(cat err)"; fail=1; }
"$LB" submit s.json --executor local --dry-run --db x.db >/dev/null 2>err ||
	{ echo "FAIL: 'a..b-c' refused by submit: $(cat err)"; fail=1; }
exit $fail
