/*
 * The results database: the one place it is opened, for reading (read-only, no
 * migrations, immutable when the folder cannot be written) or for writing (WAL, a busy
 * timeout, the schema embedded from results/schema.sql migrated step by step in one
 * exclusive transaction, PRAGMA user_version), and the shared helpers for sweeps, layouts
 * and jobs (results/db.h).
 */
#include "results/db.h"

#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/embed.h"
#include "results/upgrade.h"

const char *results_default_db(void)
{
	const char *p = getenv("LAYOUTBENCH_DB");

	return p && *p ? p : "results.db";
}

int results_schema_version(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = -1;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * A schema text is a list of parts, each from its line to the next part's line: steps,
 * at lines "-- migrate: N", and the views, at the line "-- views" (results/schema.sql).
 * Find the next part's line at or after p; sets *n to the step's N, or to 0 for the views,
 * and returns the line's start, or NULL when there is none.
 */
static const char *next_part(const char *p, long *n)
{
	static const char mark[] = "-- migrate:", views[] = "-- views";
	const size_t len = sizeof(mark) - 1, vlen = sizeof(views) - 1;

	while (p && *p) {
		if (!strncmp(p, mark, len)) {
			char *end;
			long v = strtol(p + len, &end, 10);
			if (end != p + len && v > 0 && v < 100000) {
				*n = v;
				return p;
			}
		}
		if (!strncmp(p, views, vlen) && (p[vlen] == '\n' || !p[vlen])) {
			*n = 0;
			return p;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* The part whose line starts at p: its body after that line (NULL when the text ends
 * there) and its length; the next part's line (NULL: none) and number go to *next, *next_n. */
static const char *part_body(const char *p, size_t *len, const char **next, long *next_n)
{
	const char *body = strchr(p, '\n');

	*next_n = 0;
	*next = body ? next_part(body + 1, next_n) : NULL;
	*len = !body ? 0 : *next ? (size_t)(*next - body) : strlen(body);
	return body;
}

/* Check that the steps of schema are numbered 1, 2, ... in order, with at most one views
 * part; the last number goes to *last (0 when there is none), the views' body and length
 * to *views, *vlen (NULL, 0: none). Returns 0, or -1 with err set. */
static int check_parts(const char *schema, long *last, const char **views, size_t *vlen, char *err,
		       size_t errlen)
{
	long n = 0, prev = 0, next_n;
	const char *p, *next, *body;
	size_t len;

	*views = NULL;
	*vlen = 0;
	for (p = next_part(schema, &n); p; p = next, n = next_n) {
		body = part_body(p, &len, &next, &next_n);
		if (!n) {
			if (*views) {
				snprintf(err, errlen, "schema: a second '-- views' part");
				return -1;
			}
			*views = body;
			*vlen = len;
			continue;
		}
		if (n != prev + 1) {
			snprintf(err, errlen, "schema: migration step %ld follows step %ld", n,
				 prev);
			return -1;
		}
		prev = n;
	}
	*last = prev;
	return 0;
}

/* Run the SQL text sql of len bytes, then the statement after (may be ""). 0, or -1 with
 * err set to what (a step's or the views' name) and SQLite's message. */
static int exec_part(sqlite3 *db, const char *sql, size_t len, const char *after, const char *what,
		     char *err, size_t errlen)
{
	char *msg = NULL, *text = sqlite3_mprintf("%.*s;%s", (int)len, sql, after);

	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "schema migration %s: %s", what,
			 msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		sqlite3_free(text);
		return -1;
	}
	sqlite3_free(text);
	return 0;
}

/* Drop each view that the views part (len bytes) creates at a line "CREATE VIEW name",
 * where the database has it: steps may then change the tables the views read. */
static int drop_views(sqlite3 *db, const char *views, size_t len, char *err, size_t errlen)
{
	static const char create[] = "\nCREATE VIEW ";
	const char *end = views + len;

	for (const char *p = views; p && p < end; p = strchr(p + 1, '\n')) {
		const char *name = p + sizeof(create) - 1;
		size_t n;
		char drop[160];

		if ((size_t)(end - p) < sizeof(create) || strncmp(p, create, sizeof(create) - 1))
			continue;
		n = strcspn(name, " \n");
		snprintf(drop, sizeof(drop), "DROP VIEW IF EXISTS \"%.*s\"", (int)n, name);
		if (exec_part(db, drop, strlen(drop), "", "(dropping the views)", err, errlen))
			return -1;
	}
	return 0;
}

/*
 * Every step runs inside one BEGIN EXCLUSIVE transaction that reads user_version again
 * first: two processes opening a new database at once (parallel collects) queue on the
 * lock (busy timeout), and the second finds the steps applied by the first. The views are
 * dropped before the steps and created after them, in the same transaction.
 */
int results_migrate(sqlite3 *db, const char *schema, char *err, size_t errlen)
{
	int have = results_schema_version(db);
	long n = 0, last = 0, next_n;
	const char *p, *next, *body, *views;
	size_t len, vlen;
	char *msg = NULL;

	if (have < 0) {
		snprintf(err, errlen, "cannot read the schema version: %s", sqlite3_errmsg(db));
		return -1;
	}
	if (check_parts(schema, &last, &views, &vlen, err, errlen))
		return -1;
	if (have >= last)
		return 0;
	if (sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "schema migration: cannot lock the database: %s",
			 msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return -1;
	}
	have = results_schema_version(db); /* another process may have migrated meanwhile */
	if (have < 0) {
		snprintf(err, errlen, "cannot read the schema version: %s", sqlite3_errmsg(db));
		goto out_rollback;
	}
	if (have >= last)
		goto out_commit;
	if (views && drop_views(db, views, vlen, err, errlen))
		goto out_rollback;
	for (p = next_part(schema, &n); p; p = next, n = next_n) {
		char after[48], what[48];

		body = part_body(p, &len, &next, &next_n);
		if (!n || n <= have || !body)
			continue;
		snprintf(after, sizeof(after), "PRAGMA user_version = %ld;", n);
		snprintf(what, sizeof(what), "to version %ld", n);
		if (exec_part(db, body, len, after, what, err, errlen))
			goto out_rollback;
	}
	if (views && exec_part(db, views, vlen, "", "(creating the views)", err, errlen))
		goto out_rollback;
out_commit:
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "schema migration: commit: %s",
			 msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		goto out_rollback;
	}
	return 0;
out_rollback:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* A primary result code that says the file or its folder cannot be written or opened. */
static int is_access_error(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_READONLY || rc == SQLITE_CANTOPEN || rc == SQLITE_PERM;
}

/* Readers may not attach or detach databases (sql without --write). */
static int deny_attach(void *u, int action, const char *a, const char *b, const char *c,
		       const char *d)
{
	(void)u;
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK;
}

/* "file:" URI of path with immutable=1 (the characters URIs reserve escaped). */
static int immutable_uri(const char *path, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	if (len < 32)
		return -1;
	o = (size_t)snprintf(buf, len, "file:");
	for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
		if (o + 4 >= len)
			return -1;
		if (*s == '%' || *s == '?' || *s == '#' || *s <= ' ' || *s >= 0x7f) {
			buf[o++] = '%';
			buf[o++] = hex[*s >> 4];
			buf[o++] = hex[*s & 15];
		} else {
			buf[o++] = (char)*s;
		}
	}
	if (o + sizeof("?immutable=1") > len)
		return -1;
	memcpy(buf + o, "?immutable=1", sizeof("?immutable=1"));
	return 0;
}

/* 1 after the message when schema version v is newer than this build writes, else 0. */
static int newer_schema(const char *path, int v, char *err, size_t errlen)
{
	if (v <= RESULTS_SCHEMA_VERSION)
		return 0;
	snprintf(err, errlen,
		 "database '%s' has schema version %d, newer than this build's %d; use a newer "
		 "layoutbench",
		 path, v, RESULTS_SCHEMA_VERSION);
	return 1;
}

/*
 * Read-only open: SQLITE_OPEN_READONLY, and when the first read fails because the folder
 * cannot hold the -wal/-shm files (or the file cannot be locked), the immutable=1 URI,
 * which reads the file as it is on disk. Never creates, writes or migrates.
 */
static int open_read(const char *path, sqlite3 **out, char *err, size_t errlen)
{
	sqlite3 *h = NULL;
	char uri[4200];
	struct stat sb;
	int v, rc;

	*out = NULL;
	if (stat(path, &sb)) {
		if (errno == ENOENT)
			snprintf(err, errlen,
				 "database '%s' does not exist; collect or import runs first, or "
				 "give --db",
				 path);
		else
			snprintf(err, errlen, "database '%s': %s", path, strerror(errno));
		return -1;
	}
	for (int immutable = 0; immutable < 2; immutable++) {
		const char *name = path;
		int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;

		if (immutable) {
			if (immutable_uri(path, uri, sizeof(uri)))
				break;
			name = uri;
			flags |= SQLITE_OPEN_URI;
		}
		rc = sqlite3_open_v2(name, &h, flags, NULL);
		if (rc == SQLITE_OK) {
			sqlite3_busy_timeout(h, RESULTS_BUSY_TIMEOUT_MS);
			sqlite3_exec(h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
			v = results_schema_version(h);
			if (v >= 0)
				goto out_opened;
			rc = sqlite3_extended_errcode(h);
		}
		if (!immutable && is_access_error(rc)) {
			sqlite3_close(h);
			h = NULL;
			continue;
		}
		snprintf(err, errlen, "database '%s': %s%s", path,
			 h ? sqlite3_errmsg(h) : "cannot open",
			 (rc & 0xff) == SQLITE_NOTADB ? " (is it an SQLite database?)" : "");
		sqlite3_close(h);
		return -1;
	}
	snprintf(err, errlen, "database '%s': %s", path, h ? sqlite3_errmsg(h) : "cannot open");
	sqlite3_close(h);
	return -1;
out_opened:
	if (newer_schema(path, v, err, errlen))
		goto out_close;
	if (v < RESULTS_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "database '%s': schema version %d is older than this layoutbench's %d; "
			 "run 'layoutbench collect' (or any writing command) once with write "
			 "access to upgrade it",
			 path, v, RESULTS_SCHEMA_VERSION);
		goto out_close;
	}
	sqlite3_set_authorizer(h, deny_attach, NULL);
	*out = h;
	return 0;
out_close:
	sqlite3_close(h);
	return -1;
}

/*
 * PRAGMA journal_mode = WAL, retried for up to the busy timeout: on a new file two
 * openers that both hold the shared lock get SQLITE_BUSY at once (SQLite does not call
 * the busy handler where waiting could deadlock), so the one that lost waits and tries
 * again, by when the file is in WAL mode.
 */
static int set_wal(sqlite3 *h, char **msg)
{
	const struct timespec pause = {0, 5 * 1000 * 1000}; /* 5 ms */
	int rc;

	for (long waited_ms = 0;; waited_ms += 5) {
		rc = sqlite3_exec(h, "PRAGMA journal_mode = WAL", NULL, NULL, msg);
		if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= RESULTS_BUSY_TIMEOUT_MS)
			return rc;
		sqlite3_free(*msg);
		*msg = NULL;
		nanosleep(&pause, NULL);
	}
}

int results_db_write_problem(const char *path, char *err, size_t errlen)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char p[4200], dir[4200];
	struct stat sb;
	int missing = 0;
	char *slash;

	if (stat(path, &sb))
		return 0; /* a new file: SQLite's own error names what is wrong */
	for (size_t k = 0; k < sizeof(suffix) / sizeof(suffix[0]); k++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[k]);
		if (stat(p, &sb)) {
			missing = 1;
			continue;
		}
		if (access(p, W_OK))
			goto out_denied;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	snprintf(p, sizeof(p), "%s", dir);
	if (missing && !stat(p, &sb) && access(p, W_OK))
		goto out_denied;
	return 0;
out_denied:
	snprintf(err, errlen,
		 "database '%s': no write permission on '%s' (owner uid %ld, mode %04o); writing "
		 "needs write access to the database, its -wal and -shm files and its folder "
		 "(ask its owner, or copy the database and give --db the copy)",
		 path, p, (long)sb.st_uid, (unsigned)(sb.st_mode & 07777));
	return 1;
}

