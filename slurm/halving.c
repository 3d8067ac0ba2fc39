/*
 * Successive halving (slurm/halving.h): the schedule, the groups and the decision of a
 * rung (pure), and the shell that keeps a halving's state in the results database and
 * submits its rungs through enqueue_layouts, so that every executor runs the same policy.
 *
 * Why one file: the pure core is its first section (the schedule, the groups, the
 * decision); the rest is one state machine over a halving's rows (start, advance, wait,
 * print, cancel) whose steps share the readers of those rows.
 */
#include "slurm/halving.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/ranktest.h"
#include "results/jobs.h"
#include "slurm/enqueue.h"

#define POLL_INTERVAL_MS 1000

/* ------------------------------------------------------------------ the pure core */

int halving_schedule(struct halving_params *hp, size_t largest, int steps[HALVING_MAX_RUNGS],
		     char *err, size_t errlen)
{
	int full_t = hp->full_steps - hp->warmup, min_t, max_rungs, r, n;
	int t[HALVING_MAX_RUNGS];

	if (hp->eta < 2) {
		snprintf(err, errlen,
			 "--halving %d: eta must be at least 2 (each rung keeps the "
			 "fastest 1/eta of a group)",
			 hp->eta);
		return -1;
	}
	if (full_t < 2) {
		snprintf(err, errlen,
			 "the spec runs %d step(s) with %d of warm-up: halving needs a shorter "
			 "rung before the last, so at least 2 steady-state steps (raise run.steps)",
			 hp->full_steps, hp->warmup);
		return -1;
	}
	if (hp->min_steps) {
		if (hp->min_steps <= hp->warmup || hp->min_steps >= hp->full_steps) {
			snprintf(err, errlen,
				 "--min-steps %d: rung 0 needs more steps than the spec's %d of "
				 "warm-up and fewer than its %d (the last rung's)",
				 hp->min_steps, hp->warmup, hp->full_steps);
			return -1;
		}
		min_t = hp->min_steps - hp->warmup;
	} else {
		min_t =
		    full_t - 1 < HALVING_DEFAULT_MIN_TIMED ? full_t - 1 : HALVING_DEFAULT_MIN_TIMED;
	}
	max_rungs = full_t - min_t + 1;
	if (max_rungs > HALVING_MAX_RUNGS)
		max_rungs = HALVING_MAX_RUNGS;
	n = hp->n_rungs;
	if (n == 0) {
		size_t c = (size_t)hp->eta;
		n = 1;
		while (c <= largest && n < HALVING_MAX_RUNGS) {
			n++;
			c *= (size_t)hp->eta;
		}
		if (n < 2)
			n = 2;
		if (n > max_rungs)
			n = max_rungs;
	} else if (n < 2 || n > max_rungs) {
		snprintf(err, errlen,
			 "--rungs %d: rung 0's %d steady-state step(s) and the spec's %d allow 2 "
			 "to %d rungs of different lengths (fewer rungs, a smaller --min-steps, "
			 "or more run.steps in the spec)",
			 n, min_t, full_t, max_rungs);
		return -1;
	}
	/* geometric from min_t to full_t, then made strictly increasing within the ends */
	for (r = 0; r < n; r++) {
		double v = min_t * pow((double)full_t / min_t, (double)r / (n - 1));
		t[r] = (int)lround(v);
		if (r > 0 && t[r] <= t[r - 1])
			t[r] = t[r - 1] + 1;
	}
	t[n - 1] = full_t;
	for (r = n - 2; r >= 0; r--)
		if (t[r] >= t[r + 1])
			t[r] = t[r + 1] - 1;
	for (r = 0; r < n; r++)
		steps[r] = hp->warmup + t[r];
	hp->n_rungs = n;
	hp->min_steps = steps[0];
	return 0;
}

void halving_group_key(const struct lb_layout *l, char *buf, size_t len)
{
	const struct lb_model *m = &l->model;

	snprintf(buf, len,
		 "model=%s layers=%d hidden=%d heads=%d kv_heads=%d ffn=%d vocab=%d tied=%d "
		 "seq_len=%d global_batch=%d gpus=%d",
		 m->name, m->n_layers, m->hidden, m->n_heads, m->n_kv_heads, m->ffn, m->vocab,
		 m->tied, l->seq_len, l->global_batch, lb_layout_world(l));
}

void halving_group_label(const struct lb_layout *l, char *buf, size_t len)
{
	int g = lb_layout_world(l);

	snprintf(buf, len, "%s L%d h%d, seq %d, batch %d, %d GPU%s", l->model.name,
		 l->model.n_layers, l->model.hidden, l->seq_len, l->global_batch, g,
		 g == 1 ? "" : "s");
}

static const char *const verdict_names[] = {"pending", "kept",	 "noise",
					    "dropped", "failed", "final"};

const char *halving_verdict_name(enum halving_verdict v)
{
	return (unsigned)v < sizeof(verdict_names) / sizeof(verdict_names[0]) ? verdict_names[v]
									      : "pending";
}

/* Order of the measured members of a group (indexes into m): median, then layout id. */
static int by_median(const void *pa, const void *pb, void *arg)
{
	const struct halving_member *m = arg;
	const struct halving_member *a = &m[*(const size_t *)pa], *b = &m[*(const size_t *)pb];

	if (a->median != b->median)
		return a->median < b->median ? -1 : 1;
	return strcmp(a->layout_id, b->layout_id);
}

/* Test member b against member c (the cut or the fastest): U, p, significant. */
static int test_against(struct halving_member *b, const struct halving_member *c, size_t ci,
			double alpha, double margin)
{
	struct lb_rank_test t;

	if (lb_ranktest_slower(c->times, c->n_times, b->times, b->n_times, margin, &t))
		return -1;
	b->cut = (int)ci;
	b->u = t.u;
	b->p = t.p;
	b->exact = t.exact;
	b->significant = t.p < alpha;
	return 0;
}

/* "+3.1%" for how much slower b's median is than c's. */
static double slowdown_pct(const struct halving_member *b, const struct halving_member *c)
{
	return c->median > 0 ? 100.0 * (b->median / c->median - 1.0) : 0.0;
}

/* The statistics of a test in words: "p = 0.003 < 0.05: U = 16 of 4 x 4 pairs (exact),
 * its steps against the other's x 1.02". */
static void test_words(const struct halving_member *b, const struct halving_member *c, double alpha,
		       double margin, char *buf, size_t len)
{
	snprintf(buf, len, "p = %.3g %s %g, U = %g of %zu x %zu pairs (%s) against the steps x %g",
		 b->p, b->significant ? "<" : ">=", alpha, b->u, b->n_times, c->n_times,
		 b->exact ? "exact" : "normal approx.", 1.0 + margin);
}

