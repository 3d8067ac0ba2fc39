-- layoutbench results database: the one schema, embedded into the binary, in two parts.
-- Migration steps start at lines "-- migrate: N" and hold the tables, indexes and data
-- changes: results_open() applies every step newer than PRAGMA user_version in one
-- exclusive transaction, setting user_version = N after each. A change is a new step
-- (ALTER TABLE ..., CREATE INDEX ...): the build takes the last step's number as
-- RESULTS_SCHEMA_VERSION; a step is never edited once databases exist that have it (step
-- 2 is the first such change). The views follow the line "-- views", one CREATE VIEW
-- each in its current text: a migration drops the views named there before its steps
-- and creates them again after them. A view is changed where it stands, together with a
-- new step (a comment alone when no table changes) that takes databases to the new text;
-- a view no longer wanted is dropped by that step. Times are ISO 8601 UTC text;
-- durations seconds; memory bytes. Column reference: docs/schema.md.
-- The layouts table has a column for each field of common/layout_fields.def
-- (tests/unit/test_layout_fields.c checks it): a new field is a step that adds its column.

-- migrate: 1

CREATE TABLE sweeps (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	source TEXT NOT NULL CHECK (source IN ('spec', 'paper', 'adhoc')),
	spec_path TEXT,                -- the spec file given to plan/submit
	spec_text TEXT,                -- its text at submission
	created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- One row per layout id (lb_layout_id: a hash of the canonical layout text).
CREATE TABLE layouts (
	layout_id TEXT PRIMARY KEY,
	model TEXT NOT NULL,           -- preset name
	n_layers INTEGER NOT NULL,
	hidden INTEGER NOT NULL,
	n_heads INTEGER NOT NULL,
	n_kv_heads INTEGER NOT NULL,
	ffn INTEGER NOT NULL,
	vocab INTEGER NOT NULL,
	tied INTEGER NOT NULL,         -- 0/1
	seq_len INTEGER NOT NULL,      -- tokens per sequence
	global_batch INTEGER NOT NULL, -- sequences per optimizer step
	micro_batch INTEGER NOT NULL,
	tp INTEGER NOT NULL,
	pp INTEGER NOT NULL,
	dp INTEGER NOT NULL,
	gpus INTEGER NOT NULL,         -- tp * pp * dp
	gpus_per_node INTEGER NOT NULL,
	nodes INTEGER NOT NULL,
	sequence_parallel INTEGER NOT NULL, -- 0/1
	zero_stage INTEGER NOT NULL,
	checkpointing TEXT NOT NULL,   -- none | full | selective
	attention TEXT NOT NULL,       -- naive | fused_softmax | flash | cudnn
	norm TEXT NOT NULL,            -- unfused | fused
	steps INTEGER,                 -- run settings of the first run seen (not in the id)
	warmup INTEGER,
	seed INTEGER,
	canonical TEXT NOT NULL,       -- lb_layout_canonical
	label TEXT,                    -- series label from the spec, if any
	virtual_stages INTEGER NOT NULL DEFAULT 1, -- model chunks per pipeline stage
	stage_layers TEXT              -- JSON array of layers per chunk when explicit; NULL:
	                               -- the split rule (common/layout.h)
);
CREATE INDEX layouts_shape ON layouts (model, seq_len, gpus);

-- One row per submission of a layout (attempt 1, 2, ... after resubmission).
CREATE TABLE jobs (
	id INTEGER PRIMARY KEY,
	executor TEXT NOT NULL CHECK (executor IN ('local', 'slurm', 'rest')),
	sweep TEXT NOT NULL REFERENCES sweeps (name),
	layout_id TEXT NOT NULL REFERENCES layouts (layout_id),
	job_id TEXT,                   -- scheduler id ("123", "123_4", a pid)
	array_job_id TEXT,
	array_index INTEGER,
	state TEXT NOT NULL DEFAULT 'PENDING', -- PENDING RUNNING COMPLETED FAILED CANCELLED
	                               -- TIMEOUT NODE_FAIL PREEMPTED OUT_OF_MEMORY ...
	reason TEXT,
	failure_class TEXT,            -- oom | nccl_error | timeout | killed | diverged | error ...
	exit_code INTEGER,
	submit_time TEXT,
	start_time TEXT,
	end_time TEXT,
	run_dir TEXT,
	attempt INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX jobs_sweep_layout ON jobs (sweep, layout_id);
CREATE INDEX jobs_job_id ON jobs (job_id);
CREATE INDEX jobs_array ON jobs (array_job_id, array_index);

-- One row per attempt: a run log collected, or a row imported from the paper.
CREATE TABLE runs (
	id INTEGER PRIMARY KEY,
	run_uid TEXT NOT NULL UNIQUE,  -- the run log's run_uid; 'paper:<sweep>:<trial id>'
	layout_id TEXT NOT NULL REFERENCES layouts (layout_id),
	sweep TEXT NOT NULL REFERENCES sweeps (name),
	job_ref INTEGER REFERENCES jobs (id), -- the job that ran it, when known
	source TEXT NOT NULL CHECK (source IN ('run', 'paper')),
	label TEXT,                    -- series label (the paper's kernel string verbatim)
	status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'running')),
	failure_class TEXT,            -- oom | nccl_error | timeout | killed | diverged | error
	                               -- | kernel_unavailable ...; NULL when ok or running
	message TEXT,
	exit_code INTEGER,
	failed_rank INTEGER,
	hosts TEXT,                    -- JSON array of host names
	gpu TEXT,                      -- product name; 'cpu' for the CPU backend
	peak_tflops REAL,              -- dense bf16 peak per GPU assumed; NULL unknown
	world_size INTEGER,            -- ranks (GPUs)
	versions TEXT,                 -- JSON object: layoutbench, cuda, nccl, driver
	git_commit TEXT,
	backend TEXT,                  -- cpu | cuda
	flags TEXT,                    -- the layout as trainer flags
	flops_per_step REAL,           -- model FLOPs per optimizer step (PaLM count)
	hw_flops_per_step REAL,        -- with recomputation
	tokens_per_step INTEGER,
	params INTEGER,
	start_time TEXT,
	end_time TEXT,
	log_path TEXT,                 -- absolute path of the run log
	log_bytes INTEGER,             -- size of the log at the last collect
	bytes_ingested INTEGER,        -- bytes of complete lines read (resume offset)
	measured_step_time REAL,       -- imported runs: the sheet's mean step time, seconds
	mfu_reported REAL,             -- imported runs: the sheet's MFU, fraction
	collected TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX runs_layout ON runs (layout_id);
CREATE INDEX runs_sweep ON runs (sweep, status);
CREATE INDEX runs_log_path ON runs (log_path);
CREATE INDEX runs_job ON runs (job_ref);

-- One row per optimizer step of a run.
CREATE TABLE steps (
	run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	step INTEGER NOT NULL,         -- 0-based
	warmup INTEGER NOT NULL,       -- 1: excluded from statistics
	time_s REAL NOT NULL,          -- wall time of the step
	tokens INTEGER,                -- tokens in the step, all ranks
	loss REAL,
	peak_mem_bytes INTEGER,        -- most loaded rank
	forward_s REAL,
	backward_s REAL,
	optimizer_s REAL,
	comm_exposed_s REAL,
	bubble_s REAL,
	rank_peak_mem TEXT,            -- JSON array of per-rank peak bytes
	PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

-- Each run's steady-state step statistics (steady state: warmup = 0), one row per run
-- that has steps, computed in one place: the collector (results/collect.c), in the
-- transaction that writes the run's steps; results_refresh_run_stats() recomputes them
-- after a run's steps change by other means. So reading run_summary does not go through
-- every step row. n_steps is NULL without a steady-state step; the median is the mean of
-- the middle two of an even count; peak_mem_bytes and rank_peak_mem cover every step.
CREATE TABLE run_stats (
	run_id INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	n_steps INTEGER,               -- steady-state steps (warmup excluded)
	step_time_mean REAL,           -- seconds
	step_time_median REAL,
	step_time_std REAL,            -- sample standard deviation; NULL below two steps
	peak_mem_bytes INTEGER,        -- maximum over every step, warmup included
	forward_s REAL,                -- steady-state means, seconds
	backward_s REAL,
	optimizer_s REAL,
	comm_exposed_s REAL,
	bubble_s REAL,
	rank_peak_mem TEXT             -- JSON array, bytes per rank
);

-- sbatch would have been given, and the process group of each running task.
CREATE TABLE slurm_local_arrays (
	id INTEGER PRIMARY KEY,
	script TEXT NOT NULL,          -- the rendered job script
	work_dir TEXT NOT NULL,
	out_path TEXT NOT NULL,        -- stdout path pattern (%A, %a)
	err_path TEXT NOT NULL,
	job_name TEXT NOT NULL,
	nodes INTEGER NOT NULL,
	ntasks_per_node INTEGER NOT NULL,
	gpus_per_node INTEGER NOT NULL,
	time_limit_min INTEGER NOT NULL, -- 0 = none
	throttle INTEGER NOT NULL        -- tasks at once; 0 = no limit
);
CREATE TABLE slurm_local_tasks (
	job_ref INTEGER PRIMARY KEY,   -- jobs.id of a running task
	pid INTEGER NOT NULL           -- its process group
);


-- migrate: 2
-- Numbers a reader can trust: each run's loss trajectory classed (run health:
-- results/health.h), the model FLOPs without the input embedding lookup beside the paper's
-- count (common/model.h, LB_FLOPS_NO_EMBED), and the device's own memory reading beside
-- the allocator's count. Rows of an older database get the new columns filled once, after
-- this step, by results_upgrade_runs (results/upgrade.h) from their step rows and flags.

ALTER TABLE runs ADD COLUMN flops_per_step_no_embed REAL; -- model FLOPs per step without the
                               -- input embedding lookup (Megatron-LM's, torchtitan's count)
ALTER TABLE steps ADD COLUMN device_peak_mem_bytes INTEGER; -- the device's reading, most
                               -- loaded rank (total less free, since the run began)
ALTER TABLE steps ADD COLUMN rank_device_peak_mem TEXT; -- JSON array, per rank
ALTER TABLE run_stats ADD COLUMN device_peak_mem_bytes INTEGER; -- maximum over every step
ALTER TABLE run_stats ADD COLUMN rank_device_peak_mem TEXT; -- element-wise maximum
ALTER TABLE run_stats ADD COLUMN loss_first REAL;       -- the first step's loss
ALTER TABLE run_stats ADD COLUMN loss_last_quarter REAL; -- mean loss of the last ceil(n/4) steps
ALTER TABLE run_stats ADD COLUMN health TEXT;           -- ok | flat | diverged; NULL unknown


-- migrate: 3
-- A run's identity beyond its run_uid: a hash of the log bytes read so far, so that a log
-- that reuses a collected run's run_uid is recognised and refused rather than read on from
-- the old offset (docs/run-log.md). Runs collected before this step have NULL: their next
-- collect checks layout, start time and hosts only, and records the hash.

ALTER TABLE runs ADD COLUMN log_hash TEXT; -- a 64-bit hash (16 hex digits) of the first
                               -- bytes_ingested bytes of the log


-- migrate: 4
-- Successive halving (slurm/halving.c, docs/halving.md): a submission policy that runs
-- every candidate layout of a sweep for few steps (rung 0), keeps the fastest 1/eta of
-- each group of comparable layouts (same model, sequence length, global batch and GPU
-- count) and those within noise of the cut, and runs them longer, up to the spec's
-- steps on the last rung. Its state lives here, so that a --wait that was left is
-- resumed by `status`. A layout's run on each rung is an ordinary job and run; which
-- job belongs to which rung is said here, not in the run logs.
CREATE TABLE halvings (
	id INTEGER PRIMARY KEY,
	sweep TEXT NOT NULL REFERENCES sweeps (name),
	executor TEXT NOT NULL CHECK (executor IN ('local', 'slurm', 'rest')),
	runs_dir TEXT NOT NULL,        -- the absolute runs folder of its jobs
	spec_text TEXT NOT NULL,       -- the spec planned at the start: every rung plans it
	eta INTEGER NOT NULL,          -- each rung keeps the fastest ceil(n/eta) of a group
	n_rungs INTEGER NOT NULL,
	alpha REAL NOT NULL,           -- the rank test's level (one-sided, per comparison)
	margin REAL NOT NULL,          -- relative slowdown taken as noise (0.02: 2%)
	throttle INTEGER NOT NULL DEFAULT 0,
	max_array INTEGER NOT NULL DEFAULT 0,
	state TEXT NOT NULL DEFAULT 'running'
		CHECK (state IN ('running', 'done', 'cancelled')),
	message TEXT,                  -- how it ended
	created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
	finished TEXT
);
CREATE INDEX halvings_sweep ON halvings (sweep, state);

-- One row per rung of a halving: rung 0 first; a rung's row is made when the rung
-- before it is decided.
CREATE TABLE halving_rungs (
	halving_id INTEGER NOT NULL REFERENCES halvings (id) ON DELETE CASCADE,
	rung INTEGER NOT NULL,         -- 0-based
	steps INTEGER NOT NULL,        -- the trainer's --steps on this rung (warmup included)
	warmup INTEGER NOT NULL,       -- steps left out of the statistics
	state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'decided')),
	created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
	decided TEXT,
	PRIMARY KEY (halving_id, rung)
) WITHOUT ROWID;

