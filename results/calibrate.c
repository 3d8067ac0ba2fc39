/*
 * `layoutbench calibrate` (results/calibrate.h): runs in from SQLite, the fit and its
 * report out, the machine file written. The arithmetic is common/predict.c's; this file
 * reads, prints and writes.
 */
#include "results/calibrate.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmdline.h"
#include "common/machine.h"
#include "common/model.h"
#include "common/util.h"
#include "results/db.h"

/* Huber's threshold on the relative residual: a run further off than 5% (the paper's
 * runs slowed by causes no layout field names) weighs as if it were 5% off. */
#define CALIB_HUBER 0.05

void calib_set_free(struct calib_set *s)
{
	free(s->rows);
	free(s->mfu);
	free(s->layout_id);
	for (size_t i = 0; i < s->n_sweeps; i++)
		free(s->sweeps[i]);
	free(s->sweeps);
	free(s->counts);
	memset(s, 0, sizeof(*s));
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? (const char *)t : "";
}

static int grow(struct calib_set *s, size_t *cap)
{
	size_t nc = *cap ? *cap * 2 : 64;
	struct lb_fit_row *r = realloc(s->rows, nc * sizeof(*r));
	double *m;
	char(*id)[LB_ID_LEN + 1];

	if (!r)
		return -1;
	s->rows = r;
	m = realloc(s->mfu, nc * sizeof(*m));
	if (!m)
		return -1;
	s->mfu = m;
	id = realloc(s->layout_id, nc * sizeof(*id));
	if (!id)
		return -1;
	s->layout_id = id;
	*cap = nc;
	return 0;
}

int calib_load(sqlite3 *db, const char *const *sweeps, size_t n, struct calib_set *out, char *err,
	       size_t errlen)
{
	/* h: each ok run of the sweep and whether its loss fell (or it has no steps) */
	static const char q_runs_fmt[] =
	    "WITH h AS (SELECT r.id, r.layout_id, "
	    "  COALESCE((SELECT s1.loss FROM steps s1 WHERE s1.run_id = r.id ORDER BY s1.step DESC "
	    "            LIMIT 1) <= (SELECT s0.loss FROM steps s0 WHERE s0.run_id = r.id "
	    "            ORDER BY s0.step LIMIT 1), 1) AS healthy "
	    "  FROM runs r WHERE r.sweep = ?1 AND r.status = 'ok'), "
	    "k AS (SELECT h.id, h.healthy, EXISTS (SELECT 1 FROM h h2 WHERE h2.layout_id = "
	    "  h.layout_id AND h2.healthy) AS layout_healthy FROM h) "
	    "SELECT r.layout_id, COALESCE(r.label, l.label, ''), rs.step_time_mean, "
	    "COALESCE(rs.mfu_reported, rs.mfu), COALESCE(r.gpu, ''), k.healthy, "
	    "k.layout_healthy, %s "
	    "FROM k JOIN run_summary rs ON rs.run_id = k.id JOIN runs r ON r.id = k.id "
	    "JOIN layouts l ON l.layout_id = r.layout_id "
	    "WHERE rs.step_time_mean > 0 ORDER BY rs.run_id";
	static const char q_failed[] =
	    "SELECT COALESCE(failure_class, ''), COUNT(*) FROM runs WHERE sweep = ?1 AND "
	    "status = 'failed' GROUP BY 1";
	sqlite3_stmt *st = NULL, *sf = NULL;
	char cols[2048], q_runs[sizeof(q_runs_fmt) + sizeof(cols)], lerr[256];
	size_t cap = 0;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	out->sweeps = calloc(n ? n : 1, sizeof(char *));
	out->counts = calloc(n ? n : 1, sizeof(*out->counts));
	if (!out->sweeps || !out->counts)
		goto out_oom;
	snprintf(q_runs, sizeof(q_runs), q_runs_fmt,
		 results_db_layout_columns("l", cols, sizeof(cols)));
	if (sqlite3_prepare_v2(db, q_runs, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, q_failed, -1, &sf, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "reading runs: %s", sqlite3_errmsg(db));
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		out->sweeps[k] = strdup(sweeps[k]);
		if (!out->sweeps[k])
			goto out_oom;
		out->n_sweeps++;
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, sweeps[k], -1, SQLITE_TRANSIENT);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			struct lb_fit_row *r;
			int healthy = sqlite3_column_int(st, 5);

			if (!healthy && sqlite3_column_int(st, 6)) {
				/* a healthy run of its layout is there */
				out->counts[k].rose_left++;
				continue;
			}
			out->counts[k].rose += !healthy;
			if (out->n == cap && grow(out, &cap))
				goto out_oom;
			r = &out->rows[out->n];
			memset(r, 0, sizeof(*r));
			snprintf(out->layout_id[out->n], LB_ID_LEN + 1, "%s", col_text(st, 0));
			snprintf(r->label, sizeof(r->label), "%s", col_text(st, 1));
			r->step_s = sqlite3_column_double(st, 2);
			out->mfu[out->n] = sqlite3_column_type(st, 3) == SQLITE_NULL
					       ? NAN
					       : sqlite3_column_double(st, 3);
			if (!out->gpu[0] && *col_text(st, 4))
				snprintf(out->gpu, sizeof(out->gpu), "%s", col_text(st, 4));
			if (results_db_layout_read(st, 7, &r->layout, lerr, sizeof(lerr)) < 0) {
				snprintf(err, errlen, "layout %s: %s", out->layout_id[out->n],
					 lerr);
				goto out;
			}
			r->group = out->sweeps[k];
			out->n++;
		}
		if (rc != SQLITE_DONE) {
			snprintf(err, errlen, "reading runs of '%s': %s", sweeps[k], sqlite3_errmsg(db));
			goto out;
		}
		sqlite3_reset(sf);
		sqlite3_bind_text(sf, 1, sweeps[k], -1, SQLITE_TRANSIENT);
		while ((rc = sqlite3_step(sf)) == SQLITE_ROW) {
			if (!strcmp(col_text(sf, 0), "oom"))
				out->counts[k].oom += sqlite3_column_int(sf, 1);
			else
				out->counts[k].other += sqlite3_column_int(sf, 1);
		}
		if (rc != SQLITE_DONE) {
			snprintf(err, errlen, "reading failed runs: %s", sqlite3_errmsg(db));
			goto out;
		}
	}
	rc = 0;
	goto out;
