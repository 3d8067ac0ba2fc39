#!/bin/sh
# Successive halving end to end through one executor (LB_HALVING_EXECUTOR: local, the
# default, needs no Slurm; halving_slurm.sh and halving_rest.sh run this with slurm and
# rest against the single-node cluster of scripts/slurm-local.sh), with the CPU trainer:
#   1. known speeds: of four layouts two run at full speed and two at about a tenth (the
#      test's trainer wrapper lets their trainer run one part in ten of the time: the
#      tiny model's layouts differ by less than a shared 2-core machine's noise, which
#      moves a run by up to 50%); the slow two are dropped at rung 0 as slower beyond
#      noise, a fast one is the fastest on the last rung; the report and the views show
#      the rungs and the cost;
#   2. equal layouts (four layouts that do the same work: the norm kernel and ZeRO stage
#      at dp 1) run side by side on every rung: none is dropped, all reach the last rung,
#      and none differs from the fastest there;
#   3. failures: an out-of-memory layout and one whose trainer cannot start are dropped at
#      rung 0 with their classes, the others go on to the end;
#   4. resuming: submit --wait is killed once rung 1 is submitted; `status --wait` follows
#      the halving to its end, with one job per layout and rung; a plain submit meanwhile
#      is refused, a submit --halving again follows the running one.
# The margin (--margin 0.5) is this machine's noise between two runs of one layout.
set -u
BUILD=${BUILD:-build}
EXECUTOR=${LB_HALVING_EXECUTOR:-local}
ROOT=$(pwd)
LB="$ROOT/$BUILD/layoutbench"
TRAIN="$ROOT/$BUILD/layoutbench-train"
unset SLURM_JWT LAYOUTBENCH_TRAIN LAYOUTBENCH_DB LAYOUTBENCH_MEM_LIMIT

if [ "$EXECUTOR" != local ]; then
	# shellcheck disable=SC1091
	. "$ROOT/tests/sh/lib/need_slurm.sh"
	if [ "$EXECUTOR" = rest ] && [ -z "${SLURMRESTD_URL:-}" ]; then
		echo "$skip"
		exit 77
	fi
fi
[ -x "$LB" ] && [ -x "$TRAIN" ] || { echo "no $LB or $TRAIN (make BUILD=$BUILD first)"; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 (the shell) is not installed"; exit 77; }

W=$(mktemp -d /tmp/lb-halving-$EXECUTOR.XXXXXX)
trap '"$LB" cancel --db "$W/h.db" >/dev/null 2>&1; [ -n "${LB_KEEP:-}" ] || rm -rf "$W"' EXIT
cd "$W" || exit 1
DB="$W/h.db"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
q() { sqlite3 -cmd ".timeout 10000" "$DB" "$1"; } # a worker may hold a write lock a moment
T0=$(date +%s)
lap() { echo "  ($(($(date +%s) - T0)) s) $*"; }
SUB="--executor $EXECUTOR --db $DB --runs $W/runs --margin 0.5 --min-steps 8 --quiet"

# the trainer as the test wants it: micro-batch 1 and 2 slowed to about a tenth (its
# trainer stopped 9 parts in 10 of the time) where the file 'slow' says so; micro-batch 2
# out of memory and 4 unable to start where the fault files say so
cat >"$W/train-wrap" <<EOF
#!/bin/sh
mb=
prev=
for a in "\$@"; do [ "\$prev" = --micro-batch ] && mb=\$a; prev=\$a; done
case \$mb in
2) [ -e "$W/fault-oom" ] && exec "$TRAIN" "\$@" --mem-limit 1K ;;
4) [ -e "$W/fault-launch" ] && exit 127 ;;
esac
case \$mb in
1 | 2) [ -e "$W/slow" ] || exec "$TRAIN" "\$@" ;;
*) exec "$TRAIN" "\$@" ;;
esac
"$TRAIN" "\$@" &
pid=\$!
trap 'kill -CONT \$pid 2>/dev/null; kill \$pid 2>/dev/null' TERM INT
while kill -0 \$pid 2>/dev/null; do
	sleep 0.01
	kill -STOP \$pid 2>/dev/null
	sleep 0.09
	kill -CONT \$pid 2>/dev/null
done
wait \$pid
EOF
chmod +x "$W/train-wrap"
export LAYOUTBENCH_TRAIN="$W/train-wrap"

