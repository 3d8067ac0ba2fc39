#!/bin/sh
# The halving of the one-GPU grid beside the full grid, for docs/results/h200: run here,
# on the halving's state brought back from the GPU host (bench/gpu/halving.sh's
# $OUT/state) and the full grid's published run logs.
#
#   sh bench/gpu/halving_compare.sh STATE_DIR [FULL_RUNS [HALVING_SWEEP [FULL_SWEEP]]]
#
# STATE_DIR holds h.db (and runs/); FULL_RUNS defaults to docs/results/h200/runs (the full
# grid, sweep h200-1gpu); the sweeps default to h200-1gpu-halving and h200-1gpu. Works on a
# copy of the database (the full grid's runs collected into it) and prints markdown: per
# sequence length the full grid's fastest layouts and where the halving's fastest stands
# among them, the halving's last rung with its statistics, and the GPU time of both: the
# halving's (its jobs' wall time), the full grid's as measured (its runs' wall time at
# their steps) and at the halving's last-rung steps (each layout's measured run plus the
# missing steps at its mean step time). Exit 1 on an error.
set -u
[ $# -ge 1 ] || { echo "usage: sh bench/gpu/halving_compare.sh STATE_DIR [FULL_RUNS [HALVING_SWEEP [FULL_SWEEP]]]" >&2; exit 2; }
state=$1
full_runs=${2:-docs/results/h200/runs}
hs=${3:-h200-1gpu-halving}
fs=${4:-h200-1gpu}
LB=${LB:-build/layoutbench}
[ -f "$state/h.db" ] || { echo "error: no database '$state/h.db' (bench/gpu/halving.sh writes it to \$OUT/state)" >&2; exit 1; }
[ -d "$full_runs" ] || { echo "error: no run logs in '$full_runs'" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$state/h.db" "$tmp/c.db" || exit 1
"$LB" collect --db "$tmp/c.db" "$full_runs" >/dev/null 2>"$tmp/collect.err" ||
	{ cat "$tmp/collect.err" >&2; exit 1; }
q() { "$LB" sql --db "$tmp/c.db" --format table "$1" | sed 's/^/    /'; }

echo "## The full grid's fastest layouts ($fs), per sequence length"
echo
q "SELECT seq_len, rk AS rank, layout_id, label, micro_batch AS mbs, checkpointing AS ckpt,
	round(step_time_mean, 4) AS step_s, round(100 * mfu, 1) AS mfu FROM (SELECT *,
	ROW_NUMBER() OVER (PARTITION BY seq_len ORDER BY step_time_mean) AS rk FROM run_summary
	WHERE sweep = '$fs' AND status = 'ok') WHERE rk <= 5 ORDER BY seq_len, rk"
echo
echo "## The halving's fastest layout ($hs) in the full grid"
echo
q "WITH fg AS (SELECT layout_id, seq_len, MIN(step_time_mean) AS s FROM run_summary
	WHERE sweep = '$fs' AND status = 'ok' GROUP BY layout_id, seq_len),
	rk AS (SELECT *, RANK() OVER (PARTITION BY seq_len ORDER BY s) AS r,
	s / MIN(s) OVER (PARTITION BY seq_len) - 1 AS slower FROM fg)
	SELECT l.seq_len, m.layout_id, m.label, rk.r AS rank_in_full_grid,
	round(100 * rk.slower, 2) AS pct_slower_than_its_fastest
	FROM halving_layouts m JOIN layouts l ON l.layout_id = m.layout_id
	JOIN rk ON rk.layout_id = m.layout_id
	WHERE m.sweep = '$hs' AND m.verdict = 'final' AND m.rank = 1 ORDER BY l.seq_len"
echo
echo "## The halving's last rung"
echo
q "SELECT l.seq_len, m.rank, m.layout_id, m.label, m.micro_batch AS mbs,
	m.checkpointing AS ckpt, m.n_steps AS timed, round(m.median_s, 4) AS median_s,
	round(100 * m.slowdown, 2) AS pct_vs_fastest, round(m.p_value, 4) AS p,
	m.significant AS differs FROM halving_layouts m JOIN layouts l ON l.layout_id =
	m.layout_id WHERE m.sweep = '$hs' AND m.verdict = 'final' ORDER BY l.seq_len, m.rank"
echo
echo "## GPU time"
echo
q "WITH c AS (SELECT * FROM halving_cost WHERE sweep = '$hs' ORDER BY halving_id DESC
	LIMIT 1), f AS (SELECT layout_id, MIN(run_id) AS run_id FROM run_summary WHERE sweep =
	'$fs' AND status = 'ok' GROUP BY layout_id), fr AS (SELECT s.*, (julianday(s.end_time) -
	julianday(s.start_time)) * 86400.0 * s.gpus AS wall, (SELECT COUNT(*) FROM steps st
	WHERE st.run_id = s.run_id) AS steps FROM run_summary s JOIN f ON f.run_id = s.run_id)
	SELECT c.layouts, c.runs AS halving_runs, c.full_steps,
	round(c.gpu_seconds) AS halving_gpu_s,
	(SELECT COUNT(*) FROM fr) AS full_layouts, (SELECT MAX(steps) FROM fr) AS full_steps_run,
	round((SELECT SUM(wall) FROM fr)) AS full_gpu_s_measured,
	round((SELECT SUM(wall + (c.full_steps - steps) * step_time_mean * gpus) FROM fr))
	AS full_gpu_s_at_halving_steps,
	round(100 * c.gpu_seconds / (SELECT SUM(wall + (c.full_steps - steps) * step_time_mean *
	gpus) FROM fr), 1) AS halving_pct,
	round(c.full_grid_gpu_seconds) AS full_gpu_s_from_halving_runs FROM c"
