/*
 * `layoutbench sql`: run a query on the results database and print the rows
 * (results/sql.h). Every format streams: a table's column widths come from its first
 * rows (TABLE_SAMPLE_ROWS), so a query of any size prints in the memory of that sample. On
 * a read-only handle a statement that would write (sqlite3_stmt_readonly) or attach is
 * refused before it runs, with a message that names it and --write.
 */
#include "results/sql.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "results/db.h"

int sql_format_parse(const char *name, enum sql_format *out)
{
	static const char *const names[] = {
	    [SQL_TABLE] = "table", [SQL_CSV] = "csv", [SQL_TSV] = "tsv"};
	int i = lb_name_index(names, (int)(sizeof(names) / sizeof(names[0])), name);

	if (i < 0)
		return -1;
	*out = (enum sql_format)i;
	return 0;
}

/* Rows of a table whose cells set the column widths; the rest are printed as they come,
 * padded to those widths (a wider cell pushes its row's later columns right), so that
 * memory stays that of the sample whatever the query returns. */
#define TABLE_SAMPLE_ROWS  1000
#define TABLE_SAMPLE_BYTES (8u << 20)

/* One statement's printing: the output, its format, and whether values are made visible
 * for a terminal (lb_strbuf_add_visible). */
struct printer {
	FILE *out;
	enum sql_format fmt;
	int visible;	       /* 1: control characters and invalid UTF-8 escaped */
	struct lb_strbuf cell; /* scratch: one escaped value */
	int out_errno;	       /* the first write error's errno; 0 none */
};

/* v as it is printed: escaped where the printer makes values visible (owned by pr). */
static const char *shown(struct printer *pr, const char *v)
{
	if (!pr->visible || !lb_text_needs_escape(v, strlen(v), 0))
		return v;
	pr->cell.len = 0;
	if (pr->cell.buf)
		pr->cell.buf[0] = '\0';
	lb_strbuf_add_visible(&pr->cell, v, strlen(v), 0);
	return pr->cell.failed ? "?" : lb_strbuf_str(&pr->cell);
}

/* TSV: tabs and newlines inside a value become spaces (the format has no quoting). */
static void put_tsv(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, out);
}

/* After a row: 0, or -1 with the write error's errno kept (a full disk, a closed pipe). */
static int check_out(struct printer *pr)
{
	if (!ferror(pr->out))
		return 0;
	if (!pr->out_errno)
		pr->out_errno = errno ? errno : EIO;
	return -1;
}

static int put_row(struct printer *pr, const char *const *v, int n)
{
	for (int i = 0; i < n; i++) {
		const char *s = shown(pr, v[i]);
		if (i)
			fputc(pr->fmt == SQL_CSV ? ',' : '\t', pr->out);
		if (pr->fmt == SQL_CSV)
			lb_csv_put(pr->out, s);
		else
			put_tsv(pr->out, s);
	}
	fputc('\n', pr->out);
	return check_out(pr);
}

/* Display width in characters (UTF-8 continuation bytes do not count). */
static size_t width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void pad(FILE *out, size_t n)
{
	while (n--)
		fputc(' ', out);
}

/* One table row of n cells padded to the widths w (the last cell unpadded). */
static int put_table_row(struct printer *pr, const char *const *v, const size_t *w, int n)
{
	for (int c = 0; c < n; c++) {
		fputs(v[c], pr->out);
		if (c + 1 < n) {
			size_t cw = width(v[c]);
			pad(pr->out, (cw < w[c] ? w[c] - cw : 0) + 2);
		}
	}
	fputc('\n', pr->out);
	return check_out(pr);
}

/* The cells sampled for the widths, row-major, header first; each malloc'd (made visible
 * already). */
struct sample {
	char **cells;
	size_t n, cap, bytes;
};

static int sample_add(struct sample *sm, const char *v)
{
	char *c;

	if (sm->n == sm->cap) {
		size_t cap = sm->cap ? 2 * sm->cap : 64;
		char **nc = realloc(sm->cells, cap * sizeof(*nc));
		if (!nc)
			return -1;
		sm->cells = nc;
		sm->cap = cap;
	}
	c = strdup(v);
	if (!c)
		return -1;
	sm->cells[sm->n++] = c;
	sm->bytes += strlen(v) + 1;
	return 0;
}

static void sample_release(struct sample *sm)
{
	for (size_t k = 0; k < sm->n; k++)
		free(sm->cells[k]);
	free(sm->cells);
	memset(sm, 0, sizeof(*sm));
}

/* Print the sample (header, rule, rows) with widths w computed from it. */
static int flush_sample(struct printer *pr, const struct sample *sm, size_t *w, int n)
{
	for (size_t k = 0; k < sm->n; k++)
		if (width(sm->cells[k]) > w[k % (size_t)n])
			w[k % (size_t)n] = width(sm->cells[k]);
	for (size_t r = 0; r * (size_t)n < sm->n; r++) {
		if (put_table_row(pr, (const char *const *)sm->cells + r * (size_t)n, w, n))
			return -1;
		if (r == 0) { /* rule under the header */
			for (int j = 0; j < n; j++) {
				for (size_t d = 0; d < w[j]; d++)
					fputc('-', pr->out);
				fputs(j + 1 < n ? "  " : "\n", pr->out);
			}
		}
	}
	return check_out(pr);
}

/* One statement's rows. Returns SQLITE_OK, an SQLite error code, or SQLITE_IOERR when
 * writing the output failed (pr->out_errno says why). */
