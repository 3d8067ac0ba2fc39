/*
 * The option tables of every `layoutbench` command and the one parser, usage and help
 * writer that read them (common/cmdline.h).
 */
#include "common/cmdline.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* One option of each kind, struct lb_option's fields in order. */
#define SWITCH(id, name, flags, help)                                                              \
	{                                                                                          \
		id, name, LB_ARG_NONE, NULL, NULL, NULL, 0, 0, flags, help                         \
	}
#define TEXT(id, name, arg, def, help)                                                             \
	{                                                                                          \
		id, name, LB_ARG_STRING, arg, NULL, def, 0, 0, 0, help                             \
	}
#define WHOLE(id, name, arg, def, min, max, help)                                                  \
	{                                                                                          \
		id, name, LB_ARG_INT, arg, NULL, def, min, max, 0, help                            \
	}
#define CHOICE(id, name, arg, choices, def, flags, help)                                           \
	{                                                                                          \
		id, name, LB_ARG_CHOICE, arg, choices, def, 0, 0, flags, help                      \
	}
#define END                                                                                        \
	{                                                                                          \
		LB_OPT_COUNT, NULL, LB_ARG_NONE, NULL, NULL, NULL, 0, 0, 0, NULL                   \
	}

#define EXECUTORS "slurm|rest|local"
#define CLASSES	  "oom|timeout|node_fail|preempted|cancelled|launch_error|failed|unknown"
#define FIGURES                                                                                    \
	"kernels|checkpointing|microbatch|tp-pp|seqpar|rms|best|phases|memory|predicted|halving|all"

/* The options several commands share, spelled once. */
#define OPT_DB                                                                                     \
	TEXT(LB_OPT_DB, "db", "PATH", NULL,                                                        \
	     "the results database (default $LAYOUTBENCH_DB, else ./results.db)")
#define OPT_SWEEP                                                                                  \
	TEXT(LB_OPT_SWEEP, "sweep", "NAME", NULL,                                                  \
	     "only this sweep (default every sweep in the database)")
#define OPT_THROTTLE                                                                               \
	WHOLE(LB_OPT_THROTTLE, "throttle", "K", NULL, 0, 1000000,                                  \
	      "at most K tasks of one array at once (0: no limit)")
#define OPT_MACHINE                                                                                \
	TEXT(LB_OPT_MACHINE, "machine", "NAME|FILE", NULL,                                         \
	     "the machine whose step times are predicted (default the one shipped for the "       \
	     "GPU; layoutbench help calibrate lists them)")
#define OPT_WAIT                                                                                   \
	SWITCH(LB_OPT_WAIT, "wait", 0,                                                             \
	       "block until every job ended, collecting the runs as they "                         \
	       "finish")

static const struct lb_option quickstart_opts[] = {
    TEXT(LB_OPT_OUT, "out", "DIR", "layoutbench-quickstart",
	 "the folder for the database, the run logs and the report"),
    OPT_DB,
    WHOLE(LB_OPT_JOBS, "jobs", "N", "1", 1, 1024,
	  "ranks that run at once (default 1: timed runs do not share the machine)"),
    END,
};

static const struct lb_option plan_opts[] = {
    CHOICE(LB_OPT_FORMAT, "format", NULL, "table|csv|json", "table", 0,
	   "the output format (csv and json: the summary goes to stderr)"),
    TEXT(LB_OPT_RENDER, "render", "DIR", NULL,
	 "also write the job scripts of the runnable layouts into DIR"),
    OPT_MACHINE,
    CHOICE(LB_OPT_SORT, "sort", NULL, "spec|mfu|time|gpu-hours", "spec", 0,
	   "the order of the layouts: as the spec expands them, or by predicted MFU (best "
	   "first), step time or GPU-hours (least first)"),
    END,
};

