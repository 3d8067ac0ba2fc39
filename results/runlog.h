/*
 * Parser of the run log (docs/run-log.md, format version 1): one JSON line in, one
 * record out (header, step or end). Pure: no files, no database; the collector reads the
 * lines and writes the records. Errors name the key and the fault, e.g.
 * "'time_s': expected a number, got a string" or "header: missing key 'run_uid'".
 */
#ifndef LB_RESULTS_RUNLOG_H
#define LB_RESULTS_RUNLOG_H

#include <stddef.h>
#include <stdint.h>

#include "common/layout.h"

enum runlog_type { RUNLOG_HEADER = 1, RUNLOG_STEP, RUNLOG_END };

struct runlog_header {
	int version;
	char run_uid[128];
	char layout_id[LB_ID_LEN + 1];		/* as written by the trainer */
	char layout_id_computed[LB_ID_LEN + 1]; /* lb_layout_id of the fields below */
	struct lb_layout layout;		/* from the "layout" and "model" objects */
	char *flags;				/* malloc'd or NULL */
	int64_t params;				/* -1 unknown */
	int64_t tokens_per_step;		/* -1 unknown */
	double flops_per_step;			/* model FLOPs per optimizer step; < 0 unknown */
	double hw_flops_per_step;		/* with recomputation; < 0 unknown */
	char gpu[64];				/* "" unknown */
	double peak_tflops;			/* per GPU; < 0 when null/unknown */
	int world_size;				/* 0 unknown */
	char *hosts;				/* JSON array text, malloc'd or NULL */
	char backend[16];			/* "cpu", "cuda"; "" unknown */
	char *versions;				/* JSON object text, malloc'd or NULL */
	char git_commit[64];			/* "" unknown */
	char start_time[40];			/* ISO 8601; "" unknown */
	char sweep[LB_NAME_MAX];		/* "" when null */
	char job_id[64];			/* "" when null */
	char label[64];				/* optional series label; "" when absent */
};

/* Absent optional numbers in a step are NaN (doubles) or -1 (integers). */
struct runlog_step {
	int64_t step;		/* 0-based */
	int warmup;		/* 0/1 */
	double time_s;		/* seconds */
	int64_t tokens;		/* all ranks; -1 absent */
	double loss;		/* NaN when null or absent */
	int64_t peak_mem_bytes; /* -1 absent */
	double forward_s, backward_s, optimizer_s, comm_exposed_s, bubble_s; /* NaN absent */
	char *rank_peak_mem;	       /* JSON array text, malloc'd or NULL */
	int64_t device_peak_mem_bytes; /* the device's own reading, most loaded rank; -1 absent */
	char *rank_device_peak_mem;    /* its per-rank array as JSON text, malloc'd or NULL */
};

struct runlog_end {
	int ok;			/* 1: status "ok", 0: "failed" */
	char failure_class[32]; /* "" when null */
	char *message;		/* malloc'd or NULL */
	int rank;		/* -1 null or absent */
	int exit_code;		/* -1 absent */
	char end_time[40];	/* "" absent */
};

struct runlog_record {
	enum runlog_type type;
	struct runlog_header header; /* type == RUNLOG_HEADER */
	struct runlog_step step;     /* type == RUNLOG_STEP */
	struct runlog_end end;	     /* type == RUNLOG_END */
};

/*
 * Parse one line (len bytes, no NUL needed; a trailing newline is fine). On success
 * returns 0 and fills rec; release it with runlog_record_release. On failure returns -1,
 * rec holds nothing to release, and err names the fault ("not JSON near byte 17",
 * "'step': expected an integer, got 1.5", "run log version 2 is newer than this build
 * reads (1); use a newer layoutbench").
 */
int runlog_parse_line(const char *line, size_t len, struct runlog_record *rec, char *err,
		      size_t errlen);

/* The same through cJSON alone, without the fast path for step lines. Both give equal
 * records for every line the fast path accepts (checked by tests/fuzz/fuzz_runlog.c). */
int runlog_parse_line_general(const char *line, size_t len, struct runlog_record *rec, char *err,
			      size_t errlen);

/* Free what a parsed record owns (its malloc'd strings). Safe on a zeroed record. */
void runlog_record_release(struct runlog_record *rec);

#endif
