/*
 * Unit tests of the collector and the schema: every run-log fixture collected into a
 * fresh database, idempotency (collect twice, grow a log), job linking, the arithmetic
 * of run_summary (median, mean, std, MFU, HFU by hand), best_layout, schema migrations,
 * the jobs API, and a reader querying while a collect writes.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/embed.h"
#include "results/collect.h"
#include "results/db.h"
#include "results/jobs.h"
#include "results/runlog.h"
#include "tests/unit/sql_query.h"

#define FIXDIR "tests/fixtures/runlogs"
#define FIX    FIXDIR "/run-20261202T120000Z-node1-"

struct env {
	char dir[64];
	char db_path[128];
	sqlite3 *db;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	char err[256];

	if (!e)
		return -1;
	snprintf(e->dir, sizeof(e->dir), "/tmp/lb-collect-XXXXXX");
	if (!mkdtemp(e->dir))
		return -1;
	snprintf(e->db_path, sizeof(e->db_path), "%s/results.db", e->dir);
	if (results_open(e->db_path, &e->db, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char cmd[128];

	results_close(e->db);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
	if (system(cmd) != 0)
		return -1;
	free(e);
	return 0;
}

/* Collect one path quietly; returns the function's status. */
static int collect(sqlite3 *db, const char *path, struct collect_stats *st)
{
	char err[512];

	memset(st, 0, sizeof(*st));
	st->quiet = 1;
	return results_collect_path(db, path, st, err, sizeof(err));
}

#define RUN(uid) "(SELECT id FROM runs WHERE run_uid = '20261202T120000Z-node1-" uid "')"

static void close_to(double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol))
		fail_msg("got %.17g, want %.17g", got, want);
}

static void test_ok_run(void **state)
{
	struct env *e = *state;
	struct collect_stats st;

	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_int_equal(st.runs_new, 1);
	assert_int_equal(st.steps, 7);
	assert_int_equal(st.warnings, 0);
	assert_string_equal(q_text(e->db, "SELECT status FROM runs"), "ok");
	assert_string_equal(q_text(e->db, "SELECT sweep FROM runs"), "fixture-sweep");
	assert_string_equal(q_text(e->db, "SELECT source FROM sweeps WHERE name = 'fixture-sweep'"),
			    "spec");
	assert_string_equal(q_text(e->db, "SELECT layout_id FROM runs"), "92ce779f2d33830f");
	assert_int_equal(q_int(e->db, "SELECT dp FROM layouts"), 2);
	assert_int_equal(q_int(e->db, "SELECT gpus FROM layouts"), 2);
	assert_string_equal(q_text(e->db, "SELECT checkpointing FROM layouts"), "none");
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps WHERE warmup = 1"), 2);
	assert_string_equal(q_text(e->db, "SELECT rank_peak_mem FROM steps WHERE step = 3"),
			    "[1000003,999993]");
	close_to(q_dbl(e->db, "SELECT forward_s FROM steps WHERE step = 3"), 1.2 * 0.3, 1e-12);
	assert_string_equal(q_text(e->db, "SELECT label FROM run_summary"), "flash+fused");
	assert_string_equal(q_text(e->db, "SELECT gpu FROM runs"), "NVIDIA H100 80GB HBM3");
	assert_int_equal(q_int(e->db, "SELECT exit_code FROM runs"), 0);
	assert_string_equal(q_text(e->db, "SELECT job_ref FROM runs"), "NULL");
}

/* The arithmetic of run_summary by hand: steady steps 2..6 take 1.0 1.2 1.1 1.4 1.3 s. */
static void test_view_arithmetic(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	const double flops = 1614151680.0, gpus = 2, peak = 989e12, mean = 1.2;
	const double std = sqrt((0.04 + 0.0 + 0.01 + 0.04 + 0.01) / 4);

	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_int_equal(q_int(e->db, "SELECT n_steps FROM run_summary"), 5);
	close_to(q_dbl(e->db, "SELECT step_time_median FROM run_summary"), 1.2, 1e-12);
	close_to(q_dbl(e->db, "SELECT step_time_mean FROM run_summary"), mean, 1e-12);
	close_to(q_dbl(e->db, "SELECT step_time_std FROM run_summary"), std, 1e-12);
	close_to(q_dbl(e->db, "SELECT mfu FROM run_summary"), flops / (mean * gpus * peak), 1e-18);
	close_to(q_dbl(e->db, "SELECT hfu FROM run_summary"), flops / (mean * gpus * peak), 1e-18);
	close_to(q_dbl(e->db, "SELECT tokens_per_s_per_gpu FROM run_summary"), 1024 / mean / gpus,
		 1e-9);
	close_to(q_dbl(e->db, "SELECT tflops_per_gpu FROM run_summary"), flops / mean / gpus / 1e12,
		 1e-15);
	assert_int_equal(q_int(e->db, "SELECT peak_mem_bytes FROM run_summary"), 1000006);
	assert_string_equal(q_text(e->db, "SELECT mfu_reported FROM run_summary"), "NULL");
	assert_string_equal(q_text(e->db, "SELECT status FROM run_summary"), "ok");
	assert_int_equal(q_int(e->db, "SELECT gpus FROM run_summary"), 2);

	/* an even count: the median is the mean of the middle two (1.1, 1.2 of 1.0 1.1 1.2 1.3) */
	assert_int_equal(sqlite3_exec(e->db, "DELETE FROM steps WHERE step = 5", NULL, NULL, NULL),
			 SQLITE_OK);
	/* the cached statistics follow only when refreshed */
	close_to(q_dbl(e->db, "SELECT step_time_median FROM run_summary"), 1.2, 1e-12);
	assert_int_equal(results_refresh_run_stats(e->db, q_int(e->db, "SELECT id FROM runs")), 0);
	assert_int_equal(q_int(e->db, "SELECT n_steps FROM run_summary"), 4);
	close_to(q_dbl(e->db, "SELECT step_time_median FROM run_summary"), 1.15, 1e-12);
	close_to(q_dbl(e->db, "SELECT step_time_mean FROM run_summary"), 1.15, 1e-12);

	/* HFU uses the hardware count: double it and HFU doubles, MFU stays */
	assert_int_equal(sqlite3_exec(e->db,
				      "UPDATE runs SET hw_flops_per_step = 2 * flops_per_step",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	close_to(q_dbl(e->db, "SELECT hfu / mfu FROM run_summary"), 2.0, 1e-12);

	/* best_layout: the only ok run, ranked by its MFU */
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM best_layout"), 1);
	close_to(q_dbl(e->db, "SELECT mfu_best FROM best_layout"),
		 q_dbl(e->db, "SELECT mfu FROM run_summary"), 0);
}

static void test_failure_fixtures(void **state)
{
	static const struct {
		const char *uid, *cls;
		int exit_code, rank;
	} cases[] = {
	    {"1002-oom", "oom", 3, 0},
	    {"1003-nccl", "nccl_error", 4, 1},
	    {"1004-diverged", "diverged", 5, 0},
	    {"1005-timeout", "timeout", 6, 1},
	    {"1006-killed", "killed", 137, -999},
	};
	struct env *e = *state;
	struct collect_stats st;
	char path[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), FIX "%s.jsonl", cases[i].uid);
		assert_int_equal(collect(e->db, path, &st), 0);
		assert_int_equal(st.runs_new, 1);
		assert_string_equal(q_text(e->db,
					   "SELECT status FROM runs WHERE run_uid LIKE '%%%s'",
					   cases[i].uid),
				    "failed");
		assert_string_equal(q_text(e->db,
					   "SELECT failure_class FROM run_summary WHERE run_uid "
					   "LIKE '%%%s'",
					   cases[i].uid),
				    cases[i].cls);
		assert_int_equal(q_int(e->db,
				       "SELECT exit_code FROM runs WHERE run_uid LIKE '%%%s'",
				       cases[i].uid),
				 cases[i].exit_code);
		assert_int_equal(q_int(e->db,
				       "SELECT failed_rank FROM runs WHERE run_uid LIKE '%%%s'",
				       cases[i].uid),
				 cases[i].rank);
		assert_string_not_equal(q_text(e->db,
					       "SELECT message FROM runs WHERE run_uid LIKE '%%%s'",
					       cases[i].uid),
					"NULL");
	}
	/* the OOM run used full checkpointing: its layout row says so, HFU > MFU per FLOPs */
	assert_string_equal(q_text(e->db, "SELECT checkpointing FROM layouts WHERE layout_id = "
					  "'ba351398a49735e6'"),
			    "full");
	assert_true(q_dbl(e->db, "SELECT hw_flops_per_step / flops_per_step FROM runs WHERE "
				 "run_uid LIKE '%%1002-oom'") > 1.2);
	/* diverged: the last step's loss is NULL */
	assert_string_equal(q_text(e->db, "SELECT loss FROM steps WHERE run_id = " RUN(
					      "1004-diverged") " AND step = 4"),
			    "NULL");
	/* killed: only warmup steps, so no statistics */
	assert_string_equal(
	    q_text(e->db, "SELECT mfu FROM run_summary WHERE run_uid LIKE '%%1006-killed'"),
	    "NULL");
}