static const struct lb_option submit_opts[] = {
    CHOICE(LB_OPT_EXECUTOR, "executor", NULL, EXECUTORS, "slurm", 0,
	   "where the jobs run: libslurm, slurmrestd, or local processes without Slurm"),
    OPT_DB,
    TEXT(LB_OPT_RUNS, "runs", "DIR", "runs",
	 "the runs folder (default ./runs): a layout runs in DIR/<sweep>/<layout id>"),
    SWITCH(LB_OPT_DRY_RUN, "dry-run", 0,
	   "print the arrays that would be submitted, submit nothing"),
    OPT_THROTTLE,
    WHOLE(LB_OPT_MAX_ARRAY, "max-array", "N", NULL, 0, 1000000,
	  "at most N tasks per array (0: the cluster's MaxArraySize)"),
    OPT_WAIT,
    SWITCH(LB_OPT_FORCE, "force", 0, "submit layouts already completed or in flight again"),
    WHOLE(LB_OPT_TOP, "top", "K", NULL, 1, 100000000,
	  "only the K layouts with the best predicted MFU among those that fit (and are not "
	  "done)"),
    OPT_MACHINE,
    SWITCH(LB_OPT_QUIET, "quiet", 0, "no progress lines"),
    TEXT(LB_OPT_REST_URL, "rest-url", "URL", NULL,
	 "slurmrestd: http://host:port or unix:/path (default $SLURMRESTD_URL)"),
    TEXT(LB_OPT_REST_VERSION, "rest-version", "vX", NULL,
	 "slurmrestd: the API version (default the newest the server offers)"),
    WHOLE(LB_OPT_SLOTS, "slots", "N", NULL, 1, 1000000,
	  "local: ranks that run at once (default 1: timed runs do not share the machine)"),
    WHOLE(LB_OPT_HALVING, "halving", "ETA", NULL, 2, 1000,
	  "successive halving: rung 0 runs every layout for few steps, each rung keeps the "
	  "fastest 1/ETA of each group and those within noise of the cut, the last runs the "
	  "spec's steps (docs/halving.md)"),
    WHOLE(LB_OPT_RUNGS, "rungs", "R", NULL, 2, 32,
	  "halving: rungs, the last at the spec's steps (default: about one layout per group "
	  "on the last)"),
    WHOLE(LB_OPT_MIN_STEPS, "min-steps", "S", NULL, 2, 1000000,
	  "halving: rung 0's steps, warm-up included (default warm-up + 4)"),
    TEXT(LB_OPT_ALPHA, "alpha", "P", "0.05",
	 "halving: the rank test's level: a layout slower than the cut is dropped when "
	 "p < P"),
    TEXT(LB_OPT_MARGIN, "margin", "F", "0.02",
	 "halving: a relative slowdown counted as noise (two runs of one layout differ by "
	 "about 1% on an H200)"),
    SWITCH(LB_OPT_LOCAL_WORKER, "local-worker", LB_OPT_HIDDEN, "the local executor's worker"),
    END,
};

static const struct lb_option status_opts[] = {
    OPT_DB,
    OPT_SWEEP,
    SWITCH(LB_OPT_WAIT, "wait", 0,
	   "block until every job of the sweeps ended, driving their running halvings to "
	   "the end"),
    END,
};

static const struct lb_option resubmit_opts[] = {
    OPT_DB,
    OPT_SWEEP,
    CHOICE(LB_OPT_CLASS, "class", "CLASS", CLASSES, NULL, LB_OPT_MANY,
	   "only failures of these classes (default every failed layout)"),
    CHOICE(LB_OPT_EXECUTOR, "executor", "E", EXECUTORS, NULL, 0,
	   "where the jobs run (default where they ran before)"),
    OPT_THROTTLE,
    OPT_WAIT,
    SWITCH(LB_OPT_FORCE, "force", 0,
	   "also resubmit out-of-memory failures, which fail the same way again"),
    END,
};

static const struct lb_option cancel_opts[] = {OPT_DB, OPT_SWEEP, END};

