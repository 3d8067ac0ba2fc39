/*
 * Unit tests of what the collector and the schema make of a run's numbers (schema step 2):
 * each run's health stored and shown by run_summary (ok, flat, diverged by a rise, by a
 * loss that is not finite, by a failure of class diverged; unknown when short), the device's
 * own memory reading beside the counted peak, MFU without the input embedding lookup
 * beside the paper's, the warning for a header whose FLOPs disagree with the layout's,
 * best_layout leaving diverged runs out, and a version-1 database with runs brought to
 * version 2 with every new column filled in.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/embed.h"
#include "common/layout.h"
#include "common/model.h"
#include "results/collect.h"
#include "results/db.h"
#include "tests/unit/sql_query.h"

#define FIX "tests/fixtures/runlogs/run-20261202T120000Z-node1-"

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
	snprintf(e->dir, sizeof(e->dir), "/tmp/lb-health-XXXXXX");
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

/* The ok fixture's header line (tiny, dp 2, H100, sweep fixture-sweep), malloc'd, without
 * its newline, with the run_uid replaced by uid and "flops_per_step":1614151680 by flops
 * when flops is not NULL. */
static char *header(const char *uid, const char *flops)
{
	FILE *f = fopen(FIX "1001-ok.jsonl", "r");
	char line[4096], out[4400], *p;

	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	line[strcspn(line, "\n")] = 0;
	p = strstr(line, "20261202T120000Z-node1-1001-ok");
	assert_non_null(p);
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - line), line, uid,
		 p + strlen("20261202T120000Z-node1-1001-ok"));
	if (flops) {
		char tmp[4400];
		p = strstr(out, "\"flops_per_step\":1614151680");
		assert_non_null(p);
		snprintf(tmp, sizeof(tmp), "%.*s\"flops_per_step\":%s%s", (int)(p - out), out,
			 flops, p + strlen("\"flops_per_step\":1614151680"));
		memcpy(out, tmp, strlen(tmp) + 1);
	}
	p = strdup(out);
	assert_non_null(p);
	return p;
}

/* A run log e->dir/run-<uid>.jsonl: n steps (the first warmup) of time_s each, the losses
 * given (NAN: null), device readings when dev (step i: 9000 + i and [8000 + i, 9000 + i],
 * the first rank's highest in step 0), an end record ok. */