static void copy_file(const char *from, const char *to, size_t limit)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[65536];
	size_t n;

	assert_non_null(a);
	assert_non_null(b);
	while (limit && (n = fread(buf, 1, limit < sizeof(buf) ? limit : sizeof(buf), a)) > 0) {
		assert_int_equal(fwrite(buf, 1, n, b), n);
		limit -= n;
	}
	fclose(a);
	fclose(b);
}

static void append(const char *path, const char *text)
{
	FILE *f = fopen(path, "ab");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_truncated_then_completed(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256];

	snprintf(path, sizeof(path), "%s/run-20261202T120000Z-node1-1007-truncated.jsonl", e->dir);
	copy_file(FIX "1007-truncated.jsonl", path, (size_t)-1);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.warnings, 0); /* a cut-off last line is not a fault */
	assert_int_equal(st.steps, 5);
	assert_string_equal(q_text(e->db, "SELECT status FROM run_summary"), "running");
	/* nothing new: unchanged */
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_unchanged, 1);
	/* the writer finishes the line and ends the run */
	append(path, "e,\"time_s\":1.4,\"tokens\":1024,\"loss\":5.5,\"peak_mem_bytes\":1000005}\n"
		     "{\"type\":\"end\",\"status\":\"ok\",\"class\":null,\"message\":\"done\","
		     "\"rank\":null,\"exit_code\":0,\"end_time\":\"2026-12-02T12:01:00Z\"}\n");
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_updated, 1);
	assert_int_equal(st.steps, 1);
	assert_int_equal(st.warnings, 0);
	assert_string_equal(q_text(e->db, "SELECT status FROM run_summary"), "ok");
	assert_int_equal(q_int(e->db, "SELECT n_steps FROM run_summary"), 4);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 6);
	assert_string_equal(q_text(e->db, "SELECT end_time FROM runs"), "2026-12-02T12:01:00Z");
}

static void test_corrupt_middle(void **state)
{
	struct env *e = *state;
	struct collect_stats st;

	assert_int_equal(collect(e->db, FIX "1008-corrupt.jsonl", &st), 0);
	assert_int_equal(st.warnings, 2);
	assert_int_equal(st.steps, 6);
	assert_string_equal(q_text(e->db, "SELECT status FROM runs"), "ok");
	assert_string_equal(q_text(e->db, "SELECT group_concat(step) FROM steps"), "0,1,2,4,5,6");
	/* warnings are not repeated on the next collect */
	assert_int_equal(collect(e->db, FIX "1008-corrupt.jsonl", &st), 0);
	assert_int_equal(st.warnings, 0);
	assert_int_equal(st.runs_unchanged, 1);
}

static void test_running_adhoc_cpu(void **state)
{
	struct env *e = *state;
	struct collect_stats st;

	assert_int_equal(collect(e->db, FIX "1009-running.jsonl", &st), 0);
	assert_string_equal(q_text(e->db, "SELECT status FROM run_summary"), "running");
	assert_string_equal(q_text(e->db, "SELECT sweep FROM run_summary"), "adhoc");
	assert_string_equal(q_text(e->db, "SELECT source FROM sweeps"), "adhoc");
	assert_string_equal(q_text(e->db, "SELECT peak_tflops FROM run_summary"), "NULL");
	assert_string_equal(q_text(e->db, "SELECT mfu FROM run_summary"), "NULL");
	assert_string_equal(q_text(e->db, "SELECT hfu FROM run_summary"), "NULL");
	assert_true(q_dbl(e->db, "SELECT tflops_per_gpu FROM run_summary") > 0);
}

static void test_newer_and_empty(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char err[512] = "";

	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	assert_int_equal(results_collect_path(e->db, FIX "1010-newer.jsonl", &st, err, sizeof(err)),
			 -1);
	assert_int_equal(st.errors, 1);
	assert_non_null(strstr(err, "1010-newer.jsonl:1: run log version 2 is newer than this "
				    "build reads (1)"));
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 0);
	assert_int_equal(collect(e->db, FIX "1011-empty.jsonl", &st), 0);
	assert_int_equal(st.warnings, 1);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 0);
	assert_int_equal(collect(e->db, "tests/fixtures/runlogs/no-such-file.jsonl", &st), -1);
}

