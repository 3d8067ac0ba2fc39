/*
 * Benchmark of `layoutbench report --figure all` on a large database: 100,000 runs (20
 * sweeps of 864 layouts each, several attempts per layout; 78% ok with 10 steps each, 20%
 * OOM, 2% running) inserted directly into a temporary database built from the real schema
 * (results_open). Times the whole command in-process (open, read the views, select, render)
 * for CSV and markdown against the target of 1 s, and HTML (seven gnuplot runs) as
 * information. Checks the answer: one planted run has the highest MFU of its sweep
 * (75.00%), and the report must show it; a wrong or missing value fails the benchmark.
 * Env: LB_BENCH_RUNS (default 100000); LB_BENCH_KEEP=1 keeps the database (path printed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/layout.h"
#include "common/util.h"
#include "report/cmd.h"
#include "report/load.h"
#include "report/render.h"
#include "report/report.h"
#include "results/collect.h"
#include "results/db.h"

#define SWEEPS	    20
#define STEPS	    10
#define TARGET_S    1.0
#define PEAK_TFLOPS 312.0

/* Deterministic pseudo-random numbers (xorshift64). */
static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static int check(sqlite3 *db, int rc, const char *what)
{
	if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
		fprintf(stderr, "error: %s: %s\n", what, sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

/* The layouts of sweep s: every combination of kernels, micro-batch, TP, PP,
 * checkpointing and sequence parallelism (864), at a sequence length of its own. */
static void layout_of(int s, int k, struct lb_layout *l)
{
	static const enum lb_attn attn[] = {LB_ATTN_NAIVE, LB_ATTN_FUSED_SOFTMAX, LB_ATTN_FLASH};
	static const int mbs[] = {1, 2, 4, 8}, par[] = {1, 2, 4};

	lb_layout_init(l);
	l->seq_len = 128 * (s + 1);
	l->attention = attn[k % 3];
	k /= 3;
	l->norm = k % 2 ? LB_NORM_FUSED : LB_NORM_UNFUSED;
	k /= 2;
	l->micro_batch = mbs[k % 4];
	k /= 4;
	l->tp = par[k % 3];
	k /= 3;
	l->pp = par[k % 3];
	k /= 3;
	l->checkpointing = k % 2 ? LB_CKPT_FULL : LB_CKPT_NONE;
	k /= 2;
	l->sequence_parallel = k % 2;
	l->dp = 2;
	l->gpus_per_node = l->tp * l->pp * l->dp;
	l->nodes = 1;
	l->global_batch = 64;
}

static int build_db(const char *path, long nruns)
{
	sqlite3 *db;
	sqlite3_stmt *run = NULL, *step = NULL;
	char err[256], name[32], id[LB_ID_LEN + 1], uid[48];
	struct lb_layout l;
	int rc = -1;
	const int per_sweep = 864;

	if (results_open(path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	sqlite3_exec(db, "PRAGMA synchronous=OFF; BEGIN", NULL, NULL, NULL);
	for (int s = 0; s < SWEEPS; s++) {
		snprintf(name, sizeof(name), "bench-%02d", s);
		if (results_upsert_sweep(db, name, "spec", NULL, NULL, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			goto out_close;
		}
		for (int k = 0; k < per_sweep; k++) {
			layout_of(s, k, &l);
			if (check(db, results_upsert_layout(db, &l, NULL), "layout"))
				goto out_close;
		}
	}
	if (check(db,
		  sqlite3_prepare_v2(db,
				     "INSERT INTO runs (id, run_uid, layout_id, sweep, source, "
				     "status, failure_class, gpu, peak_tflops, world_size, "
				     "flops_per_step, hw_flops_per_step) VALUES (?1, ?2, ?3, ?4, "
				     "'run', ?5, ?6, 'A100', 312, ?7, ?8, ?8)",
				     -1, &run, NULL),
		  "prepare") ||
	    check(db,
		  sqlite3_prepare_v2(db,
				     "INSERT INTO steps (run_id, step, warmup, time_s) VALUES "
				     "(?1, ?2, ?3, ?4)",
				     -1, &step, NULL),
		  "prepare"))
		goto out_close;
	for (long i = 0; i < nruns; i++) {
		int s = (int)(i % SWEEPS), k = (int)((i / SWEEPS) % per_sweep);
		double u = uniform(), mfu = 0.2 + 0.5 * uniform(), t = 10.0;
		const char *status = u < 0.78 ? "ok" : u < 0.98 ? "failed" : "running";

		layout_of(s, k, &l);
		/* the planted winner: sweep 0, flash + fused, mbs 1, TP 1, PP 1, no ckpt */
		if (i == (long)SWEEPS * 5) { /* k = 5: flash, fused, the first of the rest */
			status = "ok";
			mfu = 0.75;
		}
		lb_layout_id(&l, id);
		snprintf(name, sizeof(name), "bench-%02d", s);
		snprintf(uid, sizeof(uid), "bench-%ld", i);
		int gpus = lb_layout_world(&l);
		sqlite3_bind_int64(run, 1, i + 1);
		sqlite3_bind_text(run, 2, uid, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(run, 3, id, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(run, 4, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(run, 5, status, -1, SQLITE_STATIC);
		if (!strcmp(status, "failed"))
			sqlite3_bind_text(run, 6, "oom", -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(run, 6);
		sqlite3_bind_int(run, 7, gpus);
		/* flops chosen so that MFU = mfu at a mean step time of t seconds */
		sqlite3_bind_double(run, 8, mfu * PEAK_TFLOPS * 1e12 * gpus * t);
		if (check(db, sqlite3_step(run), "insert run"))
			goto out_close;
		sqlite3_reset(run);
		if (strcmp(status, "ok"))
			continue;
		for (int st = 0; st < STEPS; st++) {
			sqlite3_bind_int64(step, 1, i + 1);
			sqlite3_bind_int(step, 2, st);
			sqlite3_bind_int(step, 3, st == 0);
			/* steady steps alternate t - d, t + d: mean exactly t */
			sqlite3_bind_double(step, 4,
					    st == 0 ? 3 * t : (st % 2 ? t - 0.5 : t + 0.5));
			if (st == STEPS - 1)
				sqlite3_bind_double(step, 4, t); /* 9 steady steps: 4 pairs + t */
			if (check(db, sqlite3_step(step), "insert step"))
				goto out_close;
			sqlite3_reset(step);
		}
		/* as the collector does for every run it writes: cache the step statistics */
		if (check(db, results_refresh_run_stats(db, i + 1) ? SQLITE_ERROR : SQLITE_DONE,
			  "run stats"))
			goto out_close;
	}
	rc = check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
out_close:
	sqlite3_finalize(run);
	sqlite3_finalize(step);
	results_close(db);
	return rc;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run `report` in-process; returns wall seconds (CPU seconds in *cpu) or -1. */
static double time_report(const char *db, const char *format, const char *out, double *cpu)
{
	char *argv[] = {"report",   "--db",	    (char *)db, "--figure",  "all",
			"--format", (char *)format, "--out",	(char *)out, NULL};
	double t0 = lb_now_s(), c0 = cpu_s();
	int rc = lb_args_run(&cmd_report, 9, argv);
	double dt = lb_now_s() - t0;
	*cpu = cpu_s() - c0;
	if (rc) {
		fprintf(stderr, "error: report --format %s exited %d\n", format, rc);
		return -1;
	}
	return dt;
}

/* Time reading one view alone (report/load.h): the database's share of the report. With
 * own (not NULL), also time the report's own share on the rows read: every figure built
 * (best by report_runs_best) and rendered as CSV. */
static double time_view(const char *path, int best, double *cpu, size_t *rows, double *own)
{
	sqlite3 *db;
	struct report_runs rs, br;
	char err[256];
	double t0 = lb_now_s(), c0 = cpu_s(), dt = -1;

	report_runs_init(&rs);
	report_runs_init(&br);
	if (results_open(path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if ((best ? report_load_best : report_load_runs)(db, NULL, &rs, err, sizeof(err)))
		fprintf(stderr, "error: %s\n", err);
	else
		dt = lb_now_s() - t0;
	*cpu = cpu_s() - c0;
	*rows = rs.n;
	if (own && dt >= 0) {
		struct lb_strbuf sb = LB_STRBUF_INIT;
		double o0 = cpu_s();
		if (report_runs_best(&rs, &br))
			dt = -1;
		for (int k = 0; k < REPORT_KIND_COUNT && dt >= 0; k++) {
			struct report_figure f;
			if (report_figure_build(k == REPORT_BEST ? &br : &rs, (enum report_kind)k,
						NULL, &f)) {
				dt = -1;
				break;
			}
			render_csv(&sb, &f);
			report_figure_release(&f);
		}
		*own = cpu_s() - o0;
		lb_strbuf_release(&sb);
	}
	report_runs_release(&br);
	report_runs_release(&rs);
	results_close(db);
	return dt;
}

static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

int main(void)
{
	char dir[] = "/tmp/lb-bench-report-XXXXXX", db[96], out[96], path[160], cmd[200];
	long nruns = 100000;
	const char *env = getenv("LB_BENCH_RUNS");
	int rc = 1;

	if (env && lb_parse_long(env, 1, 100000000, &nruns)) {
		fprintf(stderr, "error: LB_BENCH_RUNS: expected a positive integer, got '%s'\n",
			env);
		return 2;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(db, sizeof(db), "%s/bench.db", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	double t0 = lb_now_s();
	if (build_db(db, nruns))
		goto out_rm;
	printf("built %ld runs in %.1f s\n", nruns, lb_now_s() - t0);

	double csv_cpu, md_cpu, html_cpu, rs_cpu, best_cpu, own_cpu = 0;
	size_t rs_rows, best_rows;
	double csv = time_report(db, "csv", out, &csv_cpu);
	double md = time_report(db, "md", out, &md_cpu);
	double html = time_report(db, "html", out, &html_cpu);
	double rs = time_view(db, 0, &rs_cpu, &rs_rows, &own_cpu);
	double best = time_view(db, 1, &best_cpu, &best_rows, NULL);
	if (csv < 0 || md < 0 || html < 0 || rs < 0 || best < 0)
		goto out_rm;
	printf("run_summary: %zu rows in %.3f s (CPU %.3f s); best_layout: %zu rows in %.3f s "
	       "(CPU %.3f s)\n",
	       rs_rows, rs, rs_cpu, best_rows, best, best_cpu);

	/* the planted best of sweep bench-00 */
	snprintf(path, sizeof(path), "%s/kernels.csv", out);
	int ok = file_has(path, "bench-00,flash+fused,75.00,1,1,1,none");
	snprintf(path, sizeof(path), "%s/tp-pp.csv", out);
	ok = ok && file_has(path, "bench-00,\"1,1\",75.00,1,1,1,none");
	snprintf(path, sizeof(path), "%s/report.md", out);
	ok = ok && file_has(path, "| flash+fused | 75.00 |");
	printf("answer check: %s\n", ok ? "ok" : "WRONG (planted best 75.00 not reported)");

	printf("RESULT\treport_all_csv_%ldk_runs\t%.3f\ts\t< %.1f\t%s\n", nruns / 1000, csv,
	       TARGET_S, ok && csv < TARGET_S ? "PASS" : "FAIL");
	printf("RESULT\treport_all_csv_%ldk_runs_cpu\t%.3f\ts\t-\tINFO\n", nruns / 1000, csv_cpu);
	printf("RESULT\treport_all_md_%ldk_runs\t%.3f\ts\t< %.1f\t%s\n", nruns / 1000, md, TARGET_S,
	       ok && md < TARGET_S ? "PASS" : "FAIL");
	printf("RESULT\treport_all_html_%ldk_runs\t%.3f\ts\t-\tINFO\n", nruns / 1000, html);
	printf("RESULT\tview_run_summary_%ldk_runs_cpu\t%.3f\ts\t-\tINFO\n", nruns / 1000, rs_cpu);
	printf("RESULT\tview_best_layout_%ldk_runs_cpu\t%.3f\ts\t-\tINFO\n", nruns / 1000,
	       best_cpu);
	printf("RESULT\treport_select_render_%ldk_runs_cpu\t%.3f\ts\t-\tINFO\n", nruns / 1000,
	       own_cpu);

	rc = ok && csv < TARGET_S && md < TARGET_S ? 0 : 1;
out_rm:
	if (getenv("LB_BENCH_KEEP")) {
		printf("kept %s\n", dir);
		return rc;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove '%s'\n", dir);
	return rc;
}