/* What SQL alone cannot fill in after schema step 2 (results/upgrade.h), in one
 * transaction. 0, or -1 with err set (rolled back). */
static int upgrade_runs(sqlite3 *db, char *err, size_t errlen)
{
	if (results_begin(db, err, errlen))
		return -1;
	if (results_upgrade_runs(db, err, errlen)) {
		results_rollback(db);
		return -1;
	}
	return results_commit(db, err, errlen);
}

/* Read-write open: create if needed, WAL, busy timeout, foreign keys, migrations. */
static int open_write(const char *path, sqlite3 **out, char *err, size_t errlen)
{
	static const char hint[] = " (writing needs write access to the file and its folder)";
	sqlite3 *h = NULL;
	const char *schema;
	char *msg = NULL;
	int v, rc;

	*out = NULL;
	/* SQLite would open a file it may not write read-only, or with a read-only -shm, and
	 * fail each write later as "read-only": name the permission now */
	if (results_db_write_problem(path, err, errlen))
		return -1;
	rc = sqlite3_open_v2(
	    path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "database '%s': %s%s", path,
			 h ? sqlite3_errmsg(h) : "cannot open", is_access_error(rc) ? hint : "");
		goto out_close;
	}
	sqlite3_busy_timeout(h, RESULTS_BUSY_TIMEOUT_MS);
	rc = set_wal(h, &msg);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(h, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;", NULL,
				  NULL, &msg);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "database '%s': %s%s", path, msg ? msg : sqlite3_errmsg(h),
			 is_access_error(sqlite3_extended_errcode(h)) ? hint : "");
		sqlite3_free(msg);
		goto out_close;
	}
	v = results_schema_version(h);
	if (v < 0) {
		snprintf(err, errlen, "database '%s': %s (is it an SQLite database?)", path,
			 sqlite3_errmsg(h));
		goto out_close;
	}
	if (newer_schema(path, v, err, errlen))
		goto out_close;
	if (v < RESULTS_SCHEMA_VERSION) {
		char merr[512];
		schema = lb_embedded("results/schema.sql", NULL);
		if (!schema) {
			snprintf(err, errlen, "results/schema.sql is not embedded in this build");
			goto out_close;
		}
		if (results_migrate(h, schema, merr, sizeof(merr)) ||
		    (v >= 1 && v < 2 && upgrade_runs(h, merr, sizeof(merr)))) {
			snprintf(err, errlen, "database '%s': %s", path, merr);
			goto out_close;
		}
	}
	*out = h;
	return 0;