-- One row per layout on a rung: its job, and once the rung is decided its verdict and
-- the statistics behind it.
CREATE TABLE halving_members (
	halving_id INTEGER NOT NULL REFERENCES halvings (id) ON DELETE CASCADE,
	rung INTEGER NOT NULL,
	layout_id TEXT NOT NULL REFERENCES layouts (layout_id),
	grp TEXT NOT NULL,             -- its group: "<model> L<layers> h<hidden>, seq S, batch
	                               -- B, G GPU(s)"; layouts compete within a group only
	job_ref INTEGER REFERENCES jobs (id), -- the job running it on this rung; NULL: not yet
	after_job INTEGER NOT NULL,    -- its job is the newest of the layout past this jobs.id
	tries INTEGER NOT NULL DEFAULT 0, -- jobs submitted (node_fail, preempted: once more)
	verdict TEXT NOT NULL DEFAULT 'pending' CHECK (verdict IN
		('pending', 'kept', 'noise', 'dropped', 'failed', 'final')),
	                               -- kept: among the fastest ceil(n/eta); noise: slower
	                               -- than the cut, not beyond noise; dropped: slower than
	                               -- the cut beyond noise; failed: no measurement (class);
	                               -- final: measured on the last rung
	rank INTEGER,                  -- by median step time within the group, 1 = fastest
	n_steps INTEGER,               -- steady-state steps of its run (warm-up left out)
	median_s REAL,                 -- their median step time, seconds
	cut_layout TEXT,               -- the layout it was tested against: the cut (the
	                               -- slowest kept), or on the last rung the fastest
	cut_median_s REAL,
	u REAL,                        -- Mann-Whitney U of its steps over the cut's x (1+margin)
	p_value REAL,                  -- one-sided p of that test
	exact INTEGER,                 -- 1: p from U's exact distribution, 0: normal approx.
	significant INTEGER,           -- 1: slower than cut_layout beyond noise (p < alpha)
	failure_class TEXT,            -- verdict failed: why (oom, timeout, launch_error, ...)
	reason TEXT,                   -- the verdict in words
	PRIMARY KEY (halving_id, rung, layout_id)
) WITHOUT ROWID;
CREATE INDEX halving_members_job ON halving_members (job_ref);