int halving_decide(struct halving_member *m, size_t n, int eta, double alpha, double margin,
		   int last)
{
	size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	int max_group = -1, rc = -1;

	if (!idx)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct halving_member *x = &m[i];
		x->verdict = HALVING_PENDING;
		x->rank = 0;
		x->median = 0;
		x->cut = -1;
		x->u = 0;
		x->p = 1;
		x->exact = 0;
		x->significant = -1;
		x->reason[0] = '\0';
		if (!x->failure_class[0] && x->n_times == 0)
			snprintf(x->failure_class, sizeof(x->failure_class), "unmeasured");
		if (x->failure_class[0]) {
			x->verdict = HALVING_FAILED;
			snprintf(x->reason, sizeof(x->reason), "failed (%s): dropped",
				 x->failure_class);
		} else {
			x->median = lb_ranktest_median(x->times, x->n_times);
			if (isnan(x->median))
				goto out_free;
		}
		if (x->group > max_group)
			max_group = x->group;
	}
	for (int g = 0; g <= max_group; g++) {
		size_t n_in = 0, n_meas = 0, k;
		for (size_t i = 0; i < n; i++) {
			if (m[i].group != g)
				continue;
			n_in++;
			if (m[i].verdict != HALVING_FAILED)
				idx[n_meas++] = i;
		}
		if (n_meas == 0)
			continue;
		qsort_r(idx, n_meas, sizeof(*idx), by_median, m);
		k = (n_in + (size_t)eta - 1) / (size_t)eta;
		if (k < 1)
			k = 1;
		if (k > n_meas)
			k = n_meas;
		for (size_t r = 0; r < n_meas; r++) {
			struct halving_member *x = &m[idx[r]];
			size_t ci = idx[last ? 0 : k - 1];
			const struct halving_member *c = &m[ci];
			char words[160];

			x->rank = (int)r + 1;
			if (last && r == 0) {
				x->verdict = HALVING_FINAL;
				snprintf(x->reason, sizeof(x->reason),
					 "the fastest of %zu on the last rung: median %.4g s",
					 n_meas, x->median);
				continue;
			}
			if (!last && r < k) {
				x->verdict = HALVING_KEPT;
				snprintf(
				    x->reason, sizeof(x->reason),
				    "rank %zu of %zu: among the fastest %zu (ceil(%zu/%d)): median "
				    "%.4g s",
				    r + 1, n_in, k, n_in, eta, x->median);
				continue;
			}
			if (test_against(x, c, ci, alpha, margin))
				goto out_free;
			test_words(x, c, alpha, margin, words, sizeof(words));
			if (last) {
				x->verdict = HALVING_FINAL;
				snprintf(x->reason, sizeof(x->reason),
					 "%+.1f%% against the fastest %s: %s (%s)",
					 slowdown_pct(x, c), c->layout_id,
					 x->significant ? "slower beyond noise" : "within noise",
					 words);
			} else {
				x->verdict = x->significant ? HALVING_DROPPED : HALVING_NOISE;
				snprintf(x->reason, sizeof(x->reason),
					 "rank %zu: %+.1f%% against the cut %s: %s (%s)", r + 1,
					 slowdown_pct(x, c), c->layout_id,
					 x->significant ? "slower beyond noise, dropped"
							: "within noise, goes on",
					 words);
			}
		}
	}
	rc = 0;
out_free:
	free(idx);
	return rc;
}

/* ------------------------------------------------------------------ the database */

/* A halving's row. */
struct halving_row {
	int64_t id;
	char sweep[LB_NAME_MAX];
	char executor[8];
	char runs[SLURM_PATH_MAX];
	char *spec_text; /* malloc'd */
	int eta, n_rungs, throttle, max_array;
	double alpha, margin;
	char state[16];
	char message[256]; /* how it ended; "" */
};

static void row_free(struct halving_row *h)
{
	free(h->spec_text);
	h->spec_text = NULL;
}

static void col_text(sqlite3_stmt *st, int i, char *dst, size_t len)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	snprintf(dst, len, "%s", s ? (const char *)s : "");
}

static int db_error(sqlite3 *db, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(db));
	return -1;
}

/* sql prepared: the statement, or NULL with err set ("what: <SQLite's message>"). */
static sqlite3_stmt *prepare(sqlite3 *db, const char *sql, const char *what, char *err,
			     size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		db_error(db, what, err, errlen);
	return st;
}

/* The same with ?1 = a and ?2 = b where it has them (int64s; a later parameter is the
 * caller's to bind). */
static sqlite3_stmt *prepare2(sqlite3 *db, const char *sql, int64_t a, int64_t b, const char *what,
			      char *err, size_t errlen)
{
	sqlite3_stmt *st = prepare(db, sql, what, err, errlen);
	int np;

	if (!st)
		return NULL;
	np = sqlite3_bind_parameter_count(st);
	if (np >= 1)
		sqlite3_bind_int64(st, 1, a);
	if (np >= 2)
		sqlite3_bind_int64(st, 2, b);
	return st;
}

static int load_row(sqlite3 *db, int64_t id, struct halving_row *h, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int rc;

	memset(h, 0, sizeof(*h));
	st = prepare2(
	    db,
	    "SELECT sweep, executor, runs_dir, spec_text, eta, n_rungs, alpha, margin, "
	    "throttle, max_array, state, COALESCE(message, '') FROM halvings WHERE id = ?1",
	    id, 0, "halvings", err, errlen);
	if (!st)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		h->id = id;
		col_text(st, 0, h->sweep, sizeof(h->sweep));
		col_text(st, 1, h->executor, sizeof(h->executor));
		col_text(st, 2, h->runs, sizeof(h->runs));
		const unsigned char *t = sqlite3_column_text(st, 3);
		h->spec_text = strdup(t ? (const char *)t : "");
		h->eta = sqlite3_column_int(st, 4);
		h->n_rungs = sqlite3_column_int(st, 5);
		h->alpha = sqlite3_column_double(st, 6);
		h->margin = sqlite3_column_double(st, 7);
		h->throttle = sqlite3_column_int(st, 8);
		h->max_array = sqlite3_column_int(st, 9);
		col_text(st, 10, h->state, sizeof(h->state));
		col_text(st, 11, h->message, sizeof(h->message));
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE) {
		snprintf(err, errlen, "halving %lld not found", (long long)id);
		return -1;
	}
	if (rc != SQLITE_ROW)
		return db_error(db, "halvings", err, errlen);
	if (!h->spec_text) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* Run sql with ?1 = a and ?2 = b (int64s; b ignored when the statement has one
 * parameter). Returns 0, or -1 with err set. */
static int exec2(sqlite3 *db, const char *sql, int64_t a, int64_t b, char *err, size_t errlen)
{
	sqlite3_stmt *st = prepare2(db, sql, a, b, "halving", err, errlen);
	int rc;

	if (!st)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_error(db, "halving", err, errlen);
	return 0;
}

/* One integer from sql with ?1 = a and ?2 = b where it has them: 0 and *v (0 when no row
 * or NULL), or -1 with err set. */
static int query_int(sqlite3 *db, const char *sql, int64_t a, int64_t b, int64_t *v, char *err,
		     size_t errlen)
{
	sqlite3_stmt *st = prepare2(db, sql, a, b, "halving", err, errlen);
	int rc;

	*v = 0;
	if (!st)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_error(db, "halving", err, errlen);
	return 0;
}

/* Step st, a statement that returns no row: 0, or -1 with err set ("what: <SQLite's
 * message>"). */
static int step_done(sqlite3 *db, sqlite3_stmt *st, const char *what, char *err, size_t errlen)
{
	return sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(db, what, err, errlen);
}

/* End a transaction that records a step of a halving (results_begin before it): st
 * finalized, then committed when rc is 0, else (or when the commit fails) rolled back,
 * err said why. Returns 0, or -1. */
static int end_tx(sqlite3 *db, sqlite3_stmt *st, int rc, char *err, size_t errlen)
{
	sqlite3_finalize(st);
	if (rc == 0 && results_commit(db, err, errlen) == 0)
		return 0;
	results_rollback(db);
	return -1;
}

/* The rung a halving is on: the first not decided (n_rungs - 1 when all are), and its
 * steps. */