static const struct lb_option collect_opts[] = {
    OPT_DB,
    TEXT(LB_OPT_SWEEP, "sweep", "NAME", NULL,
	 "file runs whose log names no sweep (started by hand, not by a job script) under "
	 "sweep NAME rather than 'adhoc'"),
    END,
};

static const struct lb_option import_opts[] = {
    CHOICE(LB_OPT_FORMAT, "format", NULL, "paper", NULL, LB_OPT_REQUIRED,
	   "the files' format: the paper's published sheets"),
    OPT_DB,
    END,
};

static const struct lb_option calibrate_opts[] = {
    OPT_DB,
    {LB_OPT_SWEEP, "sweep", LB_ARG_STRING, "NAME", NULL, NULL, 0, 0, LB_OPT_MANY,
     "fit the terms to the ok runs of these sweeps (--sweep A B); without, only the "
     "tables are written"},
    TEXT(LB_OPT_MACHINE, "machine", "NAME|FILE", NULL,
	 "the machine to start from: its tables and terms (default the one shipped for the "
	 "runs' GPU; shipped: a100-nominal, a100-paper, h100-nominal, h200, h200-kernels)"),
    TEXT(LB_OPT_KERNELS, "kernels", "CSV", NULL,
	 "GEMM, attention and memory-bound rates from bench_kernels --csv on the target"),
    TEXT(LB_OPT_COLLS, "colls", "FILE", NULL,
	 "the link within a node from bench_colls' output (2 or more ranks)"),
    TEXT(LB_OPT_FIT, "fit", "TERM,...", NULL,
	 "fit only these terms (default every term the runs can tell apart)"),
    TEXT(LB_OPT_NAME, "name", "NAME", NULL, "the name of the machine written"),
    TEXT(LB_OPT_GPU, "gpu", "PRODUCT", NULL,
	 "the GPU product the machine written describes (default the runs', else the "
	 "machine's)"),
    TEXT(LB_OPT_OUT, "out", "FILE", NULL,
	 "write the machine file to FILE (default stdout, the report then on stderr)"),
    SWITCH(LB_OPT_HOLDOUT, "holdout", 0,
	   "also leave each sweep out in turn: fit on the others, predict it, print the "
	   "scores"),
    END,
};

static const struct lb_option report_opts[] = {
    OPT_DB,
    OPT_SWEEP,
    CHOICE(LB_OPT_FIGURE, "figure", NULL, FIGURES, NULL, LB_OPT_REQUIRED,
	   "the figure (the paper's figures 1-5, rms, best, phases, memory, predicted, the "
	   "rungs of a successive halving) or all"),
    CHOICE(LB_OPT_FORMAT, "format", NULL, "md|csv|html", "md", 0,
	   "markdown tables, CSV, or one HTML page with the plots"),
    TEXT(LB_OPT_OUT, "out", "DIR", NULL, "write files into DIR (default stdout)"),
    SWITCH(LB_OPT_KEEP_DIVERGED, "keep-diverged", 0,
	   "let runs whose loss diverged compete for the bars and the best layouts, marked "
	   "(default: left out, and counted)"),
    OPT_MACHINE,
    END,
};

static const struct lb_option sql_opts[] = {
    OPT_DB,
    CHOICE(LB_OPT_FORMAT, "format", NULL, "table|csv|tsv", "table", 0, "the output format"),
    SWITCH(LB_OPT_WRITE, "write", 0, "allow statements that change the database"),
    END,
};

static const struct lb_option help_opts[] = {
    SWITCH(LB_OPT_MARKDOWN, "markdown", 0, "the command table as markdown (the README's)"),
    END,
};

static const struct lb_option no_opts[] = {END};