-- views
-- Created in this order (a view reads those above it) after every migration.

-- One row per run, ours or imported: the layout, the steady-state statistics (an imported
-- run, without steps, has the sheet's measured step time), throughput, MFU and HFU at
-- query time from the FLOPs and the peak the run recorded; MFU without the input
-- embedding lookup beside it; the run's health (a run that failed as diverged is
-- diverged); the device's memory reading beside the counted peak.
CREATE VIEW run_summary AS
WITH base AS (
	SELECT r.id AS run_id, r.run_uid, r.sweep, r.source, r.layout_id,
	       COALESCE(r.label, l.label, l.attention || '+' || l.norm) AS label,
	       l.model, l.seq_len, l.global_batch,
	       COALESCE(r.world_size, l.gpus) AS gpus,
	       l.micro_batch, l.tp, l.pp, l.dp, l.sequence_parallel, l.zero_stage,
	       l.checkpointing, l.attention, l.norm,
	       r.status, r.failure_class, r.message, r.gpu, r.peak_tflops,
	       st.n_steps,
	       COALESCE(st.step_time_median, r.measured_step_time) AS step_time_median,
	       COALESCE(st.step_time_mean, r.measured_step_time) AS step_time_mean,
	       st.step_time_std,
	       COALESCE(r.tokens_per_step, l.global_batch * l.seq_len) AS tokens_per_step,
	       r.flops_per_step, r.hw_flops_per_step, r.mfu_reported,
	       r.flops_per_step_no_embed,
	       st.peak_mem_bytes,
	       r.start_time, r.end_time,
	       st.forward_s, st.backward_s, st.optimizer_s, st.comm_exposed_s, st.bubble_s,
	       st.rank_peak_mem, l.virtual_stages, l.stage_layers,
	       CASE WHEN r.failure_class = 'diverged' THEN 'diverged' ELSE st.health END
		       AS health,
	       st.loss_first, st.loss_last_quarter,
	       st.device_peak_mem_bytes, st.rank_device_peak_mem
	FROM runs r
	JOIN layouts l ON l.layout_id = r.layout_id
	LEFT JOIN run_stats st ON st.run_id = r.id
)
SELECT run_id, run_uid, sweep, source, layout_id, label, model, seq_len, global_batch, gpus,
       micro_batch, tp, pp, dp, sequence_parallel, zero_stage, checkpointing, attention, norm,
       status, failure_class, message, gpu, peak_tflops, n_steps,
       step_time_median, step_time_mean, step_time_std,
       CASE WHEN step_time_mean > 0 THEN tokens_per_step / step_time_mean / gpus END
	       AS tokens_per_s_per_gpu,
       CASE WHEN step_time_mean > 0 THEN flops_per_step / step_time_mean / gpus / 1e12 END
	       AS tflops_per_gpu,
       CASE WHEN step_time_mean > 0 AND peak_tflops > 0 THEN
	       flops_per_step / (step_time_mean * gpus * peak_tflops * 1e12) END AS mfu,
       CASE WHEN step_time_mean > 0 AND peak_tflops > 0 THEN
	       hw_flops_per_step / (step_time_mean * gpus * peak_tflops * 1e12) END AS hfu,
       mfu_reported, peak_mem_bytes, start_time, end_time,
       forward_s, backward_s, optimizer_s, comm_exposed_s, bubble_s, rank_peak_mem,
       virtual_stages, stage_layers,
       CASE WHEN step_time_mean > 0 AND peak_tflops > 0 THEN
	       flops_per_step_no_embed / (step_time_mean * gpus * peak_tflops * 1e12) END
	       AS mfu_no_embed,
       health, loss_first, loss_last_quarter, device_peak_mem_bytes, rank_device_peak_mem