/* Every table as text, to compare two databases' content (collected times left out). */
static char *dump(sqlite3 *db)
{
	static char out[65536];
	static const char *const qs[] = {
	    "SELECT group_concat(x, '|') FROM (SELECT name || source AS x FROM sweeps ORDER BY "
	    "name)",
	    "SELECT group_concat(x, '|') FROM (SELECT layout_id || canonical AS x FROM layouts "
	    "ORDER BY layout_id)",
	    "SELECT group_concat(x, '|') FROM (SELECT run_uid || status || "
	    "ifnull(failure_class, '') || ifnull(exit_code, '') || log_bytes || bytes_ingested AS "
	    "x FROM runs ORDER BY run_uid)",
	    "SELECT count(*) || ':' || total(time_s) || ':' || total(step) || ':' || total(loss) "
	    "FROM steps",
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n", q_text(db, "%s", qs[i]));
	return out;
}

/* The statistics computed from the step rows in SQL, independently of the collector's C
 * (which the schema caches in run_stats): steady-state count, mean, median (window
 * functions), sample std, phase means; peak memory and per-rank peaks over every step. */
#define ORACLE                                                                                     \
	"WITH w AS (SELECT run_id, time_s, ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY "       \
	"time_s) AS rn, COUNT(*) OVER (PARTITION BY run_id) AS cnt, AVG(time_s) OVER (PARTITION "  \
	"BY run_id) AS mean FROM steps WHERE warmup = 0), o AS (SELECT run_id, COUNT(*) AS "       \
	"n_steps, AVG(time_s) AS step_time_mean, AVG(CASE WHEN rn IN ((cnt + 1) / 2, (cnt + 2) / " \
	"2) THEN time_s END) AS step_time_median, CASE WHEN COUNT(*) > 1 THEN sqrt(SUM((time_s - " \
	"mean) * (time_s - mean)) / (COUNT(*) - 1)) END AS step_time_std FROM w GROUP BY "         \
	"run_id), ph AS (SELECT run_id, AVG(forward_s) AS f, AVG(backward_s) AS b, "               \
	"AVG(optimizer_s) AS op, AVG(comm_exposed_s) AS ce, AVG(bubble_s) AS bu FROM steps WHERE " \
	"warmup = 0 GROUP BY run_id), rk AS (SELECT run_id, json_group_array(m) AS rpm FROM "      \
	"(SELECT s.run_id, CAST(j.key AS INTEGER) AS k, MAX(j.value) AS m FROM steps s, "          \
	"json_each(s.rank_peak_mem) j WHERE s.rank_peak_mem IS NOT NULL GROUP BY s.run_id, k "     \
	"ORDER BY s.run_id, k) GROUP BY run_id) "

static int differ(double a, double b)
{
	return fabs(a - b) > 1e-12 * (fabs(a) > 1 ? fabs(a) : 1);
}

/* The cached run_stats equal the independent computation for every run. */
static void check_stats_cache(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int rows = 0;

	assert_int_equal(
	    sqlite3_prepare_v2(
		db,
		ORACLE "SELECT c.run_id, o.n_steps IS c.n_steps, o.step_time_mean, "
		       "c.step_time_mean, o.step_time_median, c.step_time_median, "
		       "ifnull(o.step_time_std, -1), ifnull(c.step_time_std, -1), "
		       "ifnull(ph.f, -1), ifnull(c.forward_s, -1), ifnull(ph.b, -1), "
		       "ifnull(c.backward_s, -1), ifnull(ph.op, -1), ifnull(c.optimizer_s, -1), "
		       "ifnull(ph.ce, -1), ifnull(c.comm_exposed_s, -1), ifnull(ph.bu, -1), "
		       "ifnull(c.bubble_s, -1), rk.rpm IS c.rank_peak_mem, "
		       "c.peak_mem_bytes IS (SELECT max(peak_mem_bytes) FROM steps WHERE "
		       "run_id = c.run_id) FROM run_stats c LEFT JOIN o USING (run_id) LEFT JOIN "
		       "ph USING (run_id) LEFT JOIN rk USING (run_id)",
		-1, &st, NULL),
	    SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		rows++;
		if (!sqlite3_column_int(st, 1) || !sqlite3_column_int(st, 18) ||
		    !sqlite3_column_int(st, 19))
			fail_msg("run %d: n_steps, rank_peak_mem or peak differ",
				 sqlite3_column_int(st, 0));
		for (int k = 2; k < 18; k += 2)
			if (sqlite3_column_type(st, k) != SQLITE_NULL &&
			    differ(sqlite3_column_double(st, k), sqlite3_column_double(st, k + 1)))
				fail_msg("run %d: column %d: %.17g, cached %.17g",
					 sqlite3_column_int(st, 0), k, sqlite3_column_double(st, k),
					 sqlite3_column_double(st, k + 1));
	}
	sqlite3_finalize(st);
	/* every run with steps has its row, and run_summary shows it */
	assert_int_equal(rows, q_int(db, "SELECT count(DISTINCT run_id) FROM steps"));
	assert_int_equal(q_int(db,
			       "SELECT count(*) FROM run_summary s JOIN run_stats c USING "
			       "(run_id) WHERE s.n_steps IS NOT c.n_steps OR s.step_time_mean "
			       "IS NOT c.step_time_mean OR s.rank_peak_mem IS NOT c.rank_peak_mem"),
			 0);
}

static void test_idempotent_directory(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char first[65536];

	assert_int_equal(collect(e->db, FIXDIR, &st), -1); /* the newer-version file is refused */
	assert_int_equal(st.files, 11);
	assert_int_equal(st.runs_new, 9);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.warnings, 3); /* two corrupt lines, one empty file */
	snprintf(first, sizeof(first), "%s", dump(e->db));
	assert_int_equal(collect(e->db, FIXDIR, &st), -1);
	assert_int_equal(st.runs_new, 0);
	assert_int_equal(st.runs_updated, 0);
	assert_int_equal(st.runs_unchanged, 9);
	assert_int_equal(st.steps, 0);
	assert_string_equal(dump(e->db), first);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 9);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 37);
	check_stats_cache(e->db);
}

static void test_grow(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/run-20261202T120000Z-node1-1009-running.jsonl", e->dir);
	copy_file(FIX "1009-running.jsonl", path, (size_t)-1);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_new, 1);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 4);
	f = fopen(path, "ab");
	assert_non_null(f);
	for (int i = 4; i < 7; i++)
		fprintf(f,
			"{\"type\":\"step\",\"step\":%d,\"warmup\":false,\"time_s\":2.0,"
			"\"tokens\":1024,\"loss\":4.0,\"peak_mem_bytes\":2000000}\n",
			i);
	fclose(f);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_new, 0);
	assert_int_equal(st.runs_updated, 1);
	assert_int_equal(st.steps, 3);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 7);
	assert_string_equal(q_text(e->db, "SELECT status FROM runs"), "running");
	assert_int_equal(q_int(e->db, "SELECT peak_mem_bytes FROM run_summary"), 2000000);
	append(path, "{\"type\":\"end\",\"status\":\"failed\",\"class\":\"killed\","
		     "\"message\":\"killed by signal 15\",\"exit_code\":143}\n");
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_updated, 1);
	assert_string_equal(q_text(e->db, "SELECT failure_class FROM runs"), "killed");
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 1);
	assert_int_equal(q_int(e->db, "SELECT n_steps FROM run_summary"), 5);
	check_stats_cache(e->db);
}

/* Steps written in multi-row batches: every value lands, and a repeated step index
 * replaces the earlier record within a batch and across batches. */
static void test_batches_and_repeats(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256], line[8192];
	FILE *in, *out;

	snprintf(path, sizeof(path), "%s/run-batches.jsonl", e->dir);
	in = fopen(FIX "1001-ok.jsonl", "rb");
	out = fopen(path, "wb");
	assert_non_null(in);
	assert_non_null(out);
	assert_non_null(fgets(line, sizeof(line), in)); /* the header */
	fputs(line, out);
	fclose(in);
	for (int i = 0; i < 100; i++)
		fprintf(out,
			"{\"type\":\"step\",\"step\":%d,\"warmup\":%s,\"time_s\":%d.5,"
			"\"tokens\":%d,\"loss\":%d.25,\"peak_mem_bytes\":%d,"
			"\"rank_peak_mem_bytes\":[%d,7],\"phases\":{\"forward_s\":0.%d,"
			"\"bubble_s\":null}}\n",
			i, i < 2 ? "true" : "false", i, 1000 + i, i, 5000 + i, i, i + 1);
	/* repeats: step 10 inside the same batch region, step 3 far behind */
	fputs("{\"type\":\"step\",\"step\":10,\"warmup\":false,\"time_s\":99}\n", out);
	fputs("{\"type\":\"step\",\"step\":3,\"warmup\":false,\"time_s\":77}\n", out);
	fclose(out);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.steps, 102);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 100);
	close_to(q_dbl(e->db, "SELECT time_s FROM steps WHERE step = 10"), 99, 0);
	close_to(q_dbl(e->db, "SELECT time_s FROM steps WHERE step = 3"), 77, 0);
	assert_string_equal(q_text(e->db, "SELECT tokens FROM steps WHERE step = 10"), "NULL");
	/* every column of every other row as written */
	assert_int_equal(q_int(e->db,
			       "SELECT count(*) FROM steps WHERE step NOT IN (3, 10) AND "
			       "time_s = step + 0.5 AND tokens = 1000 + step AND loss = step "
			       "+ 0.25 AND peak_mem_bytes = 5000 + step AND rank_peak_mem = "
			       "'[' || step || ',7]' AND warmup = (step < 2) AND bubble_s IS "
			       "NULL AND backward_s IS NULL AND forward_s > 0"),
			 98);
	check_stats_cache(e->db);
	close_to(q_dbl(e->db, "SELECT step_time_median FROM run_summary"), 53, 1e-12);
}

