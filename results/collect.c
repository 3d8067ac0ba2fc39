/*
 * The collector (results/collect.h): run-log files into the runs and steps tables, one
 * transaction per run, resuming a grown file from the last complete line it read; and
 * the `layoutbench collect` command.
 *
 * Why one file: its three parts (prepare, parse on a worker thread, write) share one job
 * structure and one pipeline; a run's statistics are results/stats.c's.
 */
#include "results/collect.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/model.h"
#include "common/util.h"
#include "results/bind.h"
#include "results/db.h"
#include "results/health.h"
#include "results/stats.h"
#include "results/runlog.h"

enum {
	Q_FIND_PATH,
	Q_FIND_UID,
	Q_SWEEP,
	Q_JOB,
	Q_INSERT_RUN,
	Q_STEP,
	Q_END,
	Q_FINISH,
	Q_STATS_READ,
	Q_STATS_WRITE,
	Q_STEP_BATCH,
	Q_COUNT
};

#define STEP_BATCH 32 /* steps per multi-row INSERT */

static const char *const queries[Q_COUNT] = {
    [Q_FIND_PATH] = "SELECT log_bytes FROM runs WHERE log_path = ?1",
    [Q_FIND_UID] = "SELECT id, log_path, bytes_ingested, log_hash, layout_id, start_time, hosts, "
		   "source FROM runs WHERE run_uid = ?1",
    [Q_SWEEP] = "INSERT INTO sweeps (name, source) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
    [Q_JOB] = "SELECT id FROM jobs WHERE job_id = ?1 OR (array_job_id IS NOT NULL AND "
	      "array_job_id || '_' || array_index = ?1) ORDER BY id DESC LIMIT 1",
    [Q_INSERT_RUN] =
	"INSERT INTO runs (run_uid, layout_id, sweep, job_ref, source, label, status, hosts, gpu, "
	"peak_tflops, world_size, versions, git_commit, backend, flags, flops_per_step, "
	"hw_flops_per_step, tokens_per_step, params, start_time, log_path, log_bytes, "
	"bytes_ingested, flops_per_step_no_embed) VALUES (?1, ?2, ?3, ?4, 'run', ?5, 'running', "
	"?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, 0, 0, ?20)",
    [Q_STEP] = "INSERT OR REPLACE INTO steps (run_id, step, warmup, time_s, tokens, loss, "
	       "peak_mem_bytes, forward_s, backward_s, optimizer_s, comm_exposed_s, bubble_s, "
	       "rank_peak_mem, device_peak_mem_bytes, rank_device_peak_mem) VALUES (?1, ?2, ?3, "
	       "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    [Q_END] = "UPDATE runs SET status = ?2, failure_class = ?3, message = ?4, exit_code = ?5, "
	      "failed_rank = ?6, end_time = ?7 WHERE id = ?1",
    [Q_STATS_READ] = results_stats_read_sql,
    [Q_STATS_WRITE] = results_stats_write_sql,
    [Q_FINISH] = "UPDATE runs SET log_path = ?2, log_bytes = ?3, bytes_ingested = ?4, "
		 "log_hash = ?5, collected = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1",
};

#define STEP_COLS 15 /* bound values per step row (bind_step) */

struct collector {
	sqlite3 *db;
	sqlite3_stmt *q[Q_COUNT];
	struct collect_stats *st;
	char *err;
	size_t errlen;
	int failed;		  /* a file was refused or the database failed */
	int stop;		  /* the database failed: no further file is tried */
	int raced;		  /* runs another collect had read on meanwhile */
	int done_files;		  /* files read to the end (for the database's message) */
	struct results_stats acc; /* one run's statistics, reused */
};

/* Format a message with what a terminal would act on made visible: run logs hold what
 * anyone wrote (a run_uid, a sweep name, a value quoted in a fault). */
static void vformat_visible(char *buf, size_t len, const char *fmt, va_list ap)
{
	struct lb_strbuf vis = LB_STRBUF_INIT;
	char raw[2048];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	lb_strbuf_add_visible(&vis, raw, strlen(raw), 0);
	snprintf(buf, len, "%s", vis.failed ? raw : lb_strbuf_str(&vis));
	lb_strbuf_release(&vis);
}

static void warn(struct collector *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct collector *c, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	c->st->warnings++;
	if (c->st->quiet)
		return;
	va_start(ap, fmt);
	vformat_visible(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "warning: %s\n", msg);
}

/* A refused file or a database failure: count, print, keep as the last error. */
static void fail(struct collector *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct collector *c, const char *fmt, ...)
{
	va_list ap;

	c->st->errors++;
	c->failed = 1;
	va_start(ap, fmt);
	vformat_visible(c->err, c->errlen, fmt, ap);
	va_end(ap);
	if (!c->st->quiet)
		fprintf(stderr, "error: %s\n", c->err);
}

/*
 * The database failed (a full disk, an I/O error, a lock held too long): one error that
 * names the database and the reason, and the collect stops there, since every further
 * file would fail the same way (a full disk printed one error per file before).
 */
