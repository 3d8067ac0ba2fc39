/*
 * `layoutbench sql`: run a query on the results database and print the rows
 * (results/sql.h). Tables are buffered to align their columns; CSV and TSV stream. On a
 * read-only handle a statement that would write (sqlite3_stmt_readonly) or attach is
 * refused before it runs, with a message that names it and --write.
 */
#include "results/sql.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "results/db.h"

int sql_format_parse(const char *name, enum sql_format *out)
{
	if (!strcmp(name, "table"))
		*out = SQL_TABLE;
	else if (!strcmp(name, "csv"))
		*out = SQL_CSV;
	else if (!strcmp(name, "tsv"))
		*out = SQL_TSV;
	else
		return -1;
	return 0;
}

static void put_csv(FILE *out, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

/* TSV: tabs and newlines inside a value become spaces (the format has no quoting). */
static void put_tsv(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, out);
}

static void put_row(FILE *out, enum sql_format fmt, const char *const *v, int n)
{
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(fmt == SQL_CSV ? ',' : '\t', out);
		if (fmt == SQL_CSV)
			put_csv(out, v[i]);
		else
			put_tsv(out, v[i]);
	}
	fputc('\n', out);
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

static int print_stmt(sqlite3_stmt *st, enum sql_format fmt, FILE *out)
{
	int n = sqlite3_column_count(st), rc, i;
	char **cells = NULL, **nc; /* table: every cell, row-major, header first */
	size_t ncells = 0, cap = 0, *w = NULL;
	const char **row = calloc((size_t)n, sizeof(*row));

	if (!row)
		return SQLITE_NOMEM;
	for (i = 0; i < n; i++)
		row[i] = sqlite3_column_name(st, i);
	if (fmt != SQL_TABLE)
		put_row(out, fmt, row, n);
	else {
		cap = (size_t)n * 16;
		cells = malloc(cap * sizeof(*cells));
		if (!cells) {
			free(row);
			return SQLITE_NOMEM;
		}
		for (i = 0; i < n; i++)
			cells[ncells++] = strdup(row[i]);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (i = 0; i < n; i++) {
			const char *v = (const char *)sqlite3_column_text(st, i);
			row[i] = v ? v : (fmt == SQL_TABLE ? "NULL" : "");
		}
		if (fmt != SQL_TABLE) {
			put_row(out, fmt, row, n);
			continue;
		}
		if (ncells + (size_t)n > cap) {
			cap = 2 * cap + (size_t)n;
			nc = realloc(cells, cap * sizeof(*cells));
			if (!nc) {
				rc = SQLITE_NOMEM;
				break;
			}
			cells = nc;
		}
		for (i = 0; i < n; i++)
			cells[ncells++] = strdup(row[i]);
	}
	if (fmt == SQL_TABLE && n > 0 && (w = calloc((size_t)n, sizeof(*w)))) {
		for (size_t k = 0; k < ncells; k++)
			if (cells[k] && width(cells[k]) > w[k % (size_t)n])
				w[k % (size_t)n] = width(cells[k]);
		for (size_t k = 0; k < ncells; k++) {
			size_t c = k % (size_t)n;
			const char *v = cells[k] ? cells[k] : "";
			fputs(v, out);
			if (c + 1 < (size_t)n) {
				pad(out, w[c] - width(v) + 2);
			} else {
				fputc('\n', out);
				if (k + 1 == (size_t)n) { /* rule under the header */
					for (size_t j = 0; j < (size_t)n; j++) {
						for (size_t d = 0; d < w[j]; d++)
							fputc('-', out);
						fputs(j + 1 < (size_t)n ? "  " : "\n", out);
					}
				}
			}
		}
	}
	for (size_t k = 0; k < ncells; k++)
		free(cells[k]);
	free(cells);
	free(w);
	free(row);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
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
	int printed = 0, readonly = sqlite3_db_readonly(db, "main") == 1;

	while (p && *p) {
		sqlite3_stmt *st = NULL;
		int rc;

		if (sqlite3_prepare_v2(db, p, -1, &st, &tail) != SQLITE_OK) {
			if (readonly && sqlite3_errcode(db) == SQLITE_AUTH) /* ATTACH, DETACH */
				refuse(p, 0, err, errlen);
			else
				snprintf(err, errlen, "%s", sqlite3_errmsg(db));
			return -1;
		}
		if (st && readonly && !sqlite3_stmt_readonly(st)) {
			refuse(p, (size_t)(tail - p), err, errlen);
			sqlite3_finalize(st);
			return -1;
		}
		p = tail;
		if (!st) /* whitespace or a comment */
			continue;
		if (sqlite3_column_count(st) > 0) {
			if (printed++)
				fputc('\n', out);
			rc = print_stmt(st, fmt, out);
		} else {
			while ((rc = sqlite3_step(st)) == SQLITE_ROW)
				;
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
		if (rc != SQLITE_OK) {
			snprintf(err, errlen, "%s", sqlite3_errmsg(db));
			sqlite3_finalize(st);
			return -1;
		}
		sqlite3_finalize(st);
	}
	return 0;
}