FROM base;

-- Per (model, seq_len, gpus): the ok run with the highest COALESCE(mfu_reported, mfu);
-- where MFU is unknown (no peak) runs rank by tflops_per_gpu. Diverged runs are left out
-- (their speed is not that of a run that trains).
CREATE VIEW best_layout AS
SELECT * FROM (
	SELECT s.*, COALESCE(s.mfu_reported, s.mfu) AS mfu_best,
	       ROW_NUMBER() OVER (PARTITION BY s.model, s.seq_len, s.gpus
				  ORDER BY COALESCE(s.mfu_reported, s.mfu) DESC NULLS LAST,
					   s.tflops_per_gpu DESC NULLS LAST, s.run_id) AS rank
	FROM run_summary s WHERE s.status = 'ok' AND s.health IS NOT 'diverged'
) WHERE rank = 1;

-- Per member: the layout, the verdict and its statistics, and what its run cost (GPU
-- seconds: the job's wall time, else its run's, times the GPUs).
CREATE VIEW halving_layouts AS
SELECT h.id AS halving_id, h.sweep, m.rung, r.steps, m.grp, m.layout_id,
       COALESCE(l.label, l.attention || '+' || l.norm) AS label,
       l.micro_batch, l.tp, l.pp, l.dp, l.sequence_parallel, l.zero_stage,
       l.checkpointing, l.attention, l.norm, l.gpus,
       m.verdict, m.rank, m.n_steps, m.median_s, m.cut_layout, m.cut_median_s,
       CASE WHEN m.cut_median_s > 0 THEN m.median_s / m.cut_median_s - 1 END AS slowdown,
       m.u, m.p_value, m.exact, m.significant, m.failure_class, m.reason,
       m.job_ref, j.state AS job_state, ru.id AS run_id,
       COALESCE((julianday(j.end_time) - julianday(j.start_time)),
		(julianday(ru.end_time) - julianday(ru.start_time))) * 86400.0 * l.gpus
	       AS gpu_seconds