static void fail_db(struct collector *c, const char *file)
{
	const char *name = sqlite3_db_filename(c->db, "main");

	fail(c,
	     "database '%s': %s (at '%s'; %d file%s before it collected); collect stopped: "
	     "fix the cause and collect again, which reads on where this one stopped",
	     name && *name ? name : "?", sqlite3_errmsg(c->db), file, c->done_files,
	     c->done_files == 1 ? "" : "s");
	c->stop = 1;
}

static void bind_str(sqlite3_stmt *s, int i, const char *v)
{
	if (v && *v)
		sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, i);
}

/* The same for a statement whose every parameter is bound each time. */
static int run_all_bound(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	return rc;
}

/* Insert the run row of a header (sweep and layout first). Returns the run id or -1. */
static long long insert_run(struct collector *c, const char *file, const struct runlog_header *h,
			    const char *abspath)
{
	const char *sweep = h->sweep[0] ? h->sweep : c->st->sweep ? c->st->sweep : "adhoc";
	sqlite3_stmt *s;
	long long job = -1;
	int rc;

	(void)file;
	s = c->q[Q_SWEEP];
	sqlite3_bind_text(s, 1, sweep, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, h->sweep[0] || c->st->sweep ? "spec" : "adhoc", -1, SQLITE_STATIC);
	if (results_bind_run(s) != SQLITE_DONE)
		return -1;
	/* a layouts row is written only under its fields' own id, never under an id that a
	 * log states and its fields disagree with */
	if (results_upsert_layout_id(c->db, &h->layout, h->layout_id_computed, NULL) != SQLITE_OK)
		return -1;
	if (h->job_id[0]) {
		s = c->q[Q_JOB];
		sqlite3_bind_text(s, 1, h->job_id, -1, SQLITE_STATIC);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW)
			job = sqlite3_column_int64(s, 0);
		sqlite3_reset(s);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return -1;
	}
	s = c->q[Q_INSERT_RUN];
	bind_str(s, 1, h->run_uid);
	bind_str(s, 2, h->layout_id_computed);
	bind_str(s, 3, sweep);
	results_bind_int64(s, 4, job, job >= 0);
	bind_str(s, 5, h->label);
	bind_str(s, 6, h->hosts);
	bind_str(s, 7, h->gpu);
	results_bind_double(s, 8, h->peak_tflops, h->peak_tflops > 0);
	results_bind_int64(s, 9, h->world_size, h->world_size > 0);
	bind_str(s, 10, h->versions);
	bind_str(s, 11, h->git_commit);
	bind_str(s, 12, h->backend);
	bind_str(s, 13, h->flags);
	results_bind_double(s, 14, h->flops_per_step, h->flops_per_step >= 0);
	results_bind_double(s, 15, h->hw_flops_per_step, h->hw_flops_per_step >= 0);
	results_bind_int64(s, 16, h->tokens_per_step, h->tokens_per_step >= 0);
	results_bind_int64(s, 17, h->params, h->params >= 0);
	bind_str(s, 18, h->start_time);
	bind_str(s, 19, abspath);
	results_bind_double(s, 20, lb_flops_per_step_as(&h->layout, LB_FLOPS_NO_EMBED), 1);
	if (results_bind_run(s) != SQLITE_DONE)
		return -1;
	return sqlite3_last_insert_rowid(c->db);
}

/* The FLOPs per step the header records against the count of its layout and model
 * (common/model.h, the one home): a log of another build's arithmetic, or edited by hand,
 * is named; its own figure is kept (the views divide it). */
static void check_flops(struct collector *c, const char *file, const struct runlog_header *h)
{
	double want = lb_flops_per_step(&h->layout);

	if (h->flops_per_step >= 0 && fabs(h->flops_per_step - want) > 1e-9 * want)
		warn(c,
		     "%s:1: flops_per_step %.17g differs from %.17g computed from the layout and "
		     "model (docs/flops.md); keeping the log's, its MFU may be wrong",
		     file, h->flops_per_step, want);
}

/* Bind one step's STEP_COLS values at parameters base+1 .. base+STEP_COLS. */
static void bind_step(sqlite3_stmt *s, int base, long long run_id, const struct runlog_step *p)
{
	sqlite3_bind_int64(s, base + 1, run_id);
	sqlite3_bind_int64(s, base + 2, p->step);
	sqlite3_bind_int(s, base + 3, p->warmup);
	sqlite3_bind_double(s, base + 4, p->time_s);
	results_bind_int64(s, base + 5, p->tokens, p->tokens >= 0);
	results_bind_double(s, base + 6, p->loss, 1);
	results_bind_int64(s, base + 7, p->peak_mem_bytes, p->peak_mem_bytes >= 0);
	results_bind_double(s, base + 8, p->forward_s, 1);
	results_bind_double(s, base + 9, p->backward_s, 1);
	results_bind_double(s, base + 10, p->optimizer_s, 1);
	results_bind_double(s, base + 11, p->comm_exposed_s, 1);
	results_bind_double(s, base + 12, p->bubble_s, 1);
	bind_str(s, base + 13, p->rank_peak_mem);
	results_bind_int64(s, base + 14, p->device_peak_mem_bytes, p->device_peak_mem_bytes >= 0);
	bind_str(s, base + 15, p->rank_device_peak_mem);
}