static void write_log(struct env *e, const char *uid, const double *loss, int n, double time_s,
		      int dev, const char *flops)
{
	char path[256], *h = header(uid, flops);
	FILE *f;

	snprintf(path, sizeof(path), "%s/run-%s.jsonl", e->dir, uid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", h);
	free(h);
	for (int i = 0; i < n; i++) {
		fprintf(
		    f,
		    "{\"type\":\"step\",\"step\":%d,\"warmup\":%s,\"time_s\":%g,\"tokens\":1024,"
		    "\"loss\":",
		    i, i ? "false" : "true", time_s);
		if (isnan(loss[i]))
			fprintf(f, "null");
		else
			fprintf(f, "%.17g", loss[i]);
		fprintf(f, ",\"peak_mem_bytes\":%d", 1000 + i);
		if (dev)
			fprintf(f,
				",\"device_peak_mem_bytes\":%d,\"rank_device_peak_mem_bytes\":"
				"[%d,%d]",
				9000 + i, i ? 8000 + i : 9500, 9000 + i);
		fprintf(f, "}\n");
	}
	fprintf(f, "{\"type\":\"end\",\"status\":\"ok\",\"exit_code\":0}\n");
	fclose(f);
}

/* Drop the end record of a log write_log wrote: a run still going. */
static void strip_end(struct env *e, const char *uid)
{
	char path[256], buf[16384], *end;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/run-%s.jsonl", e->dir, uid);
	f = fopen(path, "r");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = 0;
	end = strstr(buf, "{\"type\":\"end\"");
	assert_non_null(end);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(buf, 1, (size_t)(end - buf), f);
	fclose(f);
}

static int collect(struct env *e, const char *path, struct collect_stats *st)
{
	char err[512];

	memset(st, 0, sizeof(*st));
	st->quiet = 1;
	return results_collect_path(e->db, path, st, err, sizeof(err));
}

#define UID(x)	    "20261204T120000Z-h-" x
#define HEALTH(uid) q_text(e->db, "SELECT health FROM run_summary WHERE run_uid = '" UID(uid) "'")

static void test_health_classes(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	static const double ok[] = {5.5, 5.3, 5.1, 4.9, 4.7, 4.5, 4.4, 4.3};
	static const double flat[] = {5.5, 5.5, 5.52, 5.48, 5.5, 5.51, 5.49, 5.5};
	static const double rose[] = {5.5, 5.6, 6.0, 7.5, 9.0, 8.0, 7.0, 6.9};
	static const double nan_mid[] = {5.5, 5.3, NAN, 4.9, 4.7, 4.5, 4.4, 4.3};
	static const double two[] = {5.5, 5.3};
	char dir[128];

	write_log(e, UID("ok"), ok, 8, 1.0, 0, NULL);
	write_log(e, UID("flat"), flat, 8, 1.0, 0, NULL);
	write_log(e, UID("rose"), rose, 8, 1.0, 0, NULL);
	write_log(e, UID("nan"), nan_mid, 8, 1.0, 0, NULL);
	write_log(e, UID("two"), two, 2, 1.0, 0, NULL);
	write_log(e, UID("grow"), ok, 8, 1.0, 0, NULL);
	strip_end(e, UID("grow")); /* still running */
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.runs_new, 6);
	assert_int_equal(st.warnings, 0);
	assert_string_equal(HEALTH("ok"), "ok");
	assert_string_equal(HEALTH("flat"), "flat");
	assert_string_equal(HEALTH("rose"), "diverged");
	assert_string_equal(HEALTH("nan"), "diverged");
	assert_string_equal(HEALTH("two"), "NULL"); /* too short to tell */
	assert_string_equal(HEALTH("grow"), "ok");
	/* the first loss and the last quarter's mean (the last two of eight) */
	assert_true(q_dbl(e->db, "SELECT loss_first FROM run_summary WHERE run_uid = '" UID(
				     "ok") "'") == 5.5);
	assert_true(fabs(q_dbl(e->db, "SELECT loss_last_quarter FROM run_summary WHERE "
				      "run_uid = '" UID("rose") "'") -
			 6.95) < 1e-12);
	/* a failed run of class diverged is diverged, and the fixtures' constant losses flat */
	snprintf(dir, sizeof(dir), "%s", FIX "1004-diverged.jsonl");
	assert_int_equal(collect(e, dir, &st), 0);
	assert_string_equal(q_text(e->db, "SELECT health FROM run_summary WHERE run_uid LIKE "
					  "'%%1004-diverged'"),
			    "diverged");
	assert_int_equal(collect(e, FIX "1001-ok.jsonl", &st), 0);
	assert_string_equal(
	    q_text(e->db, "SELECT health FROM run_summary WHERE run_uid LIKE '%%1001-ok'"), "flat");
	/* a grown log: the health follows its new steps (run_stats from the step rows); the
	 * log grows as a running trainer's does, by appending (a log rewritten over what was
	 * collected is another run, and refused) */
	{
		char path[256];
		FILE *f;

		snprintf(path, sizeof(path), "%s/run-" UID("grow") ".jsonl", e->dir);
		f = fopen(path, "a");
		assert_non_null(f);
		for (int i = 8; i < 12; i++)
			fprintf(f,
				"{\"type\":\"step\",\"step\":%d,\"warmup\":false,\"time_s\":1,"
				"\"loss\":9.0}\n",
				i);
		fprintf(f, "{\"type\":\"end\",\"status\":\"ok\"}\n");
		fclose(f);
	}
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.runs_updated, 1);
	assert_string_equal(HEALTH("grow"), "diverged");
}