static int current_rung(sqlite3 *db, const struct halving_row *h, int *rung, int *steps,
			char *rstate, size_t rlen, char *err, size_t errlen)
{
	sqlite3_stmt *st =
	    prepare2(db,
		     "SELECT rung, steps, state FROM halving_rungs WHERE halving_id = "
		     "?1 ORDER BY state = 'decided', CASE WHEN state = 'decided' THEN "
		     "-rung ELSE rung END LIMIT 1",
		     h->id, 0, "halving_rungs", err, errlen);
	int rc;

	if (!st)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*rung = sqlite3_column_int(st, 0);
		*steps = sqlite3_column_int(st, 1);
		col_text(st, 2, rstate, rlen);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return db_error(db, "halving_rungs", err, errlen);
	return 0;
}

/* One member row as the shell reads it. */
struct member_row {
	char layout_id[LB_ID_LEN + 1];
	char grp[128];
	int64_t job_ref; /* 0: none yet */
	int tries;
};

/* The rows of sql (?1 = a, ?2 = b where it has them) into the array *v of *n, each
 * filled by row (results_db_rows): 0, or -1 with err set (what names the table) and *v
 * NULL. */
static int load_rows(sqlite3 *db, const char *sql, int64_t a, int64_t b, size_t sz,
		     int (*row)(sqlite3_stmt *st, void *elem), void **v, size_t *n,
		     const char *what, char *err, size_t errlen)
{
	sqlite3_stmt *st = prepare2(db, sql, a, b, what, err, errlen);
	int rc;

	*v = NULL;
	*n = 0;
	if (!st)
		return -1;
	rc = results_db_rows(st, sz, row, v, n);
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		return 0;
	free(*v);
	*v = NULL;
	*n = 0;
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
	else
		db_error(db, what, err, errlen);
	return -1;
}

static int read_member(sqlite3_stmt *st, void *elem)
{
	struct member_row *m = elem;

	col_text(st, 0, m->layout_id, sizeof(m->layout_id));
	col_text(st, 1, m->grp, sizeof(m->grp));
	m->job_ref = sqlite3_column_int64(st, 2);
	m->tries = sqlite3_column_int(st, 3);
	return 0;
}

static int load_members(sqlite3 *db, int64_t id, int rung, struct member_row **out, size_t *n,
			char *err, size_t errlen)
{
	return load_rows(db,
			 "SELECT layout_id, grp, COALESCE(job_ref, 0), tries FROM halving_members "
			 "WHERE halving_id = ?1 AND rung = ?2 ORDER BY layout_id",
			 id, rung, sizeof(**out), read_member, (void **)out, n, "halving_members",
			 err, errlen);
}

/* The plan of a halving's spec text. */
static int plan_of(const struct halving_row *h, struct sweep_plan *p, char *err, size_t errlen)
{
	char what[LB_NAME_MAX + 32];

	snprintf(what, sizeof(what), "halving %lld of '%s'", (long long)h->id, h->sweep);
	return sweep_plan_text(what, h->spec_text, strlen(h->spec_text), p, err, errlen);
}

/*
 * Give every member of a rung without a job one: first the newest job of its layout in
 * the sweep newer than the member's after_job (submitted before an interruption, not yet
 * tied to the member), then a submission of the rest at the rung's steps. Marks the rung
 * running once every member has a job. Returns 0, or -1 with err set (what was submitted
 * is tied to its members all the same).
 */
static int rung_submit(sqlite3 *db, struct exec_set *es, const struct halving_row *h, int rung,
		       int steps, int quiet, char *err, size_t errlen)
{
	static const char adopt[] =
	    "UPDATE halving_members SET job_ref = (SELECT MAX(j.id) FROM jobs j WHERE j.sweep = "
	    "?3 AND j.layout_id = halving_members.layout_id AND j.id > "
	    "halving_members.after_job), tries = tries + 1 WHERE halving_id = ?1 AND rung = ?2 "
	    "AND job_ref IS NULL AND EXISTS (SELECT 1 FROM jobs j WHERE j.sweep = ?3 AND "
	    "j.layout_id = halving_members.layout_id AND j.id > halving_members.after_job)";
	static const char tie[] =
	    "UPDATE halving_members SET job_ref = ?3, tries = tries + 1 WHERE halving_id = ?1 AND "
	    "rung = ?2 AND job_ref IS NULL AND layout_id = (SELECT layout_id FROM jobs WHERE id "
	    "= ?3)";
	struct sweep_plan plan;
	struct member_row *mem = NULL;
	struct enqueued sub = {0};
	sqlite3_stmt *st = NULL;
	size_t n = 0, n_sel = 0, *sel = NULL;
	int rc = -1, sub_rc = 0;

	memset(&plan, 0, sizeof(plan));
	if (!(st = prepare2(db, adopt, h->id, rung, "halving_members", err, errlen)))
		return -1;
	sqlite3_bind_text(st, 3, h->sweep, -1, SQLITE_TRANSIENT);
	int src = step_done(db, st, "halving_members", err, errlen);
	sqlite3_finalize(st);
	st = NULL;
	if (src)
		return -1;
	if (load_members(db, h->id, rung, &mem, &n, err, errlen))
		return -1;
	for (size_t i = 0; i < n; i++)
		n_sel += mem[i].job_ref == 0;
	if (n_sel == 0)
		goto out_running;
	if (plan_of(h, &plan, err, errlen))
		goto out_free;
	sel = calloc(n_sel, sizeof(*sel));
	if (!sel) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	n_sel = 0;
	for (size_t i = 0; i < n; i++) {
		size_t e;
		if (mem[i].job_ref)
			continue;
		for (e = 0; e < plan.n_entries; e++)
			if (plan.entries[e].status == PLAN_OK &&
			    !strcmp(plan.entries[e].id, mem[i].layout_id))
				break;
		if (e == plan.n_entries) {
			snprintf(err, errlen,
				 "halving %lld: layout %s is not among the runnable layouts of the "
				 "spec it stored; cancel it ('layoutbench cancel --sweep %s')",
				 (long long)h->id, mem[i].layout_id, h->sweep);
			goto out_free;
		}
		plan.entries[e].layout.steps = steps;
		sel[n_sel++] = e;
	}
	struct executor *x = track_exec_get(es, h->executor, err, errlen);
	if (!x)
		goto out_free;
	sub_rc = enqueue_layouts(db, x, &plan, sel, n_sel, h->runs, h->throttle, h->max_array,
				 quiet, &sub, err, errlen);
	/* tie what was submitted, even after a failure part of the way */
	if (!(st = prepare2(db, tie, h->id, rung, "halving_members", err, errlen)))
		goto out_free;
	for (size_t i = 0; i < sub.n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 3, sub.rows[i]);
		if (step_done(db, st, "halving_members", err, errlen))
			goto out_free;
	}
	if (sub_rc)
		goto out_free;
out_running:
	if (exec2(db,
		  "UPDATE halving_rungs SET state = 'running' WHERE halving_id = ?1 AND rung = ?2 "
		  "AND state = 'pending' AND NOT EXISTS (SELECT 1 FROM halving_members m WHERE "
		  "m.halving_id = ?1 AND m.rung = ?2 AND m.job_ref IS NULL)",
		  h->id, rung, err, errlen))
		goto out_free;
	rc = 0;
out_free:
	sqlite3_finalize(st);
	free(sub.rows);
	free(sel);
	free(mem);
	sweep_plan_free(&plan);
	return rc;
}

