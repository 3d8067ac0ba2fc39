/*
 * Unit tests of the paper importer: every CSV of the paper's data (skipped when the data
 * is absent) imports with the file's row count, failures classed, the sheet's MFU and
 * step time visible in run_summary, and a second import changes nothing.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "results/db.h"
#include "tests/unit/sql_query.h"
#include "results/import.h"
#include "results/paper_csv.h"
#include "tests/unit/paper_data.h"

struct env {
	char dir[64];
	sqlite3 *db;
	char **files; /* paths of the CSV files */
	int nfiles;
};

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A test that needs the paper's CSV files skips, saying where it looked. */
#define skip_no_data()                                                                             \
	do {                                                                                       \
		print_message("no paper data in '%s' (set LB_PAPER_DATA)\n", paper_data_dir());   \
		skip();                                                                            \
	} while (0)

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	char err[256], path[160];
	struct dirent *de;
	DIR *d;

	if (!e)
		return -1;
	*state = e;
	snprintf(e->dir, sizeof(e->dir), "/tmp/lb-import-XXXXXX");
	if (!mkdtemp(e->dir))
		return -1;
	snprintf(path, sizeof(path), "%s/results.db", e->dir);
	if (results_open(path, &e->db, err, sizeof(err)))
		return -1;
	d = opendir(paper_data_dir());
	if (!d)
		return 0; /* the tests that read the data skip; test_bad_inputs runs */
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n < 5 || strcmp(de->d_name + n - 4, ".csv"))
			continue;
		e->files = realloc(e->files, (size_t)(e->nfiles + 1) * sizeof(*e->files));
		if (!e->files)
			return -1;
		e->files[e->nfiles] = malloc(strlen(paper_data_dir()) + n + 2);
		sprintf(e->files[e->nfiles++], "%s/%s", paper_data_dir(), de->d_name);
	}
	closedir(d);
	qsort(e->files, (size_t)e->nfiles, sizeof(*e->files), cmp);
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char cmd[128];

	results_close(e->db);
	if (e->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
		if (system(cmd) != 0)
			return -1;
	}
	for (int i = 0; i < e->nfiles; i++)
		free(e->files[i]);
	free(e->files);
	free(e);
	return 0;
}

/* Data lines of a CSV file: non-blank lines after the title and the header. */
static int data_lines(const char *path, int *oom, int *kna, int *other)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int n = 0;

	*oom = *kna = *other = 0;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (line[strspn(line, " \r\n")] == 0)
			continue;
		n++;
		/* the step-time column (third) carries the failure text */
		*oom += strstr(line, ",OOM Error,") != NULL;
		*kna += strstr(line, ",Kernel not available,") != NULL;
		*other += strstr(line, ",Other Error,") != NULL;
	}
	fclose(f);
	return n - 2;
}

static void base_name(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	snprintf(out, len, "%.*s", (int)(strlen(b) - 4), b);
}

static void test_import_every_file(void **state)
{
	struct env *e = *state;
	struct import_stats st = {0};
	char err[512], sweep[256];
	int total = 0;

	if (!e->nfiles)
		skip_no_data();
	st.quiet = 1;
	for (int i = 0; i < e->nfiles; i++) {
		int oom, kna, other, n = data_lines(e->files[i], &oom, &kna, &other);

		if (results_import_paper(e->db, e->files[i], &st, err, sizeof(err)))
			fail_msg("%s", err);
		base_name(e->files[i], sweep, sizeof(sweep));
		total += n;
		assert_true(n > 0);
		assert_int_equal(
		    q_int(e->db, "SELECT count(*) FROM run_summary WHERE sweep = '%s'", sweep), n);
		assert_int_equal(q_int(e->db,
				       "SELECT count(*) FROM run_summary WHERE sweep = '%s' AND "
				       "failure_class = 'oom'",
				       sweep),
				 oom);
		assert_int_equal(q_int(e->db,
				       "SELECT count(*) FROM run_summary WHERE sweep = '%s' AND "
				       "failure_class = 'kernel_unavailable'",
				       sweep),
				 kna);
		assert_int_equal(q_int(e->db,
				       "SELECT count(*) FROM run_summary WHERE sweep = '%s' AND "
				       "failure_class = 'error'",
				       sweep),
				 other);
		assert_int_equal(q_int(e->db,
				       "SELECT count(*) FROM run_summary WHERE sweep = '%s' AND "
				       "status = 'ok'",
				       sweep),
				 n - oom - kna - other);
		assert_int_equal(q_int(e->db,
				       "SELECT count(*) FROM sweeps WHERE name = '%s' AND "
				       "source = 'paper'",
				       sweep),
				 1);
	}
	assert_int_equal(st.files, e->nfiles);
	assert_int_equal(st.rows, total);
	assert_int_equal(st.warnings, 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), total);
	/* every imported run: A100, peak 312, our FLOPs known, no step rows */
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM run_summary WHERE gpu <> 'A100' OR "
				      "peak_tflops <> 312 OR source <> 'paper'"),
			 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs WHERE flops_per_step IS NULL"), 0);
	/* beside the paper's count, the one without the input embedding lookup: 6*V*h per
	 * token less (vocabulary 128000 untied, hidden from the layout) */
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs r JOIN layouts l USING "
				      "(layout_id) WHERE abs(r.flops_per_step - "
				      "r.flops_per_step_no_embed - 6.0 * l.vocab * l.hidden * "
				      "r.tokens_per_step) > 1e-6 * r.flops_per_step OR "
				      "r.flops_per_step_no_embed IS NULL"),
			 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM steps"), 0);
	/* the paper's headline: 70.5% MFU for Llama 13B (2k, 64 GPUs) */
	assert_int_equal(q_int(e->db,
			       "SELECT CAST(round(mfu_best * 1000) AS INTEGER) FROM "
			       "best_layout WHERE model = 'llama-13b' AND seq_len = 2048 AND "
			       "gpus = 64"),
			 706);
	/* our MFU from the model arithmetic agrees with the sheet's within 1.1 points (the
	 * sheet averages per-step MFU; two rows' mean step times give 1.0-1.1 points less) */
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM run_summary WHERE status = 'ok' AND "
				      "abs(mfu - mfu_reported) > 0.011"),
			 0);
}