/* A header whose layout_id does not match its fields: a warning, and the run filed under
 * the fields' own id; the stated id's layouts row is never made from fields that disagree
 * with it, so a later genuine run of that layout shows its own tp. */
static void test_layout_id_mismatch(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256], line[8192];
	FILE *in, *out;

	snprintf(path, sizeof(path), "%s/run-mismatch.jsonl", e->dir);
	in = fopen(FIX "1001-ok.jsonl", "rb");
	out = fopen(path, "wb");
	assert_non_null(in);
	assert_non_null(out);
	while (fgets(line, sizeof(line), in)) {
		char *at = strstr(line, "\"tp\":1,"), *uid = strstr(line, "node1-1001-ok");
		if (at)
			at[5] = '2'; /* tp=2 in the fields, the id still says tp=1 */
		if (uid)
			memcpy(uid, "node1-9001-xx", 13); /* a run of its own */
		fputs(line, out);
	}
	fclose(in);
	fclose(out);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.warnings, 1);
	assert_string_not_equal(q_text(e->db, "SELECT layout_id FROM runs"), "92ce779f2d33830f");
	assert_int_equal(q_int(e->db, "SELECT tp FROM layouts"), 2);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM layouts WHERE layout_id = "
				      "'92ce779f2d33830f'"),
			 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs r JOIN layouts l USING "
				      "(layout_id) WHERE l.tp = 2"),
			 1);
	/* the genuine run of 92ce779f2d33830f: its own fields */
	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_int_equal(st.warnings, 0);
	assert_int_equal(
	    q_int(e->db, "SELECT tp FROM layouts WHERE layout_id = '92ce779f2d33830f'"), 1);
	assert_int_equal(q_int(e->db, "SELECT tp FROM run_summary WHERE run_uid LIKE '%1001-ok'"),
			 1);
}

/* Copy from to to with the first occurrence of find on each line replaced by repl. */
static void copy_edit(const char *from, const char *to, const char *find, const char *repl)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char line[8192];

	assert_non_null(in);
	assert_non_null(out);
	while (fgets(line, sizeof(line), in)) {
		char *at = find ? strstr(line, find) : NULL;
		if (at) {
			fwrite(line, 1, (size_t)(at - line), out);
			fputs(repl, out);
			fputs(at + strlen(find), out);
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	fclose(out);
}

/* What a collected run looks like, to see that a refused log changed none of it. */
static const char *run_state(sqlite3 *db, const char *uid_like)
{
	static char buf[1024];
	char sql[512];

	snprintf(
	    sql, sizeof(sql),
	    "SELECT r.status || '|' || ifnull(r.failure_class, '') || '|' || n_steps || '|' || "
	    "step_time_mean || '|' || r.log_path || '|' || r.layout_id FROM run_summary s JOIN "
	    "runs r USING (run_uid) WHERE run_uid LIKE '%s'",
	    uid_like);
	snprintf(buf, sizeof(buf), "%s", q_text(db, sql));
	return buf;
}

/*
 * A log that reuses a collected run's run_uid is not that run: another run's log (its
 * layout), the same header with another start_time, or the same path rewritten (its first
 * bytes changed) is refused with an error that names the run and where it was collected
 * from, and the run stays as it was. A log moved or copied whole is the same run; a
 * shorter copy changes nothing (a warning).
 */
static void test_run_identity(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256], err[512], before[1024], abs_ok[4096];

	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_non_null(realpath(FIX "1001-ok.jsonl", abs_ok));
	snprintf(before, sizeof(before), "%s", run_state(e->db, "%1001-ok"));
	assert_non_null(strstr(before, "ok||5|"));

	/* the oom run's log given the ok run's uid, with slow extra records */
	snprintf(path, sizeof(path), "%s/run-foreign.jsonl", e->dir);
	copy_edit(FIX "1002-oom.jsonl", path, "node1-1002-oom", "node1-1001-ok");
	for (int i = 0; i < 5; i++)
		append(path, "{\"type\":\"step\",\"step\":9,\"warmup\":false,\"time_s\":76}\n");
	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	assert_int_equal(results_collect_path(e->db, path, &st, err, sizeof(err)), -1);
	assert_int_equal(st.errors, 1);
	assert_non_null(strstr(err, "run '20261202T120000Z-node1-1001-ok' was collected from '"));
	assert_non_null(strstr(err, abs_ok));
	assert_non_null(strstr(err, "this log is not that run: its layout 'ba351398a49735e6' is "
				    "not the run's '92ce779f2d33830f'; not collected"));
	assert_string_equal(run_state(e->db, "%1001-ok"), before);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 1);

	/* the same header but another start */
	snprintf(path, sizeof(path), "%s/run-restarted.jsonl", e->dir);
	copy_edit(FIX "1001-ok.jsonl", path, "2026-12-02T12:00:00Z", "2026-12-02T13:00:00Z");
	append(path, "{\"type\":\"step\",\"step\":9,\"warmup\":false,\"time_s\":76}\n");
	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	assert_int_equal(results_collect_path(e->db, path, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "its start_time '2026-12-02T13:00:00Z' is not the run's "
				    "'2026-12-02T12:00:00Z'"));
	assert_string_equal(run_state(e->db, "%1001-ok"), before);

	/* the same header and layout, other records: the bytes read differ */
	snprintf(path, sizeof(path), "%s/run-edited.jsonl", e->dir);
	copy_edit(FIX "1001-ok.jsonl", path, "\"time_s\":1.0,", "\"time_s\":9.0,");
	append(path, "{\"type\":\"step\",\"step\":9,\"warmup\":false,\"time_s\":76}\n");
	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	assert_int_equal(results_collect_path(e->db, path, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "its first 3135 bytes differ from those read"));
	assert_string_equal(run_state(e->db, "%1001-ok"), before);

	/* moved whole: the same run, read from its new place */
	snprintf(path, sizeof(path), "%s/run-moved.jsonl", e->dir);
	copy_file(FIX "1001-ok.jsonl", path, (size_t)-1);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.errors + st.warnings + st.runs_new + st.runs_updated, 0);
	assert_int_equal(st.runs_unchanged, 1);
	assert_non_null(strstr(q_text(e->db, "SELECT log_path FROM runs"), "/run-moved.jsonl"));
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 7);

	/* an older, shorter copy: nothing changes */
	snprintf(path, sizeof(path), "%s/run-older.jsonl", e->dir);
	copy_file(FIX "1001-ok.jsonl", path, 2000);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.warnings, 1);
	assert_int_equal(st.runs_unchanged, 1);
	assert_non_null(strstr(q_text(e->db, "SELECT log_path FROM runs"), "/run-moved.jsonl"));
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 7);
}

/* A log rewritten in place (not appended to) is not read on from the old offset. */
static void test_rewritten_in_place(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256], err[512];

	snprintf(path, sizeof(path), "%s/run-20261202T120000Z-node1-1009-running.jsonl", e->dir);
	copy_file(FIX "1009-running.jsonl", path, (size_t)-1);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 4);
	copy_edit(FIX "1009-running.jsonl", path, "\"step\":1,", "\"step\":1,\"tokens\":7,");
	append(path, "{\"type\":\"step\",\"step\":4,\"warmup\":false,\"time_s\":76}\n");
	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	assert_int_equal(results_collect_path(e->db, path, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "its first 2175 bytes differ from those read"));
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 4);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps WHERE time_s = 76"), 0);
}

/* A sweep name from a log header follows the one rule: '../../etc' or a quote is refused
 * (no sweep row, no run), with the rule named. */