out_close:
	sqlite3_close(h);
	return -1;
}

/* What is wrong with a database path before SQLite tries it (its own word for a folder,
 * or a missing parent folder, is "unable to open database file" or "disk I/O error"):
 * 0 when nothing is, else -1 with err saying what and the fix. */
static int check_db_path(const char *path, enum results_db_mode mode, char *err, size_t errlen)
{
	struct stat sb;
	char dir[4096];
	const char *slash;

	if (!*path) {
		snprintf(err, errlen, "the database path is empty (give --db FILE)");
		return -1;
	}
	if (stat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode)) {
			snprintf(err, errlen,
				 "database '%s' is a folder, not a database file (give a file: "
				 "--db %s%sresults.db)",
				 path, path, path[strlen(path) - 1] == '/' ? "" : "/");
			return -1;
		}
		return 0;
	}
	if (errno != ENOENT || mode == RESULTS_DB_READ)
		return 0; /* the open says what it is (a missing file: open_read) */
	slash = strrchr(path, '/');
	if (!slash)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path);
	if (stat(dir, &sb) != 0) {
		snprintf(err, errlen,
			 "database '%s': its folder '%s' does not exist (create it: mkdir -p '%s'; "
			 "or give another --db)",
			 path, dir, dir);
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "database '%s': '%s' is not a folder (give another --db)",
			 path, dir);
		return -1;
	}
	return 0;
}

