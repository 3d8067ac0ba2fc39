/*
 * The report's halving section (report/halving.h): loaded from the halving views, laid
 * out as one list of tables (a rungs table and a layouts table per rung and group of each
 * halving) that the markdown and HTML writers both walk, so the two cannot disagree; CSV
 * is one flat table of every layout on every rung.
 */
#include "report/halving.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"
#include "results/db.h"

static const char definition[] =
    "Successive halving runs every candidate layout for few steps (rung 0) and each rung "
    "keeps, within each group of layouts doing the same work (model, sequence length, "
    "global batch, GPUs), the fastest ceil(n/eta) by median steady-state step time (warm-up "
    "steps left out); the slowest of those is the cut. A slower layout is dropped only when "
    "it is slower than the cut beyond noise: the one-sided Mann-Whitney U test of its step "
    "times against the cut's times (1 + margin) gives p < alpha; otherwise it goes on "
    "(within noise). A layout that failed is dropped with its class. The last rung runs the "
    "spec's steps; its layouts are tested the same way against the fastest of their group: "
    "differs = slower beyond noise. GPU-hours: each job's wall time times its GPUs.";

/* A column of a row read into a struct: where it lands, and what it holds. A NULL reads as
 * unknown (TEXT: as ""; an INT or REAL column that cannot be NULL gives 0 for unknown). */
struct col {
	enum { COL_TEXT, COL_INT, COL_LONG, COL_REAL } kind;
	size_t off;
	double unknown;
};

/* Row st's columns 0, 1, ... into elem, as cols[0], cols[1], ... say: 0, or -1 when a
 * text column's copy failed (out of memory). */
static int read_cols(sqlite3_stmt *st, const struct col *cols, int n, void *elem)
{
	int rc = 0;

	for (int i = 0; i < n; i++) {
		void *at = (char *)elem + cols[i].off;
		int null = sqlite3_column_type(st, i) == SQLITE_NULL;

		if (cols[i].kind == COL_TEXT) {
			const unsigned char *s = sqlite3_column_text(st, i);

			if (!(*(char **)at = strdup(s ? (const char *)s : "")))
				rc = -1;
		} else if (cols[i].kind == COL_INT) {
			*(int *)at = null ? (int)cols[i].unknown : sqlite3_column_int(st, i);
		} else if (cols[i].kind == COL_LONG) {
			*(long *)at = (long)sqlite3_column_int64(st, i);
		} else {
			*(double *)at = null ? cols[i].unknown : sqlite3_column_double(st, i);
		}
	}
	return rc;
}

/* Free the text columns of elem. */
static void free_cols(const struct col *cols, int n, void *elem)
{
	for (int i = 0; i < n; i++)
		if (cols[i].kind == COL_TEXT)
			free(*(char **)((char *)elem + cols[i].off));
}

static double real_col(sqlite3_stmt *st, int i, double unknown)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL ? unknown : sqlite3_column_double(st, i);
}

/* The columns of halvings (halvings_sql), of halving_rung_summary (rung_sql) and of
 * halving_layouts (member_sql), in their order, into a struct report_halving, ..._rung and
 * ..._member. */
#define N_COLS(cols) ((int)(sizeof(cols) / sizeof((cols)[0])))
/* clang-format off */
#define TEXT(m) {COL_TEXT, AT(m), 0}
#define LONG(m) {COL_LONG, AT(m), 0}
#define INT(m, unknown) {COL_INT, AT(m), unknown}
#define REAL(m, unknown) {COL_REAL, AT(m), unknown}
/* clang-format on */
#define AT(m) offsetof(struct report_halving, m)
static const char halvings_sql[] =
    "SELECT id, sweep, state, COALESCE(message, ''), executor, eta, n_rungs, alpha, margin "
    "FROM halvings WHERE ?1 IS NULL OR sweep = ?1 ORDER BY sweep, id";
static const struct col halving_cols[] = {
    LONG(id),	 TEXT(sweep),	  TEXT(state),	  TEXT(message),   TEXT(executor),
    INT(eta, 0), INT(n_rungs, 0), REAL(alpha, 0), REAL(margin, 0),
};
#undef AT