int halving_latest(sqlite3 *db, const char *sweep, int64_t *id, char *state, size_t slen, char *err,
		   size_t errlen)
{
	sqlite3_stmt *st =
	    prepare(db, "SELECT id, state FROM halvings WHERE sweep = ?1 ORDER BY id DESC LIMIT 1",
		    "halvings", err, errlen);
	int rc;

	if (!st)
		return -1;
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		col_text(st, 1, state, slen);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(db, "halvings", err, errlen);
	return rc == SQLITE_ROW;
}

/* Free the strings v[0..n) (NULL ones too) and v. */
static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* Groups of the entries sel[0..n): group[i] its number, *labels[g] its label (caller
 * frees labels and each string), *n_groups, and the size of the largest. */
static int make_groups(const struct sweep_plan *p, const size_t *sel, size_t n, int *group,
		       char ***labels, size_t *n_groups, size_t *largest, char *err, size_t errlen)
{
	char **keys = calloc(n ? n : 1, sizeof(*keys));
	char **lab = calloc(n ? n : 1, sizeof(*lab));
	size_t *count = calloc(n ? n : 1, sizeof(*count));
	size_t ng = 0;
	int rc = -1;

	*labels = NULL;
	*n_groups = 0;
	*largest = 0;
	if (!keys || !lab || !count)
		goto out_oom;
	for (size_t i = 0; i < n; i++) {
		char key[512], label[128];
		size_t g;
		halving_group_key(&p->entries[sel[i]].layout, key, sizeof(key));
		for (g = 0; g < ng; g++)
			if (!strcmp(keys[g], key))
				break;
		if (g == ng) {
			halving_group_label(&p->entries[sel[i]].layout, label, sizeof(label));
			/* two models may share a label: the label must still name one group */
			for (size_t h = 0; h < ng; h++)
				if (!strcmp(lab[h], label)) {
					size_t o = strlen(label);
					snprintf(label + o, sizeof(label) - o, " #%zu", ng + 1);
					break;
				}
			if (!(keys[g] = strdup(key)) || !(lab[g] = strdup(label)))
				goto out_oom;
			ng++;
		}
		group[i] = (int)g;
		if (++count[g] > *largest)
			*largest = count[g];
	}
	*labels = lab;
	*n_groups = ng;
	lab = NULL;
	rc = 0;
	goto out_free;
out_oom:
	snprintf(err, errlen, "out of memory");
out_free:
	free_strings(keys, n);
	free_strings(lab, n);
	free(count);
	return rc;
}

/* The spec's steps and warm-up (every entry carries the spec's run settings). */
static void spec_steps(const struct sweep_plan *p, const size_t *sel, size_t n,
		       struct halving_params *hp)
{
	hp->full_steps = n ? p->entries[sel[0]].layout.steps : 0;
	hp->warmup = n ? p->entries[sel[0]].layout.warmup : 0;
}

int halving_dry_run(const struct sweep_plan *p, const size_t *sel, size_t n_sel,
		    const struct halving_opts *o, char *err, size_t errlen)
{
	struct halving_params hp = o->params;
	int steps[HALVING_MAX_RUNGS], *group = calloc(n_sel ? n_sel : 1, sizeof(int));
	char **labels = NULL;
	size_t ng = 0, largest = 0, *left = NULL, *gpus = NULL, *size = NULL;
	double guess = p->step_time_guess_s, full = 0, total = 0;
	long long full_rs = 0, total_rs = 0, runs = 0;
	const char *unit = !strcmp(p->cluster.device, "cpu") ? "CPU-rank-hours" : "GPU-hours";
	int rc = -1;

	if (!group) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (n_sel == 0) {
		printf("dry run: sweep '%s': no runnable layout to halve\n", p->name);
		free(group);
		return 0;
	}
	spec_steps(p, sel, n_sel, &hp);
	if (make_groups(p, sel, n_sel, group, &labels, &ng, &largest, err, errlen))
		goto out_free;
	if (halving_schedule(&hp, largest, steps, err, errlen))
		goto out_free;
	left = calloc(ng, sizeof(*left));
	gpus = calloc(ng, sizeof(*gpus));
	size = calloc(ng, sizeof(*size));
	if (!left || !gpus || !size) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < n_sel; i++) {
		size[group[i]]++;
		gpus[group[i]] = (size_t)lb_layout_world(&p->entries[sel[i]].layout);
	}
	printf("dry run: sweep '%s', executor %s, successive halving: %zu layout(s) in %zu "
	       "group(s); eta %d, %d rungs, rank test at level %g with a margin of %g%%\n",
	       p->name, o->executor, n_sel, ng, hp.eta, hp.n_rungs, hp.alpha, 100.0 * hp.margin);
	printf("%-6s %-48s %s\n", "group", "layouts compared with each other", "layouts");
	for (size_t g = 0; g < ng; g++)
		printf("%-6zu %-48s %zu\n", g, labels[g], size[g]);
	printf("%-5s %-6s %-8s %-12s %s\n", "rung", "steps", "layouts", "rank-steps", unit);
	for (size_t g = 0; g < ng; g++)
		left[g] = size[g];
	for (int r = 0; r < hp.n_rungs; r++) {
		size_t lay = 0;
		long long rs = 0;
		for (size_t g = 0; g < ng; g++) {
			if (r > 0)
				left[g] = (left[g] + (size_t)hp.eta - 1) / (size_t)hp.eta;
			lay += left[g];
			rs += (long long)left[g] * (long long)gpus[g] * steps[r];
		}
		runs += (long long)lay;
		total_rs += rs;
		if (guess > 0)
			printf("%-5d %-6d %-8zu %-12lld %.3f\n", r, steps[r], lay, rs,
			       guess * (double)rs / 3600.0);
		else
			printf("%-5d %-6d %-8zu %-12lld -\n", r, steps[r], lay, rs);
	}
	for (size_t g = 0; g < ng; g++)
		full_rs += (long long)size[g] * (long long)gpus[g] * hp.full_steps;
	total = guess * (double)total_rs / 3600.0;
	full = guess * (double)full_rs / 3600.0;
	if (guess > 0)
		printf("total: %.3f %s by halving, %lld runs, against %.3f for the full grid (%zu "
		       "runs of %d steps): %.1f%% (step_time_guess_s %.3g s x steps x ranks)\n",
		       total, unit, runs, full, n_sel, hp.full_steps, 100.0 * total / full, guess);
	else
		printf("total: %lld rank-steps by halving, %lld runs, against %lld for the full "
		       "grid (%zu runs of %d steps): %.1f%%; %s unknown (the spec gives no "
		       "step_time_guess_s)\n",
		       total_rs, runs, full_rs, n_sel, hp.full_steps,
		       100.0 * (double)total_rs / (double)full_rs, unit);
	printf("(each rung keeping exactly ceil(n/%d) of a group; a layout within noise of a "
	       "cut goes on and costs more; each run also pays its start-up)\n",
	       hp.eta);
	rc = 0;
out_free:
	free_strings(labels, ng);
	free(group);
	free(left);
	free(gpus);
	free(size);
	return rc;
}

/* Record a halving of p over sel[0..n_sel) with its schedule (hp, steps[]) and groups
 * (group[i] a label's index): its row, its rungs and rung 0's members, in one
 * transaction. Returns its id, or 0 with err set and nothing recorded. */
