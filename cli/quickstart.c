/*
 * `layoutbench quickstart`: the main job end to end on the embedded default, on any
 * machine: plan the embedded tiny sweep (sweeps/specs/quickstart.json), train every
 * runnable layout with the local executor and the CPU backend, collect the run logs into
 * SQLite, then print the loss of each run (first and last step), the report table and
 * where the HTML report is. Everything lands under one folder (default
 * ./layoutbench-quickstart); running it again skips layouts already completed.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cmdline.h"
#include "common/util.h"
#include "report/cmd.h"
#include "results/cmd.h"
#include "slurm/submit.h"

#define QS_SPEC "quickstart"

/* Loss at the first and last step of each run, beside its speed: the run is learning
 * (and every layout, split or not, computes the same losses), and how fast each went.
 * MFU is unknown on a CPU (no peak), never invented: n/a, as the report writes it. */
static const char *qs_loss_query =
    "SELECT s.layout_id AS layout, s.label, s.micro_batch AS mbs, s.checkpointing AS ckpt,"
    " s.tp, s.pp, s.dp, s.sequence_parallel AS sp, s.zero_stage AS zero,"
    " printf('%.3f', (SELECT loss FROM steps WHERE run_id = s.run_id ORDER BY step LIMIT 1))"
    "   AS loss_first,"
    " printf('%.3f', (SELECT loss FROM steps WHERE run_id = s.run_id ORDER BY step DESC"
    "   LIMIT 1)) AS loss_last,"
    " printf('%.4f', s.step_time_mean) AS step_s,"
    " printf('%.0f', s.tokens_per_s_per_gpu) AS tokens_per_s,"
    " printf('%.4f', s.tflops_per_gpu) AS tflops,"
    " CASE WHEN s.mfu IS NULL THEN 'n/a' ELSE printf('%.2f%%', 100 * s.mfu) END AS mfu"
    " FROM run_summary s WHERE s.sweep = 'quickstart' AND s.status = 'ok'"
    " ORDER BY s.tflops_per_gpu DESC";

/* The ids of its options (struct lb_option.id). */
enum { OPT_OUT, OPT_DB, OPT_JOBS };

static const struct lb_option quickstart_opts[] = {
    LB_TEXT(OPT_OUT, "out", "DIR", "layoutbench-quickstart",
	    "the folder for the database, the run logs and the report"),
    LB_OPTION_DB(OPT_DB),
    LB_WHOLE(OPT_JOBS, "jobs", "N", "1", 1, 1024,
	     "ranks that run at once (default 1: timed runs do not share the machine)"),
    LB_OPT_END,
};

static int run_quickstart(const struct lb_args *a)
{
	const char *out = a->str[OPT_OUT], *db = a->str[OPT_DB];
	char err[512] = "";
	int rc;

	if (lb_mkdir_p(out, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	char dbpath[PATH_MAX], runs[PATH_MAX], html[PATH_MAX];
	if (!db) {
		snprintf(dbpath, sizeof(dbpath), "%s/results.db", out);
		db = dbpath;
	}
	snprintf(runs, sizeof(runs), "%s/runs", out);
	snprintf(html, sizeof(html), "%s/report", out);

	fprintf(stderr, "== 1/4 plan: the embedded sweep '%s'\n", QS_SPEC);
	char *plan_argv[] = {"plan", QS_SPEC, "--format", "table", NULL};
	if (lb_args_run(&cmd_plan, 4, plan_argv))
		return 1;

	fprintf(stderr, "\n== 2/4 train every runnable layout (local executor, CPU backend)\n");
	struct submit_opts o;
	submit_opts_init(&o);
	o.spec = QS_SPEC;
	o.executor = "local";
	o.db_path = db;
	o.runs_dir = runs;
	o.wait = 1;
	o.local_slots = (int)a->num[OPT_JOBS];
	rc = submit_sweep(&o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}

	printf("\n== 3/4 loss and speed of each run (database %s)\n", db);
	fflush(stdout);
	char *sql_argv[] = {"sql", "--db", (char *)db, (char *)qs_loss_query, NULL};
	if (lb_args_run(&cmd_sql, 4, sql_argv))
		return 1;

	printf("\n== 4/4 report (MFU is n/a on a CPU: it has no bf16 peak)\n");
	fflush(stdout);
	char *rep_argv[] = {"report",	"--db", (char *)db, "--sweep", QS_SPEC,
			    "--figure", "best", "--format", "md",      NULL};
	if (lb_args_run(&cmd_report, 9, rep_argv))
		return 1;
	char *html_argv[] = {"report", "--db",	   (char *)db, "--sweep", QS_SPEC, "--figure",
			     "all",    "--format", "html",     "--out",	  html,	   NULL};
	lb_args_run(&cmd_report, 11, html_argv); /* says where it wrote the page, or why not */
	fprintf(stderr,
		"query the results: build/layoutbench sql --db %s \"SELECT * FROM "
		"run_summary\"\n",
		db);
	return rc ? 1 : 0;
}

const struct lb_command cmd_quickstart =
    LB_COMMAND("quickstart", NULL, 0, 0, 0, quickstart_opts, run_quickstart,
	       "the embedded tiny sweep end to end on the CPU: plan, train, collect, report");