static void test_header_sweep_name(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	const char *bad[] = {"../../etc", "a'b", "x y"};
	char path[256], err[512], repl[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(path, sizeof(path), "%s/run-bad-sweep-%zu.jsonl", e->dir, i);
		snprintf(repl, sizeof(repl), "\"sweep\":\"%s\"", bad[i]);
		copy_edit(FIX "1001-ok.jsonl", path, "\"sweep\":\"fixture-sweep\"", repl);
		memset(&st, 0, sizeof(st));
		st.quiet = 1;
		assert_int_equal(results_collect_path(e->db, path, &st, err, sizeof(err)), -1);
		assert_int_equal(st.errors, 1);
		assert_non_null(strstr(err, ":1: 'sweep': sweep name '"));
		assert_non_null(strstr(err, bad[i]));
		assert_non_null(strstr(err, "a sweep name is 1 to 63 letters"));
	}
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM sweeps"), 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 0);
}

/* The ok fixture with attention 'cudnn' (the field, the flags and the id the trainer
 * would write): read and stored as cudnn under its own layout id and label, beside the
 * flash original. */
static void test_cudnn_run(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[256], line[8192], out_line[8192], err[256];
	struct runlog_record r;
	FILE *in, *out;
	char id[LB_ID_LEN + 1] = "";

	snprintf(path, sizeof(path), "%s/run-20261202T120000Z-node1-1012-cudnn.jsonl", e->dir);
	in = fopen(FIX "1001-ok.jsonl", "rb");
	out = fopen(path, "wb");
	assert_non_null(in);
	assert_non_null(out);
	while (fgets(line, sizeof(line), in)) {
		static const char *const from[] = {"\"attention\":\"flash\"", "--attention flash",
						   "1001-ok"};
		static const char *const to[] = {"\"attention\":\"cudnn\"", "--attention cudnn",
						 "1012-cudnn"};
		char *at;

		for (int k = 0; k < 3; k++) {
			if (!(at = strstr(line, from[k])))
				continue;
			snprintf(out_line, sizeof(out_line), "%.*s%s%s", (int)(at - line), line,
				 to[k], at + strlen(from[k]));
			snprintf(line, sizeof(line), "%s", out_line);
		}
		if (!id[0]) { /* the header: the id of the layout it now names */
			assert_int_equal(
			    runlog_parse_line(line, strlen(line), &r, err, sizeof(err)), 0);
			assert_int_equal(r.header.layout.attention, LB_ATTN_CUDNN);
			snprintf(id, sizeof(id), "%s", r.header.layout_id_computed);
			runlog_record_release(&r);
			assert_string_not_equal(id, "92ce779f2d33830f");
			at = strstr(line, "92ce779f2d33830f");
			assert_non_null(at);
			memcpy(at, id, LB_ID_LEN);
		}
		fputs(line, out);
	}
	fclose(in);
	fclose(out);
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.runs_new, 1);
	assert_int_equal(st.warnings, 0); /* the id the log names is the one its fields give */
	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM layouts"), 2);
	assert_string_equal(
	    q_text(e->db, "SELECT layout_id FROM runs WHERE run_uid LIKE '%%cudnn'"), id);
	assert_string_equal(
	    q_text(e->db, "SELECT attention FROM layouts WHERE attention <> 'flash'"), "cudnn");
	assert_string_equal(
	    q_text(e->db, "SELECT label FROM run_summary WHERE run_uid LIKE '%%cudnn'"),
	    "cudnn+fused");
	assert_string_equal(
	    q_text(e->db, "SELECT status FROM run_summary WHERE run_uid LIKE '%%cudnn'"), "ok");
}

static void test_job_link(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	struct results_job j, k;
	struct lb_layout l;
	char err[256];
	int64_t id;

	lb_layout_init(&l);
	l.dp = 2;
	l.gpus_per_node = 2;
	l.steps = 7;
	assert_int_equal(results_upsert_layout(e->db, &l, NULL), SQLITE_OK);
	results_job_init(&j);
	snprintf(j.executor, sizeof(j.executor), "slurm");
	snprintf(j.sweep, sizeof(j.sweep), "fixture-sweep");
	snprintf(j.layout_id, sizeof(j.layout_id), "92ce779f2d33830f");
	snprintf(j.array_job_id, sizeof(j.array_job_id), "4242");
	j.array_index = 3;
	j.submit_time = 1796212800; /* 2026-12-02T12:00:00Z */
	assert_int_equal(results_job_insert(e->db, &j, &id, err, sizeof(err)), 0);
	/* a later job of another layout with a plain id */
	k = j;
	k.array_job_id[0] = 0;
	k.array_index = -1;
	snprintf(k.job_id, sizeof(k.job_id), "4243");
	assert_int_equal(results_job_insert(e->db, &k, NULL, err, sizeof(err)), 0);
	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	assert_int_equal(collect(e->db, FIX "1003-nccl.jsonl", &st), 0);
	assert_int_equal(q_int(e->db, "SELECT job_ref FROM runs WHERE run_uid LIKE '%%1001-ok'"),
			 id);
	assert_int_equal(q_int(e->db, "SELECT job_ref FROM runs WHERE run_uid LIKE '%%1003-nccl'"),
			 k.id);
	assert_string_equal(
	    q_text(e->db, "SELECT submit_time FROM jobs WHERE id = %lld", (long long)id),
	    "2026-12-02T12:00:00Z");
}