static int64_t record_halving(sqlite3 *db, const struct sweep_plan *p, const char *spec_text,
			      const size_t *sel, size_t n_sel, const struct halving_opts *o,
			      const struct halving_params *hp, const int *steps, const int *group,
			      char *const *labels, char *err, size_t errlen)
{
	static const char what[] = "recording the halving";
	static const char halving_sql[] =
	    "INSERT INTO halvings (sweep, executor, runs_dir, spec_text, eta, n_rungs, alpha, "
	    "margin, throttle, max_array) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
	static const char rung_sql[] =
	    "INSERT INTO halving_rungs (halving_id, rung, steps, warmup, state) VALUES "
	    "(?1, ?2, ?3, ?4, 'pending')";
	/* after_job: a member's job is one submitted after this */
	static const char member_sql[] =
	    "INSERT INTO halving_members (halving_id, rung, layout_id, grp, after_job) VALUES "
	    "(?1, 0, ?2, ?3, (SELECT COALESCE(MAX(id), 0) FROM jobs))";
	sqlite3_stmt *st;
	int64_t hid = 0;
	int rc = -1;

	if (results_begin(db, err, errlen))
		return 0;
	if (!(st = prepare(db, halving_sql, what, err, errlen)))
		goto out_end;
	sqlite3_bind_text(st, 1, p->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, o->executor, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, o->runs, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, spec_text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, hp->eta);
	sqlite3_bind_int(st, 6, hp->n_rungs);
	sqlite3_bind_double(st, 7, hp->alpha);
	sqlite3_bind_double(st, 8, hp->margin);
	sqlite3_bind_int(st, 9, o->throttle);
	sqlite3_bind_int(st, 10, o->max_array);
	if (step_done(db, st, what, err, errlen))
		goto out_end;
	sqlite3_finalize(st);
	hid = sqlite3_last_insert_rowid(db);
	if (!(st = prepare2(db, rung_sql, hid, 0, what, err, errlen)))
		goto out_end;
	for (int r = 0; r < hp->n_rungs; r++) {
		sqlite3_reset(st);
		sqlite3_bind_int(st, 2, r);
		sqlite3_bind_int(st, 3, steps[r]);
		sqlite3_bind_int(st, 4, hp->warmup);
		if (step_done(db, st, what, err, errlen))
			goto out_end;
	}
	sqlite3_finalize(st);
	if (!(st = prepare2(db, member_sql, hid, 0, what, err, errlen)))
		goto out_end;
	for (size_t i = 0; i < n_sel; i++) {
		const struct plan_entry *e = &p->entries[sel[i]];
		if (results_upsert_layout(db, &e->layout, e->label[0] ? e->label : NULL)) {
			db_error(db, what, err, errlen);
			goto out_end;
		}
		sqlite3_reset(st);
		sqlite3_bind_text(st, 2, e->id, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, labels[group[i]], -1, SQLITE_TRANSIENT);
		if (step_done(db, st, what, err, errlen))
			goto out_end;
	}
	rc = 0;
out_end:
	return end_tx(db, st, rc, err, errlen) ? 0 : hid;
}

int halving_start(sqlite3 *db, struct exec_set *es, const struct sweep_plan *p,
		  const char *spec_text, const size_t *sel, size_t n_sel,
		  const struct halving_opts *o, int64_t *id, char *err, size_t errlen)
{
	struct halving_params hp = o->params;
	struct halving_row h;
	int steps[HALVING_MAX_RUNGS], *group = calloc(n_sel ? n_sel : 1, sizeof(int));
	char **labels = NULL;
	size_t ng = 0, largest = 0;
	int rc = -1;

	memset(&h, 0, sizeof(h));
	*id = 0;
	if (!group) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (n_sel == 0) {
		snprintf(err, errlen, "sweep '%s' has no runnable layout to halve", p->name);
		goto out_free;
	}
	spec_steps(p, sel, n_sel, &hp);
	if (make_groups(p, sel, n_sel, group, &labels, &ng, &largest, err, errlen) ||
	    halving_schedule(&hp, largest, steps, err, errlen) ||
	    !(*id = record_halving(db, p, spec_text, sel, n_sel, o, &hp, steps, group, labels, err,
				   errlen)))
		goto out_free;
	if (load_row(db, *id, &h, err, errlen))
		goto out_free;
	if (rung_submit(db, es, &h, 0, steps[0], o->quiet, err, errlen)) {
		int64_t tied = 0;
		char e2[256];
		/* nothing ran: leave no halving behind */
		if (query_int(db,
			      "SELECT COUNT(*) FROM halving_members WHERE halving_id = ?1 AND "
			      "job_ref IS NOT NULL",
			      *id, 0, &tied, e2, sizeof(e2)) == 0 &&
		    tied == 0) {
			exec2(db, "DELETE FROM halving_members WHERE halving_id = ?1", *id, 0, e2,
			      sizeof(e2));
			exec2(db, "DELETE FROM halving_rungs WHERE halving_id = ?1", *id, 0, e2,
			      sizeof(e2));
			exec2(db, "DELETE FROM halvings WHERE id = ?1", *id, 0, e2, sizeof(e2));
			*id = 0;
		}
		goto out_free;
	}
	rc = 0;
out_free:
	row_free(&h);
	free_strings(labels, ng);
	free(group);
	return rc;
}

static int read_time(sqlite3_stmt *st, void *elem)
{
	*(double *)elem = sqlite3_column_double(st, 0);
	return 0;
}

/* The steady-state step times of the run tied to job (warm-up left out), in step order:
 * 0 and *times (caller frees; NULL when none) and *n; -1 with err set. */
static int run_times(sqlite3 *db, int64_t job, double **times, size_t *n, char *err, size_t errlen)
{
	return load_rows(db,
			 "SELECT s.time_s FROM steps s WHERE s.warmup = 0 AND s.run_id = (SELECT "
			 "MAX(r.id) FROM runs r WHERE r.job_ref = ?1 AND r.status = 'ok') ORDER BY "
			 "s.step",
			 job, 0, sizeof(**times), read_time, (void **)times, n, "steps", err,
			 errlen);
}

/* 1 when the scheduler, not the layout, ended a job: worth one more try. */
static int lost_by_scheduler(const char *cls)
{
	return !strcmp(cls, "node_fail") || !strcmp(cls, "preempted");
}

/* The job of row id ref among jobs[0..nj), or NULL. */
static const struct results_job *job_of(const struct results_job *jobs, size_t nj, int64_t ref)
{
	for (size_t k = 0; k < nj; k++)
		if (jobs[k].id == ref)
			return &jobs[k];
	return NULL;
}

/*
 * Record the verdicts m[0..n) of rung `rung` of h and the rung decided, then the next
 * rung's members (*next its number) or the halving's end (*next -1: a job of the rung
 * was cancelled, it was the last, or no layout goes on), in one transaction. Returns 0,
 * or -1 with err set and nothing recorded (*next then means nothing).
 */