static void test_device_memory(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	static const double loss[] = {5.5, 5.3, 5.1, 4.9, 4.7};

	write_log(e, UID("dev"), loss, 5, 1.0, 1, NULL);
	write_log(e, UID("nodev"), loss, 5, 1.0, 0, NULL);
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.runs_new, 2);
	/* the counted peak and the device's reading side by side, each the maximum */
	assert_int_equal(q_int(e->db, "SELECT peak_mem_bytes FROM run_summary WHERE run_uid = "
				      "'" UID("dev") "'"),
			 1004);
	assert_int_equal(q_int(e->db, "SELECT device_peak_mem_bytes FROM run_summary WHERE "
				      "run_uid = '" UID("dev") "'"),
			 9004);
	/* per rank, the element-wise maximum: rank 0 peaked in step 0 */
	assert_string_equal(q_text(e->db, "SELECT rank_device_peak_mem FROM run_summary WHERE "
					  "run_uid = '" UID("dev") "'"),
			    "[9500,9004]");
	assert_int_equal(q_int(e->db,
			       "SELECT device_peak_mem_bytes FROM steps s JOIN runs r ON "
			       "r.id = s.run_id WHERE r.run_uid = '" UID("dev") "' AND "
										"s.step = 2"),
			 9002);
	assert_string_equal(
	    q_text(e->db, "SELECT rank_device_peak_mem FROM steps s JOIN runs r "
			  "ON r.id = s.run_id WHERE r.run_uid = '" UID("dev") "' AND s.step = 2"),
	    "[8002,9002]");
	/* a log without the reading has none: NULL, never 0 */
	assert_int_equal(q_int(e->db, "SELECT device_peak_mem_bytes IS NULL FROM run_summary "
				      "WHERE run_uid = '" UID("nodev") "'"),
			 1);
	/* results_refresh_run_stats computes the same from the step rows */
	long long id = q_int(e->db, "SELECT id FROM runs WHERE run_uid = '" UID("dev") "'");
	assert_int_equal(sqlite3_exec(e->db, "DELETE FROM run_stats", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(results_refresh_run_stats(e->db, id), 0);
	assert_string_equal(q_text(e->db, "SELECT rank_device_peak_mem || ' ' || "
					  "device_peak_mem_bytes || ' ' || health FROM run_stats"),
			    "[9500,9004] 9004 ok");
}

static void test_mfu_no_embed(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	static const double loss[] = {5.5, 5.3, 5.1, 4.9, 4.7};
	struct lb_layout l;
	double ratio;

	lb_layout_init(&l);
	lb_model_preset("tiny", &l.model);
	l.seq_len = 128;
	l.global_batch = 8;
	ratio = lb_flops_per_step_as(&l, LB_FLOPS_NO_EMBED) / lb_flops_per_step(&l);
	write_log(e, UID("mfu"), loss, 5, 0.001, 0, NULL);
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.warnings, 0);
	double mfu = q_dbl(e->db, "SELECT mfu FROM run_summary");
	double noemb = q_dbl(e->db, "SELECT mfu_no_embed FROM run_summary");
	/* 1614151680 FLOPs in 1 ms on two GPUs of 989 TFLOP/s */
	assert_true(fabs(mfu - 1614151680.0 / (0.001 * 2 * 989e12)) < 1e-12);
	assert_true(fabs(noemb / mfu - ratio) < 1e-12);
	assert_true(ratio < 0.95); /* tiny's 256 x 64 embedding is a large share */
	assert_true(q_dbl(e->db, "SELECT flops_per_step_no_embed FROM runs") ==
		    lb_flops_per_step_as(&l, LB_FLOPS_NO_EMBED));
}

/* A header whose FLOPs are not its layout's: a warning naming both; the log's figure is
 * kept (the views divide it). */
static void test_flops_header_checked(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	static const double loss[] = {5.5, 5.3, 5.1, 4.9, 4.7};

	write_log(e, UID("bad"), loss, 5, 1.0, 0, "1714151680");
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.warnings, 1);
	assert_true(q_dbl(e->db, "SELECT flops_per_step FROM runs") == 1714151680.0);
	write_log(e, UID("good"), loss, 5, 1.0, 0, NULL);
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_int_equal(st.warnings, 0);
}

static void test_best_leaves_diverged_out(void **state)
{
	struct env *e = *state;
	struct collect_stats st;
	static const double ok[] = {5.5, 5.3, 5.1, 4.9, 4.7, 4.5};
	static const double rose[] = {5.5, 5.8, 6.3, 7.0, 8.0, 9.0};

	write_log(e, UID("slow-ok"), ok, 6, 1.02, 0, NULL);
	write_log(e, UID("fast-diverged"), rose, 6, 0.98, 0, NULL);
	assert_int_equal(collect(e, e->dir, &st), 0);
	assert_string_equal(q_text(e->db, "SELECT run_uid FROM best_layout"), UID("slow-ok"));
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM best_layout"), 1);
}

