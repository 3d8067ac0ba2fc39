/*
 * Unit tests of the report's database reading (report/load.h): against a scratch database
 * holding the contract's columns as plain tables (run_summary, best_layout), and against
 * the real schema (results_open) with runs and steps inserted directly, where MFU comes
 * from the view: known peak -> MFU from the mean steady-state step time; unknown peak (CPU)
 * -> MFU n/a, ranked by TFLOP/s per GPU; the memory figure's model from the runs' flags.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/layout.h"
#include "common/model.h"
#include "report/load.h"
#include "report/render.h"
#include "report/report.h"
#include "results/collect.h"
#include "results/db.h"

#define CONTRACT_COLUMNS                                                                           \
	"run_id INTEGER, run_uid TEXT, sweep TEXT, source TEXT, layout_id TEXT, label TEXT, "      \
	"model TEXT, seq_len INTEGER, global_batch INTEGER, gpus INTEGER, micro_batch INTEGER, "   \
	"tp INTEGER, pp INTEGER, dp INTEGER, sequence_parallel INTEGER, zero_stage INTEGER, "      \
	"checkpointing TEXT, attention TEXT, norm TEXT, status TEXT, failure_class TEXT, "         \
	"message TEXT, gpu TEXT, peak_tflops REAL, n_steps INTEGER, step_time_median REAL, "       \
	"step_time_mean REAL, step_time_std REAL, tokens_per_s_per_gpu REAL, "                     \
	"tflops_per_gpu REAL, mfu REAL, hfu REAL, mfu_reported REAL, peak_mem_bytes INTEGER, "     \
	"start_time TEXT, end_time TEXT, forward_s REAL, backward_s REAL, optimizer_s REAL, "      \
	"comm_exposed_s REAL, bubble_s REAL, rank_peak_mem TEXT"

static void exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sql: %s\n", msg);
	sqlite3_free(msg);
	assert_int_equal(rc, SQLITE_OK);
}

static char *figure_csv(struct report_runs *rs, enum report_kind k)
{
	struct report_figure f;
	struct lb_strbuf sb = LB_STRBUF_INIT;

	assert_int_equal(report_figure_build(rs, k, NULL, &f), 0);
	render_csv(&sb, &f);
	report_figure_release(&f);
	return lb_strbuf_detach(&sb);
}

static void test_contract_tables(void **state)
{
	(void)state;
	sqlite3 *db;
	struct report_runs rs;
	char err[256];

	assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
	exec(db, "CREATE TABLE run_summary (" CONTRACT_COLUMNS ");"
		 "CREATE TABLE best_layout (" CONTRACT_COLUMNS ", mfu_best REAL, rank INTEGER);");
	/* imported: the sheet's MFU wins over a computed one (COALESCE(mfu_reported, mfu)) */
	exec(db, "INSERT INTO run_summary (run_id, sweep, source, label, model, seq_len, gpus, "
		 "micro_batch, tp, pp, dp, sequence_parallel, checkpointing, attention, norm, "
		 "status, failure_class, tflops_per_gpu, mfu, mfu_reported, step_time_mean, "
		 "step_time_std, n_steps) VALUES "
		 "(1, 'p', 'paper', 'torch', 'llama-13b', 2048, 64, 1, 2, 2, 16, 0, 'none', "
		 "'naive', 'unfused', 'ok', NULL, 118.2, 0.30, 0.3788948519626735, 26.5, NULL, "
		 "NULL),"
		 "(2, 'p', 'paper', 'torch', 'llama-13b', 2048, 64, 8, 2, 2, 16, 0, 'full', "
		 "'naive', 'unfused', 'failed', 'oom', NULL, NULL, NULL, NULL, NULL, NULL),"
		 "(3, 'q', 'run', 'flash+fused', 'tiny', 128, 2, 1, 1, 1, 2, 0, 'none', "
		 "'flash', 'fused', 'running', NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
		 "(4, 'q', 'run', 'flash+fused', 'tiny', 128, 2, 1, 2, 1, 1, 1, 'none', "
		 "'flash', 'fused', 'ok', NULL, 0.0042, NULL, NULL, 2.0, 0.1, 5)");
	exec(db, "INSERT INTO best_layout (run_id, sweep, source, label, model, seq_len, gpus, "
		 "micro_batch, tp, pp, dp, sequence_parallel, checkpointing, attention, norm, "
		 "status, tflops_per_gpu, mfu, mfu_reported, step_time_mean, step_time_std, "
		 "n_steps) SELECT run_id, sweep, source, label, "
		 "model, seq_len, gpus, micro_batch, tp, pp, dp, sequence_parallel, checkpointing, "
		 "attention, norm, status, tflops_per_gpu, mfu, mfu_reported, step_time_mean, "
		 "step_time_std, n_steps FROM run_summary "
		 "WHERE run_id IN (1, 4)");

	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 4);
	const struct report_run *r = &rs.v[0];
	assert_int_equal(r->run_id, 1);
	assert_true(r->paper);
	assert_true(r->has_mfu);
	assert_true(r->mfu > 0.3788 && r->mfu < 0.3789);
	assert_string_equal(r->label, "torch");
	assert_int_equal(r->dp, 16);
	assert_int_equal(rs.v[1].status, REPORT_RUN_FAILED);
	assert_string_equal(rs.v[1].failure_class, "oom");
	assert_null(rs.v[0].failure_class);
	assert_int_equal(rs.v[2].status, REPORT_RUN_RUNNING);
	assert_false(rs.v[3].paper);
	assert_false(rs.v[3].has_mfu);
	assert_true(rs.v[3].has_tflops);
	assert_int_equal(rs.v[3].sequence_parallel, 1);
	/* the spread: step_time_std and n_steps as the view gives them, NULL unknown */
	assert_true(rs.v[3].step_time_sd == 0.1);
	assert_int_equal(rs.v[3].n_steps, 5);
	assert_true(rs.v[0].step_time_sd < 0);
	assert_int_equal(rs.v[0].n_steps, 0);

	char *csv = figure_csv(&rs, REPORT_KERNELS);
	assert_string_equal(csv, "group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_"
				 "parallel,model,seq_len,gpus,"
				 "tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps\n"
				 "p,torch,37.89,1,2,2,none,16,0,llama-13b,2048,64,118.2,,26.5,,\n"
				 "q,flash+fused,,1,2,1,none,1,1,tiny,128,2,0.0042,,2,0.1,5\n");
	free(csv);
	report_runs_release(&rs);

	/* the sweep filter happens in SQL */
	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, "q", &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 2);
	report_runs_release(&rs);

	report_runs_init(&rs);
	assert_int_equal(report_load_best(db, NULL, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 2);
	csv = figure_csv(&rs, REPORT_BEST);
	assert_string_equal(csv,
			    "group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_parallel,"
			    "model,seq_len,gpus,"
			    "tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps\n"
			    "llama-13b/2048/64,torch,37.89,1,2,2,none,16,0,llama-13b,2048,64,"
			    "118.2,,26.5,,\n"
			    "tiny/128/2,flash+fused,,1,2,1,none,1,1,tiny,128,2,0.0042,,2,0.1,5\n");
	free(csv);
	report_runs_release(&rs);

	/* a database without the views: a clear error */
	exec(db, "DROP TABLE run_summary");
	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'run_summary'"));
	report_runs_release(&rs);
	sqlite3_close(db);
}