static int record_rung(sqlite3 *db, const struct halving_row *h, int rung,
		       const struct halving_member *m, size_t n, int cancelled, int *next,
		       char *err, size_t errlen)
{
	static const char what[] = "recording rung";
	static const char upd[] =
	    "UPDATE halving_members SET verdict = ?4, rank = NULLIF(?5, 0), n_steps = ?6, "
	    "median_s = NULLIF(?7, 0.0), cut_layout = ?8, cut_median_s = ?9, u = ?10, "
	    "p_value = ?11, exact = ?12, significant = ?13, failure_class = NULLIF(?14, ''), "
	    "reason = ?15 WHERE halving_id = ?1 AND rung = ?2 AND layout_id = ?3";
	sqlite3_stmt *st;
	size_t survivors = 0, finals = 0;
	int last = rung >= h->n_rungs - 1, rc = -1;
	char msg[160];

	*next = -1;
	if (results_begin(db, err, errlen))
		return -1;
	if (!(st = prepare(db, upd, what, err, errlen)))
		goto out_end;
	for (size_t i = 0; i < n; i++) {
		const struct halving_member *x = &m[i];
		const struct halving_member *c = x->cut >= 0 ? &m[x->cut] : NULL;
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		sqlite3_bind_int64(st, 1, h->id);
		sqlite3_bind_int(st, 2, rung);
		sqlite3_bind_text(st, 3, x->layout_id, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 4, halving_verdict_name(x->verdict), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, x->rank);
		if (x->verdict != HALVING_FAILED)
			sqlite3_bind_int64(st, 6, (sqlite3_int64)x->n_times);
		sqlite3_bind_double(st, 7, x->median);
		if (c) {
			sqlite3_bind_text(st, 8, c->layout_id, -1, SQLITE_TRANSIENT);
			sqlite3_bind_double(st, 9, c->median);
			sqlite3_bind_double(st, 10, x->u);
			sqlite3_bind_double(st, 11, x->p);
			sqlite3_bind_int(st, 12, x->exact);
			sqlite3_bind_int(st, 13, x->significant > 0);
		}
		sqlite3_bind_text(st, 14, x->failure_class, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 15, x->reason, -1, SQLITE_TRANSIENT);
		if (step_done(db, st, what, err, errlen))
			goto out_end;
		survivors += x->verdict == HALVING_KEPT || x->verdict == HALVING_NOISE;
		finals += x->verdict == HALVING_FINAL;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (exec2(db,
		  "UPDATE halving_rungs SET state = 'decided', decided = strftime('%Y-%m-%dT%H:%M:"
		  "%SZ', 'now') WHERE halving_id = ?1 AND rung = ?2",
		  h->id, rung, err, errlen))
		goto out_end;
	if (!cancelled && !last && survivors > 0) {
		/* after_job: a member's job is one submitted after this */
		st = prepare2(db,
			      "INSERT INTO halving_members (halving_id, rung, layout_id, grp, "
			      "after_job) SELECT halving_id, rung + 1, layout_id, grp, (SELECT "
			      "COALESCE(MAX(id), 0) FROM jobs) FROM halving_members WHERE "
			      "halving_id = ?1 AND rung = ?2 AND verdict IN ('kept', 'noise')",
			      h->id, rung, what, err, errlen);
		*next = rung + 1;
	} else {
		if (cancelled)
			snprintf(msg, sizeof(msg), "a job of rung %d was cancelled", rung);
		else if (last)
			snprintf(msg, sizeof(msg),
				 "%zu layout(s) measured on the last rung, rung %d", finals, rung);
		else
			snprintf(msg, sizeof(msg), "no layout went on after rung %d", rung);
		st = prepare2(db,
			      "UPDATE halvings SET state = ?2, message = ?3, finished = "
			      "strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?1",
			      h->id, 0, what, err, errlen);
		if (st) {
			sqlite3_bind_text(st, 2, cancelled ? "cancelled" : "done", -1,
					  SQLITE_STATIC);
			sqlite3_bind_text(st, 3, msg, -1, SQLITE_TRANSIENT);
		}
	}
	if (!st || step_done(db, st, what, err, errlen))
		goto out_end;
	rc = 0;
out_end:
	return end_tx(db, st, rc, err, errlen);
}

/*
 * Decide rung `rung` of h from its settled jobs and record it (record_rung). *next gets
 * the next rung's number (-1 when the halving ended). Returns 0, or -1 with err set.
 */
static int decide_rung(sqlite3 *db, const struct halving_row *h, int rung,
		       const struct member_row *mem, size_t n, const struct results_job *jobs,
		       size_t nj, int *next, char *err, size_t errlen)
{
	struct halving_member *m = calloc(n ? n : 1, sizeof(*m));
	double **times = calloc(n ? n : 1, sizeof(*times));
	char **grps = calloc(n ? n : 1, sizeof(*grps));
	size_t ng = 0;
	int cancelled = 0, rc = -1;

	*next = -1;
	if (!m || !times || !grps) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		const struct results_job *j = job_of(jobs, nj, mem[i].job_ref);
		size_t g;
		snprintf(m[i].layout_id, sizeof(m[i].layout_id), "%s", mem[i].layout_id);
		for (g = 0; g < ng; g++)
			if (!strcmp(grps[g], mem[i].grp))
				break;
		if (g == ng)
			grps[ng++] = (char *)mem[i].grp;
		m[i].group = (int)g;
		if (!j) {
			snprintf(m[i].failure_class, sizeof(m[i].failure_class), "unknown");
			continue;
		}
		if (j->failure_class[0]) {
			snprintf(m[i].failure_class, sizeof(m[i].failure_class), "%s",
				 j->failure_class);
			cancelled |= !strcmp(j->failure_class, "cancelled");
			continue;
		}
		if (run_times(db, j->id, &times[i], &m[i].n_times, err, errlen))
			goto out_free;
		m[i].times = times[i];
	}
	if (halving_decide(m, n, h->eta, h->alpha, h->margin, rung >= h->n_rungs - 1)) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	rc = record_rung(db, h, rung, m, n, cancelled, next, err, errlen);
out_free:
	for (size_t i = 0; times && i < n; i++)
		free(times[i]);
	free(times);
	free(grps);
	free(m);
	return rc;
}

/* The jobs tied to the members mem[0..n) (track_load_rows: caller frees *jobs), *nr
 * how many members have one. Returns 0, or -1 with err set. */
static int member_jobs(sqlite3 *db, const struct halving_row *h, const struct member_row *mem,
		       size_t n, struct results_job **jobs, size_t *nj, size_t *nr, char *err,
		       size_t errlen)
{
	int64_t *rows = calloc(n ? n : 1, sizeof(*rows));
	int rc;

	*nr = 0;
	if (!rows) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (mem[i].job_ref)
			rows[(*nr)++] = mem[i].job_ref;
	rc = track_load_rows(db, h->sweep, rows, *nr, jobs, nj, err, errlen);
	free(rows);
	return rc;
}

/* Take the job of each member of a settled rung whose job the scheduler lost (node_fail,
 * preempted) and that has tries left, so that rung_submit gives it one more: *retried
 * their number. Returns 0, or -1 with err set. */
static int retry_lost(sqlite3 *db, const struct halving_row *h, int rung,
		      const struct member_row *mem, size_t n, const struct results_job *jobs,
		      size_t nj, int *retried, char *err, size_t errlen)
{
	static const char what[] = "halving_members";
	sqlite3_stmt *st = NULL;
	int rc = 0;

	*retried = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct results_job *j = job_of(jobs, nj, mem[i].job_ref);
		if (!j || !lost_by_scheduler(j->failure_class) || mem[i].tries >= HALVING_MAX_TRIES)
			continue;
		if (!st &&
		    !(st = prepare2(db,
				    "UPDATE halving_members SET after_job = job_ref, job_ref = "
				    "NULL WHERE halving_id = ?1 AND rung = ?2 AND layout_id = ?3",
				    h->id, rung, what, err, errlen)))
			return -1;
		sqlite3_reset(st);
		sqlite3_bind_text(st, 3, mem[i].layout_id, -1, SQLITE_TRANSIENT);
		rc = step_done(db, st, what, err, errlen);
		*retried += rc == 0;
	}
	sqlite3_finalize(st);
	return rc;
}