out_oom:
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	sqlite3_finalize(st);
	sqlite3_finalize(sf);
	return rc ? -1 : 0;
}

void calib_score(const struct lb_machine *m, const struct calib_set *s, const size_t *idx,
		 size_t n, struct lb_pred_score *out, size_t *n_pred)
{
	double *ps = malloc((n ? n : 1) * sizeof(double)), *ms = malloc((n ? n : 1) * sizeof(double));
	double *pm = malloc((n ? n : 1) * sizeof(double)), *mm = malloc((n ? n : 1) * sizeof(double));
	struct lb_predict_cache cache;
	size_t k = 0;

	memset(out, 0, sizeof(*out));
	*n_pred = 0;
	if (!ps || !ms || !pm || !mm)
		goto out;
	lb_predict_cache_init(&cache);
	for (size_t i = 0; i < n; i++) {
		const struct lb_fit_row *r = &s->rows[idx[i]];
		struct lb_prediction p;
		char why[256];

		if (lb_predict(m, &r->layout, r->label, &cache, &p, why, sizeof(why)))
			continue;
		ps[k] = p.step_s;
		ms[k] = r->step_s;
		pm[k] = p.mfu;
		/* a run without a measured MFU ranks by its measured step time */
		mm[k] = isnan(s->mfu[idx[i]]) ? p.mfu * p.step_s / r->step_s : s->mfu[idx[i]];
		k++;
	}
	lb_predict_cache_release(&cache);
	lb_pred_score(ps, ms, pm, mm, k, out);
	*n_pred = k;
out:
	free(ps);
	free(ms);
	free(pm);
	free(mm);
}

static void score_header(FILE *f, const char *first)
{
	fprintf(f, "| %s | runs | left out | mean abs error | worst | Spearman | MFU of predicted "
		   "best | best MFU | gap (points) |\n",
		first);
	fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
}