# spec NAME GRID: tiny single-rank layouts, 14 steps (2 warm-up)
spec() {
	cat >"$1.json" <<EOF2
{"name": "$1", "model": "tiny", "fixed": {"seq_len": 64, "global_batch": 8, "gpus": 1},
 "grid": $2, "run": {"steps": 14, "warmup": 2},
 "cluster": {"time_limit": 10, "gpus_per_node": 1, "device": "cpu"}}
EOF2
}
# verdicts of a sweep's halving: "rung layout verdict class" lines
verdicts() { q "SELECT m.rung, l.micro_batch, l.norm, l.zero_stage, m.verdict,
	ifnull(m.failure_class, '') FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	JOIN layouts l ON l.layout_id = m.layout_id WHERE h.sweep = '$1' ORDER BY 1, 2, 3, 4"; }
mbof() { q "SELECT l.micro_batch FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	JOIN layouts l ON l.layout_id = m.layout_id WHERE h.sweep = '$1' AND $2"; }

# ---------------------------------------------------------------- 1. known speeds
# rung 0 at 8 steps (6 timed: the test can reach p = 1/924)
touch slow
spec hv-known '{"micro_batch": [1, 2, 4, 8]}'
"$LB" submit hv-known.json $SUB --halving 2 --dry-run >dry.out 2>&1 || bad "dry run: $(cat dry.out)"
grep -q "^total: .* rank-steps by halving, 7 runs, against 56 for the full grid (4 runs of 14 steps)" dry.out ||
	bad "dry run: $(cat dry.out)"
"$LB" submit hv-known.json $SUB --slots 4 --halving 2 --wait >k.out 2>k.err
rc=$?
[ $rc = 0 ] || bad "known: submit --halving --wait exited $rc: $(tail -n 5 k.err)"
grep -q "^halving 1 of sweep 'hv-known': done" k.out || bad "known: $(cat k.out)"
[ "$(mbof hv-known "m.rung = 0 AND m.verdict = 'dropped'" | sort | tr '\n' ' ')" = "1 2 " ] ||
	bad "known: the slow layouts were not dropped at rung 0: $(verdicts hv-known)"
best=$(mbof hv-known "m.verdict = 'final' AND m.rank = 1")
case "$best" in 4 | 8) ;; *) bad "known: the fastest on the last rung is micro-batch '$best': $(verdicts hv-known)" ;; esac
# the two slow ones, at rung 0 (on a loaded machine a later rung may drop another layout
# of the four running side by side: that is noise measured, not a fault)
[ "$(q "SELECT COUNT(*) FROM halving_members WHERE rung = 0 AND verdict = 'dropped'
	AND significant = 1 AND p_value < 0.05 AND median_s > 1.5 * cut_median_s")" = 2 ] ||
	bad "known: the drops lack their statistics: $(q "SELECT * FROM halving_layouts WHERE verdict = 'dropped'")"
# the report shows each rung, what was dropped and why, and the cost
"$LB" report --db "$DB" --figure halving >r.md 2>r.err || bad "report: $(cat r.err)"
for want in "## Successive halving (halving)" "### Halving 1 of sweep 'hv-known': done" \
	"| rung | steps | layouts | kept | within noise | dropped | failed | final |" \
	"dropped: slower" "#### Last rung, " "| differs |" "Spent "; do
	grep -qF "$want" r.md || bad "report lacks '$want'"
done
"$LB" report --db "$DB" --figure halving --format csv >r.csv || bad "report csv"
[ "$(grep -c ',hv-known,' r.csv)" = "$(q "SELECT COUNT(*) FROM halving_members")" ] ||
	bad "report csv: not one row per layout and rung: $(cat r.csv)"
"$LB" report --db "$DB" --figure all --format html --out html >/dev/null 2>&1 || bad "report html"
grep -q '<section id="halving">' html/report.html || bad "the HTML report has no halving section"
"$LB" sql --db "$DB" "SELECT rung, steps, layouts, dropped_slower FROM halving_rung_summary" >s.out ||
	bad "sql halving_rung_summary"
[ "$(q "SELECT gpu_seconds > 0 AND full_grid_gpu_seconds > 0 FROM halving_cost")" = 1 ] ||
	bad "halving_cost: $(q "SELECT * FROM halving_cost")"
lap "known speeds: the slow two dropped at rung 0, micro-batch $best the fastest"
rm -f slow

# ---------------------------------------------------------------- 2. equal layouts
spec hv-equal '{"micro_batch": [8], "norm": ["unfused", "fused"], "zero_stage": [0, 1]}'
"$LB" submit hv-equal.json $SUB --slots 4 --halving 2 --wait >e.out 2>e.err
rc=$?
[ $rc = 0 ] || bad "equal: submit --halving --wait exited $rc: $(tail -n 5 e.err)"
[ "$(q "SELECT COUNT(*) FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	WHERE h.sweep = 'hv-equal' AND m.verdict IN ('dropped', 'failed')")" = 0 ] ||
	bad "equal: a layout was cut on noise: $(verdicts hv-equal)"
