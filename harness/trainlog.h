/*
 * The run-log writer of layoutbench-train: JSON lines exactly as docs/run-log.md
 * specifies (format version 1), written by rank 0 to <run-dir>/run-<run_uid>.jsonl, each
 * line with one checked write(2); a header, one line per optimizer step, an end record
 * with the status and failure class. A write that fails (a full disk, a quota, an I/O
 * error) is kept (werr), the file cut back to its last whole line, and no further step is
 * written: the trainer then ends the run as io_error, its end record tried once more.
 * Also the failure classes and their exit codes, and the harness's fatal-error path
 * (file:line, host, rank; the class into the log; exit).
 */
#ifndef LB_TRAINLOG_H
#define LB_TRAINLOG_H

#include <stdint.h>
#include <stdio.h>

#include "common/layout.h"
#include "harness/ops.h"

/* Trainer exit codes (docs/run-log.md); killed is 128 + the signal. */
#define LB_EXIT_OK	 0
#define LB_EXIT_ERROR	 1
#define LB_EXIT_USAGE	 2
#define LB_EXIT_OOM	 3
#define LB_EXIT_NCCL	 4
#define LB_EXIT_DIVERGED 5
#define LB_EXIT_TIMEOUT	 6
#define LB_EXIT_IO	 7 /* io_error: the run log could not be written */

struct lb_trainlog {
	FILE *f;	   /* NULL on ranks other than 0, or before open; written through its
			      descriptor only (nothing is ever buffered in it) */
	char path[4096];   /* <run-dir>/run-<run_uid>.jsonl */
	char run_uid[256]; /* <UTC yyyymmddThhmmssZ>-<host>-<pid> */
	int ended;	   /* 1 once the end record is written */
	int werr;	   /* errno of the first write that failed (ENOSPC, EDQUOT, EIO, ...);
			      0 while every line was written */
	long long good;	   /* bytes of whole lines in the file: where a failed write is cut
			      back to */
};

/* What the header states beyond the layout. */
struct lb_runinfo {
	const struct lb_layout *layout;
	const char *gpu;     /* product name; "cpu" for the CPU backend */
	double peak_tflops;  /* per GPU; < 0: unknown (null) */
	const char *backend; /* "cpu" or "cuda" */
	int world_size;
	const char *const *hosts; /* n_hosts names; NULL: this host */
	int n_hosts;
	const char *cuda_version, *nccl_version, *driver_version; /* NULL: null */
	const struct lb_device_info *device; /* the GPU's facts (harness/ops.h); NULL: none */
	const char *pipeline_schedule;	     /* the schedule run ("1f1b", "gpipe", "interleaved");
						NULL: not written */
	int has_optimizer;		     /* 1: write "optimizer" with the three below */
	double lr, weight_decay, clip;
};

/* Phase times of a step, seconds; < 0: not known (omitted). */
struct lb_phases {
	double forward_s, backward_s, optimizer_s, comm_exposed_s, bubble_s;
};

/* Create run_dir (and parents) if needed, open the log and write the header.
 * Returns 0, or -1 with err set (lg->werr set when the header's write failed: the caller
 * exits LB_EXIT_IO). */
int lb_trainlog_open(struct lb_trainlog *lg, const char *run_dir, const struct lb_runinfo *info,
		     char *err, size_t errlen);
void lb_trainlog_step(struct lb_trainlog *lg, int step, int warmup, double time_s, int64_t tokens,
		      double loss, uint64_t peak_mem_bytes, const struct lb_phases *ph);
/* The same with each rank's peak memory (n_ranks entries, world rank order) written as
 * rank_peak_mem_bytes; peak_mem_bytes is their maximum. rank_dev_peak (NULL: the device
 * reports none) holds each rank's device reading (lb_ops.device_mem_peak), written as
 * device_peak_mem_bytes (their maximum) and rank_device_peak_mem_bytes. n_ranks < 0: one
 * entry in each, and no per-rank arrays. */
void lb_trainlog_step_ranks(struct lb_trainlog *lg, int step, int warmup, double time_s,
			    int64_t tokens, double loss, const uint64_t *rank_peak,
			    const uint64_t *rank_dev_peak, int n_ranks, const struct lb_phases *ph);
/* Open an existing log at path for appending (the end record of a run whose rank 0 is
 * gone: written by the launcher, or by rank 1 under srun). 0, or -1 with errno. */
int lb_trainlog_append(struct lb_trainlog *lg, const char *path);
/* The end record; cls NULL means status "ok". rank < 0 writes null. Only the first call
 * that succeeds writes: after a failed write (lg->werr) a later call tries again, the one
 * line still tried once the log could not take a step (a full disk may hold it). */
void lb_trainlog_end(struct lb_trainlog *lg, const char *cls, const char *message, int rank,
		     int exit_code);
void lb_trainlog_close(struct lb_trainlog *lg);

/* "cannot write run log 'PATH': <the OS's reason>" for a log whose write failed. */
void lb_trainlog_error(const struct lb_trainlog *lg, char *buf, size_t len);

/* Exit code of a failure class ("oom" -> 3, ...; unknown -> 1). */
int lb_class_exit_code(const char *cls);

/* The log the fatal path and signal handlers write to (rank 0's), and this rank. */
void lb_trainlog_set_current(struct lb_trainlog *lg, int rank);

/* No safe recovery: print "file:line: host H rank R: error: msg" on stderr, write the end
 * record with the class, and exit with the class's code. */
void lb_fatal(const char *file, int line, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
#define LB_FATAL(cls, ...) lb_fatal(__FILE__, __LINE__, (cls), __VA_ARGS__)

/* Run uid for now on this host: "<UTC yyyymmddThhmmssZ>-<host>-<pid>". */
void lb_run_uid(char *buf, size_t len);

#endif