static void score_row(FILE *f, const char *name, size_t n, int left, const struct lb_pred_score *sc)
{
	fprintf(f, "| %s | %zu | %d | %.2f%% | %.2f%% | %.3f | %.2f%% | %.2f%% | %.2f |\n", name, n,
		left, 100.0 * sc->mean_abs, 100.0 * sc->max_abs, sc->spearman,
		100.0 * sc->mfu_of_predicted_best, 100.0 * sc->mfu_best,
		100.0 * (sc->mfu_best - sc->mfu_of_predicted_best));
}

/* The rows of sweep k (or every row but sweep k's when others). */
static size_t select_rows(const struct calib_set *s, size_t k, int others, size_t *idx)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		if ((s->rows[i].group == s->sweeps[k]) != others)
			idx[n++] = i;
	return n;
}

int calib_holdout(FILE *f, const struct lb_machine *base, const struct calib_set *s,
		  const struct lb_fit_opts *o, int only_given, double huber, char *err,
		  size_t errlen)
{
	size_t *idx = malloc((s->n ? s->n : 1) * sizeof(size_t));
	struct lb_fit_row *train = malloc((s->n ? s->n : 1) * sizeof(*train));
	struct lb_machine *m = malloc(sizeof(*m));
	int rc = -1;

	if (!idx || !train || !m) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	score_header(f, "held-out sweep");
	for (size_t k = 0; k < s->n_sweeps; k++) {
		struct lb_fit_opts fo = *o;
		struct lb_fit_result res;
		struct lb_pred_score sc;
		size_t nt = select_rows(s, k, 1, idx), ns, np;

		for (size_t i = 0; i < nt; i++)
			train[i] = s->rows[idx[i]];
		*m = *base;
		lb_fit_identifiable(m, train, nt, &fo);
		if (only_given)
			for (int j = 0; j < LB_FIT_MAX_PARAMS; j++)
				fo.free[j] = fo.free[j] && o->free[j];
		fo.huber = huber;
		if (lb_predict_fit(m, train, nt, &fo, NULL, &res, err, errlen))
			goto out;
		ns = select_rows(s, k, 0, idx);
		calib_score(m, s, idx, ns, &sc, &np);
		score_row(f, s->sweeps[k], np, s->counts[k].other, &sc);
	}
	rc = 0;
out:
	free(idx);
	free(train);
	free(m);
	return rc;
}

/* ------------------------------------------------------------------ the command */

/* --fit "a,b": the terms named (attention kernels as attn.NAME). */
static int parse_fit_list(const char *list, const struct lb_machine *m, struct lb_fit_opts *o,
			  char *err, size_t errlen)
{
	char buf[1024], *save = NULL;

	memset(o->free, 0, sizeof(o->free));
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int j = lb_fit_term_find(t);

		if (j < 0 && !strncmp(t, "attn.", 5)) {
			const struct lb_attn_kernel *k = lb_machine_attn_mut((struct lb_machine *)m, t + 5);

			if (k)
				j = LB_FIT_COUNT + (int)(k - m->attn);
		}
		if (j < 0) {
			size_t n = (size_t)snprintf(err, errlen, "--fit: unknown term '%s' (terms: ", t);

			for (int i = 0; i < LB_FIT_COUNT && n < errlen; i++)
				n += (size_t)snprintf(err + n, errlen - n, "%s, ", lb_fit_terms[i].name);
			for (int i = 0; i < m->n_attn && n < errlen; i++)
				n += (size_t)snprintf(err + n, errlen - n, "attn.%s%s", m->attn[i].name,
						      i + 1 < m->n_attn ? ", " : ")");
			return -1;
		}
		o->free[j] = 1;
	}
	return 0;
}