[ "$(q "SELECT COUNT(*) FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	WHERE h.sweep = 'hv-equal' AND m.verdict = 'final' AND COALESCE(m.significant, 0) = 0")" = 4 ] ||
	bad "equal: not all four on the last rung within noise: $(verdicts hv-equal)"
lap "equal layouts: none cut, all four within noise on the last rung"

# ---------------------------------------------------------------- 3. failures
touch fault-oom fault-launch
spec hv-fail '{"micro_batch": [1, 2, 4, 8]}'
"$LB" submit hv-fail.json $SUB --slots 4 --halving 2 --rungs 2 --wait >f.out 2>f.err
rc=$?
[ $rc = 0 ] || bad "failures: submit --halving --wait exited $rc: $(tail -n 5 f.err)"
[ "$(q "SELECT l.micro_batch || ':' || m.failure_class FROM halving_members m JOIN halvings h
	ON h.id = m.halving_id JOIN layouts l ON l.layout_id = m.layout_id WHERE h.sweep =
	'hv-fail' AND m.verdict = 'failed' ORDER BY 1" | tr '\n' ' ')" = "2:oom 4:launch_error " ] ||
	bad "failures: $(verdicts hv-fail)"
[ "$(q "SELECT COUNT(*) FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	WHERE h.sweep = 'hv-fail' AND m.rung = 1")" = 2 ] || bad "failures: rung 1: $(verdicts hv-fail)"
grep -q "^halving 3 of sweep 'hv-fail': done" f.out || bad "failures: $(cat f.out)"
rm -f fault-oom fault-launch
lap "failures: oom and launch_error dropped at rung 0 with their classes"

# ---------------------------------------------------------------- 4. resuming
spec hv-resume '{"micro_batch": [1, 2, 4, 8]}'
"$LB" submit hv-resume.json $SUB --halving 2 --wait >w.out 2>w.err &
pid=$!
n=0
until [ "$(q "SELECT COUNT(*) FROM halving_members m JOIN halvings h ON h.id = m.halving_id
	WHERE h.sweep = 'hv-resume' AND m.rung = 1 AND m.job_ref IS NOT NULL" 2>/dev/null)" -gt 0 ] 2>/dev/null; do
	n=$((n + 1))
	[ $n -gt 300 ] && { bad "resume: rung 1 never submitted: $(cat w.err)"; break; }
	sleep 0.2
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
[ "$(q "SELECT state FROM halvings WHERE sweep = 'hv-resume'")" = running ] ||
	bad "resume: the halving ended before the interruption"
# meanwhile: a plain submit is refused, a halving submit follows the running one
"$LB" submit hv-resume.json --executor "$EXECUTOR" --db "$DB" --runs "$W/runs" >p.out 2>&1
[ $? = 1 ] && grep -q "is being run by halving 4: follow it with 'layoutbench status --sweep hv-resume --wait'" p.out ||
	bad "resume: a plain submit was not refused: $(cat p.out)"
"$LB" submit hv-resume.json $SUB --halving 2 >h.out 2>&1 || bad "resume: submit --halving again: $(cat h.out)"
grep -q "^sweep 'hv-resume': halving 4 is running: following it" h.out || bad "resume: $(cat h.out)"
"$LB" status --db "$DB" --sweep hv-resume --wait >st.out 2>st.err
rc=$?
[ $rc = 0 ] || bad "resume: status --wait exited $rc: $(tail -n 5 st.err)"
grep -q "^halving 4 of sweep 'hv-resume': done" st.out || bad "resume: $(cat st.out)"
[ "$(q "SELECT COUNT(*) FROM jobs WHERE sweep = 'hv-resume'")" = \
	"$(q "SELECT COUNT(*) FROM halving_members m JOIN halvings h ON h.id = m.halving_id WHERE h.sweep = 'hv-resume'")" ] ||
	bad "resume: not one job per layout and rung: $(q "SELECT layout_id, COUNT(*) FROM jobs WHERE sweep = 'hv-resume' GROUP BY 1")"
[ "$(q "SELECT COUNT(*) FROM halving_rungs r JOIN halvings h ON h.id = r.halving_id
	WHERE h.sweep = 'hv-resume' AND r.state != 'decided'")" = 0 ] || bad "resume: a rung left undecided"
lap "resume: status --wait finished the halving after its submit was killed"

[ "$fail" = 0 ] && echo "halving ($EXECUTOR): all passed in $(($(date +%s) - T0)) s"
exit $fail