/* Insert one of our runs of layout l with steps of the given times (first one warmup). */
static void insert_run(sqlite3 *db, const struct lb_layout *l, long id, const char *status,
		       const char *gpu, double peak, const double *times, int n)
{
	char id16[LB_ID_LEN + 1], sql[1024];

	lb_layout_id(l, id16);
	assert_int_equal(results_upsert_layout(db, l, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO runs (id, run_uid, layout_id, sweep, source, status, failure_class, "
		 "gpu, peak_tflops, world_size, flops_per_step, hw_flops_per_step) VALUES (%ld, "
		 "'uid-%ld', '%s', 's', 'run', '%s', %s, '%s', %s, %d, 1e15, 1e15)",
		 id, id, id16, status, strcmp(status, "failed") ? "NULL" : "'oom'", gpu,
		 peak > 0 ? "312" : "NULL", lb_layout_world(l));
	exec(db, sql);
	for (int i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql),
			 "INSERT INTO steps (run_id, step, warmup, time_s) VALUES (%ld, %d, %d, "
			 "%.17g)",
			 id, i, i == 0, times[i]);
		exec(db, sql);
	}
	assert_int_equal(results_refresh_run_stats(db, id), 0); /* as the collector does */
}

static void test_real_schema(void **state)
{
	(void)state;
	char path[] = "/tmp/lb-report-test-XXXXXX";
	char dbpath[64], err[256];
	sqlite3 *db;
	struct report_runs rs;
	struct lb_layout l;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	snprintf(dbpath, sizeof(dbpath), "%s.db", path);
	assert_int_equal(results_open(dbpath, &db, err, sizeof(err)), 0);
	assert_int_equal(results_upsert_sweep(db, "s", "spec", NULL, NULL, err, sizeof(err)), 0);

	lb_layout_init(&l); /* tiny, flash + fused, 1 GPU */
	/* 1e15 FLOPs per step; steady steps 2 s and 4 s: mean 3 s -> 333.3 TFLOP/s, MFU
	 * 333.3 / 312 = 106.84% (never capped: the report shows what the view says) */
	const double t1[] = {100, 2, 4};
	insert_run(db, &l, 1, "ok", "A100", 312, t1, 3);
	l.micro_batch = 2;
	l.global_batch = 8;
	const double t2[] = {1, 5, 5};
	insert_run(db, &l, 2, "ok", "A100", 312, t2, 3);
	l.micro_batch = 4;
	insert_run(db, &l, 3, "failed", "A100", 312, NULL, 0);
	/* unknown peak: a CPU run */
	l.micro_batch = 8;
	const double t4[] = {1, 1000, 1000};
	insert_run(db, &l, 4, "ok", "cpu", 0, t4, 3);

	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 4);
	for (size_t i = 0; i < rs.n; i++) {
		const struct report_run *r = &rs.v[i];
		if (r->run_id == 1) {
			assert_true(r->has_mfu);
			assert_true(r->mfu > 1.0683 && r->mfu < 1.0685);
			assert_true(r->tflops > 333.33 && r->tflops < 333.34);
		} else if (r->run_id == 4) {
			assert_false(r->has_mfu);
			assert_true(r->has_tflops);
			assert_true(r->tflops > 0.99 && r->tflops < 1.01);
		}
	}
	/* our runs: flash+fused has no flash2 rows, so microbatch is empty; checkpointing has
	 * no candidate rows either; kernels shows the best with a known MFU, and its spread
	 * from the view: steady steps 2 s and 4 s, sample sd sqrt(2) = 1.41421 s, MFU sd
	 * 106.84 * 1.41421 / 3 = 50.364 points */
	char *csv = figure_csv(&rs, REPORT_KERNELS);
	assert_string_equal(csv, "group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_"
				 "parallel,model,seq_len,gpus,"
				 "tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps\n"
				 "s,flash+fused,106.84,1,1,1,none,1,0,tiny,128,1,333.333,50.364,3,"
				 "1.41421,2\n");
	free(csv);
	csv = figure_csv(&rs, REPORT_TP_PP);
	assert_string_equal(csv, "group,series,mfu,micro_batch,tp,pp,checkpointing,dp,sequence_"
				 "parallel,model,seq_len,gpus,"
				 "tflops_per_gpu,mfu_sd,step_time_s,step_time_sd_s,steps\n"
				 "s,\"1,1\",106.84,1,1,1,none,1,0,tiny,128,1,333.333,50.364,3,"
				 "1.41421,2\n");
	free(csv);
	report_runs_release(&rs);

	report_runs_init(&rs);
	assert_int_equal(report_load_best(db, NULL, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.n, 1);
	assert_int_equal(rs.v[0].run_id, 1);
	report_runs_release(&rs);

	/* phases: no run has phase times yet, so the figure is empty; then run 2 gets some
	 * (steady steps 5 s and 5 s) and per-rank peaks, and is the figure's one row besides
	 * run 1 (ok, without phases) */
	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), 0);
	csv = figure_csv(&rs, REPORT_PHASES);
	assert_string_equal(csv, "group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,"
				 "forward_s,backward_s,optimizer_s,comm_exposed_s,bubble_s,"
				 "peak_mem_mib,rank_peak_mem_min_mib,rank_peak_mem_max_mib,ranks,"
				 "checkpointing,model,seq_len,gpus,run_id,step_time_sd_s,steps\n");
	free(csv);
	report_runs_release(&rs);
	exec(db, "UPDATE steps SET forward_s = time_s / 5, backward_s = 2 * time_s / 5, "
		 "optimizer_s = 0.125, comm_exposed_s = step, bubble_s = 0, "
		 "peak_mem_bytes = 1048576 * (step + 1), "
		 "rank_peak_mem = json_array(524288 * (step + 1), 1048576 * (step + 1)) "
		 "WHERE run_id = 2");
	assert_int_equal(results_refresh_run_stats(db, 2), 0);
	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), 0);
	csv = figure_csv(&rs, REPORT_PHASES);
	assert_string_equal(csv,
			    "group,label,micro_batch,tp,pp,dp,sequence_parallel,step_time_s,"
			    "forward_s,backward_s,optimizer_s,comm_exposed_s,bubble_s,"
			    "peak_mem_mib,rank_peak_mem_min_mib,rank_peak_mem_max_mib,ranks,"
			    "checkpointing,model,seq_len,gpus,run_id,step_time_sd_s,steps\n"
			    "s,flash+fused,1,1,1,1,0,3,,,,,,,,,,none,tiny,128,1,1,1.41421,2\n"
			    "s,flash+fused,2,1,1,1,0,5,1,2,0.125,1.5,0,3.000,1.500,3.000,2,none,"
			    "tiny,128,1,2,0,2\n"
			    "s,flash+fused,8,1,1,1,0,1000,,,,,,,,,,none,tiny,128,1,4,0,2\n");
	free(csv);
	report_runs_release(&rs);

	/* memory: the model of a run with flags (run 2 on the CPU backend, run 3 out of memory on
	 * the GPU backend) is the trainer's for that layout and backend; runs without flags have
	 * none and are not in the figure */
	struct lb_mem_estimate est2, est3;
	char flags[1024], sql[1400];
	lb_layout_init(&l);
	l.micro_batch = 2;
	l.global_batch = 8;
	assert_int_equal(lb_memory_trainer(&l, 0, 0, &est2), 0);
	lb_layout_to_flags(&l, flags, sizeof(flags));
	snprintf(sql, sizeof(sql), "UPDATE runs SET flags = '%s', backend = 'cpu' WHERE id = 2",
		 flags);
	exec(db, sql);
	l.micro_batch = 4;
	assert_int_equal(lb_memory_trainer(&l, 1, 0, &est3), 0);
	assert_true(est3.total != est2.total);
	lb_layout_to_flags(&l, flags, sizeof(flags));
	snprintf(sql, sizeof(sql), "UPDATE runs SET flags = '%s', backend = 'cuda' WHERE id = 3",
		 flags);
	exec(db, sql);
	exec(db,
	     "UPDATE runs SET flags = '--tp two', backend = 'cpu' WHERE id = 4"); /* unreadable */
	report_runs_init(&rs);
	assert_int_equal(report_load_runs(db, NULL, &rs, err, sizeof(err)), 0);
	for (size_t i = 0; i < rs.n; i++)
		assert_true(rs.v[i].model_mem == -1); /* only when asked for */
	assert_int_equal(report_load_model_mem(db, NULL, &rs, err, sizeof(err)), 0);
	for (size_t i = 0; i < rs.n; i++) {
		const struct report_run *r = &rs.v[i];
		long long want = r->run_id == 2	  ? (long long)est2.total
				 : r->run_id == 3 ? (long long)est3.total
						  : -1;
		assert_true(r->model_mem == want);
	}
	struct report_figure f;
	assert_int_equal(report_figure_build(&rs, REPORT_MEMORY, NULL, &f), 0);
	assert_int_equal(f.n, 2);
	assert_int_equal(f.bars[0].run->run_id, 2);
	assert_int_equal(f.bars[0].state, REPORT_BAR_VALUE);
	assert_int_equal(f.bars[1].run->run_id, 3);
	assert_int_equal(f.bars[1].state, REPORT_BAR_OOM);
	report_figure_release(&f);
	report_runs_release(&rs);

	results_close(db);
	unlink(dbpath);
	char side[80];
	snprintf(side, sizeof(side), "%s-wal", dbpath);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", dbpath);
	unlink(side);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_contract_tables),
	    cmocka_unit_test(test_real_schema),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