static void print_terms(FILE *f, const struct lb_machine *m, const struct lb_fit_opts *o)
{
	fprintf(f, "| term | value | bounds | fitted | what it stands for |\n");
	fprintf(f, "| --- | ---: | --- | --- | --- |\n");
	for (int i = 0; i < LB_FIT_COUNT; i++)
		fprintf(f, "| %s | %.4g%s | [%g, %g] | %s | %s |\n", lb_fit_terms[i].name, m->fit[i],
			lb_fit_terms[i].unit[0] == 's' ? " s" : "", lb_fit_terms[i].min,
			lb_fit_terms[i].max, o->free[i] ? "yes" : "no", lb_fit_terms[i].what);
	for (int i = 0; i < m->n_attn; i++)
		fprintf(f, "| attn.%s | %.4g | [%g, %g] | %s | attention '%s': time over the "
			   "table's rate |\n",
			m->attn[i].name, m->attn[i].scale, LB_ATTN_SCALE_MIN, LB_ATTN_SCALE_MAX,
			o->free[LB_FIT_COUNT + i] ? "yes" : "no", m->attn[i].name);
}

/* The provenance object of a calibration, as JSON text (caller frees). */
static char *provenance(const struct calib_set *s, const struct lb_fit_result *res,
			const char *base)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	int rose = 0;

	for (size_t k = 0; k < s->n_sweeps; k++)
		rose += s->counts[k].rose;
	lb_strbuf_adds(&sb, "{\"base\": ");
	lb_strbuf_add_json(&sb, base);
	lb_strbuf_adds(&sb, ", \"sweeps\": [");
	for (size_t k = 0; k < s->n_sweeps; k++) {
		if (k)
			lb_strbuf_adds(&sb, ", ");
		lb_strbuf_add_json(&sb, s->sweeps[k]);
	}
	lb_strbuf_addf(&sb,
		       "], \"runs\": %d, \"runs_loss_rose\": %d, \"terms_fitted\": %d, \"huber\": %g, "
		       "\"rms_relative_residual\": %.4f, \"mean_abs_relative_residual\": %.4f, "
		       "\"max_abs_relative_residual\": %.4f}",
		       res->n_used, rose, res->n_params, CALIB_HUBER, res->rms, res->mean_abs,
		       res->max_abs);
	return lb_strbuf_detach(&sb);
}

static int read_into(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	if (lb_read_file(path, text, len)) {
		snprintf(err, errlen, "cannot read '%s'", path);
		return -1;
	}
	return 0;
}

/* The ids of its options (struct lb_option.id). */
enum {
	OPT_DB,
	OPT_SWEEP,
	OPT_MACHINE,
	OPT_KERNELS,
	OPT_COLLS,
	OPT_FIT,
	OPT_NAME,
	OPT_GPU,
	OPT_OUT,
	OPT_HOLDOUT
};

static const struct lb_option calibrate_opts[] = {
    LB_OPTION_DB(OPT_DB),
    {OPT_SWEEP, "sweep", LB_ARG_STRING, "NAME", NULL, NULL, 0, 0, LB_OPT_MANY,
     "fit the terms to the ok runs of these sweeps (--sweep A B); without, only the "
     "tables are written"},
    LB_TEXT(OPT_MACHINE, "machine", "NAME|FILE", NULL,
	    "the machine to start from: its tables and terms (default the one shipped for the "
	    "runs' GPU; shipped: a100-nominal, a100-paper, h100-nominal, h200, h200-kernels)"),
    LB_TEXT(OPT_KERNELS, "kernels", "CSV", NULL,
	    "GEMM, attention and memory-bound rates from bench_kernels --csv on the target"),
    LB_TEXT(OPT_COLLS, "colls", "FILE", NULL,
	    "the link within a node from bench_colls' output (2 or more ranks)"),
    LB_TEXT(OPT_FIT, "fit", "TERM,...", NULL,
	    "fit only these terms (default every term the runs can tell apart)"),
    LB_TEXT(OPT_NAME, "name", "NAME", NULL, "the name of the machine written"),
    LB_TEXT(OPT_GPU, "gpu", "PRODUCT", NULL,
	    "the GPU product the machine written describes (default the runs', else the "
	    "machine's)"),
    LB_TEXT(OPT_OUT, "out", "FILE", NULL,
	    "write the machine file to FILE (default stdout, the report then on stderr)"),
    LB_SWITCH(OPT_HOLDOUT, "holdout", 0,
	      "also leave each sweep out in turn: fit on the others, predict it, print the "
	      "scores"),
    LB_OPT_END,
};

/* The runs of one sweep, label and layout averaged: a point of the pipeline check. */
struct bound_point {
	size_t row; /* its first run in the set */
	double step_s;
	int runs;
};