static int write_step(struct collector *c, long long run_id, const struct runlog_step *p)
{
	bind_step(c->q[Q_STEP], 0, run_id, p);
	return run_all_bound(c->q[Q_STEP]) == SQLITE_DONE ? 0 : -1;
}

/* STEP_BATCH steps in one multi-row INSERT: the statement overhead is paid once. */
static int write_step_batch(struct collector *c, long long run_id,
			    const struct runlog_step *const *p)
{
	for (int k = 0; k < STEP_BATCH; k++)
		bind_step(c->q[Q_STEP_BATCH], STEP_COLS * k, run_id, p[k]);
	return run_all_bound(c->q[Q_STEP_BATCH]) == SQLITE_DONE ? 0 : -1;
}

static int write_end(struct collector *c, long long run_id, const struct runlog_end *e)
{
	sqlite3_stmt *s = c->q[Q_END];

	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_text(s, 2, e->ok ? "ok" : "failed", -1, SQLITE_STATIC);
	bind_str(s, 3, e->ok ? NULL : e->failure_class);
	bind_str(s, 4, e->message);
	results_bind_int64(s, 5, e->exit_code, e->exit_code >= 0);
	results_bind_int64(s, 6, e->rank, e->rank >= 0);
	bind_str(s, 7, e->end_time);
	return results_bind_run(s) == SQLITE_DONE ? 0 : -1;
}

