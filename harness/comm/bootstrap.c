/*
 * Rank 0's bytes to every rank through a shared file or Slurm's PMI2; see bootstrap.h.
 */
#include "harness/comm/bootstrap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/comm/comm.h"

#define MAX_BYTES 480 /* hex-encoded: 960 characters, under PMI2's 1024 */

/* The kinds' names (--bootstrap's values), in the enum's order. */
static const char *const boot_names[] = {
    [LB_BOOT_AUTO] = "auto",
    [LB_BOOT_FILE] = "file",
    [LB_BOOT_PMI2] = "pmi2",
};

#define N_BOOT_NAMES (sizeof(boot_names) / sizeof(boot_names[0]))

const char *lb_bootstrap_name(enum lb_bootstrap k)
{
	return (unsigned)k < N_BOOT_NAMES ? boot_names[k] : "auto";
}

int lb_bootstrap_parse(const char *s, enum lb_bootstrap *out)
{
	for (unsigned i = 0; i < N_BOOT_NAMES; i++)
		if (!strcmp(s, boot_names[i])) {
			*out = (enum lb_bootstrap)i;
			return 0;
		}
	return -1;
}

enum lb_bootstrap lb_bootstrap_resolve(enum lb_bootstrap k)
{
	const char *fd = getenv("PMI_FD");

	if (k != LB_BOOT_AUTO)
		return k;
	return fd && *fd ? LB_BOOT_PMI2 : LB_BOOT_FILE;
}

/* --- file --- */

static void file_path(const struct lb_boot_opts *o, char *path, size_t len)
{
	snprintf(path, len, "%s/.nccl-id-%s", o->dir && o->dir[0] ? o->dir : ".",
		 o->tag && o->tag[0] ? o->tag : "run");
}

static int by_file(const struct lb_boot_opts *o, void *buf, size_t len, char *err, size_t errlen)
{
	char path[4200], tmp[4300];
	double deadline = lb_now_s() + o->timeout_s;

	file_path(o, path, sizeof(path));
	if (o->rank == 0) {
		int fd;

		snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) || close(fd) ||
		    rename(tmp, path)) {
			snprintf(err, errlen, "NCCL bootstrap: cannot write '%s': %s", path,
				 strerror(errno));
			if (fd >= 0)
				close(fd);
			unlink(tmp);
			return LB_COMM_EFAIL;
		}
		return 0;
	}
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			ssize_t n = read(fd, buf, len);

			close(fd);
			if (n == (ssize_t)len)
				return 0;
		}
		if (lb_now_s() > deadline) {
			snprintf(
			    err, errlen,
			    "NCCL bootstrap: rank 0's id '%s' did not appear within %.1f s (is "
			    "the run directory on a file system every node sees? else use "
			    "--bootstrap pmi2 under srun --mpi=pmi2)",
			    path, o->timeout_s);
			return LB_COMM_ETIMEOUT;
		}
		usleep(50000);
	}
}

/* --- PMI2 (slurm/pmi2.h's calls, loaded at run time) --- */

#define PMI2_SUCCESS 0
#define PMI2_ID_NULL (-1)

struct pmi2_api {
	int (*init)(int *spawned, int *size, int *rank, int *appnum);
	int (*finalize)(void);
	int (*job_getid)(char *jobid, int jobid_size);
	int (*kvs_put)(const char *key, const char *value);
	int (*kvs_fence)(void);
	int (*kvs_get)(const char *jobid, int src_pmi_id, const char *key, char *value,
		       int maxvalue, int *vallen);
};

static int pmi2_load(struct pmi2_api *p, char *err, size_t errlen)
{
	void *h = dlopen("libpmi2.so.0", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(err, errlen,
			 "NCCL bootstrap through PMI2: libpmi2.so.0 cannot be loaded: %s (install "
			 "Slurm's libpmi2-0 on the compute nodes, or use --bootstrap file)",
			 dlerror());
		return -1;
	}
	*(void **)&p->init = dlsym(h, "PMI2_Init");
	*(void **)&p->finalize = dlsym(h, "PMI2_Finalize");
	*(void **)&p->job_getid = dlsym(h, "PMI2_Job_GetId");
	*(void **)&p->kvs_put = dlsym(h, "PMI2_KVS_Put");
	*(void **)&p->kvs_fence = dlsym(h, "PMI2_KVS_Fence");
	*(void **)&p->kvs_get = dlsym(h, "PMI2_KVS_Get");
	if (!p->init || !p->finalize || !p->job_getid || !p->kvs_put || !p->kvs_fence ||
	    !p->kvs_get) {
		snprintf(err, errlen,
			 "NCCL bootstrap through PMI2: libpmi2.so.0 lacks the PMI2_KVS calls");
		return -1;
	}
	return 0; /* the handle stays: the library is used until the process ends */
}