int calib_bound_pairs(struct calib_set *s, struct calib_bound_pair **over, size_t *n_over)
{
	struct bound_point *pt = malloc((s->n ? s->n : 1) * sizeof(*pt));
	size_t cap = 0;

	*over = NULL;
	*n_over = 0;
	if (!pt)
		return -1;
	for (size_t k = 0; k < s->n_sweeps; k++) {
		size_t np = 0;

		s->counts[k].bound_pairs = s->counts[k].bound_over = 0;
		for (size_t i = 0; i < s->n; i++) {
			size_t j;

			if (s->rows[i].group != s->sweeps[k])
				continue;
			for (j = 0; j < np; j++)
				if (!strcmp(s->layout_id[pt[j].row], s->layout_id[i]) &&
				    !strcmp(s->rows[pt[j].row].label, s->rows[i].label))
					break;
			if (j == np)
				pt[np++] = (struct bound_point){i, 0, 0};
			pt[j].step_s += s->rows[i].step_s;
			pt[j].runs++;
		}
		for (size_t i = 0; i < np; i++)
			pt[i].step_s /= pt[i].runs;
		for (size_t i = 0; i < np; i++)
			for (size_t j = 0; j < np; j++) {
				const struct lb_fit_row *lo = &s->rows[pt[i].row], *hi = &s->rows[pt[j].row];
				double bound;

				if (i == j || lo->layout.pp < 2 || strcmp(lo->label, hi->label))
					continue;
				bound = lb_pipeline_bound(&lo->layout, &hi->layout);
				if (!(bound > 0))
					continue;
				s->counts[k].bound_pairs++;
				if (pt[j].step_s <= pt[i].step_s * bound * (1.0 + CALIB_BOUND_SLACK))
					continue;
				if (lb_grow(over, *n_over, &cap, 8, sizeof(**over))) {
					free(pt);
					free(*over);
					*over = NULL;
					*n_over = 0;
					return -1;
				}
				(*over)[(*n_over)++] = (struct calib_bound_pair){
				    pt[i].row, pt[j].row, pt[i].step_s, pt[j].step_s, bound};
				s->counts[k].bound_over++;
			}
	}
	free(pt);
	return 0;
}

void calib_bound_md(struct lb_strbuf *sb, const struct calib_set *s,
		    const struct calib_bound_pair *over, size_t n_over,
		    void (*escape)(struct lb_strbuf *sb, const char *text))
{
	lb_strbuf_adds(sb, "| sweep | label | larger's layout | tp | pp | dp | ckpt | micro-batches "
			   "| step s | ratio | bound | over |\n| --- | --- | --- | ---: | ---: | "
			   "---: | --- | --- | --- | ---: | ---: | ---: |\n");
	for (size_t i = 0; i < n_over; i++) {
		const struct calib_bound_pair *q = &over[i];
		const struct lb_fit_row *lo = &s->rows[q->lo], *hi = &s->rows[q->hi];
		const char *cells[2] = {lo->group, lo->label[0] ? lo->label : "-"};
		double ratio = q->hi_s / q->lo_s;

		for (int c = 0; c < 2; c++) {
			lb_strbuf_adds(sb, c ? " | " : "| ");
			if (escape)
				escape(sb, cells[c]);
			else
				lb_strbuf_adds(sb, cells[c]);
		}
		lb_strbuf_addf(sb, " | %s | %d | %d | %d | %s | %d -> %d | %.4g -> %.4g | %.3f | %.3f | "
				   "%+.1f%% |\n",
			       s->layout_id[q->hi], lo->layout.tp, lo->layout.pp, lo->layout.dp,
			       lb_ckpt_name(lo->layout.checkpointing), lo->layout.micro_batch,
			       hi->layout.micro_batch, q->lo_s, q->hi_s, ratio, q->bound,
			       100.0 * (ratio / q->bound - 1.0));
	}
}

/* calibrate's report of the pairs over the pipeline bound: no fitted term follows such a
 * run (Huber's weighting keeps it from bending the others), and what slowed it is worth a
 * look. Returns -1 out of memory. */
