/*
 * The one list of layout fields (common/layout_fields.def) against what is made from it:
 * results/schema.sql's layouts table has a column for each field, of the type its kind
 * stores, and no other but the four of its own; a layout whose every field differs from
 * its default comes back equal through the flags, the database row and the run log's
 * header, and a sparse field at its default leaves the canonical text as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/layout.h"
#include "harness/trainlog.h"
#include "results/db.h"
#include "results/runlog.h"

/* The layouts table's columns that are no layout field. */
static const char *const own_columns[] = {"layout_id", "gpus", "canonical", "label"};

static const char *column_type(enum lb_field_kind k)
{
	return k == LB_FK_NAME || k == LB_FK_ENUM || k == LB_FK_SPLIT ? "TEXT" : "INTEGER";
}

static void test_schema_columns(void **state)
{
	char dir[] = "/tmp/lb-fields-XXXXXX", path[64], err[256];
	int seen[LB_NFIELDS] = {0};
	sqlite3_stmt *st;
	sqlite3 *db;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/r.db", dir);
	assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT name, type FROM pragma_table_info('layouts')",
					    -1, &st, NULL),
			 SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *type = (const char *)sqlite3_column_text(st, 1);
		int f, own = 0;

		for (size_t i = 0; i < sizeof(own_columns) / sizeof(own_columns[0]); i++)
			own |= !strcmp(name, own_columns[i]);
		if (own)
			continue;
		for (f = 0; f < LB_NFIELDS && strcmp(lb_fields[f].column, name); f++)
			;
		if (f == LB_NFIELDS)
			fail_msg("layouts.%s is no field of common/layout_fields.def", name);
		if (strcmp(type, column_type(lb_fields[f].kind)))
			fail_msg("layouts.%s is %s; field '%s' stores %s", name, type,
				 lb_fields[f].key, column_type(lb_fields[f].kind));
		seen[f]++;
	}
	sqlite3_finalize(st);
	for (int f = 0; f < LB_NFIELDS; f++)
		if (seen[f] != 1)
			fail_msg(
			    "field '%s' has no column '%s' in results/schema.sql's layouts (add "
			    "a schema step that adds it)",
			    lb_fields[f].key, lb_fields[f].column);
	results_close(db);
	unlink(path);
	rmdir(dir);
}

/* A valid layout whose every field but the model's name differs from its default. */
static void unusual(struct lb_layout *l)
{
	char text[] = "--model tiny-deep --hidden 128 --heads 8 --kv-heads 2 --ffn 256 --vocab 512 "
		      "--tied 1 --seq-len 64 --global-batch 16 --micro-batch 2 --tp 2 --pp 2 "
		      "--dp 2 --gpus-per-node 4 --nodes 2 --sequence-parallel 1 --zero-stage 1 "
		      "--checkpointing selective --attention naive --norm unfused "
		      "--virtual-stages 2 --stage-layers 1,3,3,1 --steps 5 --warmup 1 --seed 12345";
	char *argv[64], *rest[64], *save = NULL, err[256];
	int n = 0, nrest;

	for (char *w = strtok_r(text, " ", &save); w && n < 64; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	lb_layout_init(l);
	assert_int_equal(lb_layout_parse_args(l, n, argv, rest, &nrest, err, sizeof(err)), 0);
	assert_int_equal(nrest, 0);
	if (lb_layout_check(l, err, sizeof(err)))
		fail_msg("the unusual layout is invalid: %s", err);
}

static void test_every_field_differs(void **state)
{
	struct lb_layout d, l;

	(void)state;
	lb_layout_init(&d);
	unusual(&l);
	for (int f = 0; f < LB_NFIELDS; f++) {
		char a[512], b[512];

		if (lb_fields[f].kind == LB_FK_NAME)
			continue;
		lb_field_text(&d, f, a, sizeof(a));
		lb_field_text(&l, f, b, sizeof(b));
		if (!strcmp(a, b))
			fail_msg("field '%s' is its default (%s) in the test's layout: give it "
				 "another value there",
				 lb_fields[f].key, a);
	}
}

static void test_database_round_trip(void **state)
{
	char dir[] = "/tmp/lb-fields-XXXXXX", path[64], err[256], cols[2048], sql[2400];
	struct lb_layout l, back;
	sqlite3_stmt *st;
	sqlite3 *db;

	(void)state;
	unusual(&l);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/r.db", dir);
	assert_int_equal(results_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(results_upsert_layout(db, &l, "x"), SQLITE_OK);
	snprintf(sql, sizeof(sql), "SELECT %s FROM layouts",
		 results_db_layout_columns(NULL, cols, sizeof(cols)));
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(results_db_layout_read(st, 0, &back, err, sizeof(err)), LB_NFIELDS);
	sqlite3_finalize(st);
	assert_true(lb_layout_equal(&l, &back));
	results_close(db);
	unlink(path);
	rmdir(dir);
}

static void test_run_log_round_trip(void **state)
{
	char dir[] = "/tmp/lb-fields-XXXXXX", err[256], line[8192];
	struct lb_runinfo info = {0};
	struct lb_trainlog lg;
	struct runlog_record rec;
	struct lb_layout l;
	FILE *f;

	(void)state;
	unusual(&l);
	assert_non_null(mkdtemp(dir));
	info.layout = &l;
	info.gpu = "cpu";
	info.peak_tflops = -1;
	info.backend = "cpu";
	info.world_size = lb_layout_world(&l);
	assert_int_equal(lb_trainlog_open(&lg, dir, &info, err, sizeof(err)), 0);
	f = fopen(lg.path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	unlink(lg.path);
	lb_trainlog_close(&lg);
	rmdir(dir);
	if (runlog_parse_line(line, strlen(line), &rec, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(rec.type, RUNLOG_HEADER);
	assert_true(lb_layout_equal(&l, &rec.header.layout));
	runlog_record_release(&rec);
}

/* A sparse field at its default is not in the canonical text, so a layout without it
 * keeps its id; away from its default it is. */
static void test_sparse_fields(void **state)
{
	struct lb_layout l, u;
	char a[1024], b[1024];

	(void)state;
	lb_layout_init(&l);
	unusual(&u);
	for (int f = 0; f < LB_NFIELDS; f++) {
		if (!(lb_fields[f].attrs & LB_FA_SPARSE))
			continue;
		char key[80];

		snprintf(key, sizeof(key), " %s=", lb_fields[f].key);
		lb_layout_canonical(&l, a, sizeof(a));
		lb_layout_canonical(&u, b, sizeof(b));
		if (strstr(a, key) || !strstr(b, key))
			fail_msg("sparse field '%s': '%s' / '%s'", lb_fields[f].key, a, b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_schema_columns),	cmocka_unit_test(test_every_field_differs),
	    cmocka_unit_test(test_database_round_trip), cmocka_unit_test(test_run_log_round_trip),
	    cmocka_unit_test(test_sparse_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