static int by_pmi2(const struct lb_boot_opts *o, void *buf, size_t len, char *err, size_t errlen)
{
	static const char hex[] = "0123456789abcdef";
	struct pmi2_api p;
	char key[64], val[1024], jobid[256];
	int spawned = 0, size = 0, rank = -1, appnum = 0, vlen = 0, rc;

	if (!getenv("PMI_FD")) {
		snprintf(
		    err, errlen,
		    "NCCL bootstrap through PMI2: this process was not started by srun with "
		    "the PMI2 plugin (no PMI_FD; run srun --mpi=pmi2 or set SLURM_MPI_TYPE=pmi2, "
		    "or use --bootstrap file)");
		return LB_COMM_EFAIL;
	}
	if (pmi2_load(&p, err, errlen))
		return LB_COMM_EFAIL;
	if ((rc = p.init(&spawned, &size, &rank, &appnum)) != PMI2_SUCCESS) {
		snprintf(err, errlen, "NCCL bootstrap through PMI2: PMI2_Init failed (%d)", rc);
		return LB_COMM_EFAIL;
	}
	if (size != o->size || rank != o->rank) {
		snprintf(err, errlen,
			 "NCCL bootstrap through PMI2: PMI2 says rank %d of %d, the run rank %d of "
			 "%d (one srun task per rank)",
			 rank, size, o->rank, o->size);
		p.finalize();
		return LB_COMM_EFAIL;
	}
	snprintf(key, sizeof(key), "lb-%.56s", o->tag && o->tag[0] ? o->tag : "run");
	rc = p.job_getid(jobid, (int)sizeof(jobid));
	if (rc == PMI2_SUCCESS && o->rank == 0) {
		for (size_t i = 0; i < len; i++) {
			val[2 * i] = hex[((const unsigned char *)buf)[i] >> 4];
			val[2 * i + 1] = hex[((const unsigned char *)buf)[i] & 15];
		}
		val[2 * len] = '\0';
		rc = p.kvs_put(key, val);
	}
	if (rc == PMI2_SUCCESS)
		rc = p.kvs_fence();
	if (rc == PMI2_SUCCESS && o->rank != 0) {
		rc = p.kvs_get(jobid, PMI2_ID_NULL, key, val, (int)sizeof(val), &vlen);
		if (rc == PMI2_SUCCESS && (vlen < 0 || (size_t)vlen < 2 * len))
			rc = -1;
		for (size_t i = 0; rc == PMI2_SUCCESS && i < len; i++) {
			const char *a = strchr(hex, val[2 * i]), *b = strchr(hex, val[2 * i + 1]);

			if (!a || !b || !*a || !*b)
				rc = -1;
			else
				((unsigned char *)buf)[i] =
				    (unsigned char)((a - hex) << 4 | (b - hex));
		}
	}
	p.finalize();
	if (rc != PMI2_SUCCESS) {
		snprintf(err, errlen,
			 "NCCL bootstrap through PMI2: the exchange of '%s' failed (%d)", key, rc);
		return LB_COMM_EFAIL;
	}
	return 0;
}

int lb_bootstrap_bcast(const struct lb_boot_opts *o, void *buf, size_t len, char *err,
		       size_t errlen)
{
	if (len > MAX_BYTES) {
		snprintf(err, errlen, "NCCL bootstrap: %zu bytes, at most %d", len, MAX_BYTES);
		return LB_COMM_EFAIL;
	}
	if (lb_bootstrap_resolve(o->kind) == LB_BOOT_PMI2)
		return by_pmi2(o, buf, len, err, errlen);
	return by_file(o, buf, len, err, errlen);
}

void lb_bootstrap_done(const struct lb_boot_opts *o)
{
	char path[4200];

	if (o->rank != 0 || lb_bootstrap_resolve(o->kind) != LB_BOOT_FILE)
		return;
	file_path(o, path, sizeof(path));
	unlink(path);
}