static void test_jobs_api(void **state)
{
	struct env *e = *state;
	struct results_job j, *list;
	struct lb_layout l;
	char err[256], id[LB_ID_LEN + 1];
	size_t n;

	lb_layout_init(&l);
	lb_layout_id(&l, id);
	assert_int_equal(results_upsert_layout(e->db, &l, "flash+fused"), SQLITE_OK);
	assert_int_equal(results_upsert_layout(e->db, &l, "other"), SQLITE_OK); /* label kept */
	assert_string_equal(q_text(e->db, "SELECT label FROM layouts"), "flash+fused");
	assert_int_equal(
	    results_upsert_sweep(e->db, "s1", "spec", "specs/s1.json", "{}", err, sizeof(err)), 0);
	assert_int_equal(results_upsert_sweep(e->db, "s1", "spec", NULL, NULL, err, sizeof(err)),
			 0);
	assert_string_equal(q_text(e->db, "SELECT spec_path FROM sweeps"), "specs/s1.json");
	assert_int_equal(results_upsert_sweep(e->db, "s2", "bogus", NULL, NULL, err, sizeof(err)),
			 -1);

	results_job_init(&j);
	snprintf(j.executor, sizeof(j.executor), "local");
	snprintf(j.sweep, sizeof(j.sweep), "s1");
	snprintf(j.layout_id, sizeof(j.layout_id), "%s", id);
	assert_int_equal(results_job_insert(e->db, &j, NULL, err, sizeof(err)), 0);
	assert_int_equal(results_layout_has_active_job(e->db, "s1", id), 1); /* PENDING */
	assert_int_equal(results_layout_has_ok_run(e->db, "s1", id), 0);
	snprintf(j.state, sizeof(j.state), "FAILED");
	snprintf(j.failure_class, sizeof(j.failure_class), "oom");
	j.exit_code = 3;
	j.end_time = 1796212860;
	assert_int_equal(results_job_update(e->db, &j, err, sizeof(err)), 0);
	assert_int_equal(results_layout_has_active_job(e->db, "s1", id), 0);
	j.attempt = 2;
	j.state[0] = j.failure_class[0] = 0;
	j.exit_code = -1;
	j.end_time = 0;
	assert_int_equal(results_job_insert(e->db, &j, NULL, err, sizeof(err)), 0);
	assert_int_equal(results_jobs_list(e->db, "s1", 0, &list, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[0].state, "FAILED");
	assert_string_equal(list[0].failure_class, "oom");
	assert_int_equal(list[0].exit_code, 3);
	assert_int_equal(list[0].end_time, 1796212860);
	assert_int_equal(list[0].array_index, -1);
	free(list);
	assert_int_equal(results_jobs_list(e->db, "s1", 1, &list, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(list[0].attempt, 2);
	assert_string_equal(list[0].state, "PENDING");
	free(list);
	j.id = 999;
	assert_int_equal(results_job_update(e->db, &j, err, sizeof(err)), -1);
	assert_string_equal(err, "job row 999 not found");
	/* a job of an unknown layout is refused (foreign key) */
	snprintf(j.layout_id, sizeof(j.layout_id), "ffffffffffffffff");
	assert_int_equal(results_job_insert(e->db, &j, NULL, err, sizeof(err)), -1);
}

static void test_migrations(void **state)
{
	struct env *e = *state;
	static const char two_steps[] = "-- migrate: 1\nCREATE TABLE a (x INTEGER);\n"
					"-- migrate: 2\nALTER TABLE a ADD COLUMN y TEXT;\n"
					"INSERT INTO a VALUES (1, 'two');\n";
	char path[160], err[512];
	sqlite3 *db;

	/* a fresh database is at the current version with every table and view */
	assert_int_equal(results_schema_version(e->db), RESULTS_SCHEMA_VERSION);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM sqlite_master WHERE name IN "
				      "('sweeps','layouts','jobs','runs','steps','run_summary',"
				      "'best_layout')"),
			 7);
	assert_string_equal(q_text(e->db, "PRAGMA journal_mode"), "wal");

	/* an empty version-0 file is migrated on open */
	snprintf(path, sizeof(path), "%s/v0.db", e->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(results_schema_version(db), 0);
	sqlite3_close(db);
	assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), RESULTS_SCHEMA_VERSION);
	results_close(db);

	/* a run and its steps written by hand, its statistics by results_refresh_run_stats */
	snprintf(path, sizeof(path), "%s/hand.db", e->dir);
	{
		struct collect_stats cs;
		assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
		assert_int_equal(
		    sqlite3_exec(
			db,
			"INSERT INTO sweeps (name, source) VALUES ('old', 'adhoc');"
			"INSERT INTO layouts (layout_id, model, n_layers, hidden, n_heads, n_kv_heads, ffn, "
			"vocab, tied, seq_len, global_batch, micro_batch, tp, pp, dp, gpus, "
			"gpus_per_node, nodes, sequence_parallel, zero_stage, checkpointing, "
			"attention, norm, steps, warmup, seed, canonical, label, virtual_stages, "
			"stage_layers) VALUES ('abc', 'tiny', 4, 64, 4, 4, 128, 256, 0, "
			"128, 8, 1, 1, 1, 1, 1, 1, 1, 0, 0, 'none', 'flash', 'fused', 7, 2, 1, "
			"'x', NULL, 1, NULL);"
			"INSERT INTO runs (id, run_uid, layout_id, sweep, source, status, "
			"world_size, peak_tflops, flops_per_step) VALUES (1, 'old-run', 'abc', "
			"'old', 'run', 'ok', 1, 100, 1e12);"
			"INSERT INTO steps (run_id, step, warmup, time_s, peak_mem_bytes) "
			"VALUES (1, 0, 1, 9.0, 5), (1, 1, 0, 2.0, 7), (1, 2, 0, 4.0, 6);",
			NULL, NULL, NULL),
		    SQLITE_OK);
		assert_int_equal(results_refresh_run_stats(db, 1), 0);
		assert_int_equal(q_int(db, "SELECT n_steps FROM run_summary"), 2);
		close_to(q_dbl(db, "SELECT step_time_mean FROM run_summary"), 3.0, 1e-12);
		close_to(q_dbl(db, "SELECT mfu FROM run_summary"), 1e12 / (3.0 * 100e12), 1e-15);
		assert_int_equal(q_int(db, "SELECT peak_mem_bytes FROM run_summary"), 7);
		/* and the database takes collected runs beside it */
		memset(&cs, 0, sizeof(cs));
		cs.quiet = 1;
		assert_int_equal(
		    results_collect_path(db, FIX "1001-ok.jsonl", &cs, err, sizeof(err)), 0);
		assert_int_equal(q_int(db, "SELECT count(*) FROM run_summary WHERE n_steps = 5"),
				 1);
		results_close(db);
	}

	/* the migration machinery, on texts of the test's own: step by step, a version-1
	 * database gets only step 2 */
	snprintf(path, sizeof(path), "%s/steps.db", e->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(
	    results_migrate(db, "-- migrate: 1\nCREATE TABLE a (x INTEGER);\n", err, sizeof(err)),
	    0);
	assert_int_equal(results_schema_version(db), 1);
	assert_int_equal(results_migrate(db, two_steps, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), 2);
	assert_string_equal(q_text(db, "SELECT y FROM a"), "two");
	assert_int_equal(results_migrate(db, two_steps, err, sizeof(err)), 0); /* no-op */
	assert_int_equal(q_int(db, "SELECT count(*) FROM a"), 1);
	/* a failing step is rolled back and leaves the version */
	assert_int_equal(results_migrate(db,
					 "-- migrate: 1\n-- migrate: 2\n-- migrate: 3\nBOGUS;\n",
					 err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "schema migration to version 3"));
	assert_int_equal(results_schema_version(db), 2);
	/* steps out of order are refused */
	assert_int_equal(results_migrate(db, "-- migrate: 2\nSELECT 1;\n", err, sizeof(err)), -1);
	sqlite3_close(db);

	/* a newer database is refused with a clear message */
	snprintf(path, sizeof(path), "%s/new.db", e->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(results_open(path, &db, err, sizeof(err)), -1);
	assert_null(db);
	assert_non_null(strstr(err, "has schema version 99, newer than this build's"));

	/* not a database */
	snprintf(path, sizeof(path), "%s/junk.db", e->dir);
	{
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		fputs("this is not an sqlite file, not at all, no; padding padding padding\n", f);
		fclose(f);
	}
	assert_int_equal(results_open(path, &db, err, sizeof(err)), -1);
}

/* The views part of a schema text: its views are dropped before the steps (which may
 * then change what they read) and made again after them from their current text; a view
 * it does not name is left alone, and a database at the last step is not touched. */
static void test_migrate_views(void **state)
{
	struct env *e = *state;
	static const char one[] = "-- migrate: 1\nCREATE TABLE a (x INTEGER, y INTEGER);\n"
				  "INSERT INTO a VALUES (3, 5);\n"
				  "-- views\nCREATE VIEW v AS SELECT x FROM a;\n";
	static const char two[] = "-- migrate: 1\nCREATE TABLE a (x INTEGER, y INTEGER);\n"
				  "INSERT INTO a VALUES (3, 5);\n"
				  "-- migrate: 2\nALTER TABLE a DROP COLUMN x;\n"
				  "ALTER TABLE a ADD COLUMN z INTEGER DEFAULT 4;\n"
				  "-- views\nCREATE VIEW v AS SELECT y + z AS w FROM a;\n";
	char path[160], err[512];
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/views.db", e->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(results_migrate(db, one, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), 1);
	assert_int_equal(q_int(db, "SELECT x FROM v"), 3);
	assert_int_equal(sqlite3_exec(db, "CREATE VIEW mine AS SELECT 1 AS k", NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(results_migrate(db, two, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), 2);
	assert_int_equal(q_int(db, "SELECT w FROM v"), 9);
	assert_int_equal(sqlite3_exec(db, "DROP VIEW v", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(results_migrate(db, two, err, sizeof(err)), 0); /* no-op */
	assert_int_equal(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'v'"), 0);
	assert_int_equal(q_int(db, "SELECT k FROM mine"), 1);
	/* a second views part is refused */
	assert_int_equal(
	    results_migrate(db, "-- migrate: 1\n-- views\n-- views\n", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "views"));
	sqlite3_close(db);
}

/* Write n run logs of m steps each under dir. */
/* Phase means (steady state) and per-rank peaks (element-wise maximum over every step) in
 * run_stats and run_summary: the two-rank fixture, a log whose rank peaks are highest in
 * different steps and where a step lacks phases, and a version-3 file backfilled by step 4. */
static void test_phases(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char path[160], err[512], line[8192];
	sqlite3 *db;
	FILE *f;

	/* 1001-ok: steady steps 1.0 1.2 1.1 1.4 1.3 s, phases 0.3/0.6/0.05/0.04/0 of each */
	assert_int_equal(collect(e->db, FIX "1001-ok.jsonl", &st), 0);
	close_to(q_dbl(e->db, "SELECT forward_s FROM run_summary"), 0.36, 1e-12);
	close_to(q_dbl(e->db, "SELECT backward_s FROM run_summary"), 0.72, 1e-12);
	close_to(q_dbl(e->db, "SELECT optimizer_s FROM run_summary"), 0.06, 1e-12);
	close_to(q_dbl(e->db, "SELECT comm_exposed_s FROM run_summary"), 0.048, 1e-12);
	close_to(q_dbl(e->db, "SELECT bubble_s FROM run_summary"), 0.0, 0);
	assert_string_equal(q_text(e->db, "SELECT rank_peak_mem FROM run_summary"),
			    "[1000006,999996]");
	assert_int_equal(q_int(e->db, "SELECT peak_mem_bytes FROM run_summary"), 1000006);

	/* a log of our own: the fixture's header under another run_uid */
	f = fopen(FIX "1001-ok.jsonl", "rb");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	char *uid = strstr(line, "node1-1001");
	assert_non_null(uid);
	memcpy(uid, "node1-1099", 10);
	snprintf(path, sizeof(path), "%s/run-phases.jsonl", e->dir);
	append(path, line);
	append(path, "{\"type\":\"step\",\"step\":0,\"warmup\":true,\"time_s\":9,"
		     "\"peak_mem_bytes\":30,\"rank_peak_mem_bytes\":[10,30],"
		     "\"phases\":{\"forward_s\":5,\"bubble_s\":4}}\n"
		     "{\"type\":\"step\",\"step\":1,\"warmup\":false,\"time_s\":2,"
		     "\"peak_mem_bytes\":20,\"rank_peak_mem_bytes\":[20,5],"
		     "\"phases\":{\"forward_s\":1,\"backward_s\":0.5,\"bubble_s\":0.25}}\n"
		     "{\"type\":\"step\",\"step\":2,\"warmup\":false,\"time_s\":4,"
		     "\"peak_mem_bytes\":8,\"rank_peak_mem_bytes\":[8,7]}\n"
		     "{\"type\":\"step\",\"step\":3,\"warmup\":false,\"time_s\":3,"
		     "\"phases\":{\"forward_s\":2,\"bubble_s\":0.75}}\n"
		     "{\"type\":\"end\",\"status\":\"ok\"}\n");
	assert_int_equal(collect(e->db, path, &st), 0);
	assert_int_equal(st.warnings, 0);
#define R99 RUN("1099-ok")
	close_to(q_dbl(e->db, "SELECT forward_s FROM run_summary WHERE run_id = " R99), 1.5, 1e-12);
	close_to(q_dbl(e->db, "SELECT backward_s FROM run_summary WHERE run_id = " R99), 0.5,
		 1e-12);
	assert_true(isnan(q_dbl(e->db, "SELECT optimizer_s FROM run_summary WHERE run_id = " R99)));
	assert_true(
	    isnan(q_dbl(e->db, "SELECT comm_exposed_s FROM run_summary WHERE run_id = " R99)));
	close_to(q_dbl(e->db, "SELECT bubble_s FROM run_summary WHERE run_id = " R99), 0.5, 1e-12);
	assert_string_equal(
	    q_text(e->db, "SELECT rank_peak_mem FROM run_summary WHERE run_id = " R99), "[20,30]");
	close_to(q_dbl(e->db, "SELECT step_time_mean FROM run_summary WHERE run_id = " R99), 3.0,
		 1e-12);
	/* results_refresh_run_stats gives the same row */
	char before[1024];
	snprintf(before, sizeof(before), "%s",
		 q_text(e->db, "SELECT forward_s || backward_s || ifnull(optimizer_s, '-') || "
			       "bubble_s || rank_peak_mem FROM run_stats WHERE run_id = " R99));
	assert_int_equal(results_refresh_run_stats(e->db, q_int(e->db, "SELECT " R99)), 0);
	assert_string_equal(q_text(e->db, "SELECT forward_s || backward_s || "
					  "ifnull(optimizer_s, '-') || bubble_s || rank_peak_mem "
					  "FROM run_stats WHERE run_id = " R99),
			    before);
	check_stats_cache(e->db);

	/* steps written by hand, with phases: results_refresh_run_stats fills run_stats */
	snprintf(path, sizeof(path), "%s/hand.db", e->dir);
	{
		assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
		assert_int_equal(
		    sqlite3_exec(
			db,
			"INSERT INTO sweeps (name, source) VALUES ('old', 'adhoc');"
			"INSERT INTO layouts (layout_id, model, n_layers, hidden, n_heads, n_kv_heads, ffn, "
			"vocab, tied, seq_len, global_batch, micro_batch, tp, pp, dp, gpus, "
			"gpus_per_node, nodes, sequence_parallel, zero_stage, checkpointing, "
			"attention, norm, steps, warmup, seed, canonical, label, virtual_stages, "
			"stage_layers) VALUES ('abc', 'tiny', 4, 64, 4, 4, 128, 256, 0, "
			"128, 8, 1, 1, 2, 1, 2, 1, 1, 0, 0, 'none', 'flash', 'fused', 7, 2, 1, "
			"'x', NULL, 1, NULL);"
			"INSERT INTO runs (id, run_uid, layout_id, sweep, source, status, "
			"world_size) VALUES (1, 'old-run', 'abc', 'old', 'run', 'ok', 2),"
			"(2, 'old-run-2', 'abc', 'old', 'run', 'ok', 2);"
			"INSERT INTO steps (run_id, step, warmup, time_s, peak_mem_bytes, "
			"forward_s, comm_exposed_s, bubble_s, rank_peak_mem) VALUES "
			"(1, 0, 1, 9.0, 9, 7, 7, 7, '[9,1]'), (1, 1, 0, 2.0, 6, 1, 0.2, 0.4, "
			"'[3,6]'), (1, 2, 0, 4.0, 5, 3, 0.4, 0.8, '[5,4]'),"
			"(2, 0, 0, 1.0, NULL, NULL, NULL, NULL, NULL);",
			NULL, NULL, NULL),
		    SQLITE_OK);
		assert_int_equal(q_int(db, "SELECT count(*) FROM run_stats"), 0);
		assert_int_equal(results_refresh_run_stats(db, 1), 0);
		assert_int_equal(results_refresh_run_stats(db, 2), 0);
		assert_int_equal(q_int(db, "SELECT peak_mem_bytes FROM run_stats WHERE run_id = 1"),
				 9);
		close_to(q_dbl(db, "SELECT forward_s FROM run_stats WHERE run_id = 1"), 2.0, 1e-12);
		close_to(q_dbl(db, "SELECT forward_s FROM run_summary WHERE run_id = 1"), 2.0,
			 1e-12);
		close_to(q_dbl(db, "SELECT comm_exposed_s FROM run_summary WHERE run_id = 1"), 0.3,
			 1e-12);
		close_to(q_dbl(db, "SELECT bubble_s FROM run_summary WHERE run_id = 1"), 0.6,
			 1e-12);
		assert_true(
		    isnan(q_dbl(db, "SELECT backward_s FROM run_summary WHERE run_id = 1")));
		assert_string_equal(q_text(db, "SELECT rank_peak_mem FROM run_summary "
					       "WHERE run_id = 1"),
				    "[9,6]");
		assert_true(isnan(q_dbl(db, "SELECT forward_s FROM run_summary WHERE run_id = 2")));
		assert_string_equal(q_text(db, "SELECT rank_peak_mem FROM run_summary "
					       "WHERE run_id = 2"),
				    "NULL");
		assert_int_equal(q_int(db, "SELECT count(*) FROM best_layout"), 1);
		check_stats_cache(db);
		results_close(db);
	}
}

static void write_runs(const char *dir, int n, int m)
{
	char path[256];

	for (int r = 0; r < n; r++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/run-r%04d.jsonl", dir, r);
		f = fopen(path, "wb");
		assert_non_null(f);
		fprintf(f,
			"{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":1,"
			"\"run_uid\":\"r%04d\",\"layout_id\":\"92ce779f2d33830f\",\"layout\":{"
			"\"model\":\"tiny\",\"seq_len\":128,\"global_batch\":8,\"micro_batch\":1,"
			"\"tp\":1,\"pp\":1,\"dp\":2,\"gpus_per_node\":2,\"nodes\":1,"
			"\"sequence_parallel\":0,\"zero_stage\":0,\"checkpointing\":\"none\","
			"\"attention\":\"flash\",\"norm\":\"fused\"},\"model\":{\"name\":\"tiny\","
			"\"layers\":4,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"ffn\":128,"
			"\"vocab\":256,\"tied\":0},\"flops_per_step\":1614151680,\"world_size\":2,"
			"\"sweep\":\"load\"}\n",
			r);
		for (int s = 0; s < m; s++)
			fprintf(f,
				"{\"type\":\"step\",\"step\":%d,\"warmup\":%s,\"time_s\":%g,"
				"\"tokens\":1024,\"loss\":3.5}\n",
				s, s < 2 ? "true" : "false", 1.0 + 0.001 * s);
		fprintf(f, "{\"type\":\"end\",\"status\":\"ok\",\"exit_code\":0}\n");
		fclose(f);
	}
}

/* A reader process queries run_summary in a loop while the parent collects: no
 * "database is locked" (or any other) error on either side. */
static void test_reader_during_collect(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	char runs[128], done[160];
	pid_t pid;
	int status;

	snprintf(runs, sizeof(runs), "%s/runs", e->dir);
	snprintf(done, sizeof(done), "%s/done", e->dir);
	assert_int_equal(mkdir(runs, 0755), 0);
	write_runs(runs, 150, 300);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sqlite3 *db;
		char err[256];
		int loops = 0, bad = 0;
		struct stat sb;
		if (results_open(e->db_path, &db, err, sizeof(err)))
			_exit(2);
		while (stat(done, &sb) != 0 || loops < 3) {
			sqlite3_stmt *q;
			int rc = sqlite3_prepare_v2(db,
						    "SELECT count(*), total(step_time_mean) FROM "
						    "run_summary",
						    -1, &q, NULL);
			if (rc == SQLITE_OK) {
				while ((rc = sqlite3_step(q)) == SQLITE_ROW)
					;
				sqlite3_finalize(q);
			}
			if (rc != SQLITE_DONE && rc != SQLITE_OK) {
				fprintf(stderr, "reader: %s\n", sqlite3_errmsg(db));
				bad++;
			}
			loops++;
		}
		results_close(db);
		_exit(bad ? 1 : 0);
	}
	assert_int_equal(collect(e->db, runs, &st), 0);
	{
		FILE *f = fopen(done, "w");
		assert_non_null(f);
		fclose(f);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(st.runs_new, 150);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 150 * 300);
	assert_int_equal(q_int(e->db, "SELECT sum(n_steps) FROM run_summary"), 150 * 298);
}

/* results_db_open(RESULTS_DB_READ): never creates or migrates, refuses writes and ATTACH;
 * results_migrate re-reads user_version inside its transaction (a second migrator of the
 * same steps finds them applied). */
static void test_read_mode(void **state)
{
	struct env *e = *state;
	char path[160], err[512];
	struct stat sb;
	sqlite3 *db, *w;

	/* a missing file is not created */
	snprintf(path, sizeof(path), "%s/missing.db", e->dir);
	assert_int_equal(results_db_open(path, RESULTS_DB_READ, &db, err, sizeof(err)), -1);
	assert_null(db);
	assert_non_null(strstr(err, "does not exist"));
	assert_int_not_equal(stat(path, &sb), 0);

	/* a current file reads; writes and ATTACH fail */
	assert_int_equal(results_db_open(e->db_path, RESULTS_DB_READ, &db, err, sizeof(err)), 0);
	assert_int_equal(sqlite3_db_readonly(db, "main"), 1);
	assert_int_equal(q_int(db, "SELECT count(*) FROM runs"), 0);
	assert_int_not_equal(sqlite3_exec(db, "DELETE FROM runs", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "ATTACH ':memory:' AS m", NULL, NULL, NULL), SQLITE_AUTH);
	results_close(db);

	/* an older file (version 0: an SQLite file no writer has migrated) is refused with
	 * the fix, and left at its version */
	snprintf(path, sizeof(path), "%s/v0.db", e->dir);
	assert_int_equal(sqlite3_open(path, &w), SQLITE_OK);
	assert_int_equal(sqlite3_exec(w, "CREATE TABLE other (x INTEGER)", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(w);
	assert_int_equal(results_db_open(path, RESULTS_DB_READ, &db, err, sizeof(err)), -1);
	assert_null(db);
	assert_non_null(strstr(err, "schema version 0 is older than this layoutbench's"));
	assert_non_null(strstr(err, "run 'layoutbench collect' (or any writing command) once"));
	assert_int_equal(sqlite3_open(path, &w), SQLITE_OK);
	assert_int_equal(results_schema_version(w), 0);
	sqlite3_close(w);
	assert_int_equal(results_db_open(path, RESULTS_DB_WRITE, &db, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), RESULTS_SCHEMA_VERSION);
	results_close(db);

	/* two handles that both saw version 0: the second migration applies nothing */
	snprintf(path, sizeof(path), "%s/race.db", e->dir);
	{
		static const char two[] = "-- migrate: 1\nCREATE TABLE a (x INTEGER);\n"
					  "-- migrate: 2\nALTER TABLE a ADD COLUMN y TEXT;\n";
		sqlite3 *h1, *h2;
		assert_int_equal(sqlite3_open(path, &h1), SQLITE_OK);
		assert_int_equal(sqlite3_open(path, &h2), SQLITE_OK);
		sqlite3_busy_timeout(h1, 1000);
		sqlite3_busy_timeout(h2, 1000);
		assert_int_equal(results_schema_version(h2), 0);
		assert_int_equal(results_migrate(h1, two, err, sizeof(err)), 0);
		assert_int_equal(results_migrate(h2, two, err, sizeof(err)), 0);
		assert_int_equal(results_schema_version(h2), 2);
		sqlite3_close(h1);
		sqlite3_close(h2);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ok_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_view_arithmetic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failure_fixtures, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncated_then_completed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_middle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_running_adhoc_cpu, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_and_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idempotent_directory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grow, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_layout_id_mismatch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_identity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rewritten_in_place, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_header_sweep_name, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cudnn_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_batches_and_repeats, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_job_link, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_jobs_api, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrations, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrate_views, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_phases, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reader_during_collect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_mode, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