const struct lb_command lb_commands[] = {
    {"quickstart", NULL, 0, 0, 0,
     "the embedded tiny sweep end to end on the CPU: plan, train, collect, report",
     quickstart_opts},
    {"plan", "SPEC", 1, 1, 1,
     "every grid point with its id, fields, memory per GPU, status (ok, oom or invalid "
     "with the reason) and predicted step time, MFU and GPU-hours; --render writes the "
     "job scripts",
     plan_opts},
    {"submit", "SPEC", 0, 1, 1, /* none with the internal --local-worker */
     "submit the runnable layouts as job arrays; skips layouts already completed or in "
     "flight unless --force",
     submit_opts},
    {"status", NULL, 0, 0, 0,
     "one batched scheduler query; writes states, collects finished runs, classes failures",
     status_opts},
    {"resubmit", NULL, 0, 0, 0, "submit failed layouts again, as a new attempt", resubmit_opts},
    {"cancel", NULL, 0, 0, 0, "cancel pending and running jobs", cancel_opts},
    {"collect", "[RUN_DIR|FILE ...]", 0, -1, 0, "ingest run logs (idempotent; default ./runs)",
     collect_opts},
    {"import", "FILE.csv ...", 1, -1, 0, "load the paper's measured runs as external sweeps",
     import_opts},
    {"calibrate", NULL, 0, 0, 0,
     "fit a machine's step-time terms to runs in the database (least squares, residuals "
     "printed) and write the machine file; --kernels and --colls make its tables",
     calibrate_opts},
    {"report", NULL, 0, 0, 0,
     "the paper's tables and figures, and predicted against measured step times",
     report_opts},
    {"sql", "QUERY", 1, 1, 0,
     "run a query on the results database, read-only (needs no write access to the file "
     "or its folder); --write allows statements that change it",
     sql_opts},
    {"help", "[CMD]", 0, 1, 0, "print the usage of every command, or of one with its options",
     help_opts},
    {"version", NULL, 0, 0, 0, "print the version and the commit it was built from", no_opts},
};
const size_t lb_n_commands = sizeof(lb_commands) / sizeof(lb_commands[0]);

const struct lb_command *lb_command_find(const char *name)
{
	for (size_t i = 0; name && i < lb_n_commands; i++)
		if (!strcmp(lb_commands[i].name, name))
			return &lb_commands[i];
	return NULL;
}

/* The edit distance between a and b with an adjacent swap counting one edit (Damerau's
 * optimal string alignment: "plna" is one from "plan"); strings longer than 31 are far. */
static int edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	int d[32][32];

	if (n > 31 || m > 31)
		return 99;
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

const char *lb_command_suggest(const char *name)
{
	const char *best = NULL;
	int best_d = 3; /* at most two edits */

	for (size_t i = 0; name && i < lb_n_commands; i++) {
		int dist = edit_distance(name, lb_commands[i].name);

		if (dist < best_d && (size_t)dist < strlen(lb_commands[i].name)) {
			best_d = dist;
			best = lb_commands[i].name;
		}
	}
	return best;
}

/* ------------------------------------------------------------------ parsing */