/* A database of schema version 1 with a collected run opens as version 2 with the run's
 * health, losses, FLOPs without the embedding filled in (results_upgrade_runs). */
static void test_upgrade_from_v1(void **state)
{
	struct env *e = *state;
	const char *schema = lb_embedded("results/schema.sql", NULL);
	const char *two;
	char *v1, path[160], err[512];
	sqlite3 *db;
	struct lb_layout l;

	assert_non_null(schema);
	two = strstr(schema, "\n-- migrate: 2");
	assert_non_null(two);
	v1 = strndup(schema, (size_t)(two - schema) + 1);
	assert_non_null(v1);
	snprintf(path, sizeof(path), "%s/v1.db", e->dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(results_migrate(db, v1, err, sizeof(err)), 0);
	free(v1);
	assert_int_equal(results_schema_version(db), 1);
	lb_layout_init(&l);
	lb_model_preset("tiny", &l.model);
	l.seq_len = 128;
	l.global_batch = 8;
	char id[LB_ID_LEN + 1], sql[2048], canon[1024];
	lb_layout_id(&l, id);
	lb_layout_canonical(&l, canon, sizeof(canon));
	/* the layout's row as a version-1 file holds it: that version's columns (a later
	 * layout field is a later step's column) */
	snprintf(sql, sizeof(sql),
		 "INSERT INTO layouts (layout_id, model, n_layers, hidden, n_heads, n_kv_heads, "
		 "ffn, vocab, tied, seq_len, global_batch, micro_batch, tp, pp, dp, gpus, "
		 "gpus_per_node, nodes, sequence_parallel, zero_stage, checkpointing, attention, "
		 "norm, canonical) VALUES ('%s', '%s', %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, "
		 "%d, %d, %d, %d, %d, %d, %d, '%s', '%s', '%s', '%s')",
		 id, l.model.name, l.model.n_layers, l.model.hidden, l.model.n_heads,
		 l.model.n_kv_heads, l.model.ffn, l.model.vocab, l.model.tied, l.seq_len,
		 l.global_batch, l.micro_batch, l.tp, l.pp, l.dp, lb_layout_world(&l),
		 l.gpus_per_node, l.nodes, l.sequence_parallel, l.zero_stage,
		 lb_ckpt_name(l.checkpointing), lb_attn_name(l.attention), lb_norm_name(l.norm),
		 canon);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO sweeps (name, source) VALUES ('s', 'adhoc');"
		 "INSERT INTO runs (id, run_uid, layout_id, sweep, source, status, peak_tflops, "
		 "world_size, flops_per_step, tokens_per_step) VALUES (1, 'u', '%s', 's', 'run', "
		 "'ok', 989, 1, %.17g, 1024);"
		 "INSERT INTO steps (run_id, step, warmup, time_s, loss, peak_mem_bytes) VALUES "
		 "(1, 0, 1, 2, 5.5, 10), (1, 1, 0, 1, 6.0, 11), (1, 2, 0, 1, 7.0, 11), "
		 "(1, 3, 0, 1, 8.0, 12);"
		 "INSERT INTO run_stats (run_id, n_steps, step_time_mean, peak_mem_bytes) VALUES "
		 "(1, 3, 1, 12);",
		 id, lb_flops_per_step(&l));
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(results_schema_version(db), RESULTS_SCHEMA_VERSION);
	assert_string_equal(q_text(db, "SELECT health FROM run_summary"), "diverged");
	assert_true(q_dbl(db, "SELECT loss_last_quarter FROM run_summary") == 8.0);
	assert_true(q_dbl(db, "SELECT flops_per_step_no_embed FROM runs") ==
		    lb_flops_per_step_as(&l, LB_FLOPS_NO_EMBED));
	assert_true(q_dbl(db, "SELECT mfu_no_embed FROM run_summary") > 0);
	/* the statistics the old collector wrote stay what they were */
	assert_int_equal(q_int(db, "SELECT n_steps FROM run_summary"), 3);
	assert_int_equal(q_int(db, "SELECT peak_mem_bytes FROM run_summary"), 12);
	/* a diverged run is no best layout */
	assert_int_equal(q_int(db, "SELECT count(*) FROM best_layout"), 0);
	results_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_health_classes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_device_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mfu_no_embed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flops_header_checked, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_best_leaves_diverged_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_upgrade_from_v1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
