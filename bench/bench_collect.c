/*
 * Benchmark of the collector: writes RUNS run logs of STEPS step records each (with
 * phase times and per-rank memory, as the trainer writes them) into a temporary
 * directory, collects the directory into a fresh database, and checks the answer: the
 * steps table must hold RUNS * STEPS rows and run_summary RUNS ok runs with the expected
 * steady-state count. Then collects again (every run unchanged) and times that too.
 * Target: 1,000,000 step records in under 5 s. Env: LB_BENCH_RUNS, LB_BENCH_STEPS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/util.h"
#include "results/collect.h"
#include "results/db.h"

/* CPU seconds (user + system) of this process so far. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
	       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static long env_long(const char *name, long def, long min, long max)
{
	const char *s = getenv(name);
	long v;

	if (!s || !*s)
		return def;
	if (lb_parse_long(s, min, max, &v)) {
		fprintf(stderr, "error: %s='%s': expected an integer in [%ld, %ld]\n", name, s, min,
			max);
		exit(2);
	}
	return v;
}

static long long q_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int write_runs(const char *dir, long runs, long steps)
{
	char path[512];

	for (long r = 0; r < runs; r++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/run-bench%05ld.jsonl", dir, r);
		f = fopen(path, "wb");
		if (!f)
			return -1;
		fprintf(f,
			"{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":1,"
			"\"run_uid\":\"bench%05ld\",\"layout_id\":\"92ce779f2d33830f\",\"layout\":{"
			"\"model\":\"tiny\",\"seq_len\":128,\"global_batch\":8,\"micro_batch\":1,"
			"\"tp\":1,\"pp\":1,\"dp\":2,\"gpus_per_node\":2,\"nodes\":1,"
			"\"sequence_parallel\":false,\"zero_stage\":0,\"checkpointing\":\"none\","
			"\"attention\":\"flash\",\"norm\":\"fused\",\"steps\":%ld,\"warmup\":2,"
			"\"seed\":1},\"model\":{\"name\":\"tiny\",\"layers\":4,\"hidden\":64,"
			"\"heads\":4,\"kv_heads\":4,\"ffn\":128,\"vocab\":256,\"tied\":false},"
			"\"params\":197184,\"tokens_per_step\":1024,\"flops_per_step\":1614151680,"
			"\"hw_flops_per_step\":1614151680,\"gpu\":\"NVIDIA H100 80GB HBM3\","
			"\"peak_tflops\":989,\"world_size\":2,\"hosts\":[\"node1\"],"
			"\"backend\":\"cuda\",\"versions\":{\"layoutbench\":\"0.1.0\"},"
			"\"git_commit\":null,\"start_time\":\"2026-12-02T12:00:00Z\","
			"\"sweep\":\"bench\",\"job_id\":null}\n",
			r, steps);
		for (long s = 0; s < steps; s++)
			fprintf(f,
				"{\"type\":\"step\",\"step\":%ld,\"warmup\":%s,\"time_s\":%.6f,"
				"\"tokens\":1024,\"loss\":%.5f,\"peak_mem_bytes\":%ld,"
				"\"rank_peak_mem_bytes\":[%ld,%ld],\"phases\":{\"forward_s\":0.3,"
				"\"backward_s\":0.6,\"optimizer_s\":0.05,\"comm_exposed_s\":0.04,"
				"\"bubble_s\":0}}\n",
				s, s < 2 ? "true" : "false", 1.0 + 1e-6 * (double)(s % 97),
				5.5 - 1e-4 * (double)s, 1000000 + s, 1000000 + s, 999000 + s);
		fprintf(f,
			"{\"type\":\"end\",\"status\":\"ok\",\"class\":null,\"message\":\"done\","
			"\"rank\":null,\"exit_code\":0,\"end_time\":\"2026-12-02T12:30:00Z\"}\n");
		if (fclose(f))
			return -1;
	}
	return 0;
}

int main(void)
{
	long runs = env_long("LB_BENCH_RUNS", 1000, 1, 100000);
	long steps = env_long("LB_BENCH_STEPS", 1000, 3, 1000000);
	char dir[] = "/tmp/lb-bench-collect-XXXXXX", runs_dir[64], db_path[64], err[512], cmd[96];
	struct collect_stats st = {0};
	long long n_steps, n_ok, n_steady;
	double t0, c0, t_first, c_first, t_again;
	sqlite3 *db;
	int bad = 0;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(runs_dir, sizeof(runs_dir), "%s/runs", dir);
	snprintf(db_path, sizeof(db_path), "%s/results.db", dir);
	if (mkdir(runs_dir, 0755) || write_runs(runs_dir, runs, steps)) {
		perror("write run logs");
		return 1;
	}
	if (results_open(db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	st.quiet = 1;
	t0 = lb_now_s();
	c0 = cpu_s();
	if (results_collect_path(db, runs_dir, &st, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		bad = 1;
	}
	t_first = lb_now_s() - t0;
	c_first = cpu_s() - c0;
	n_steps = q_int(db, "SELECT count(*) FROM steps");
	n_ok = q_int(db, "SELECT count(*) FROM run_summary WHERE status = 'ok'");
	n_steady = q_int(db, "SELECT sum(n_steps) FROM run_summary");
	if (n_steps != (long long)runs * steps || n_ok != runs ||
	    n_steady != (long long)runs * (steps - 2) || st.runs_new != runs ||
	    st.steps != runs * steps) {
		fprintf(stderr,
			"wrong answer: %lld step rows (want %lld), %lld ok runs (want %ld), %lld "
			"steady steps (want %lld)\n",
			n_steps, (long long)runs * steps, n_ok, runs, n_steady,
			(long long)runs * (steps - 2));
		bad = 1;
	}
	memset(&st, 0, sizeof(st));
	st.quiet = 1;
	t0 = lb_now_s();
	if (results_collect_path(db, runs_dir, &st, err, sizeof(err)) || st.runs_unchanged != runs)
		bad = 1;
	t_again = lb_now_s() - t0;
	results_close(db);
	printf("collected %ld runs x %ld steps = %lld step records in %.2f s (%.0f records/s); "
	       "again (unchanged) in %.3f s\n",
	       runs, steps, (long long)runs * steps, t_first, (double)runs * steps / t_first,
	       t_again);
	printf("RESULT\tcollect %ld step records\t%.2f\ts\t< 5\t%s\n", runs * steps, t_first,
	       bad ? "FAIL" : (runs * steps >= 1000000 ? (t_first < 5 ? "PASS" : "FAIL") : "INFO"));
	printf("RESULT\tcollect %ld step records, CPU time\t%.2f\ts\t-\t%s\n", runs * steps,
	       c_first, bad ? "FAIL" : "INFO");
	printf("RESULT\tre-collect %ld unchanged runs\t%.3f\ts\t-\t%s\n", runs, t_again,
	       bad ? "FAIL" : "INFO");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove '%s'\n", dir);
	return bad;
}