int results_db_open(const char *path, enum results_db_mode mode, sqlite3 **db, char *err,
		    size_t errlen)
{
	if (!path)
		path = results_default_db();
	*db = NULL;
	if (check_db_path(path, mode, err, errlen))
		return -1;
	return mode == RESULTS_DB_READ ? open_read(path, db, err, errlen)
				       : open_write(path, db, err, errlen);
}

int results_open(const char *path, sqlite3 **db, char *err, size_t errlen)
{
	return results_db_open(path, RESULTS_DB_WRITE, db, err, errlen);
}

void results_close(sqlite3 *db)
{
	if (db)
		sqlite3_close(db);
}

static int exec_step(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	snprintf(err, errlen, "%s: %s", sql, sqlite3_errmsg(db));
	return -1;
}

int results_begin(sqlite3 *db, char *err, size_t errlen)
{
	return exec_step(db, "BEGIN IMMEDIATE", err, errlen);
}

int results_commit(sqlite3 *db, char *err, size_t errlen)
{
	return exec_step(db, "COMMIT", err, errlen);
}

void results_rollback(sqlite3 *db)
{
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

int results_upsert_sweep(sqlite3 *db, const char *name, const char *source, const char *spec_path,
			 const char *spec_text, char *err, size_t errlen)
{
	static const char sql[] =
	    "INSERT INTO sweeps (name, source, spec_path, spec_text) VALUES (?1, ?2, ?3, ?4) "
	    "ON CONFLICT (name) DO UPDATE SET source = excluded.source, "
	    "spec_path = COALESCE(excluded.spec_path, spec_path), "
	    "spec_text = COALESCE(excluded.spec_text, spec_text)";
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, source, -1, SQLITE_TRANSIENT);
		results_bind_text(st, 3, spec_path);
		results_bind_text(st, 4, spec_text);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		return 0;
	snprintf(err, errlen, "sweep '%s': %s", name, sqlite3_errmsg(db));
	return -1;
}