int halving_advance(sqlite3 *db, struct exec_set *es, int64_t id, struct halving_progress *pr,
		    char *err, size_t errlen)
{
	struct halving_row h;
	struct member_row *mem = NULL;
	struct results_job *jobs = NULL;
	size_t n = 0, nj = 0, nr = 0;
	char rstate[16] = "";
	int rung = 0, steps = 0, rc = -2, rrc = 0, retried, next;
	char e[1024] = "";

	memset(pr, 0, sizeof(*pr));
	pr->decided = -1;
	if (load_row(db, id, &h, err, errlen))
		return -2;
	snprintf(pr->sweep, sizeof(pr->sweep), "%s", h.sweep);
	if (current_rung(db, &h, &rung, &steps, rstate, sizeof(rstate), err, errlen))
		goto out_free;
	pr->rung = rung;
	pr->n_rungs = h.n_rungs;
	pr->steps = steps;
	snprintf(pr->state, sizeof(pr->state), "%s", h.state);
	if (strcmp(h.state, "running")) {
		rc = 0;
		goto out_free;
	}
	/* a rung made but not (wholly) submitted before an interruption */
	if (rung_submit(db, es, &h, rung, steps, 1, err, errlen))
		goto out_free;
	if (load_members(db, h.id, rung, &mem, &n, err, errlen))
		goto out_free;
	if (member_jobs(db, &h, mem, n, &jobs, &nj, &nr, err, errlen))
		goto out_free;
	rrc = track_refresh(db, es, jobs, nj, e, sizeof(e));
	if (rrc == -2) {
		snprintf(err, errlen, "%s", e);
		goto out_free;
	}
	if (track_count(db, jobs, nj, &pr->jobs, err, errlen))
		goto out_free;
	if (pr->jobs.running + pr->jobs.pending > 0 || nr < n) {
		rc = rrc;
		if (rrc)
			snprintf(err, errlen, "%s", e);
		goto out_free;
	}
	/* every job settled: the ones the scheduler lost get one more job */
	if (retry_lost(db, &h, rung, mem, n, jobs, nj, &retried, err, errlen))
		goto out_free;
	if (retried) {
		pr->retried = retried;
		rc = rung_submit(db, es, &h, rung, steps, 1, err, errlen) ? -2 : 0;
		goto out_free;
	}
	if (decide_rung(db, &h, rung, mem, n, jobs, nj, &next, err, errlen))
		goto out_free;
	pr->decided = rung;
	if (next >= 0) {
		int nsteps = 0;
		char ns[16];
		if (current_rung(db, &h, &next, &nsteps, ns, sizeof(ns), err, errlen) ||
		    rung_submit(db, es, &h, next, nsteps, 1, err, errlen))
			goto out_free;
	}
	rc = 0;
out_free:
	free(jobs);
	free(mem);
	row_free(&h);
	return rc;
}

/* "6, 12, 24" (the steps of every rung) into buf. */
static int rung_steps_text(sqlite3 *db, int64_t id, char *buf, size_t len, char *err, size_t errlen)
{
	sqlite3_stmt *st =
	    prepare2(db, "SELECT steps FROM halving_rungs WHERE halving_id = ?1 ORDER BY rung", id,
		     0, "halving_rungs", err, errlen);
	size_t o = 0;
	int rc;

	buf[0] = '\0';
	if (!st)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && o + 16 < len)
		o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? ", " : "",
				      sqlite3_column_int(st, 0));
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_error(db, "halving_rungs", err, errlen);
	return 0;
}

/* "rung 0 (6 steps): 8 layouts: 4 kept, 1 within noise, 2 dropped as slower, 1 failed"
 * for a decided rung, to f. */