static int print_pipeline_bound(FILE *f, struct calib_set *s)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	struct calib_bound_pair *over;
	size_t n_over;
	int pairs = 0, rc = 0;

	if (calib_bound_pairs(s, &over, &n_over))
		return -1;
	for (size_t k = 0; k < s->n_sweeps; k++)
		pairs += s->counts[k].bound_pairs;
	if (!n_over) {
		if (pairs)
			fprintf(f, "\nthe pipeline bound: all %d pairs of runs that differ in the "
				   "micro-batch only hold it within %.0f%%\n",
				pairs, 100.0 * CALIB_BOUND_SLACK);
		return 0;
	}
	fprintf(f, "\nruns a pipeline cannot make (the pipeline bound): " CALIB_BOUND_WHAT "\n\n",
		100.0 * CALIB_BOUND_SLACK);
	calib_bound_md(&sb, s, over, n_over, NULL);
	free(over);
	if (sb.failed)
		rc = -1;
	else
		fputs(lb_strbuf_str(&sb), f);
	lb_strbuf_release(&sb);
	if (rc)
		return rc;
	fprintf(f, "\n");
	for (size_t k = 0; k < s->n_sweeps; k++)
		if (s->counts[k].bound_pairs)
			fprintf(f, "%s: %d pairs with a pipeline, %d over the bound\n", s->sweeps[k],
				s->counts[k].bound_pairs, s->counts[k].bound_over);
	return 0;
}

