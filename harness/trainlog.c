/*
 * The run-log writer (docs/run-log.md, format version 1). Hand-written JSON, strings
 * escaped by common/util.h's escaper; numbers in the C locale; one checked write(2) per
 * line, a failed one cut back to the last whole line.
 */
#include "harness/trainlog.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/model.h"
#include "common/util.h"
#include "common/version.h"

static struct lb_trainlog *current;
static int current_rank;

static void iso_now(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void host_name(char *buf, size_t len)
{
	if (gethostname(buf, len))
		snprintf(buf, len, "unknown");
	buf[len - 1] = '\0';
}

void lb_run_uid(char *buf, size_t len)
{
	char host[128], ts[32];
	time_t t = time(NULL);

	/* at most 127 bytes (docs/run-log.md): 16 + 1 + host (<= 64) + 1 + pid (<= 20) */
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	host_name(host, sizeof(host));
	host[64] = '\0';
	for (char *p = host; *p; p++) /* the uid is part of a file name */
		if (*p == '/' || *p == ' ')
			*p = '_';
	snprintf(buf, len, "%s-%s-%ld", ts, host, (long)getpid());
}

static void add_str_or_null(struct lb_strbuf *sb, const char *s)
{
	if (s)
		lb_strbuf_add_json(sb, s);
	else
		lb_strbuf_adds(sb, "null");
}

/* A member of an object being written: ,"key": and s as a JSON string, or null. */
static void add_member_str(struct lb_strbuf *sb, const char *key, const char *s)
{
	lb_strbuf_addf(sb, ",\"%s\":", key);
	add_str_or_null(sb, s);
}

/*
 * One line (sb and its '\n') with one checked write. A line that did not fit (a full
 * disk, a quota) is cut off again, so the log stays whole lines: a reader would take a
 * cut-off last line for one still being written. retry: write even after an earlier
 * failure (the end record); else a log that failed once takes nothing more (no gap in the
 * steps). Returns 0, or -1 (lg->werr holds the first failure's errno).
 */
static int write_line(struct lb_trainlog *lg, struct lb_strbuf *sb, int retry)
{
	int rc = 0;

	if (!lg->f || sb->failed || (lg->werr && !retry)) {
		lb_strbuf_release(sb);
		return lg->f && !sb->failed ? -1 : 0;
	}
	lb_strbuf_add(sb, "\n", 1);
	if (!sb->failed && lb_write_all(fileno(lg->f), sb->buf, sb->len)) {
		if (!lg->werr)
			lg->werr = errno ? errno : EIO;
		if (ftruncate(fileno(lg->f), (off_t)lg->good) == 0)
			lseek(fileno(lg->f), (off_t)lg->good, SEEK_SET);
		rc = -1;
	} else if (!sb->failed) {
		lg->good += (long long)sb->len;
	}
	lb_strbuf_release(sb);
	return rc;
}

void lb_trainlog_error(const struct lb_trainlog *lg, char *buf, size_t len)
{
	snprintf(buf, len, "cannot write run log '%s': %s", lg->path,
		 strerror(lg->werr ? lg->werr : EIO));
}

/* A field's value as JSON: a number, a string (an enum's name), an array (a split). */
static void add_field(struct lb_strbuf *sb, const struct lb_layout *l, int f)
{
	char t[LB_MAX_STAGES * 12 + 16];

	lb_strbuf_addf(sb, ",\"%s\":", lb_fields[f].key);
	lb_field_text(l, f, t, sizeof(t));
	if (lb_fields[f].kind == LB_FK_ENUM)
		lb_strbuf_add_json(sb, t);
	else if (lb_fields[f].kind == LB_FK_SPLIT)
		lb_strbuf_addf(sb, "[%s]", t);
	else
		lb_strbuf_adds(sb, t);
}

/* The header's "layout" and "model" objects (common/layout_fields.def): the layout's
 * fields after its model's name, then the sparse ones that differ from their default (as
 * the canonical text and the id have them); the model's name and shape. */
static void add_layout(struct lb_strbuf *sb, const struct lb_layout *l)
{
	lb_strbuf_adds(sb, ",\"layout\":{\"model\":");
	lb_strbuf_add_json(sb, l->model.name);
	for (int sparse = 0; sparse < 2; sparse++)
		for (int f = 0; f < LB_NFIELDS; f++)
			if (!lb_fields[f].in_model && lb_fields[f].kind != LB_FK_NAME &&
			    ((lb_fields[f].attrs & LB_FA_SPARSE) != 0) == sparse &&
			    lb_field_shown(l, f))
				add_field(sb, l, f);
	lb_strbuf_adds(sb, "},\"model\":{\"name\":");
	lb_strbuf_add_json(sb, l->model.name);
	for (int f = 0; f < LB_NFIELDS; f++)
		if (lb_fields[f].in_model && lb_fields[f].kind != LB_FK_NAME)
			add_field(sb, l, f);
	lb_strbuf_adds(sb, "}");
}

int lb_trainlog_open(struct lb_trainlog *lg, const char *run_dir, const struct lb_runinfo *info,
		     char *err, size_t errlen)
{
	const struct lb_layout *l = info->layout;
	const struct lb_model *m = &l->model;
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char id[LB_ID_LEN + 1], ts[32], host[128], flags[LB_MAX_STAGES * 12 + 2048];
	const char *sweep = getenv("LAYOUTBENCH_SWEEP");
	const char *job = getenv("SLURM_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
	const char *array_job = getenv("SLURM_ARRAY_JOB_ID"), *label = getenv("LAYOUTBENCH_LABEL");

	memset(lg, 0, sizeof(*lg));
	lb_run_uid(lg->run_uid, sizeof(lg->run_uid));
	if (lb_mkdir_p(run_dir, err, errlen))
		return -1;
	snprintf(lg->path, sizeof(lg->path), "%s/run-%s.jsonl", run_dir, lg->run_uid);
	lg->f = fopen(lg->path, "w");
	if (!lg->f) {
		snprintf(err, errlen, "cannot create run log '%s': %s", lg->path, strerror(errno));
		return -1;
	}
	lb_layout_id(l, id);
	lb_layout_to_flags(l, flags, sizeof(flags));
	iso_now(ts, sizeof(ts));
	host_name(host, sizeof(host));

	lb_strbuf_addf(&sb,
		       "{\"type\":\"header\",\"format\":\"layoutbench-runlog\",\"version\":%d,"
		       "\"run_uid\":",
		       LB_RUNLOG_VERSION);
	lb_strbuf_add_json(&sb, lg->run_uid);
	lb_strbuf_adds(&sb, ",\"layout_id\":");
	lb_strbuf_add_json(&sb, id);
	add_layout(&sb, l);
	lb_strbuf_adds(&sb, ",\"flags\":");
	lb_strbuf_add_json(&sb, flags);
	if (info->pipeline_schedule) {
		lb_strbuf_adds(&sb, ",\"pipeline_schedule\":");
		lb_strbuf_add_json(&sb, info->pipeline_schedule);
	}
	if (info->has_optimizer)
		lb_strbuf_addf(&sb,
			       ",\"optimizer\":{\"lr\":%.9g,\"weight_decay\":%.9g,\"clip\":%.9g}",
			       info->lr, info->weight_decay, info->clip);
	lb_strbuf_addf(&sb,
		       ",\"params\":%lld,\"tokens_per_step\":%lld,\"flops_per_step\":%.17g,"
		       "\"hw_flops_per_step\":%.17g,\"gpu\":",
		       (long long)lb_param_count(m), (long long)l->global_batch * l->seq_len,
		       lb_flops_per_step(l), lb_hw_flops_per_step(l));
	lb_strbuf_add_json(&sb, info->gpu);
	if (info->peak_tflops >= 0)
		lb_strbuf_addf(&sb, ",\"peak_tflops\":%.17g", info->peak_tflops);
	else
		lb_strbuf_adds(&sb, ",\"peak_tflops\":null");
	lb_strbuf_addf(&sb, ",\"world_size\":%d,\"hosts\":[", info->world_size);
	if (info->hosts && info->n_hosts > 0) {
		for (int i = 0; i < info->n_hosts; i++) {
			if (i)
				lb_strbuf_adds(&sb, ",");
			lb_strbuf_add_json(&sb, info->hosts[i]);
		}
	} else {
		lb_strbuf_add_json(&sb, host);
	}
	lb_strbuf_adds(&sb, "],\"backend\":");
	lb_strbuf_add_json(&sb, info->backend);
	lb_strbuf_adds(&sb, ",\"versions\":{\"layoutbench\":");
	lb_strbuf_add_json(&sb, LB_VERSION);
	add_member_str(&sb, "cuda", info->cuda_version);
	add_member_str(&sb, "nccl", info->nccl_version);
	add_member_str(&sb, "driver", info->driver_version);
	if (info->device && info->device->libs[0]) {
		lb_strbuf_adds(&sb, ",\"libs\":");
		lb_strbuf_add_json(&sb, info->device->libs);
	}
	lb_strbuf_adds(&sb, "}");
	if (info->device) {
		const struct lb_device_info *d = info->device;

		lb_strbuf_adds(&sb, ",\"device\":{\"name\":");
		lb_strbuf_add_json(&sb, d->name);
		lb_strbuf_addf(
		    &sb, ",\"sm_count\":%d,\"mem_bytes\":%llu,\"compute_capability\":\"%d.%d\"}",
		    d->sm_count, (unsigned long long)d->mem_bytes, d->cc_major, d->cc_minor);
	}
	add_member_str(&sb, "git_commit",
		       strcmp(lb_git_commit(), "unknown") ? lb_git_commit() : NULL);
	lb_strbuf_adds(&sb, ",\"start_time\":");
	lb_strbuf_add_json(&sb, ts);
	add_member_str(&sb, "sweep", sweep && *sweep ? sweep : NULL);
	lb_strbuf_adds(&sb, ",\"job_id\":");
	if (array_job && *array_job && task && *task) { /* an array task: <array job>_<task> */
		char jid[256];

		snprintf(jid, sizeof(jid), "%s_%s", array_job, task);
		lb_strbuf_add_json(&sb, jid);
	} else if (job && *job) {
		lb_strbuf_add_json(&sb, job);
	} else {
		lb_strbuf_adds(&sb, "null");
	}
	if (label && *label) {
		lb_strbuf_adds(&sb, ",\"label\":");
		lb_strbuf_add_json(&sb, label);
	}
	lb_strbuf_adds(&sb, "}");
	if (sb.failed) {
		lb_strbuf_release(&sb);
		snprintf(err, errlen, "run log: out of host memory");
		return -1;
	}
	if (write_line(lg, &sb, 0)) {
		lb_trainlog_error(lg, err, errlen);
		return -1;
	}
	return 0;
}

void lb_trainlog_step(struct lb_trainlog *lg, int step, int warmup, double time_s, int64_t tokens,
		      double loss, uint64_t peak_mem_bytes, const struct lb_phases *ph)
{
	lb_trainlog_step_ranks(lg, step, warmup, time_s, tokens, loss, &peak_mem_bytes, NULL, -1,
			       ph);
}

int lb_trainlog_append(struct lb_trainlog *lg, const char *path)
{
	struct stat sb;

	memset(lg, 0, sizeof(*lg));
	snprintf(lg->path, sizeof(lg->path), "%s", path);
	lg->f = fopen(path, "a");
	if (lg->f && !fstat(fileno(lg->f), &sb))
		lg->good = (long long)sb.st_size;
	return lg->f ? 0 : -1;
}

/* The largest of n entries (one when n < 0). */
static uint64_t max_of(const uint64_t *v, int n)
{
	uint64_t m = 0;

	for (int i = 0; i < (n < 0 ? 1 : n); i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* ,"key":[a,b,...] */
static void add_u64_array(struct lb_strbuf *sb, const char *key, const uint64_t *v, int n)
{
	lb_strbuf_addf(sb, ",\"%s\":[", key);
	for (int i = 0; i < n; i++)
		lb_strbuf_addf(sb, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
	lb_strbuf_adds(sb, "]");
}

/* n_ranks < 0: rank_peak (and rank_dev_peak) hold one entry, no per-rank arrays. */
void lb_trainlog_step_ranks(struct lb_trainlog *lg, int step, int warmup, double time_s,
			    int64_t tokens, double loss, const uint64_t *rank_peak,
			    const uint64_t *rank_dev_peak, int n_ranks, const struct lb_phases *ph)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	uint64_t peak_mem_bytes;

	if (!lg || !lg->f)
		return;
	peak_mem_bytes = max_of(rank_peak, n_ranks);
	lb_strbuf_addf(&sb,
		       "{\"type\":\"step\",\"step\":%d,\"warmup\":%s,\"time_s\":%.9g,"
		       "\"tokens\":%lld,\"loss\":",
		       step, warmup ? "true" : "false", time_s, (long long)tokens);
	if (isfinite(loss))
		lb_strbuf_addf(&sb, "%.9g", loss);
	else
		lb_strbuf_adds(&sb, "null"); /* diverged: JSON has no NaN */
	lb_strbuf_addf(&sb, ",\"peak_mem_bytes\":%llu", (unsigned long long)peak_mem_bytes);
	if (n_ranks > 0)
		add_u64_array(&sb, "rank_peak_mem_bytes", rank_peak, n_ranks);
	if (rank_dev_peak) {
		lb_strbuf_addf(&sb, ",\"device_peak_mem_bytes\":%llu",
			       (unsigned long long)max_of(rank_dev_peak, n_ranks));
		if (n_ranks > 0)
			add_u64_array(&sb, "rank_device_peak_mem_bytes", rank_dev_peak, n_ranks);
	}
	if (ph) {
		const char *names[] = {"forward_s", "backward_s", "optimizer_s", "comm_exposed_s",
				       "bubble_s"};
		double vals[] = {ph->forward_s, ph->backward_s, ph->optimizer_s, ph->comm_exposed_s,
				 ph->bubble_s};
		int n = 0;

		lb_strbuf_adds(&sb, ",\"phases\":{");
		for (int i = 0; i < 5; i++)
			if (vals[i] >= 0)
				lb_strbuf_addf(&sb, "%s\"%s\":%.9g", n++ ? "," : "", names[i],
					       vals[i]);
		lb_strbuf_adds(&sb, "}");
	}
	lb_strbuf_adds(&sb, "}");
	write_line(lg, &sb, 0);
}

void lb_trainlog_end(struct lb_trainlog *lg, const char *cls, const char *message, int rank,
		     int exit_code)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char ts[32];

	if (!lg || !lg->f || lg->ended)
		return;
	iso_now(ts, sizeof(ts));
	lb_strbuf_addf(&sb,
		       "{\"type\":\"end\",\"status\":\"%s\",\"class\":", cls ? "failed" : "ok");
	add_str_or_null(&sb, cls);
	lb_strbuf_adds(&sb, ",\"message\":");
	lb_strbuf_add_json(&sb, message ? message : "");
	if (rank >= 0)
		lb_strbuf_addf(&sb, ",\"rank\":%d", rank);
	else
		lb_strbuf_adds(&sb, ",\"rank\":null");
	lb_strbuf_addf(&sb, ",\"exit_code\":%d,\"end_time\":", exit_code);
	lb_strbuf_add_json(&sb, ts);
	lb_strbuf_adds(&sb, "}");
	if (write_line(lg, &sb, 1) == 0)
		lg->ended = 1;
}

void lb_trainlog_close(struct lb_trainlog *lg)
{
	if (lg && lg->f) {
		fclose(lg->f);
		lg->f = NULL;
	}
	if (current == lg)
		current = NULL;
}

/* The exit status of each failure class (docs/run-log.md); any other class exits
 * LB_EXIT_ERROR. */
static const struct {
	const char *cls;
	int code;
} class_codes[] = {
    {"oom", LB_EXIT_OOM},	  {"nccl_error", LB_EXIT_NCCL}, {"diverged", LB_EXIT_DIVERGED},
    {"timeout", LB_EXIT_TIMEOUT}, {"io_error", LB_EXIT_IO},
};

int lb_class_exit_code(const char *cls)
{
	if (!cls)
		return LB_EXIT_OK;
	for (size_t i = 0; i < sizeof(class_codes) / sizeof(class_codes[0]); i++)
		if (!strcmp(cls, class_codes[i].cls))
			return class_codes[i].code;
	return LB_EXIT_ERROR;
}

void lb_trainlog_set_current(struct lb_trainlog *lg, int rank)
{
	current = lg;
	current_rank = rank;
}

void lb_fatal(const char *file, int line, const char *cls, const char *fmt, ...)
{
	char msg[1024], host[128];
	int code = lb_class_exit_code(cls);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	host_name(host, sizeof(host));
	fprintf(stderr, "%s:%d: host %s rank %d: error: %s\n", file, line, host, current_rank, msg);
	if (current) {
		lb_trainlog_end(current, cls, msg, current_rank, code);
		lb_trainlog_close(current);
	}
	exit(code);
}