/* run_summary shows the sheet's MFU and step time exactly, row by row. */
static void test_summary_equals_sheet(void **state)
{
	struct env *e = *state;
	struct import_stats st = {0};
	char err[512], sweep[256];
	long checked = 0;

	if (!e->nfiles)
		skip_no_data();
	st.quiet = 1;
	for (int i = 0; i < e->nfiles; i++) {
		struct paper_row *rows;
		size_t n, len;
		char *text;
		FILE *f = fopen(e->files[i], "rb");

		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		len = (size_t)ftell(f);
		fseek(f, 0, SEEK_SET);
		text = malloc(len + 1);
		assert_int_equal(fread(text, 1, len, f), len);
		fclose(f);
		assert_int_equal(paper_csv_parse(text, len, &rows, &n, NULL, 0, err, sizeof(err)),
				 0);
		assert_int_equal(results_import_paper(e->db, e->files[i], &st, err, sizeof(err)),
				 0);
		base_name(e->files[i], sweep, sizeof(sweep));
		for (size_t k = 0; k < n; k++) {
			sqlite3_stmt *q;
			char uid[300];
			snprintf(uid, sizeof(uid), "paper:%s:%ld", sweep, rows[k].trial_id);
			assert_int_equal(
			    sqlite3_prepare_v2(e->db,
					       "SELECT mfu_reported, step_time_median, "
					       "step_time_mean, step_time_std, n_steps, "
					       "label, status FROM run_summary WHERE "
					       "run_uid = ?1",
					       -1, &q, NULL),
			    SQLITE_OK);
			sqlite3_bind_text(q, 1, uid, -1, SQLITE_STATIC);
			assert_int_equal(sqlite3_step(q), SQLITE_ROW);
			assert_string_equal((const char *)sqlite3_column_text(q, 5),
					    rows[k].kernel);
			if (rows[k].failed) {
				assert_int_equal(sqlite3_column_type(q, 0), SQLITE_NULL);
				assert_string_equal((const char *)sqlite3_column_text(q, 6),
						    "failed");
			} else {
				assert_true(sqlite3_column_double(q, 0) == rows[k].mfu);
				assert_true(sqlite3_column_double(q, 1) == rows[k].step_time_s);
				assert_true(sqlite3_column_double(q, 2) == rows[k].step_time_s);
				assert_int_equal(sqlite3_column_type(q, 3), SQLITE_NULL);
				checked++;
			}
			assert_int_equal(sqlite3_column_type(q, 4), SQLITE_NULL);
			sqlite3_finalize(q);
		}
		free(rows);
		free(text);
	}
	assert_true(checked > 200);
}

static void test_reimport_idempotent(void **state)
{
	struct env *e = *state;
	struct import_stats st = {0};
	char err[512];
	long long runs, layouts;
	double sum;

	if (!e->nfiles)
		skip_no_data();
	st.quiet = 1;
	for (int i = 0; i < e->nfiles; i++)
		assert_int_equal(results_import_paper(e->db, e->files[i], &st, err, sizeof(err)),
				 0);
	runs = q_int(e->db, "SELECT count(*) FROM runs");
	layouts = q_int(e->db, "SELECT count(*) FROM layouts");
	sum = (double)q_int(e->db, "SELECT CAST(total(mfu_reported) * 1e6 AS INTEGER) FROM runs");
	for (int i = 0; i < e->nfiles; i++)
		assert_int_equal(results_import_paper(e->db, e->files[i], &st, err, sizeof(err)),
				 0);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), runs);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM layouts"), layouts);
	assert_true((double)q_int(e->db, "SELECT CAST(total(mfu_reported) * 1e6 AS INTEGER) FROM "
					 "runs") == sum);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM sweeps"), e->nfiles);
}

static void test_bad_inputs(void **state)
{
	struct env *e = *state;
	struct import_stats st = {0};
	char err[512], path[160];
	FILE *f;

	assert_int_equal(
	    results_import_paper(e->db, "/nonexistent/llama_13B_x.csv", &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file"));
	snprintf(path, sizeof(path), "%s/notes.csv", e->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("title\nTrial ID\n", f);
	fclose(f);
	assert_int_equal(results_import_paper(e->db, path, &st, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "names no model"));
	snprintf(path, sizeof(path), "%s/llama_13B_broken.csv", e->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("title\nTrial ID,World Size\n1,x\n", f);
	fclose(f);
	assert_int_equal(results_import_paper(e->db, path, &st, err, sizeof(err)), -1);
	assert_int_equal(q_int(e->db, "SELECT count(*) FROM runs"), 0);
	assert_int_equal(st.files, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_import_every_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_summary_equals_sheet, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reimport_idempotent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