static const struct lb_option *find_option(const struct lb_command *c, const char *name, size_t len)
{
	for (const struct lb_option *o = c->options; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

/* 1 if v is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = choices; p && *p;) {
		const char *bar = strchr(p, '|');
		size_t k = bar ? (size_t)(bar - p) : strlen(p);
		if (k == n && !strncmp(p, v, n))
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

/* "a|b|c" as "a, b or c" into buf. */
static const char *choice_words(const char *choices, char *buf, size_t len)
{
	size_t o = 0;
	const char *last = strrchr(choices, '|');

	buf[0] = '\0';
	for (const char *p = choices; *p && o + 8 < len; p++) {
		if (*p == '|')
			o += (size_t)snprintf(buf + o, len - o, p == last ? " or " : ", ");
		else
			buf[o++] = *p;
		buf[o] = '\0';
	}
	return buf;
}

static int usage_error(struct lb_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int usage_error(struct lb_args *a, const char *fmt, ...)
{
	va_list ap;

	fputs("error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	lb_usage(a->cmd->name);
	return 2;
}

/* Take value v for option o. Returns 0 or 2 (reported). */
static int take_value(struct lb_args *a, const struct lb_option *o, const char *v, int argc)
{
	char words[256];

	if (o->type == LB_ARG_INT) {
		if (lb_parse_long(v, o->min, o->max, &a->num[o->id]))
			return usage_error(a,
					   "option '--%s' expects a whole number from %ld to %ld, "
					   "got '%s'",
					   o->name, o->min, o->max, v);
	} else if (o->type == LB_ARG_CHOICE && !is_choice(o->choices, v)) {
		return usage_error(a, "unknown value '%s' for '--%s' (use %s)", v, o->name,
				   choice_words(o->choices, words, sizeof(words)));
	} else if (o->type == LB_ARG_STRING && !*v) {
		return usage_error(a, "option '--%s' needs a value", o->name);
	}
	a->str[o->id] = v;
	if (o->flags & LB_OPT_MANY) {
		if (!a->many[o->id]) {
			a->many[o->id] = calloc((size_t)argc + 1, sizeof(char *));
			if (!a->many[o->id]) {
				fprintf(stderr, "error: out of memory\n");
				return 2;
			}
		}
		a->many[o->id][a->n_many[o->id]++] = v;
	}
	return 0;
}

int lb_args_parse(const char *cmd, int argc, char **argv, struct lb_args *a)
{
	int only_operands = 0;

	memset(a, 0, sizeof(*a));
	a->cmd = lb_command_find(cmd);
	if (!a->cmd) {
		fprintf(stderr, "error: unknown command '%s'\n", cmd ? cmd : "");
		return 2;
	}
	for (const struct lb_option *o = a->cmd->options; o->name; o++) {
		a->str[o->id] = o->def;
		if (o->type == LB_ARG_INT && o->def)
			lb_parse_long(o->def, o->min, o->max, &a->num[o->id]);
	}
	a->operands = calloc((size_t)(argc > 0 ? argc : 1), sizeof(char *));
	if (!a->operands) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];

		if (only_operands || w[0] != '-' || !w[1]) {
			a->operands[a->n_operands++] = argv[i];
			continue;
		}
		if (!strcmp(w, "--")) {
			only_operands = 1;
			continue;
		}
		if (w[1] != '-')
			return usage_error(a, "unknown option '%s'", w);
		const char *name = w + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct lb_option *o = find_option(a->cmd, name, len);
		if (!o)
			return usage_error(a, "unknown option '--%.*s'", (int)len, name);
		a->given[o->id]++;
		if (o->type == LB_ARG_NONE) {
			if (eq)
				return usage_error(a, "option '--%s' takes no value", o->name);
			continue;
		}
		const char *v = eq ? eq + 1 : NULL;
		if (!v) {
			if (i + 1 >= argc)
				return usage_error(a, "option '--%s' needs a value", o->name);
			v = argv[++i];
		}
		if (take_value(a, o, v, argc))
			return 2;
		/* more values: the words that follow, up to the next option */
		while ((o->flags & LB_OPT_MANY) && i + 1 < argc && argv[i + 1][0] != '-')
			if (take_value(a, o, argv[++i], argc))
				return 2;
	}
	for (const struct lb_option *o = a->cmd->options; o->name; o++)
		if ((o->flags & LB_OPT_REQUIRED) && !a->given[o->id]) {
			char words[256];
			if (o->type == LB_ARG_CHOICE)
				return usage_error(a, "option '--%s' is required (%s)", o->name,
						   choice_words(o->choices, words, sizeof(words)));
			return usage_error(a, "option '--%s' is required", o->name);
		}
	if (a->n_operands < a->cmd->min_operands)
		return usage_error(a, "%s needs %s", a->cmd->name, a->cmd->operands);
	if (a->cmd->max_operands >= 0 && a->n_operands > a->cmd->max_operands) {
		if (a->cmd->max_operands == 0)
			return usage_error(a, "%s takes no operand, got '%s'", a->cmd->name,
					   a->operands[0]);
		return usage_error(a,
				   "%s takes one %s, got '%s' and '%s' (quote a value that "
				   "has spaces)",
				   a->cmd->name, a->cmd->operands, a->operands[0], a->operands[1]);
	}
	return 0;
}

void lb_args_release(struct lb_args *a)
{
	for (int k = 0; k < LB_OPT_COUNT; k++)
		free(a->many[k]);
	free(a->operands);
	memset(a, 0, sizeof(*a));
}

/* ------------------------------------------------------------------ usage and help */

/* "--format table|csv|json", "--db PATH", "--wait", "--class CLASS ..." */
static size_t option_text(const struct lb_option *o, char *buf, size_t len)
{
	const char *arg = o->arg ? o->arg : o->choices;

	if (o->type == LB_ARG_NONE)
		return (size_t)snprintf(buf, len, "--%s", o->name);
	return (size_t)snprintf(buf, len, "--%s %s%s", o->name, arg,
				(o->flags & LB_OPT_MANY) ? " ..." : "");
}

char *lb_usage_text(const struct lb_command *c, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "%s", c->name);

	if (c->operands && c->operands_first && o < len)
		o += (size_t)snprintf(buf + o, len - o, " %s", c->operands);
	for (const struct lb_option *p = c->options; p->name && o < len; p++) {
		char t[256];
		if (p->flags & LB_OPT_HIDDEN)
			continue;
		option_text(p, t, sizeof(t));
		o += (size_t)snprintf(buf + o, len - o,
				      (p->flags & LB_OPT_REQUIRED) ? " %s" : " [%s]", t);
	}
	if (c->operands && !c->operands_first && o < len)
		snprintf(buf + o, len - o, " %s", c->operands);
	return buf;
}

void lb_usage(const char *cmd)
{
	const struct lb_command *c = lb_command_find(cmd);
	char u[1024];

	if (c)
		fprintf(stderr, "usage: layoutbench %s\n", lb_usage_text(c, u, sizeof(u)));
}

void lb_help_command(FILE *f, const struct lb_command *c)
{
	char u[1024];

	fprintf(f, "usage: layoutbench %s\n\n%s\n", lb_usage_text(c, u, sizeof(u)), c->summary);
	if (c->options[0].name)
		fputc('\n', f);
	for (const struct lb_option *p = c->options; p->name; p++) {
		char t[256];
		if (p->flags & LB_OPT_HIDDEN)
			continue;
		option_text(p, t, sizeof(t));
		fprintf(f, "    %-28s %s", t, p->help);
		if (p->def && p->type != LB_ARG_NONE && !strstr(p->help, "default"))
			fprintf(f, " (default %s)", p->def);
		fputc('\n', f);
	}
}

void lb_help_all(FILE *f)
{
	fprintf(f, "usage: layoutbench <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < lb_n_commands; i++)
		fprintf(f, "  %-11s %s\n", lb_commands[i].name, lb_commands[i].summary);
	fprintf(f, "\n'layoutbench help CMD' prints a command's options; the default database is "
		   "results.db (--db or LAYOUTBENCH_DB)\n");
}

/* s with '|' escaped for a markdown table cell. */
static void md_cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s, f);
	}
}

void lb_help_markdown(FILE *f)
{
	fprintf(f, "| command | what it does |\n| --- | --- |\n");
	for (size_t i = 0; i < lb_n_commands; i++) {
		char u[1024];
		fputs("| `", f);
		md_cell(f, lb_usage_text(&lb_commands[i], u, sizeof(u)));
		fputs("` | ", f);
		md_cell(f, lb_commands[i].summary);
		fputs(" |\n", f);
	}
}