/* The size of the log last collected from path: 1 found (*log_bytes), 0 not, -1 error. */
static int find_path(struct collector *c, const char *path, long long *log_bytes)
{
	sqlite3_stmt *s = c->q[Q_FIND_PATH];
	int rc;

	sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*log_bytes =
		    sqlite3_column_type(s, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* What the database holds about a run_uid: the identity a log must match to be read on. */
struct known_run {
	int found;
	long long id;
	long long ingested; /* resume offset */
	int has_hash;	    /* log_hash not NULL */
	uint64_t hash;	    /* of the first `ingested` bytes */
	char source[8];	    /* 'run' or 'paper' */
	char layout_id[LB_ID_LEN + 1];
	char start_time[40];
	char *hosts; /* malloc'd or NULL */
	char log_path[PATH_MAX];
};

static void known_release(struct known_run *k)
{
	free(k->hosts);
	memset(k, 0, sizeof(*k));
}

static void col_text(sqlite3_stmt *s, int i, char *buf, size_t len)
{
	const char *v = (const char *)sqlite3_column_text(s, i);

	snprintf(buf, len, "%s", v ? v : "");
}

/* Look run_uid up; 0 (k->found says whether), or -1 on a database error. */
static int find_uid(struct collector *c, const char *uid, struct known_run *k)
{
	sqlite3_stmt *s = c->q[Q_FIND_UID];
	int rc;

	known_release(k);
	sqlite3_bind_text(s, 1, uid, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const char *hash = (const char *)sqlite3_column_text(s, 3);
		const char *hosts = (const char *)sqlite3_column_text(s, 6);
		k->found = 1;
		k->id = sqlite3_column_int64(s, 0);
		col_text(s, 1, k->log_path, sizeof(k->log_path));
		k->ingested = sqlite3_column_int64(s, 2);
		if (hash && strlen(hash) == 16) {
			char hex[19] = "0x";
			memcpy(hex + 2, hash, 17);
			k->has_hash = lb_parse_u64(hex, &k->hash) == 0;
		}
		col_text(s, 4, k->layout_id, sizeof(k->layout_id));
		col_text(s, 5, k->start_time, sizeof(k->start_time));
		col_text(s, 7, k->source, sizeof(k->source));
		if (hosts && !(k->hosts = strdup(hosts)))
			rc = SQLITE_NOMEM;
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

static int count_lines(const char *buf, size_t len)
{
	int n = 0;
	const char *p = buf, *e = buf + len;

	while (p < e && (p = memchr(p, '\n', (size_t)(e - p)))) {
		n++;
		p++;
	}
	return n;
}

/*
 * One file's way through the collector, in three parts so that parsing (the worker
 * thread) overlaps writing (the calling thread, the only one touching the database):
 * prepare (read the file, look its run up, parse the header), parse (every line after
 * the resume offset into items; pure) and write (one transaction).
 */
enum job_state { JOB_DONE = 0, JOB_READ };

struct item {
	enum runlog_type type; /* 0: a line that could not be read (fault says why) */
	int lineno;	       /* 1-based line number in the file */
	struct runlog_step step;
	struct runlog_end end;
	char *fault; /* malloc'd; type 0 only */
};

struct job {
	const char *file; /* as given, for messages */
	char abspath[PATH_MAX];
	char *buf; /* the whole file, NUL-terminated */
	size_t len;
	enum job_state state;
	struct runlog_record hdr;  /* the header (JOB_READ) */
	size_t hlen;		   /* bytes of the header line */
	size_t off;		   /* resume offset: the first byte to parse */
	int lineno0;		   /* lines before off */
	int known;		   /* prepare found the run_uid in the database */
	struct item *items;	   /* parse output */
	size_t n_items, cap_items; /* */
	size_t consumed;	   /* offset after the last line read */
	uint64_t hash_off;	   /* log_hash of buf[0, off) */
	uint64_t hash_consumed;	   /* log_hash of buf[0, consumed) */
	int oom;		   /* parse ran out of memory */
};

static void job_items_release(struct job *j)
{
	for (size_t i = 0; i < j->n_items; i++) {
		struct item *it = &j->items[i];
		struct runlog_record r = {0};
		if (it->type == RUNLOG_STEP) {
			r.type = RUNLOG_STEP;
			r.step = it->step;
			runlog_record_release(&r);
		} else if (it->type == RUNLOG_END) {
			r.type = RUNLOG_END;
			r.end = it->end;
			runlog_record_release(&r);
		}
		free(it->fault);
	}
	free(j->items);
	j->items = NULL;
	j->n_items = j->cap_items = 0;
}

static void job_release(struct job *j)
{
	job_items_release(j);
	if (j->state == JOB_READ)
		runlog_record_release(&j->hdr);
	free(j->buf);
	memset(j, 0, sizeof(*j));
}

/*
 * Read a file and its header, and find where to read on: a file whose size is what the
 * last collect saw is unchanged (not read); otherwise its run_uid decides, the run's
 * resume offset if the database knows it (write_job checks that this log is that run
 * before anything is written), else the line after the header. A FIFO, a device or a
 * folder is refused without being opened for reading.
 */
static void prepare(struct collector *c, struct job *j, const char *file)
{
	struct known_run k = {0};
	long long log_bytes = 0;
	char perr[256], serr[256];
	struct stat sb;
	const char *nl;
	int found;

	memset(j, 0, sizeof(*j));
	j->file = file;
	j->state = JOB_DONE;
	c->st->files++;
	if (stat(file, &sb) || !realpath(file, j->abspath)) {
		fail(c, "'%s': %s", file, strerror(errno));
		return;
	}
	if (!S_ISREG(sb.st_mode)) {
		fail(c, "'%s': not a regular file; a run log is one", file);
		return;
	}
	found = find_path(c, j->abspath, &log_bytes);
	if (found < 0) {
		fail_db(c, file);
		return;
	}
	if (found && log_bytes == (long long)sb.st_size) {
		c->st->runs_unchanged++;
		c->done_files++;
		return;
	}
	if (lb_read_file(j->abspath, &j->buf, &j->len)) {
		fail(c, "'%s': %s", file,
		     errno == EINVAL ? "not a regular file; a run log is one" : strerror(errno));
		return;
	}
	if (j->len == 0) {
		warn(c, "%s: empty run log (no header yet); skipped", file);
		c->done_files++;
		return;
	}
	nl = memchr(j->buf, '\n', j->len);
	j->hlen = nl ? (size_t)(nl - j->buf) + 1 : j->len;
	if (runlog_parse_line(j->buf, j->hlen, &j->hdr, perr, sizeof(perr))) {
		if (!nl)
			warn(c, "%s: no complete header yet; skipped", file);
		else
			fail(c, "%s:1: %s", file, perr);
		return;
	}
	if (j->hdr.type != RUNLOG_HEADER) {
		runlog_record_release(&j->hdr);
		fail(c, "%s:1: expected a header record first", file);
		return;
	}
	j->state = JOB_READ;
	/* the sweep becomes a row, a folder name and SQL text: one rule for its name */
	if (j->hdr.header.sweep[0] &&
	    lb_sweep_name_check(j->hdr.header.sweep, serr, sizeof(serr))) {
		fail(c, "%s:1: 'sweep': %s; not collected", file, serr);
		goto out_done;
	}
	if (find_uid(c, j->hdr.header.run_uid, &k)) {
		fail_db(c, file);
		goto out_done;
	}
	j->known = k.found;
	j->off = k.found && k.ingested >= (long long)j->hlen && k.ingested <= (long long)j->len
		     ? (size_t)k.ingested
		     : j->hlen;
	j->lineno0 = count_lines(j->buf, j->off);
	known_release(&k);
	return;
out_done:
	known_release(&k);
	runlog_record_release(&j->hdr);
	j->state = JOB_DONE;
}

/*
 * runs.log_hash, the identity of a log's first n bytes: a 64-bit multiply-xorshift mix of
 * its little-endian 8-byte words, then of the last n % 8 bytes as one word and of n. A
 * word at a time (about a cycle a byte, where FNV-1a takes four) so that hashing every
 * byte read costs little beside parsing it; the state over whole words continues from a
 * prefix to a longer one, so one pass gives the hash of both. Not a cryptographic hash: it
 * tells a copied or edited log from the one that was read, not an attacker who aims at a
 * collision.
 */
#define HASH_SEED 0x9e3779b97f4a7c15ULL

static uint64_t hash_mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

static uint64_t load_le(const char *p, size_t n)
{
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)(unsigned char)p[i] << (8 * i);
	return w;
}

/* The state after nwords more whole words from p. */
static uint64_t hash_words(uint64_t h, const char *p, size_t nwords)
{
	for (size_t i = 0; i < nwords; i++)
		h = hash_mix(h, load_le(p + 8 * i, 8));
	return h;
}

/* The hash of buf[0, n) from the state over its n / 8 whole words. */
static uint64_t hash_final(uint64_t h, const char *buf, size_t n)
{
	h = hash_mix(h, load_le(buf + n / 8 * 8, n % 8));
	return hash_mix(h, (uint64_t)n);
}

/* Pure: the lines of j->buf from j->off into j->items, and the hashes of what was read
 * before them and up to the last complete line. */
static void parse_job(struct job *j)
{
	size_t pos;
	int lineno = j->lineno0;

	uint64_t words = hash_words(HASH_SEED, j->buf, j->off / 8);
	j->hash_off = hash_final(words, j->buf, j->off);
	for (pos = j->off; pos < j->len;) {
		const char *nl = memchr(j->buf + pos, '\n', j->len - pos);
		size_t llen = nl ? (size_t)(nl - (j->buf + pos)) + 1 : j->len - pos;
		struct runlog_record rec;
		struct item *it;
		char perr[256];
		int rc;

		lineno++;
		rc = runlog_parse_line(j->buf + pos, llen, &rec, perr, sizeof(perr));
		if (rc && !nl)
			break; /* a line still being written: read it next time */
		if (j->n_items == j->cap_items) {
			size_t cap = j->cap_items ? 2 * j->cap_items : 256;
			struct item *v = realloc(j->items, cap * sizeof(*v));
			if (!v) {
				if (!rc)
					runlog_record_release(&rec);
				j->oom = 1;
				break;
			}
			j->items = v;
			j->cap_items = cap;
		}
		it = &j->items[j->n_items++];
		memset(it, 0, sizeof(*it));
		it->lineno = lineno;
		if (rc) {
			it->fault = strdup(perr);
		} else {
			it->type = rec.type;
			if (rec.type == RUNLOG_STEP)
				it->step = rec.step;
			else if (rec.type == RUNLOG_END)
				it->end = rec.end;
			else
				runlog_record_release(&rec); /* a second header */
		}
		pos += llen;
	}
	j->consumed = pos;
	words = hash_words(words, j->buf + j->off / 8 * 8, pos / 8 - j->off / 8);
	j->hash_consumed = hash_final(words, j->buf, pos);
}

static void *parse_thread(void *arg)
{
	parse_job(arg);
	return NULL;
}

/*
 * The run_stats row after writing a job's steps: for a new run whose step numbers
 * increase (no step replaced another) straight from the parsed items, else from the step
 * rows. Returns 0 or -1.
 */
static int stats_from_items(struct collector *c, const struct job *j, long long run_id, int is_new)
{
	long long last = -1;

	results_stats_reset(&c->acc);
	if (is_new) {
		for (size_t i = 0; i < j->n_items; i++) {
			const struct runlog_step *p = &j->items[i].step;
			if (j->items[i].type != RUNLOG_STEP)
				continue;
			if (p->step <= last)
				goto out_from_rows;
			last = p->step;
			double ph[RESULTS_STATS_PHASES] = {p->forward_s, p->backward_s,
							   p->optimizer_s, p->comm_exposed_s,
							   p->bubble_s};
			if (results_stats_add(&c->acc, p->warmup, p->time_s, p->peak_mem_bytes, ph,
					      p->rank_peak_mem) ||
			    results_stats_add_more(&c->acc, p->loss, p->device_peak_mem_bytes,
						   p->rank_device_peak_mem))
				return -1;
		}
		return results_stats_write(c->q[Q_STATS_WRITE], run_id, &c->acc);
	}
out_from_rows:
	return results_stats_refresh(c->q[Q_STATS_READ], c->q[Q_STATS_WRITE], run_id, &c->acc);
}

static int str_eq_null(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/*
 * Whether the log of job j is the run the database knows under its run_uid: a log moved
 * or copied whole is (the same header, the same bytes up to where the run was read), a
 * copied or edited log that took another run's run_uid is not. On a mismatch, the error
 * names the run and what differs, and returns -1. A log shorter than what was read of the
 * run (an older copy, or not that run: which, its bytes cannot tell) changes nothing: a
 * warning, and 1. Else 0.
 */
static int same_run(struct collector *c, const struct job *j, const struct known_run *k)
{
	const struct runlog_header *h = &j->hdr.header;
	char what[256];

	if (strcmp(k->source, "run"))
		snprintf(what, sizeof(what), "that run was imported (source '%s'), not collected",
			 k->source);
	else if (strcmp(k->layout_id, h->layout_id_computed))
		snprintf(what, sizeof(what), "its layout '%s' is not the run's '%s'",
			 h->layout_id_computed, k->layout_id);
	else if (strcmp(k->start_time, h->start_time))
		snprintf(what, sizeof(what), "its start_time '%s' is not the run's '%s'",
			 h->start_time, k->start_time);
	else if (!str_eq_null(k->hosts, h->hosts))
		snprintf(what, sizeof(what), "its hosts %.80s are not the run's %.80s",
			 h->hosts ? h->hosts : "null", k->hosts ? k->hosts : "null");
	else if (k->ingested > (long long)j->len) {
		warn(c,
		     "%s: run '%s' was read further (%lld bytes) from '%s' than this log holds "
		     "(%zu bytes): an older copy, or not that run; skipped",
		     j->file, h->run_uid, k->ingested, k->log_path[0] ? k->log_path : "?", j->len);
		return 1;
	} else if (k->has_hash && (size_t)k->ingested == j->off && k->hash != j->hash_off)
		snprintf(what, sizeof(what), "its first %lld bytes differ from those read",
			 k->ingested);
	else
		return 0;
	fail(c,
	     "%s: run '%s' was collected from '%s' (run %lld), and this log is not that run: "
	     "%s; not collected (a copied or edited log must not take another run's run_uid)",
	     j->file, h->run_uid, k->log_path[0] ? k->log_path : "?", k->id, what);
	return -1;
}

static void write_job(struct collector *c, struct job *j)
{
	const struct runlog_step *pend[STEP_BATCH]; /* steps not yet written */
	struct known_run k = {0};
	long long run_id;
	char hash[17];
	int is_new, changed = 0, np = 0, same;
	long steps = 0;

	if (j->state == JOB_DONE)
		return;
	if (j->oom) {
		fail(c, "%s: out of memory", j->file);
		return;
	}
	if (sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		goto out_db_error;
	/* what the database holds now, inside the transaction: another collect may have
	 * taken this run (this log, or another copy of it) since prepare looked */
	if (find_uid(c, j->hdr.header.run_uid, &k))
		goto out_db_error_rollback;
	is_new = !k.found;
	if (j->known != k.found ||
	    (k.found && k.ingested != (long long)j->off && k.ingested >= (long long)j->hlen &&
	     k.ingested <= (long long)j->len)) {
		/* read again from where the database stands (rare: a collect ran alongside) */
		c->raced += j->known || k.found;
		job_items_release(j);
		j->off =
		    k.found && k.ingested >= (long long)j->hlen && k.ingested <= (long long)j->len
			? (size_t)k.ingested
			: j->hlen;
		j->lineno0 = count_lines(j->buf, j->off);
		j->known = k.found;
		parse_job(j);
		if (j->oom) {
			fail(c, "%s: out of memory", j->file);
			goto out_rollback;
		}
	}
	if (!is_new && (same = same_run(c, j, &k))) {
		if (same > 0) { /* nothing to write: counted as looked at */
			c->done_files++;
			c->st->runs_unchanged++;
		}
		goto out_rollback;
	}
	if (is_new) {
		if (strcmp(j->hdr.header.layout_id, j->hdr.header.layout_id_computed))
			warn(c,
			     "%s:1: layout_id '%s' differs from '%s' computed from the layout "
			     "fields; the run is filed under '%s' (the fields' own id)",
			     j->file, j->hdr.header.layout_id, j->hdr.header.layout_id_computed,
			     j->hdr.header.layout_id_computed);
		run_id = insert_run(c, j->file, &j->hdr.header, j->abspath);
		if (run_id < 0)
			goto out_db_error_rollback;
		check_flops(c, j->file, &j->hdr.header);
	} else {
		run_id = k.id;
	}
	for (size_t i = 0; i < j->n_items; i++) {
		const struct item *it = &j->items[i];

		if (!it->type) {
			warn(c, "%s:%d: %s", j->file, it->lineno, it->fault ? it->fault : "?");
		} else if (it->type == RUNLOG_STEP) {
			pend[np++] = &it->step;
			if (np == STEP_BATCH) {
				if (write_step_batch(c, run_id, pend))
					goto out_db_error_rollback;
				np = 0;
			}
			steps++;
		} else if (it->type == RUNLOG_END) {
			if (write_end(c, run_id, &it->end))
				goto out_db_error_rollback;
			changed = 1;
		} else {
			warn(c, "%s:%d: a second header record; ignored", j->file, it->lineno);
		}
	}
	for (int q = 0; q < np; q++)
		if (write_step(c, run_id, pend[q]))
			goto out_db_error_rollback;
	if (steps && stats_from_items(c, j, run_id, is_new))
		goto out_db_error_rollback;
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)j->hash_consumed);
	sqlite3_bind_int64(c->q[Q_FINISH], 1, run_id);
	sqlite3_bind_text(c->q[Q_FINISH], 2, j->abspath, -1, SQLITE_STATIC);
	sqlite3_bind_int64(c->q[Q_FINISH], 3, (long long)j->len);
	sqlite3_bind_int64(c->q[Q_FINISH], 4, (long long)j->consumed);
	sqlite3_bind_text(c->q[Q_FINISH], 5, hash, -1, SQLITE_STATIC);
	if (results_bind_run(c->q[Q_FINISH]) != SQLITE_DONE)
		goto out_db_error_rollback;
	if (sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto out_db_error_rollback;
	known_release(&k);
	c->done_files++;
	c->st->steps += steps;
	if (is_new)
		c->st->runs_new++;
	else if (steps || changed)
		c->st->runs_updated++;
	else
		c->st->runs_unchanged++;
	return;

out_db_error_rollback:
	fail_db(c, j->file);
out_rollback:
	sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	known_release(&k);
	return;
out_db_error:
	fail_db(c, j->file);
}

/* Collect files in order: file i+1 is parsed by a worker thread while file i is written.
 * A database failure stops the list (fail_db). */
static void collect_files(struct collector *c, char *const *files, size_t n)
{
	struct job jobs[2];
	pthread_t tid;
	int running = 0;

	if (!n)
		return;
	prepare(c, &jobs[0], files[0]);
	if (jobs[0].state != JOB_DONE)
		parse_job(&jobs[0]);
	for (size_t i = 0; i < n; i++) {
		struct job *cur = &jobs[i % 2], *next = &jobs[(i + 1) % 2];

		if (i + 1 < n && !c->stop) {
			prepare(c, next, files[i + 1]);
			running = next->state != JOB_DONE &&
				  pthread_create(&tid, NULL, parse_thread, next) == 0;
			if (!running && next->state != JOB_DONE)
				parse_job(next);
		}
		if (!c->stop)
			write_job(c, cur);
		job_release(cur);
		if (running) {
			pthread_join(tid, NULL);
			running = 0;
		}
		if (c->stop) {
			if (i + 1 < n)
				job_release(next);
			break;
		}
	}
}

/*
 * The walk of a folder: every run-*.jsonl below it, symbolic links followed (a runs
 * folder on shared storage is often one), each folder and each file taken once however
 * many links lead to it (so a link back up is no loop). A folder that cannot be read, or
 * a run log name that leads nowhere, is an error that names it; a run log name that is
 * not a regular file (a FIFO) is skipped with a warning, never opened.
 */
struct devino {
	dev_t dev;
	ino_t ino;
};

struct walk {
	struct collector *c;
	char **files;
	size_t n, cap;
	struct devino *seen; /* open addressing; cap_seen a power of two, 0 = empty slot */
	size_t n_seen, cap_seen;
	int oom;
};

#define WALK_MAX_DEPTH 256

/* 1 when (dev, ino) was seen before, else records it and returns 0; -1 out of memory. */
static int walk_seen(struct walk *w, dev_t dev, ino_t ino)
{
	size_t mask, h;

	if (2 * (w->n_seen + 1) > w->cap_seen) {
		size_t cap = w->cap_seen ? 2 * w->cap_seen : 256;
		struct devino *v = calloc(cap, sizeof(*v)), *old = w->seen;
		if (!v)
			return -1;
		for (size_t i = 0; i < w->cap_seen; i++) {
			if (!old[i].ino && !old[i].dev)
				continue;
			h = (size_t)lb_fnv1a64(&old[i], sizeof(old[i])) & (cap - 1);
			while (v[h].ino || v[h].dev)
				h = (h + 1) & (cap - 1);
			v[h] = old[i];
		}
		free(old);
		w->seen = v;
		w->cap_seen = cap;
	}
	struct devino key;
	memset(&key, 0, sizeof(key));
	key.dev = dev;
	key.ino = ino ? ino : (ino_t)-1;
	mask = w->cap_seen - 1;
	h = (size_t)lb_fnv1a64(&key, sizeof(key)) & mask;
	while (w->seen[h].ino || w->seen[h].dev) {
		if (w->seen[h].dev == key.dev && w->seen[h].ino == key.ino)
			return 1;
		h = (h + 1) & mask;
	}
	w->seen[h] = key;
	w->n_seen++;
	return 0;
}

static int is_log_name(const char *base)
{
	size_t bl = strlen(base);

	return !strncmp(base, "run-", 4) && bl >= 10 && !strcmp(base + bl - 6, ".jsonl");
}

static void walk_add(struct walk *w, const char *path)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		char **v = realloc(w->files, cap * sizeof(*v));
		if (!v) {
			w->oom = 1;
			return;
		}
		w->files = v;
		w->cap = cap;
	}
	if (!(w->files[w->n] = strdup(path)))
		w->oom = 1;
	else
		w->n++;
}

static void walk_dir(struct walk *w, const char *dir, int depth)
{
	DIR *d;
	struct dirent *e;

	if (depth > WALK_MAX_DEPTH) {
		fail(w->c, "'%s': folders nested deeper than %d; not searched", dir,
		     WALK_MAX_DEPTH);
		return;
	}
	d = opendir(dir);
	if (!d) {
		fail(w->c, "cannot read folder '%s': %s", dir, strerror(errno));
		return;
	}
	for (;;) {
		char path[PATH_MAX];
		struct stat sb;
		int log;

		errno = 0;
		e = readdir(d);
		if (!e) {
			if (errno)
				fail(w->c, "cannot read folder '%s': %s", dir, strerror(errno));
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		log = is_log_name(e->d_name);
		/* only folders and run logs matter: other files are not even looked at */
		if (!log && e->d_type != DT_DIR && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path)) {
			fail(w->c, "'%s/%s': the path is too long", dir, e->d_name);
			continue;
		}
		if (stat(path, &sb)) {
			if (log) /* a link to a log that is gone, a loop of links */
				fail(w->c, "'%s': %s", path, strerror(errno));
			continue;
		}
		if (S_ISDIR(sb.st_mode)) {
			int seen = walk_seen(w, sb.st_dev, sb.st_ino);
			if (seen < 0)
				w->oom = 1;
			else if (!seen)
				walk_dir(w, path, depth + 1);
		} else if (log && !S_ISREG(sb.st_mode)) {
			warn(w->c, "'%s': not a regular file; skipped", path);
		} else if (log) {
			int seen = walk_seen(w, sb.st_dev, sb.st_ino);
			if (seen < 0)
				w->oom = 1;
			else if (!seen)
				walk_add(w, path);
		}
		if (w->oom)
			break;
	}
	closedir(d);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int results_collect_path(sqlite3 *db, const char *path, struct collect_stats *st, char *err,
			 size_t errlen)
{
	struct collector c = {db, {0}, st, err, errlen, 0, 0, 0, 0, {0}};
	struct stat sb;
	int i;

	/* the collector writes parents before children itself; checking every step row's
	 * run is a third of the insert time */
	sqlite3_exec(db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL);
	/* checkpoint the WAL every 64 MiB instead of every 4 MiB: each checkpoint syncs the
	 * disk twice, and on a busy disk the syncs, not the inserts, set the pace */
	sqlite3_exec(db, "PRAGMA wal_autocheckpoint = 16384", NULL, NULL, NULL);
	for (i = 0; i < Q_COUNT; i++) {
		char batch[STEP_BATCH * STEP_COLS * 6 + 512];
		const char *sql = queries[i];
		if (i == Q_STEP_BATCH) {
			/* the single-row statement with STEP_BATCH rows of numbered parameters */
			size_t at = (size_t)(strstr(queries[Q_STEP], "VALUES") - queries[Q_STEP]);
			memcpy(batch, queries[Q_STEP], at);
			at += (size_t)snprintf(batch + at, sizeof(batch) - at, "VALUES ");
			for (int k = 0; k < STEP_BATCH; k++) {
				at += (size_t)snprintf(batch + at, sizeof(batch) - at, "%s(",
						       k ? "," : "");
				for (int v = 1; v <= STEP_COLS; v++)
					at += (size_t)snprintf(batch + at, sizeof(batch) - at,
							       "?%d%s", STEP_COLS * k + v,
							       v < STEP_COLS ? "," : ")");
			}
			sql = batch;
		}
		if (sqlite3_prepare_v2(db, sql, -1, &c.q[i], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "database: %s", sqlite3_errmsg(db));
			c.failed = 1;
			goto out_finalize;
		}
	}
	if (stat(path, &sb)) { /* follows a link: a linked runs folder is searched */
		fail(&c, "'%s': %s", path, strerror(errno));
		goto out_finalize;
	}
	if (S_ISDIR(sb.st_mode)) {
		struct walk w;

		memset(&w, 0, sizeof(w));
		w.c = &c;
		if (walk_seen(&w, sb.st_dev, sb.st_ino) < 0)
			w.oom = 1;
		else
			walk_dir(&w, path, 0);
		if (w.oom)
			fail(&c, "'%s': out of memory", path);
		else if (w.n) {
			qsort(w.files, w.n, sizeof(*w.files), cmp_str);
			collect_files(&c, w.files, w.n);
		}
		for (size_t k = 0; k < w.n; k++)
			free(w.files[k]);
		free(w.files);
		free(w.seen);
	} else {
		char *one = (char *)path;
		collect_files(&c, &one, 1);
	}
	if (c.raced && !st->quiet)
		fprintf(stderr,
			"note: %d run%s %s being collected by another collect at the same time; "
			"read on from where it had got to\n",
			c.raced, c.raced == 1 ? "" : "s", c.raced == 1 ? "was" : "were");
out_finalize:
	for (i = 0; i < Q_COUNT; i++)
		sqlite3_finalize(c.q[i]);
	results_stats_release(&c.acc);
	sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
	sqlite3_exec(db, "PRAGMA wal_autocheckpoint = 1000", NULL, NULL, NULL);
	return c.failed ? -1 : 0;
}