static int print_rung_line(sqlite3 *db, int64_t id, int rung, FILE *f, char *err, size_t errlen)
{
	sqlite3_stmt *st =
	    prepare2(db,
		     "SELECT sweep, steps, layouts, kept, kept_within_noise, "
		     "dropped_slower, dropped_failed, final FROM halving_rung_summary "
		     "WHERE halving_id = ?1 AND rung = ?2",
		     id, rung, "halving_rung_summary", err, errlen);
	int rc;

	if (!st)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		fprintf(f,
			"sweep '%s': rung %d (%d steps) decided: %d layout(s): %d kept, %d within "
			"noise of the cut, %d dropped as slower, %d failed, %d final\n",
			sqlite3_column_text(st, 0), rung, sqlite3_column_int(st, 1),
			sqlite3_column_int(st, 2), sqlite3_column_int(st, 3),
			sqlite3_column_int(st, 4), sqlite3_column_int(st, 5),
			sqlite3_column_int(st, 6), sqlite3_column_int(st, 7));
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(db, "halving_rung_summary", err, errlen);
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int halving_wait(sqlite3 *db, struct exec_set *es, int64_t id, int quiet, char *err, size_t errlen)
{
	struct halving_progress pr, last;
	int64_t finals = 0;
	int first = 1;

	memset(&last, 0, sizeof(last));
	for (;;) {
		char e[1024] = "";
		int rc = halving_advance(db, es, id, &pr, e, sizeof(e));
		if (rc == -2) {
			snprintf(err, errlen, "%s", e);
			return -1;
		}
		if (rc == -1)
			fprintf(stderr, "warning: %s\n", e);
		if (!quiet && (first || pr.rung != last.rung ||
			       memcmp(&pr.jobs, &last.jobs, sizeof(pr.jobs)))) {
			fprintf(
			    stderr,
			    "%s: rung %d of %d (%d steps): done %zu / running %zu / pending %zu "
			    "/ failed %zu\n",
			    pr.sweep, pr.rung, pr.n_rungs, pr.steps, pr.jobs.done, pr.jobs.running,
			    pr.jobs.pending, pr.jobs.failed);
			last = pr;
			first = 0;
		}
		if (!quiet && pr.decided >= 0 &&
		    print_rung_line(db, id, pr.decided, stderr, err, errlen))
			return -1;
		if (!quiet && pr.retried)
			fprintf(
			    stderr,
			    "sweep '%s': rung %d: %d layout(s) lost by the scheduler (node_fail, "
			    "preempted) submitted once more\n",
			    pr.sweep, pr.rung, pr.retried);
		if (strcmp(pr.state, "running"))
			break;
		sleep_ms(POLL_INTERVAL_MS);
	}
	if (query_int(db,
		      "SELECT COUNT(*) FROM halving_members WHERE halving_id = ?1 AND verdict = "
		      "'final'",
		      id, 0, &finals, err, errlen))
		return -1;
	return !strcmp(pr.state, "done") && finals > 0 ? 0 : 1;
}

int halving_print(sqlite3 *db, int64_t id, FILE *f, char *err, size_t errlen)
{
	static const char what[] = "halving";
	static const char rungs_sql[] =
	    "SELECT rung, steps, layouts, COALESCE(kept, 0), COALESCE(kept_within_noise, 0), "
	    "COALESCE(dropped_slower, 0), COALESCE(dropped_failed, 0), COALESCE(final, 0), "
	    "COALESCE(pending, 0), gpu_seconds FROM halving_rung_summary WHERE halving_id = ?1 "
	    "ORDER BY rung";
	/* the last rung's layouts of each group: the fastest, and whether the others differ */
	static const char finals_sql[] =
	    "SELECT grp, layout_id, label, micro_batch, tp, pp, checkpointing, rank, median_s, "
	    "slowdown, p_value, significant FROM halving_layouts WHERE halving_id = ?1 AND "
	    "verdict = 'final' ORDER BY grp, rank";
	static const char cost_sql[] =
	    "SELECT runs, layouts, full_steps, gpu_seconds, "
	    "full_grid_gpu_seconds FROM halving_cost WHERE halving_id = ?1";
	sqlite3_stmt *st;
	struct halving_row h;
	char steps[256], unit[32] = "GPU-hours";
	int64_t gpu = 1;
	int rc = -1;

	if (load_row(db, id, &h, err, errlen))
		return -1;
	if (rung_steps_text(db, id, steps, sizeof(steps), err, errlen))
		goto out_free;
	if (query_int(
		db,
		"SELECT COALESCE(MIN(r.backend != 'cpu'), 1) FROM runs r JOIN halving_members "
		"m ON r.job_ref = m.job_ref WHERE m.halving_id = ?1",
		id, 0, &gpu, err, errlen))
		goto out_free;
	if (!gpu)
		snprintf(unit, sizeof(unit), "CPU-rank-hours");
	fprintf(f,
		"halving %lld of sweep '%s': %s%s%s; eta %d, rungs of %s steps, rank test at "
		"level %g with a margin of %g%%, executor %s\n",
		(long long)id, h.sweep, h.state, *h.message ? ": " : "", h.message, h.eta, steps,
		h.alpha, 100.0 * h.margin, h.executor);
	fprintf(f, "  %-5s %-6s %-8s %-5s %-6s %-8s %-7s %-6s %-8s %s\n", "rung", "steps",
		"layouts", "kept", "noise", "dropped", "failed", "final", "pending", unit);
	if (!(st = prepare2(db, rungs_sql, id, 0, what, err, errlen)))
		goto out_free;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char cost[32] = "-";
		if (sqlite3_column_type(st, 9) != SQLITE_NULL)
			snprintf(cost, sizeof(cost), "%.4f", sqlite3_column_double(st, 9) / 3600.0);
		fprintf(f, "  %-5d %-6d %-8d %-5d %-6d %-8d %-7d %-6d %-8d %s\n",
			sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
			sqlite3_column_int(st, 2), sqlite3_column_int(st, 3),
			sqlite3_column_int(st, 4), sqlite3_column_int(st, 5),
			sqlite3_column_int(st, 6), sqlite3_column_int(st, 7),
			sqlite3_column_int(st, 8), cost);
	}
	sqlite3_finalize(st);
	if (!(st = prepare2(db, finals_sql, id, 0, what, err, errlen)))
		goto out_free;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int rank = sqlite3_column_int(st, 7);
		if (rank == 1)
			fprintf(f,
				"  fastest of '%s': %s (%s, mbs %d, tp %d, pp %d, ckpt %s): "
				"median %.4g s\n",
				sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
				sqlite3_column_text(st, 2), sqlite3_column_int(st, 3),
				sqlite3_column_int(st, 4), sqlite3_column_int(st, 5),
				sqlite3_column_text(st, 6), sqlite3_column_double(st, 8));
		else
			fprintf(f,
				"    %d. %s (%s, mbs %d, tp %d, pp %d, ckpt %s): %+.1f%%, %s "
				"(p = %.3g)\n",
				rank, sqlite3_column_text(st, 1), sqlite3_column_text(st, 2),
				sqlite3_column_int(st, 3), sqlite3_column_int(st, 4),
				sqlite3_column_int(st, 5), sqlite3_column_text(st, 6),
				100.0 * sqlite3_column_double(st, 9),
				sqlite3_column_int(st, 11) ? "slower beyond noise" : "within noise",
				sqlite3_column_double(st, 10));
	}
	sqlite3_finalize(st);
	if (!(st = prepare2(db, cost_sql, id, 0, what, err, errlen)))
		goto out_free;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 3) != SQLITE_NULL) {
		double spent = sqlite3_column_double(st, 3) / 3600.0;
		double full = sqlite3_column_double(st, 4) / 3600.0;
		fprintf(f,
			"  spent %.4f %s over %d run(s); the full grid (%d layouts x %d steps) "
			"%s about %.4f%s",
			spent, unit, sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
			sqlite3_column_int(st, 2),
			strcmp(h.state, "running") ? "would take" : "so far", full,
			full > 0 ? "" : "\n");
		if (full > 0)
			fprintf(f, " (each layout's last run plus its missing steps): %.1f%%\n",
				100.0 * spent / full);
	}
	sqlite3_finalize(st);
	rc = 0;
out_free:
	row_free(&h);
	return rc;
}

int halving_cancel_sweep(sqlite3 *db, const char *sweep, char *err, size_t errlen)
{
	sqlite3_stmt *st =
	    prepare(db,
		    "UPDATE halvings SET state = 'cancelled', message = 'cancelled', "
		    "finished = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE sweep = "
		    "?1 AND state = 'running'",
		    "halvings", err, errlen);
	int rc;

	if (!st)
		return -1;
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	rc = step_done(db, st, "halvings", err, errlen);
	sqlite3_finalize(st);
	return rc ? -1 : sqlite3_changes(db);
}

int halving_submit(sqlite3 *db, struct exec_set *es, const struct sweep_plan *p,
		   const char *spec_text, const size_t *sel, size_t n_sel,
		   const struct halving_opts *o, int wait, int force, char *err, size_t errlen)
{
	char state[16] = "", steps[256];
	int64_t id = 0;
	int has = halving_latest(db, p->name, &id, state, sizeof(state), err, errlen);

	if (has < 0)
		return -1;
	if (has && !strcmp(state, "running")) {
		struct halving_progress pr;
		int rc;
		printf("sweep '%s': halving %lld is running: following it (its own settings "
		       "hold)\n",
		       p->name, (long long)id);
		fflush(stdout);
		if (!wait) {
			rc = halving_advance(db, es, id, &pr, err, errlen);
			if (rc == -2)
				return -1;
			if (rc == -1)
				fprintf(stderr, "warning: %s\n", err);
			return halving_print(db, id, stdout, err, errlen) ? -1 : 0;
		}
	} else if (has && !force) {
		printf("sweep '%s': halving %lld is %s: nothing to submit (--force starts "
		       "another)\n",
		       p->name, (long long)id, state);
		return 0;
	} else {
		if (halving_start(db, es, p, spec_text, sel, n_sel, o, &id, err, errlen))
			return id ? 1 : -1;
		if (rung_steps_text(db, id, steps, sizeof(steps), err, errlen))
			return 1;
		printf("sweep '%s': halving %lld: %zu layout(s), eta %d, rungs of %s steps; rung 0 "
		       "submitted through %s; runs in %s/%s\n",
		       p->name, (long long)id, n_sel, o->params.eta, steps, o->executor, o->runs,
		       p->name);
		fflush(stdout);
	}
	if (!wait)
		return 0;
	int rc = halving_wait(db, es, id, o->quiet, err, errlen);
	if (rc < 0)
		return -1;
	if (halving_print(db, id, stdout, err, errlen))
		return -1;
	return rc;
}

int halving_refuse_plain(sqlite3 *db, const char *sweep, char *err, size_t errlen)
{
	char state[16] = "";
	int64_t id = 0;
	int has = halving_latest(db, sweep, &id, state, sizeof(state), err, errlen);

	if (has <= 0)
		return has;
	if (strcmp(state, "running"))
		return 0;
	snprintf(err, errlen,
		 "sweep '%s' is being run by halving %lld: follow it with 'layoutbench status "
		 "--sweep %s --wait' (or submit with --halving again), stop it with "
		 "'layoutbench cancel --sweep %s', or submit every layout anyway with --force",
		 sweep, (long long)id, sweep, sweep);
	return -1;
}