static int run_calibrate(const struct lb_args *a)
{
	struct lb_machine *m = NULL, *base = NULL;
	struct calib_set set = {0};
	struct lb_fit_opts fo;
	struct lb_fit_result res = {0};
	sqlite3 *db = NULL;
	FILE *rep = stdout, *out = NULL;
	const char *mname, *outp;
	double *resid = NULL;
	char err[1024], *calib = NULL;
	int rc = 1, n_sweeps = a->n_many[OPT_SWEEP];

	outp = a->str[OPT_OUT];
	if (!outp)
		rep = stderr;
	m = malloc(sizeof(*m));
	base = malloc(sizeof(*base));
	if (!m || !base) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	if (!n_sweeps && !a->str[OPT_KERNELS] && !a->str[OPT_COLLS]) {
		fprintf(stderr, "error: nothing to calibrate: give --sweep NAME (runs to fit), "
				"--kernels CSV or --colls FILE (tables)\n");
		goto out;
	}
	if (n_sweeps) {
		if (results_db_open(a->str[OPT_DB], RESULTS_DB_READ, &db, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			goto out;
		}
		for (int k = 0; k < n_sweeps; k++)
			if (results_sweep_check(
				db, a->str[OPT_DB] ? a->str[OPT_DB] : results_default_db(),
				a->many[OPT_SWEEP][k], err, sizeof(err))) {
				fprintf(stderr, "error: %s\n", err);
				goto out;
			}
		if (calib_load(db, a->many[OPT_SWEEP], (size_t)n_sweeps, &set, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			goto out;
		}
		if (!set.n) {
			fprintf(
			    stderr,
			    "error: no ok run with a step time in sweep%s %s (collect or import "
			    "runs first)\n",
			    n_sweeps > 1 ? "s" : "", a->many[OPT_SWEEP][0]);
			goto out;
		}
	}
	mname = a->str[OPT_MACHINE];
	if (!mname && set.gpu[0])
		mname = lb_machine_for_gpu(set.gpu);
	if (!mname) {
		fprintf(stderr,
			"error: no machine to start from%s%s%s (give --machine NAME|FILE: a shipped "
			"table such as a100-nominal, or a file)\n",
			set.gpu[0] ? ": none is shipped for GPU '" : "", set.gpu,
			set.gpu[0] ? "'" : "");
		goto out;
	}
	if (lb_machine_load(mname, m, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	if (a->str[OPT_KERNELS]) {
		char *text;
		size_t len;
		int skipped;

		if (read_into(a->str[OPT_KERNELS], &text, &len, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			goto out;
		}
		rc = lb_machine_from_kernels_csv(m, text, len, &skipped, err, sizeof(err));
		free(text);
		if (rc) {
			fprintf(stderr, "error: --kernels '%s': %s\n", a->str[OPT_KERNELS], err);
			rc = 1;
			goto out;
		}
		m->nominal = 0;
		snprintf(m->source, sizeof(m->source), "bench_kernels --csv: %s",
			 a->str[OPT_KERNELS]);
		snprintf(m->description, sizeof(m->description),
			 "GEMM, attention and memory-bound rates measured by bench_kernels (%s); "
			 "links, stack and peak from machine '%s'",
			 a->str[OPT_KERNELS], mname);
		fprintf(rep,
			"tables from '%s': %d GEMM rows, %d attention kernels, %d memory-bound "
			"rows (%d rows left out: not ok or not used)\n",
			a->str[OPT_KERNELS], m->n_gemm, m->n_attn, m->n_mem, skipped);
	}
	if (a->str[OPT_COLLS]) {
		char *text;
		size_t len;

		if (read_into(a->str[OPT_COLLS], &text, &len, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			goto out;
		}
		rc = lb_machine_from_colls(m, text, len, err, sizeof(err));
		free(text);
		if (rc) {
			fprintf(stderr, "error: --colls '%s': %s\n", a->str[OPT_COLLS], err);
			rc = 1;
			goto out;
		}
		fprintf(rep, "link within a node from '%s': %.1f GB/s, %.2f us a ring step\n",
			a->str[OPT_COLLS], m->nvlink_gbps, m->nvlink_lat_s * 1e6);
	}
	*base = *m;
	/* a calibration names its base as it was given: a shipped name or a path */
	snprintf(base->name, sizeof(base->name), "%s", mname);
	if (a->str[OPT_NAME]) {
		if (!lb_name_ok(a->str[OPT_NAME], sizeof(m->name))) {
			fprintf(stderr,
				"error: --name '%s': a machine name is 1 to 63 letters, "
				"digits, '.', '_' or '-'\n",
				a->str[OPT_NAME]);
			goto out;
		}
		snprintf(m->name, sizeof(m->name), "%s", a->str[OPT_NAME]);
	}
	if (a->str[OPT_GPU] || set.gpu[0])
		snprintf(m->gpu, sizeof(m->gpu), "%s", a->str[OPT_GPU] ? a->str[OPT_GPU] : set.gpu);
	if (set.n) {
		size_t *idx = malloc(set.n * sizeof(size_t));

		resid = malloc(set.n * sizeof(double));
		if (!idx || !resid) {
			free(idx);
			fprintf(stderr, "error: out of memory\n");
			goto out;
		}
		lb_fit_identifiable(m, set.rows, set.n, &fo);
		if (a->str[OPT_FIT]) {
			struct lb_fit_opts given;

			if (parse_fit_list(a->str[OPT_FIT], m, &given, err, sizeof(err))) {
				free(idx);
				fprintf(stderr, "error: %s\n", err);
				goto out;
			}
			memcpy(fo.free, given.free, sizeof(fo.free));
		}
		fo.huber = CALIB_HUBER;
		fo.max_iter = 0;
		if (lb_predict_fit(m, set.rows, set.n, &fo, resid, &res, err, sizeof(err))) {
			free(idx);
			fprintf(stderr, "error: %s\n", err);
			goto out;
		}
		fprintf(rep, "\nfit of machine '%s' (from '%s') to %d of %zu runs in %zu sweep(s): "
			     "%d terms, %d iterations, least squares on the relative residuals "
			     "(Huber beyond %.0f%%)\n\n",
			m->name, mname, res.n_used, set.n, set.n_sweeps, res.n_params, res.iterations,
			100.0 * CALIB_HUBER);
		print_terms(rep, m, &fo);
		fprintf(rep, "\nresiduals, (predicted - measured) / measured:\n\n");
		fprintf(rep, "| sweep | layout | label | mb | tp | pp | dp | sp | ckpt | measured s "
			     "| predicted s | error |\n");
		fprintf(rep, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | "
			     "---: | ---: |\n");
		for (size_t i = 0; i < set.n; i++) {
			const struct lb_fit_row *r = &set.rows[i];
			const struct lb_layout *l = &r->layout;

			fprintf(rep, "| %s | %s | %s | %d | %d | %d | %d | %d | %s | %.4g | ", r->group,
				set.layout_id[i], r->label[0] ? r->label : "-", l->micro_batch, l->tp,
				l->pp, l->dp, l->sequence_parallel, lb_ckpt_name(l->checkpointing),
				r->step_s);
			if (isnan(resid[i]))
				fprintf(rep, "- | cannot predict |\n");
			else
				fprintf(rep, "%.4g | %+.2f%% |\n", r->step_s * (1.0 + resid[i]),
					100.0 * resid[i]);
		}
		fprintf(rep, "\nper sweep, predicted with this fit (in sample):\n\n");
		score_header(rep, "sweep");
		for (size_t k = 0; k < set.n_sweeps; k++) {
			struct lb_pred_score sc;
			size_t np, ns = select_rows(&set, k, 0, idx);

			calib_score(m, &set, idx, ns, &sc, &np);
			score_row(rep, set.sweeps[k], np, set.counts[k].other, &sc);
		}
		for (size_t k = 0; k < set.n_sweeps; k++)
			if (set.counts[k].rose || set.counts[k].rose_left)
				fprintf(rep,
					"\n%s: runs whose loss rose (diverged): %d used (no healthy "
					"run of their layout), %d left out (a healthy run of their "
					"layout is used)\n",
					set.sweeps[k], set.counts[k].rose, set.counts[k].rose_left);
		if (print_pipeline_bound(rep, &set) < 0) {
			free(idx);
			fprintf(stderr, "error: out of memory\n");
			goto out;
		}
		fprintf(rep, "\nall: %d runs, relative residual rms %.2f%%, mean |%.2f%%|, worst "
			     "%.2f%%\n",
			res.n_used, 100.0 * res.rms, 100.0 * res.mean_abs, 100.0 * res.max_abs);
		free(idx);
		if (a->given[OPT_HOLDOUT]) {
			struct lb_fit_opts given = fo;

			fprintf(rep, "\nleave one sweep out: fit on the others, predict it:\n\n");
			if (calib_holdout(rep, base, &set, &given, a->str[OPT_FIT] != NULL,
					  CALIB_HUBER, err, sizeof(err))) {
				fprintf(stderr, "error: %s\n", err);
				goto out;
			}
		}
		if (!a->str[OPT_KERNELS] && !a->str[OPT_COLLS]) {
			size_t k = (size_t)snprintf(m->description, sizeof(m->description),
						    "machine '%s' with %d terms fitted to %d runs of "
						    "sweep%s ",
						    base->name, res.n_params, res.n_used,
						    set.n_sweeps > 1 ? "s" : "");

			for (size_t j = 0; j < set.n_sweeps && k < sizeof(m->description); j++)
				k += (size_t)snprintf(m->description + k, sizeof(m->description) - k,
						      "%s%s", j ? ", " : "", set.sweeps[j]);
		}
		calib = provenance(&set, &res, base->name);
		if (!calib) {
			fprintf(stderr, "error: out of memory\n");
			goto out;
		}
	}
	fflush(rep);
	out = outp ? fopen(outp, "w") : stdout;
	if (!out) {
		fprintf(stderr, "error: cannot write '%s'\n", outp);
		goto out;
	}
	/* measured tables make a machine of its own; a fit alone a calibration of its base */
	if (lb_machine_write(out, m, a->str[OPT_KERNELS] || a->str[OPT_COLLS] ? NULL : base,
			     calib) ||
	    (outp && fclose(out))) {
		fprintf(stderr, "error: writing the machine file failed\n");
		out = NULL;
		goto out;
	}
	if (outp)
		fprintf(rep, "wrote machine '%s' to '%s'\n", m->name, outp);
	out = NULL;
	rc = 0;
out:
	if (out && out != stdout)
		fclose(out);
	free(calib);
	free(resid);
	calib_set_free(&set);
	results_close(db);
	free(m);
	free(base);
	return rc;
}

const struct lb_command cmd_calibrate =
    LB_COMMAND("calibrate", NULL, 0, 0, 0, calibrate_opts, run_calibrate,
	       "fit a machine's step-time terms to runs in the database (least squares, residuals "
	       "printed) and write the machine file; --kernels and --colls make its tables");