FROM halving_members m
JOIN halvings h ON h.id = m.halving_id
JOIN halving_rungs r ON r.halving_id = m.halving_id AND r.rung = m.rung
JOIN layouts l ON l.layout_id = m.layout_id
LEFT JOIN jobs j ON j.id = m.job_ref
LEFT JOIN runs ru ON ru.id = (SELECT MAX(x.id) FROM runs x WHERE x.job_ref = m.job_ref);

-- Per rung: its steps, how many layouts ran and what became of them, what it cost.
CREATE VIEW halving_rung_summary AS
SELECT h.id AS halving_id, h.sweep, h.eta, h.n_rungs, h.alpha, h.margin,
       h.state AS halving_state, r.rung, r.steps, r.state,
       COUNT(m.layout_id) AS layouts,
       SUM(m.verdict = 'kept') AS kept,
       SUM(m.verdict = 'noise') AS kept_within_noise,
       SUM(m.verdict = 'dropped') AS dropped_slower,
       SUM(m.verdict = 'failed') AS dropped_failed,
       SUM(m.verdict = 'final') AS final,
       SUM(m.verdict = 'pending') AS pending,
       SUM(m.gpu_seconds) AS gpu_seconds
FROM halvings h
JOIN halving_rungs r ON r.halving_id = h.id
LEFT JOIN halving_layouts m ON m.halving_id = h.id AND m.rung = r.rung
GROUP BY h.id, r.rung;