static int print_stmt(sqlite3_stmt *st, struct printer *pr)
{
	int n = sqlite3_column_count(st), rc, i, streaming = 0, werr = 0;
	struct sample sm = {0};
	size_t *w = calloc((size_t)n, sizeof(*w));
	const char **row = calloc((size_t)n, sizeof(*row));

	if (!row || !w) {
		rc = SQLITE_NOMEM;
		goto out_free;
	}
	for (i = 0; i < n; i++)
		row[i] = sqlite3_column_name(st, i);
	rc = SQLITE_NOMEM; /* what werr -2 means */
	if (pr->fmt != SQL_TABLE)
		werr = put_row(pr, row, n);
	for (i = 0; i < n && pr->fmt == SQL_TABLE && !werr; i++)
		if (sample_add(&sm, shown(pr, row[i])))
			werr = -2;
	while (!werr && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (i = 0; i < n; i++) {
			const char *v = (const char *)sqlite3_column_text(st, i);
			row[i] = v ? v : (pr->fmt == SQL_TABLE ? "NULL" : "");
		}
		if (pr->fmt != SQL_TABLE) {
			werr = put_row(pr, row, n);
			continue;
		}
		if (streaming) { /* each cell printed before the next is made visible */
			for (i = 0; i < n; i++) {
				const char *v = shown(pr, row[i]);
				size_t cw = width(v);
				fputs(v, pr->out);
				if (i + 1 < n)
					pad(pr->out, (cw < w[i] ? w[i] - cw : 0) + 2);
			}
			fputc('\n', pr->out);
			werr = check_out(pr);
			continue;
		}
		for (i = 0; i < n && !werr; i++)
			if (sample_add(&sm, shown(pr, row[i])))
				werr = -2;
		if (!werr &&
		    (sm.n / (size_t)n > TABLE_SAMPLE_ROWS || sm.bytes > TABLE_SAMPLE_BYTES)) {
			werr = flush_sample(pr, &sm, w, n);
			sample_release(&sm);
			streaming = 1;
		}
	}
	if (!werr && pr->fmt == SQL_TABLE && !streaming && n > 0)
		werr = flush_sample(pr, &sm, w, n);
	if (werr == -1)
		rc = SQLITE_IOERR;
	else if (!werr)
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
out_free:
	sample_release(&sm);
	free(w);
	free(row);
	return rc;
}

/* A statement for a message: blanks collapsed, at most 60 characters, up to the first ';'
 * when the statement did not compile (n = 0: its length is unknown). */
static void quote_stmt(const char *s, size_t n, char *buf, size_t len)
{
	size_t o = 0, max = len < 64 ? len - 4 : 60;
	int blank = 0;

	if (!n)
		n = strcspn(s, ";");
	while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r' ||
		     s[n - 1] == ';'))
		n--;
	size_t i;

	for (i = 0; i < n && o < max; i++) {
		int b = s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r';
		if (b && blank)
			continue;
		blank = b;
		buf[o++] = b ? ' ' : s[i];
	}
	if (i < n) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = 0;
}

/* On a read-only handle (results_db_open RESULTS_DB_READ): the refusal of a statement
 * that would write, attach or detach. */
static void refuse(const char *stmt, size_t n, char *err, size_t errlen)
{
	char q[80];

	quote_stmt(stmt, n, q, sizeof(q));
	snprintf(err, errlen,
		 "'sql' is read-only: '%s' would change the database (use --write to allow it)", q);
}

int sql_print(sqlite3 *db, const char *query, enum sql_format fmt, FILE *out, char *err,
	      size_t errlen)
{
	const char *p = query, *tail = NULL;
	int printed = 0, readonly = sqlite3_db_readonly(db, "main") == 1, ret = 0;
	struct printer pr = {out, fmt, 0, LB_STRBUF_INIT, 0};

	/* a table is for reading: what a run log's label could do to a terminal is shown,
	 * not done; CSV and TSV are data, kept exact unless they go to a terminal */
	pr.visible = fmt == SQL_TABLE || isatty(fileno(out));
	while (p && *p) {
		sqlite3_stmt *st = NULL;
		int rc;

		if (sqlite3_prepare_v2(db, p, -1, &st, &tail) != SQLITE_OK) {
			if (readonly && sqlite3_errcode(db) == SQLITE_AUTH) /* ATTACH, DETACH */
				refuse(p, 0, err, errlen);
			else
				snprintf(err, errlen, "%s", sqlite3_errmsg(db));
			ret = -1;
			goto out_release;
		}
		if (st && readonly && !sqlite3_stmt_readonly(st)) {
			refuse(p, (size_t)(tail - p), err, errlen);
			sqlite3_finalize(st);
			ret = -1;
			goto out_release;
		}
		p = tail;
		if (!st) /* whitespace or a comment */
			continue;
		if (sqlite3_column_count(st) > 0) {
			if (printed++)
				fputc('\n', out);
			rc = print_stmt(st, &pr);
		} else {
			while ((rc = sqlite3_step(st)) == SQLITE_ROW)
				;
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
		sqlite3_finalize(st);
		if (pr.out_errno)
			break;
		if (rc != SQLITE_OK) {
			snprintf(err, errlen, "%s",
				 rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
			ret = -1;
			goto out_release;
		}
	}
	if ((fflush(out) || ferror(out)) && !pr.out_errno)
		pr.out_errno = errno ? errno : EIO;
	if (pr.out_errno) {
		snprintf(err, errlen, "%s", strerror(pr.out_errno));
		ret = -2;
	}
out_release:
	lb_strbuf_release(&pr.cell);
	return ret;
}