char *results_db_layout_columns(const char *alias, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int f = 0; f < LB_NFIELDS && used < len; f++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", f ? ", " : "",
					 alias ? alias : "", alias ? "." : "", lb_fields[f].column);
	return buf;
}

int results_db_rows(sqlite3_stmt *st, size_t sz, int (*row)(sqlite3_stmt *st, void *elem), void **v,
		    size_t *n)
{
	size_t cap = *n;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			size_t c = cap ? 2 * cap : 16;
			void *nv = realloc(*v, c * sz);
			if (!nv)
				return -1;
			*v = nv;
			cap = c;
		}
		void *elem = (char *)*v + *n * sz;
		memset(elem, 0, sz);
		++*n;
		if (row(st, elem))
			return -1;
	}
	return rc;
}

/* "[7,8,8,7]" (a layouts row's stage_layers) into l; NULL or "": the rule. 0, or -1. */
static int parse_split(const char *s, struct lb_layout *l)
{
	l->n_stage_layers = 0;
	if (!s || !*s)
		return 0;
	if (*s++ != '[')
		return -1;
	while (*s && *s != ']') {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > 1000000 || l->n_stage_layers == LB_MAX_STAGES)
			return -1;
		l->stage_layers[l->n_stage_layers++] = (int)v;
		s = end;
		if (*s == ',')
			s++;
	}
	return *s == ']' ? 0 : -1;
}

int results_db_layout_read(sqlite3_stmt *st, int col, struct lb_layout *l, char *err, size_t errlen)
{
	lb_layout_init(l);
	for (int f = 0; f < LB_NFIELDS; f++, col++) {
		const struct lb_field_info *fi = &lb_fields[f];
		const char *t = (const char *)sqlite3_column_text(st, col);
		int v;

		if (sqlite3_column_type(st, col) == SQLITE_NULL && fi->kind != LB_FK_SPLIT)
			continue; /* a run setting no run gave: the default */
		switch (fi->kind) {
		case LB_FK_NAME:
			snprintf(l->model.name, sizeof(l->model.name), "%s", t ? t : "");
			break;
		case LB_FK_ENUM:
			if ((v = lb_field_enum_index(f, t)) < 0) {
				snprintf(err, errlen, "%s '%s' is not a name it knows", fi->column,
					 t ? t : "");
				return -1;
			}
			lb_field_set(l, f, v);
			break;
		case LB_FK_SPLIT:
			if (parse_split(t, l)) {
				snprintf(err, errlen, "%s '%s' is not a list of layers", fi->column,
					 t ? t : "");
				return -1;
			}
			break;
		default:
			lb_field_set(l, f, sqlite3_column_int64(st, col));
		}
	}
	return col;
}