-- Per halving: what it spent (the GPU seconds of its jobs) and an estimate of what the
-- full grid, every candidate at the last rung's steps, would have spent: per layout, the
-- GPU seconds of its last run plus the steps that run did not make at its mean step
-- time (a layout that failed costs what its failure cost). Complete once it is done.
CREATE VIEW halving_cost AS
WITH last AS (
	SELECT m.*, ROW_NUMBER() OVER (PARTITION BY m.halving_id, m.layout_id
				       ORDER BY m.rung DESC) AS k
	FROM halving_layouts m
), top AS (
	SELECT halving_id, MAX(steps) AS full_steps FROM halving_rungs GROUP BY halving_id
)
SELECT h.id AS halving_id, h.sweep, h.state, t.full_steps,
       (SELECT COUNT(*) FROM halving_members a WHERE a.halving_id = h.id AND a.rung = 0)
	       AS layouts,
       (SELECT COUNT(*) FROM halving_members a WHERE a.halving_id = h.id
	       AND a.job_ref IS NOT NULL) AS runs,
       (SELECT SUM(a.gpu_seconds) FROM halving_layouts a WHERE a.halving_id = h.id)
	       AS gpu_seconds,
       (SELECT SUM(COALESCE(l.gpu_seconds, 0) + CASE WHEN l.verdict = 'failed' THEN 0
		       ELSE (t.full_steps - l.steps) * COALESCE(st.step_time_mean, 0) * l.gpus END)
	FROM last l LEFT JOIN run_stats st ON st.run_id = l.run_id
	WHERE l.halving_id = h.id AND l.k = 1) AS full_grid_gpu_seconds
FROM halvings h JOIN top t ON t.halving_id = h.id;
