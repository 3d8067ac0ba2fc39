/*
 * The multi-node bootstrap (harness/comm/bootstrap.h) on the CPU: the file way between forked
 * ranks (every rank gets rank 0's bytes; the file is gone after lb_bootstrap_done), a
 * rank 0 that never writes (a timeout that names the file and the fix), the PMI2 way
 * outside srun (a clear refusal), what auto resolves to, the names.
 *
 * Under srun --mpi=pmi2 (PMI_FD set; tests/sh/bootstrap_slurm.sh starts it so) the binary
 * instead runs the real PMI2 exchange among the srun tasks and prints
 * "pmi2 rank R of N: ok" per task.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/comm/bootstrap.h"
#include "harness/comm/comm.h"

static char dir[256];

static void fill(unsigned char *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 7 + (size_t)seed * 13 + 1);
}

static void test_file_between_ranks(void **state)
{
	enum { N = 4, LEN = 128 };
	pid_t pid[N];
	char path[400];
	struct stat st;

	(void)state;
	for (int r = 0; r < N; r++) {
		pid[r] = fork();
		assert_true(pid[r] >= 0);
		if (pid[r] == 0) {
			struct lb_boot_opts o = {LB_BOOT_FILE, r, N, dir, "job7-0-r0", 10.0};
			unsigned char got[LEN], want[LEN];
			char err[512];

			if (r != 0)
				usleep(1000 * (unsigned)(20 * r)); /* readers before and after */
			fill(want, LEN, 0);
			fill(got, LEN, r + 1); /* rank 0's stands; the others' are overwritten */
			if (lb_bootstrap_bcast(&o, r == 0 ? want : got, LEN, err, sizeof(err))) {
				fprintf(stderr, "rank %d: %s\n", r, err);
				_exit(1);
			}
			_exit(r == 0 || !memcmp(got, want, LEN) ? 0 : 2);
		}
	}
	for (int r = 0; r < N; r++) {
		int status = 0;

		assert_int_equal(waitpid(pid[r], &status, 0), pid[r]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	snprintf(path, sizeof(path), "%s/.nccl-id-job7-0-r0", dir);
	assert_int_equal(stat(path, &st), 0);
	{
		struct lb_boot_opts o = {LB_BOOT_FILE, 0, N, dir, "job7-0-r0", 10.0};

		lb_bootstrap_done(&o);
	}
	assert_int_not_equal(stat(path, &st), 0);
}

static void test_file_timeout(void **state)
{
	struct lb_boot_opts o = {LB_BOOT_FILE, 1, 2, dir, "never", 0.2};
	unsigned char b[16];
	char err[512];
	double t0 = lb_now_s();

	(void)state;
	assert_int_equal(lb_bootstrap_bcast(&o, b, sizeof(b), err, sizeof(err)), LB_COMM_ETIMEOUT);
	assert_true(lb_now_s() - t0 < 5.0);
	assert_non_null(strstr(err, ".nccl-id-never' did not appear within 0.2 s"));
	assert_non_null(strstr(err, "file system every node sees"));
}

static void test_pmi2_outside_srun(void **state)
{
	struct lb_boot_opts o = {LB_BOOT_PMI2, 0, 2, dir, "x", 1.0};
	unsigned char b[16] = {0};
	char err[512];

	(void)state;
	unsetenv("PMI_FD");
	assert_int_equal(lb_bootstrap_bcast(&o, b, sizeof(b), err, sizeof(err)), LB_COMM_EFAIL);
	assert_non_null(strstr(err, "not started by srun with the PMI2 plugin"));
	assert_non_null(strstr(err, "--bootstrap file"));
	/* too many bytes for a PMI2 value */
	{
		unsigned char big[600];

		assert_int_equal(lb_bootstrap_bcast(&o, big, sizeof(big), err, sizeof(err)),
				 LB_COMM_EFAIL);
		assert_non_null(strstr(err, "at most 480"));
	}
}

static void test_names_and_auto(void **state)
{
	enum lb_bootstrap k;

	(void)state;
	assert_int_equal(lb_bootstrap_parse("pmi2", &k), 0);
	assert_int_equal(k, LB_BOOT_PMI2);
	assert_string_equal(lb_bootstrap_name(k), "pmi2");
	assert_int_equal(lb_bootstrap_parse("file", &k), 0);
	assert_string_equal(lb_bootstrap_name(k), "file");
	assert_int_equal(lb_bootstrap_parse("auto", &k), 0);
	assert_int_equal(lb_bootstrap_parse("mpi", &k), -1);
	unsetenv("PMI_FD");
	assert_int_equal(lb_bootstrap_resolve(LB_BOOT_AUTO), LB_BOOT_FILE);
	setenv("PMI_FD", "5", 1);
	assert_int_equal(lb_bootstrap_resolve(LB_BOOT_AUTO), LB_BOOT_PMI2);
	assert_int_equal(lb_bootstrap_resolve(LB_BOOT_FILE), LB_BOOT_FILE);
	unsetenv("PMI_FD");
}

/* Under srun --mpi=pmi2: every task gets task 0's bytes through PMI2. */
static int pmi2_tasks(void)
{
	const char *r = getenv("SLURM_PROCID"), *n = getenv("SLURM_NTASKS");
	struct lb_boot_opts o;
	unsigned char got[128], want[128];
	char err[512];
	int rank, size;

	if (!r || !n || lb_parse_int(r, 0, 1 << 20, &rank) || lb_parse_int(n, 1, 1 << 20, &size)) {
		fprintf(stderr, "error: PMI_FD without SLURM_PROCID/SLURM_NTASKS\n");
		return 1;
	}
	memset(&o, 0, sizeof(o));
	o.kind = LB_BOOT_AUTO; /* PMI_FD is set: auto is pmi2 */
	o.rank = rank;
	o.size = size;
	o.tag = getenv("SLURM_JOB_ID");
	o.timeout_s = 30;
	fill(want, sizeof(want), 0);
	fill(got, sizeof(got), rank + 1);
	if (lb_bootstrap_bcast(&o, rank == 0 ? want : got, sizeof(got), err, sizeof(err))) {
		printf("pmi2 rank %d of %d: FAIL: %s\n", rank, size, err);
		return 1;
	}
	if (rank && memcmp(got, want, sizeof(got))) {
		printf("pmi2 rank %d of %d: FAIL: wrong bytes\n", rank, size);
		return 1;
	}
	printf("pmi2 rank %d of %d: ok\n", rank, size);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_file_between_ranks),
	    cmocka_unit_test(test_file_timeout),
	    cmocka_unit_test(test_pmi2_outside_srun),
	    cmocka_unit_test(test_names_and_auto),
	};
	const char *t = getenv("TMPDIR");
	int rc;
	char cmd[300];

	if (getenv("PMI_FD"))
		return pmi2_tasks();
	snprintf(dir, sizeof(dir), "%s/lb-boot-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: cannot remove %s\n", dir);
	return rc;
}
