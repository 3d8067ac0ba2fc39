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

#include "common/cmdline.h"
#include "common/layout.h"
#include "common/util.h"
#include "results/cmd.h"
#include "results/collect.h"
#include "results/db.h"
#include "results/import.h"
#include "results/sql.h"

/* The ids of its options (struct lb_option.id). */
enum { OPT_DB, OPT_SWEEP, OPT_FORMAT, OPT_WRITE };

static const struct lb_option collect_opts[] = {
    LB_OPTION_DB(OPT_DB),
    LB_TEXT(OPT_SWEEP, "sweep", "NAME", NULL,
	    "file runs whose log names no sweep (started by hand, not by a job script) under "
	    "sweep NAME rather than 'adhoc'"),
    LB_OPT_END,
};

static int run_collect(const struct lb_args *a)
{
	struct collect_stats st = {0};
	char err[512];
	sqlite3 *db;
	int rc = 0;

	st.sweep = a->str[OPT_SWEEP];
	if (st.sweep && lb_sweep_name_check(st.sweep, err, sizeof(err))) {
		fprintf(stderr, "error: --sweep: %s (as a spec's \"name\")\n", err);
		return 2;
	}
	if (results_open(a->str[OPT_DB], &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (!a->n_operands) {
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
	for (int i = 0; i < a->n_operands; i++)
		if (results_collect_path(db, a->operands[i], &st, err, sizeof(err)))
			rc = 1;
	printf("collected %d file%s: %d new run%s, %d updated, %d unchanged; %ld step%s; "
	       "%d warning%s, %d error%s\n",
	       st.files, st.files == 1 ? "" : "s", st.runs_new, st.runs_new == 1 ? "" : "s",
	       st.runs_updated, st.runs_unchanged, st.steps, st.steps == 1 ? "" : "s", st.warnings,
	       st.warnings == 1 ? "" : "s", st.errors, st.errors == 1 ? "" : "s");
out_close_db:
	results_close(db);
	return rc;
}

const struct lb_command cmd_collect =
    LB_COMMAND("collect", "[RUN_DIR|FILE ...]", 0, -1, 0, collect_opts, run_collect,
	       "ingest run logs (idempotent; default ./runs)");

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

static const struct lb_option import_opts[] = {
    LB_CHOICE(OPT_FORMAT, "format", NULL, "paper", NULL, LB_OPT_REQUIRED,
	      "the files' format: the paper's published sheets"),
    LB_OPTION_DB(OPT_DB),
    LB_OPT_END,
};

/* --format is not read: paper is required and the only choice (the table above) */
static int run_import(const struct lb_args *a)
{
	struct import_stats st = {0};
	const char *db_path = a->str[OPT_DB] ? a->str[OPT_DB] : results_default_db();
	char err[512];
	sqlite3 *db;
	struct stat sb;
	int rc = 0, existed = !stat(db_path, &sb);

	if (results_open(db_path, &db, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
		goto out_remove_new_db;
	}
	for (int i = 0; i < a->n_operands; i++)
		if (results_import_paper(db, a->operands[i], &st, err, sizeof(err))) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
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

const struct lb_command cmd_import =
    LB_COMMAND("import", "FILE.csv ...", 1, -1, 0, import_opts, run_import,
	       "load the paper's measured runs as external sweeps");

static const struct lb_option sql_opts[] = {
    LB_OPTION_DB(OPT_DB),
    LB_CHOICE(OPT_FORMAT, "format", NULL, "table|csv|tsv", "table", 0, "the output format"),
    LB_SWITCH(OPT_WRITE, "write", 0, "allow statements that change the database"),
    LB_OPT_END,
};

static int run_sql(const struct lb_args *a)
{
	enum sql_format fmt = SQL_TABLE;
	const char *db_path = a->str[OPT_DB] ? a->str[OPT_DB] : results_default_db();
	char err[512];
	sqlite3 *db = NULL;
	struct stat sb;
	int rc = 1;

	sql_format_parse(a->str[OPT_FORMAT], &fmt); /* the table's choices */
	if (stat(db_path, &sb)) { /* sql creates no database, not even with --write */
		fprintf(stderr,
			"error: database '%s' does not exist; collect or import runs first, or "
			"give --db\n",
			db_path);
		goto out_close_db;
	}
	if (results_db_open(db_path, a->given[OPT_WRITE] ? RESULTS_DB_WRITE : RESULTS_DB_READ, &db,
			    err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out_close_db;
	}
	rc = 0;
	switch (sql_print(db, a->operands[0], fmt, stdout, err, sizeof(err))) {
	case 0:
		break;
	case -2: /* the rows did not all reach stdout: a full disk, a closed pipe */
		fprintf(stderr, "error: cannot write the result to standard output: %s\n", err);
		rc = 1;
		break;
	default:
		if (a->given[OPT_WRITE] &&
		    (sqlite3_extended_errcode(db) & 0xff) == SQLITE_READONLY &&
		    results_db_write_problem(db_path, err, sizeof(err)))
			fprintf(stderr, "error: %s\n", err);
		else
			fprintf(stderr, "error: query: %s\n", err);
		rc = 1;
	}
out_close_db:
	results_close(db);
	return rc;
}

const struct lb_command cmd_sql =
    LB_COMMAND("sql", "QUERY", 1, 1, 0, sql_opts, run_sql,
	       "run a query on the results database, read-only (needs no write access to the file "
	       "or its folder); --write allows statements that change it");