#define AT(m) offsetof(struct report_halving_rung, m)
static const char rung_sql[] =
    "SELECT rung, steps, state, layouts, COALESCE(kept, 0), COALESCE(kept_within_noise, 0), "
    "COALESCE(dropped_slower, 0), COALESCE(dropped_failed, 0), COALESCE(final, 0), "
    "COALESCE(pending, 0), gpu_seconds FROM halving_rung_summary WHERE halving_id = ?1 "
    "ORDER BY rung";
static const struct col rung_cols[] = {
    INT(rung, 0),  INT(steps, 0),   TEXT(state),	   INT(layouts, 0),
    INT(kept, 0),  INT(noise, 0),   INT(dropped, 0),	   INT(failed, 0),
    INT(final, 0), INT(pending, 0), REAL(gpu_seconds, -1),
};
#undef AT

#define AT(m) offsetof(struct report_halving_member, m)
static const char member_sql[] =
    "SELECT rung, steps, grp, layout_id, label, checkpointing, verdict, "
    "COALESCE(cut_layout, ''), COALESCE(failure_class, ''), micro_batch, tp, pp, dp, rank, "
    "n_steps, median_s, cut_median_s, slowdown, p_value, significant, gpu_seconds FROM "
    "halving_layouts WHERE halving_id = ?1 ORDER BY rung, grp, rank IS NULL, rank, layout_id";
static const struct col member_cols[] = {
    INT(rung, 0),	 INT(steps, 0),	       TEXT(grp),
    TEXT(layout_id),	 TEXT(label),	       TEXT(checkpointing),
    TEXT(verdict),	 TEXT(cut_layout),     TEXT(failure_class),
    INT(micro_batch, 0), INT(tp, 0),	       INT(pp, 0),
    INT(dp, 0),		 INT(rank, 0),	       INT(n_steps, -1),
    REAL(median, -1),	 REAL(cut_median, -1), REAL(slowdown, NAN),
    REAL(p, -1),	 INT(significant, -1), REAL(gpu_seconds, -1),
};
#undef AT

/* One row of each into its struct (results_db_rows). */
static int rung_row(sqlite3_stmt *st, void *elem)
{
	return read_cols(st, rung_cols, N_COLS(rung_cols), elem);
}

static int member_row(sqlite3_stmt *st, void *elem)
{
	return read_cols(st, member_cols, N_COLS(member_cols), elem);
}

static void free_halving(struct report_halving *h)
{
	free_cols(halving_cols, N_COLS(halving_cols), h);
	free(h->steps);
	for (size_t i = 0; i < h->n_rung_rows; i++)
		free_cols(rung_cols, N_COLS(rung_cols), &h->rungs[i]);
	free(h->rungs);
	for (size_t i = 0; i < h->n_members; i++)
		free_cols(member_cols, N_COLS(member_cols), &h->members[i]);
	free(h->members);
}

void report_halving_release(struct report_halvings *hs)
{
	for (size_t i = 0; i < hs->n; i++)
		free_halving(&hs->v[i]);
	free(hs->v);
	memset(hs, 0, sizeof(*hs));
}

/* The rows of sql (?1 = id) into the array *v of *n (results_db_rows): 0, or -1 with err
 * set ("out of memory", or what the database said, after "halving ID: "). */
static int load_rows(sqlite3 *db, const char *sql, long id, size_t sz,
		     int (*row)(sqlite3_stmt *st, void *elem), void **v, size_t *n, char *err,
		     size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, id);
		rc = results_db_rows(st, sz, row, v, n);
	}
	sqlite3_finalize(st);
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
	else if (rc != SQLITE_DONE)
		snprintf(err, errlen, "halving %ld: %s", id, sqlite3_errmsg(db));
	return rc == SQLITE_DONE ? 0 : -1;
}

