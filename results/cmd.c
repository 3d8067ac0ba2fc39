/*
 * The results stage's subcommands: `layoutbench collect`, `import` and `sql`. Thin
 * shells: options in, the calls of results/collect.h, results/import.h and
 * results/sql.h, a summary line out (stdout), diagnostics on stderr. collect and import
 * open the database for writing; sql opens it read-only unless --write is given.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "results/collect.h"
#include "results/db.h"
#include "results/import.h"
#include "results/sql.h"

int cmd_collect(int argc, char **argv)
{
	const char *db_path = NULL;
	struct collect_stats st = {0};
	char err[512];
	sqlite3 *db;
	int i, npaths = 0, rc = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--db")) {
			if (++i >= argc) {
				fprintf(stderr, "error: '--db' needs a path\n");
				lb_usage(argv[0]);
				return 2;
			}
			db_path = argv[i];
		} else if (!strncmp(argv[i], "--db=", 5)) {
			db_path = argv[i] + 5;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
			lb_usage(argv[0]);
			return 2;
		} else {
			npaths++;
		}
	}
	if (results_open(db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (!npaths) {
		struct stat sb;
		if (stat("runs", &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "error: 'runs': no such directory; name run directories or "
					"files to collect\n");
			rc = 1;
			goto out_close_db;
		}
		if (results_collect_path(db, "runs", &st, err, sizeof(err)))
			rc = 1;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--db")) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--db=", 5))
			continue;
		if (results_collect_path(db, argv[i], &st, err, sizeof(err)))
			rc = 1;
	}
	printf("collected %d file%s: %d new run%s, %d updated, %d unchanged; %ld step%s; "
	       "%d warning%s, %d error%s\n",
	       st.files, st.files == 1 ? "" : "s", st.runs_new, st.runs_new == 1 ? "" : "s",
	       st.runs_updated, st.runs_unchanged, st.steps, st.steps == 1 ? "" : "s", st.warnings,
	       st.warnings == 1 ? "" : "s", st.errors, st.errors == 1 ? "" : "s");
out_close_db:
	results_close(db);
	return rc;
}

/* Remove a database file that this command created and left empty, with its -wal and
 * -shm files (a failed import leaves nothing behind). */
static void remove_db(const char *path)
{
	static const char *const suffix[] = {"-wal", "-shm", "-journal"};
	char p[4096];

	for (size_t k = 0; k < sizeof(suffix) / sizeof(suffix[0]); k++)
		if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix[k]) < sizeof(p))
			unlink(p);
	unlink(path);
}

int cmd_import(int argc, char **argv)
{
	const char *db_path = NULL, *format = NULL;
	struct import_stats st = {0};
	char err[512];
	sqlite3 *db;
	struct stat sb;
	int i, nfiles = 0, rc = 0, existed;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--db") || !strcmp(a, "--format")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "error: '%s' needs a value\n", a);
				lb_usage(argv[0]);
				return 2;
			}
			if (a[2] == 'd')
				db_path = argv[++i];
			else
				format = argv[++i];
		} else if (!strncmp(a, "--db=", 5)) {
			db_path = a + 5;
		} else if (!strncmp(a, "--format=", 9)) {
			format = a + 9;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "error: unknown option '%s'\n", a);
			lb_usage(argv[0]);
			return 2;
		} else {
			nfiles++;
		}
	}
	if (!format || strcmp(format, "paper")) {
		fprintf(stderr, "error: format '%s' is not supported; use '--format paper'\n",
			format ? format : "");
		lb_usage(argv[0]);
		return 2;
	}
	if (!nfiles) {
		fprintf(stderr, "error: no file to import\n");
		lb_usage(argv[0]);
		return 2;
	}
	if (!db_path)
		db_path = results_default_db();
	existed = !stat(db_path, &sb);
	if (results_open(db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
		goto out_remove_new_db;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--db") || !strcmp(argv[i], "--format")) {
			i++;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1])
			continue;
		if (results_import_paper(db, argv[i], &st, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
		}
	}
	printf("imported %d file%s: %d runs (%d ok, %d failed); %d warning%s\n", st.files,
	       st.files == 1 ? "" : "s", st.rows, st.ok, st.failed, st.warnings,
	       st.warnings == 1 ? "" : "s");
	results_close(db);
out_remove_new_db:
	if (rc && !existed && !st.files)
		remove_db(db_path);
	return rc;
}

int cmd_sql(int argc, char **argv)
{
	const char *db_path = NULL, *query = NULL;
	enum sql_format fmt = SQL_TABLE;
	enum results_db_mode mode = RESULTS_DB_READ;
	char err[512];
	sqlite3 *db;
	struct stat sb;
	int i, rc = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--write") && !query) {
			mode = RESULTS_DB_WRITE;
		} else if (!strcmp(a, "--db") || !strcmp(a, "--format")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "error: '%s' needs a value\n", a);
				lb_usage(argv[0]);
				return 2;
			}
			if (a[2] == 'd')
				db_path = argv[++i];
			else if (sql_format_parse(argv[++i], &fmt)) {
				fprintf(stderr,
					"error: format '%s' is unknown; use table, csv or tsv\n",
					argv[i]);
				return 2;
			}
		} else if (!strncmp(a, "--db=", 5)) {
			db_path = a + 5;
		} else if (!strncmp(a, "--format=", 9)) {
			if (sql_format_parse(a + 9, &fmt)) {
				fprintf(stderr,
					"error: format '%s' is unknown; use table, csv or tsv\n",
					a + 9);
				return 2;
			}
		} else if (a[0] == '-' && a[1] && !query) {
			fprintf(stderr, "error: unknown option '%s'\n", a);
			lb_usage(argv[0]);
			return 2;
		} else if (query) {
			fprintf(stderr, "error: more than one query; quote the query as one "
					"argument\n");
			lb_usage(argv[0]);
			return 2;
		} else {
			query = a;
		}
	}
	if (!query) {
		fprintf(stderr, "error: no query given\n");
		lb_usage(argv[0]);
		return 2;
	}
	if (!db_path)
		db_path = results_default_db();
	if (stat(db_path, &sb)) {
		fprintf(stderr,
			"error: database '%s' does not exist; collect or import runs first, or "
			"give --db\n",
			db_path);
		return 1;
	}
	if (results_db_open(db_path, mode, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (sql_print(db, query, fmt, stdout, err, sizeof(err))) {
		fprintf(stderr, "error: query: %s\n", err);
		rc = 1;
	}
	results_close(db);
	return rc;
}