int results_upsert_layout_id(sqlite3 *db, const struct lb_layout *l, const char *layout_id,
			     const char *label)
{
	char sql[4096], canon[4096], t[LB_MAX_STAGES * 12 + 3]; /* 64 stages fit */
	sqlite3_stmt *st = NULL;
	size_t used;
	int rc, i = 1, f;

	used = (size_t)snprintf(sql, sizeof(sql), "INSERT INTO layouts (layout_id");
	for (f = 0; f < LB_NFIELDS; f++)
		used +=
		    (size_t)snprintf(sql + used, sizeof(sql) - used, ", %s", lb_fields[f].column);
	used += (size_t)snprintf(sql + used, sizeof(sql) - used,
				 ", gpus, canonical, label) VALUES (?1");
	for (f = 2; f <= LB_NFIELDS + 4; f++)
		used += (size_t)snprintf(sql + used, sizeof(sql) - used, ", ?%d", f);
	snprintf(sql + used, sizeof(sql) - used,
		 ") ON CONFLICT (layout_id) DO UPDATE SET label = COALESCE(label, excluded.label)");
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	lb_layout_canonical(l, canon, sizeof(canon));
	sqlite3_bind_text(st, i++, layout_id, -1, SQLITE_TRANSIENT);
	for (f = 0; f < LB_NFIELDS; f++, i++) {
		switch (lb_fields[f].kind) {
		case LB_FK_NAME:
		case LB_FK_ENUM:
			lb_field_text(l, f, t, sizeof(t));
			sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT);
			break;
		case LB_FK_SPLIT: /* a JSON array when explicit; NULL: the split rule */
			if (lb_field_shown(l, f)) {
				t[0] = '[';
				lb_field_text(l, f, t + 1, sizeof(t) - 2);
				strcat(t, "]");
				sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT);
			}
			break;
		default:
			sqlite3_bind_int64(st, i, (sqlite3_int64)lb_field_get(l, f));
		}
	}
	sqlite3_bind_int64(st, i++, (sqlite3_int64)l->tp * l->pp * l->dp);
	sqlite3_bind_text(st, i++, canon, -1, SQLITE_TRANSIENT);
	results_bind_text(st, i++, label);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int results_upsert_layout(sqlite3 *db, const struct lb_layout *l, const char *label)
{
	char id[LB_ID_LEN + 1];

	lb_layout_id(l, id);
	return results_upsert_layout_id(db, l, id, label);
}

int results_sweep_spec_text(sqlite3 *db, const char *sweep, char **text, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*text = NULL;
	if (sqlite3_prepare_v2(db, "SELECT spec_text FROM sweeps WHERE name = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		goto out_err;
	sqlite3_bind_text(st, 1, sweep, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_text(st, 0)) {
		*text = strdup((const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
		if (!*text) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	return 1;
out_err:
	snprintf(err, errlen, "spec of sweep '%s': %s", sweep, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return -1;
}

int results_sweep_check(sqlite3 *db, const char *db_path, const char *name, char *err,
			size_t errlen)
{
	sqlite3_stmt *st = NULL;
	struct lb_strbuf known = LB_STRBUF_INIT;
	int found = 0, n = 0, rc;

	if (sqlite3_prepare_v2(db, "SELECT name FROM sweeps ORDER BY name", -1, &st, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "database '%s': %s", db_path, sqlite3_errmsg(db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		if (!s)
			continue;
		if (!strcmp(s, name))
			found = 1;
		if (n < 20) /* enough to spot a misspelling; the rest as a count */
			lb_strbuf_addf(&known, "%s%s", n ? ", " : "", s);
		n++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "database '%s': %s", db_path, sqlite3_errmsg(db));
		lb_strbuf_release(&known);
		return -1;
	}
	if (n > 20)
		lb_strbuf_addf(&known, " and %d more", n - 20);
	if (!found)
		snprintf(err, errlen, "no sweep '%s' in database '%s' (known: %s)", name, db_path,
			 n ? lb_strbuf_str(&known) : "none");
	lb_strbuf_release(&known);
	return found ? 0 : 1;
}