static int load_one(sqlite3 *db, struct report_halving *h, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct lb_strbuf steps = LB_STRBUF_INIT;
	int rc;

	if (load_rows(db, rung_sql, h->id, sizeof(*h->rungs), rung_row, (void **)&h->rungs,
		      &h->n_rung_rows, err, errlen) ||
	    load_rows(db, member_sql, h->id, sizeof(*h->members), member_row, (void **)&h->members,
		      &h->n_members, err, errlen))
		return -1;
	for (size_t i = 0; i < h->n_rung_rows; i++)
		lb_strbuf_addf(&steps, "%s%d", i ? ", " : "", h->rungs[i].steps);
	h->steps = steps.failed ? NULL : strdup(steps.len ? lb_strbuf_str(&steps) : "");
	lb_strbuf_release(&steps);
	if (!h->steps) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* cost, and whether its runs ran on GPUs */
	h->spent = h->full_est = -1;
	if (sqlite3_prepare_v2(
		db,
		"SELECT layouts, runs, full_steps, gpu_seconds, full_grid_gpu_seconds, "
		"(SELECT COALESCE(MIN(r.backend != 'cpu'), 1) FROM runs r JOIN "
		"halving_members m ON r.job_ref = m.job_ref WHERE m.halving_id = ?1) "
		"FROM halving_cost WHERE halving_id = ?1",
		-1, &st, NULL) != SQLITE_OK)
		goto out_db;
	sqlite3_bind_int64(st, 1, h->id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		h->layouts = sqlite3_column_int(st, 0);
		h->runs = sqlite3_column_int(st, 1);
		h->full_steps = sqlite3_column_int(st, 2);
		h->spent = real_col(st, 3, -1);
		h->full_est = real_col(st, 4, -1);
		h->gpu = sqlite3_column_int(st, 5);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return 0;
out_db:
	snprintf(err, errlen, "halving %ld: %s", h->id, sqlite3_errmsg(db));
	return -1;
}

static int halving_row(sqlite3_stmt *st, void *elem)
{
	return read_cols(st, halving_cols, N_COLS(halving_cols), elem);
}

int report_halving_load(sqlite3 *db, const char *sweep, struct report_halvings *hs, char *err,
			size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	memset(hs, 0, sizeof(*hs));
	/* an older database, or one with the views only, has no halving */
	if (sqlite3_prepare_v2(db,
			       "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('halvings', "
			       "'halving_layouts', 'halving_rung_summary', 'halving_cost')",
			       -1, &st, NULL) != SQLITE_OK)
		goto out_db;
	rc = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
	sqlite3_finalize(st);
	st = NULL;
	if (rc < 0)
		goto out_db;
	if (rc < 4)
		return 0;
	if (sqlite3_prepare_v2(db, halvings_sql, -1, &st, NULL) != SQLITE_OK)
		goto out_db;
	if (sweep)
		sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	rc = results_db_rows(st, sizeof(*hs->v), halving_row, (void **)&hs->v, &hs->n);
	sqlite3_finalize(st);
	st = NULL;
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rc != SQLITE_DONE)
		goto out_db;
	for (size_t i = 0; i < hs->n; i++)
		if (load_one(db, &hs->v[i], err, errlen))
			return -1;
	return 0;
out_db:
	snprintf(err, errlen, "halvings: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

/* ------------------------------------------------------------------ layout */

enum fmt { FMT_MD, FMT_HTML };

/* A paragraph. */
static void para(struct lb_strbuf *sb, enum fmt f, const char *text)
{
	if (f == FMT_MD) {
		lb_strbuf_addf(sb, "\n%s\n", text);
	} else {
		lb_strbuf_adds(sb, "<p class=\"note\">");
		render_html_escape(sb, text);
		lb_strbuf_adds(sb, "</p>\n");
	}
}

/* A heading of level 3 or 4. */
static void heading(struct lb_strbuf *sb, enum fmt f, int level, const char *text)
{
	if (f == FMT_MD) {
		lb_strbuf_addf(sb, "\n%s %s\n", level == 3 ? "###" : "####", text);
	} else {
		lb_strbuf_addf(sb, "<h%d>", level);
		render_html_escape(sb, text);
		lb_strbuf_addf(sb, "</h%d>\n", level);
	}
}

/* A table row: cells[0..n); num[k] right-aligns cell k; head: the header row. */
static void row(struct lb_strbuf *sb, enum fmt f, const char *const *cells, const int *num, int n,
		int head)
{
	if (f == FMT_MD) {
		if (head)
			lb_strbuf_adds(sb, "\n");
		lb_strbuf_adds(sb, "|");
		for (int k = 0; k < n; k++) {
			lb_strbuf_adds(sb, " ");
			render_md_escape(sb, cells[k]);
			lb_strbuf_adds(sb, " |");
		}
		lb_strbuf_adds(sb, "\n");
		if (head) {
			lb_strbuf_adds(sb, "|");
			for (int k = 0; k < n; k++)
				lb_strbuf_adds(sb, num[k] ? " ---: |" : " --- |");
			lb_strbuf_adds(sb, "\n");
		}
		return;
	}
	if (head)
		lb_strbuf_adds(sb, "<table>\n");
	lb_strbuf_adds(sb, "<tr>");
	for (int k = 0; k < n; k++) {
		lb_strbuf_adds(sb, head ? "<th>" : num[k] ? "<td class=\"num\">" : "<td>");
		render_html_escape(sb, cells[k]);
		lb_strbuf_adds(sb, head ? "</th>" : "</td>");
	}
	lb_strbuf_adds(sb, "</tr>\n");
}

static void table_end(struct lb_strbuf *sb, enum fmt f)
{
	if (f == FMT_HTML)
		lb_strbuf_adds(sb, "</table>\n");
}

static const char *unit_of(const struct report_halving *h)
{
	return h->gpu ? "GPU-hours" : "CPU-rank-hours";
}

static void hours(double secs, char *buf, size_t len)
{
	if (secs < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.4f", secs / 3600.0);
}

/* What a verdict says in the layouts table. */
static void verdict_text(const struct report_halving_member *m, char *buf, size_t len)
{
	if (!strcmp(m->verdict, "kept"))
		snprintf(buf, len, "kept");
	else if (!strcmp(m->verdict, "noise"))
		snprintf(buf, len, "within noise: goes on");
	else if (!strcmp(m->verdict, "dropped"))
		snprintf(buf, len, "dropped: slower");
	else if (!strcmp(m->verdict, "failed"))
		snprintf(buf, len, "dropped: %s", *m->failure_class ? m->failure_class : "failed");
	else if (!strcmp(m->verdict, "final"))
		snprintf(buf, len, m->rank == 1 ? "fastest" : "final");
	else
		snprintf(buf, len, "%s", m->verdict);
}

/* The layouts of one rung and group, members[a..b). */
static void layouts_table(struct lb_strbuf *sb, enum fmt f, const struct report_halving *h,
			  size_t a, size_t b)
{
	const struct report_halving_member *m0 = &h->members[a];
	int last = m0->rung == h->n_rungs - 1;
	char title[256];
	const char *cut = NULL;
	double cut_median = -1;
	static const int num[] = {1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0};
	const char *head[] = {"rank",
			      "layout",
			      "label",
			      "mbs",
			      "TP",
			      "PP",
			      "DP",
			      "ckpt",
			      "timed steps",
			      "median s",
			      last ? "vs fastest" : "vs cut",
			      "p",
			      last ? "differs" : "verdict"};

	for (size_t i = a; i < b; i++)
		if (*h->members[i].cut_layout) {
			cut = h->members[i].cut_layout;
			cut_median = h->members[i].cut_median;
			break;
		}
	snprintf(title, sizeof(title), "%s %d (%d steps): %s", last ? "Last rung," : "Rung",
		 m0->rung, m0->steps, m0->grp);
	heading(sb, f, 4, title);
	if (cut && !last) {
		char t[160];
		snprintf(t, sizeof(t), "The cut: %s, median %.4g s.", cut, cut_median);
		para(sb, f, t);
	}
	row(sb, f, head, num, 13, 1);
	for (size_t i = a; i < b; i++) {
		const struct report_halving_member *m = &h->members[i];
		char rank[16], mb[16], tp[16], pp[16], dp[16], n[16], med[32], vs[32], p[32], v[64];
		snprintf(rank, sizeof(rank), m->rank > 0 ? "%d" : "-", m->rank);
		snprintf(mb, sizeof(mb), "%d", m->micro_batch);
		snprintf(tp, sizeof(tp), "%d", m->tp);
		snprintf(pp, sizeof(pp), "%d", m->pp);
		snprintf(dp, sizeof(dp), "%d", m->dp);
		snprintf(n, sizeof(n), m->n_steps >= 0 ? "%d" : "-", m->n_steps);
		if (m->median > 0)
			snprintf(med, sizeof(med), "%.4g", m->median);
		else
			snprintf(med, sizeof(med), "-");
		if (!isnan(m->slowdown))
			snprintf(vs, sizeof(vs), "%+.1f%%", 100.0 * m->slowdown);
		else
			snprintf(vs, sizeof(vs), "-");
		if (m->p >= 0)
			snprintf(p, sizeof(p), "%.3g", m->p);
		else
			snprintf(p, sizeof(p), "-");
		if (last && !strcmp(m->verdict, "final"))
			snprintf(v, sizeof(v), "%s",
				 m->significant < 0 ? "fastest"
				 : m->significant   ? "yes"
						    : "no");
		else
			verdict_text(m, v, sizeof(v));
		const char *cells[] = {rank, m->layout_id,     m->label, mb,  tp, pp,
				       dp,   m->checkpointing, n,	 med, vs, p,
				       v};
		row(sb, f, cells, num, 13, 0);
	}
	table_end(sb, f);
}

static void halving_body(struct lb_strbuf *sb, enum fmt f, const struct report_halving *h)
{
	static const int num[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
	char title[512], text[512];

	snprintf(title, sizeof(title),
		 "Halving %ld of sweep '%s': %s (eta %d, rungs of %s steps, rank test at level %g "
		 "with a margin of %g%%, executor %s)",
		 h->id, h->sweep, h->state, h->eta, h->steps, h->alpha, 100.0 * h->margin,
		 h->executor);
	heading(sb, f, 3, title);
	if (*h->message) {
		snprintf(text, sizeof(text), "%s.", h->message);
		para(sb, f, text);
	}
	const char *head[] = {"rung",	 "steps",  "layouts", "kept",	  "within noise",
			      "dropped", "failed", "final",   unit_of(h), "state"};
	row(sb, f, head, num, 10, 1);
	for (size_t i = 0; i < h->n_rung_rows; i++) {
		const struct report_halving_rung *r = &h->rungs[i];
		char c[9][32];
		snprintf(c[0], 32, "%d", r->rung);
		snprintf(c[1], 32, "%d", r->steps);
		snprintf(c[2], 32, "%d", r->layouts);
		snprintf(c[3], 32, "%d", r->kept);
		snprintf(c[4], 32, "%d", r->noise);
		snprintf(c[5], 32, "%d", r->dropped);
		snprintf(c[6], 32, "%d", r->failed);
		snprintf(c[7], 32, "%d", r->final);
		hours(r->gpu_seconds, c[8], 32);
		const char *cells[] = {c[0], c[1], c[2], c[3], c[4],
				       c[5], c[6], c[7], c[8], r->state};
		row(sb, f, cells, num, 10, 0);
	}
	table_end(sb, f);
	if (h->spent >= 0) {
		char s[32], full[32];
		hours(h->spent, s, sizeof(s));
		hours(h->full_est, full, sizeof(full));
		if (h->full_est > 0)
			snprintf(
			    text, sizeof(text),
			    "Spent %s %s over %d runs; the full grid (%d layouts x %d steps) %s "
			    "about %s (each layout's last run plus the steps it did not run, at "
			    "its mean step time): %.1f%%.",
			    s, unit_of(h), h->runs, h->layouts, h->full_steps,
			    strcmp(h->state, "running") ? "would take" : "would take, so far,",
			    full, 100.0 * h->spent / h->full_est);
		else
			snprintf(text, sizeof(text), "Spent %s %s over %d runs.", s, unit_of(h),
				 h->runs);
		para(sb, f, text);
	}
	for (size_t a = 0; a < h->n_members;) {
		size_t b = a + 1;
		while (b < h->n_members && h->members[b].rung == h->members[a].rung &&
		       !strcmp(h->members[b].grp, h->members[a].grp))
			b++;
		layouts_table(sb, f, h, a, b);
		a = b;
	}
}

void report_halving_md(struct lb_strbuf *sb, const struct report_halvings *hs)
{
	lb_strbuf_addf(sb, "## Successive halving (halving)\n\n%s\n", definition);
	if (!hs->n) {
		lb_strbuf_adds(sb, "\nNo halving in this database.\n");
		return;
	}
	for (size_t i = 0; i < hs->n; i++)
		halving_body(sb, FMT_MD, &hs->v[i]);
}

void report_halving_html(struct lb_strbuf *sb, const struct report_halvings *hs)
{
	lb_strbuf_adds(sb, "<section id=\"halving\">\n<h2>Successive halving</h2>\n");
	para(sb, FMT_HTML, definition);
	if (!hs->n)
		lb_strbuf_adds(sb, "<p>No halving in this database.</p>\n");
	for (size_t i = 0; i < hs->n; i++)
		halving_body(sb, FMT_HTML, &hs->v[i]);
	lb_strbuf_adds(sb, "</section>\n");
}

void report_halving_csv(struct lb_strbuf *sb, const struct report_halvings *hs)
{
	lb_strbuf_adds(sb, "halving,sweep,rung,steps,group,layout_id,label,micro_batch,tp,pp,dp,"
			   "checkpointing,verdict,failure_class,rank,n_steps,median_s,cut_layout,"
			   "cut_median_s,slowdown,p_value,significant,gpu_seconds\n");
	for (size_t i = 0; i < hs->n; i++) {
		const struct report_halving *h = &hs->v[i];
		for (size_t k = 0; k < h->n_members; k++) {
			const struct report_halving_member *m = &h->members[k];
			lb_strbuf_addf(sb, "%ld,", h->id);
			render_csv_field(sb, h->sweep);
			lb_strbuf_addf(sb, ",%d,%d,", m->rung, m->steps);
			render_csv_field(sb, m->grp);
			lb_strbuf_addf(sb, ",%s,", m->layout_id);
			render_csv_field(sb, m->label);
			lb_strbuf_addf(sb, ",%d,%d,%d,%d,%s,%s,%s,", m->micro_batch, m->tp, m->pp,
				       m->dp, m->checkpointing, m->verdict, m->failure_class);
			if (m->rank > 0)
				lb_strbuf_addf(sb, "%d", m->rank);
			lb_strbuf_adds(sb, ",");
			if (m->n_steps >= 0)
				lb_strbuf_addf(sb, "%d", m->n_steps);
			lb_strbuf_adds(sb, ",");
			if (m->median > 0)
				lb_strbuf_addf(sb, "%.6g", m->median);
			lb_strbuf_addf(sb, ",%s,", m->cut_layout);
			if (m->cut_median > 0)
				lb_strbuf_addf(sb, "%.6g", m->cut_median);
			lb_strbuf_adds(sb, ",");
			if (!isnan(m->slowdown))
				lb_strbuf_addf(sb, "%.6g", m->slowdown);
			lb_strbuf_adds(sb, ",");
			if (m->p >= 0)
				lb_strbuf_addf(sb, "%.6g", m->p);
			lb_strbuf_adds(sb, ",");
			if (m->significant >= 0)
				lb_strbuf_addf(sb, "%d", m->significant);
			lb_strbuf_adds(sb, ",");
			if (m->gpu_seconds >= 0)
				lb_strbuf_addf(sb, "%.6g", m->gpu_seconds);
			lb_strbuf_adds(sb, "\n");
		}
	}
}
