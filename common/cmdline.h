/*
 * The command line of `layoutbench`: one option table per command, from which each
 * command's parsing, `layoutbench help CMD` and the README's command table all come
 * (git's parse-options is the model). The tables are data (common/cmdline.c); a command
 * parses its argv with lb_args_parse and reads the values by option id, so every command
 * takes `--name VALUE` and `--name=VALUE` alike, checks numbers with strtol and a range,
 * checks choices, and reports a usage error the same way (exit status 2). cli/main.c maps
 * the command names to their functions; no room includes cli/.
 */
#ifndef LB_CMDLINE_H
#define LB_CMDLINE_H

#include <stddef.h>
#include <stdio.h>

/* Every option any command takes, by meaning: --db is the same option everywhere. */
enum lb_opt {
	LB_OPT_DB,
	LB_OPT_SWEEP,
	LB_OPT_FORMAT,
	LB_OPT_RENDER,
	LB_OPT_OUT,
	LB_OPT_FIGURE,
	LB_OPT_EXECUTOR,
	LB_OPT_RUNS,
	LB_OPT_DRY_RUN,
	LB_OPT_THROTTLE,
	LB_OPT_MAX_ARRAY,
	LB_OPT_WAIT,
	LB_OPT_FORCE,
	LB_OPT_QUIET,
	LB_OPT_REST_URL,
	LB_OPT_REST_VERSION,
	LB_OPT_SLOTS,
	LB_OPT_LOCAL_WORKER,
	LB_OPT_CLASS,
	LB_OPT_WRITE,
	LB_OPT_JOBS,
	LB_OPT_MARKDOWN,
	LB_OPT_KEEP_DIVERGED,
	LB_OPT_MACHINE,
	LB_OPT_KERNELS,
	LB_OPT_COLLS,
	LB_OPT_NAME,
	LB_OPT_HOLDOUT,
	LB_OPT_FIT,
	LB_OPT_SORT,
	LB_OPT_TOP,
	LB_OPT_GPU,
	LB_OPT_HALVING,
	LB_OPT_RUNGS,
	LB_OPT_MIN_STEPS,
	LB_OPT_ALPHA,
	LB_OPT_MARGIN,
	LB_OPT_COUNT
};

enum lb_opt_type {
	LB_ARG_NONE,   /* a switch: --wait */
	LB_ARG_STRING, /* --db PATH */
	LB_ARG_INT,    /* --throttle K, a whole number in [min, max] */
	LB_ARG_CHOICE, /* --format table|csv|json: one of the choices */
};

#define LB_OPT_REQUIRED 1u /* the command fails without it */
#define LB_OPT_HIDDEN	2u /* internal: in no usage or help text */
#define LB_OPT_MANY	4u /* one or more values: "--class oom timeout" */

struct lb_option {
	enum lb_opt id;
	const char *name; /* without the dashes: "db" */
	enum lb_opt_type type;
	const char *arg;     /* the value's name in usage ("PATH"); NULL for a choice: its list */
	const char *choices; /* LB_ARG_CHOICE: "table|csv|json" */
	const char *def;     /* the value when not given (NULL: none); shown by help */
	long min, max;	     /* LB_ARG_INT */
	unsigned flags;	     /* LB_OPT_REQUIRED, LB_OPT_HIDDEN, LB_OPT_MANY */
	const char *help;    /* one line for `help CMD` */
};

struct lb_command {
	const char *name;
	const char *operands;		 /* usage of the operands ("SPEC", "[RUN_DIR|FILE ...]") */
	int min_operands, max_operands;	 /* max_operands -1: any number */
	int operands_first;		 /* 1: usage names them before the options */
	const char *summary;		 /* one line: what it does (help, README) */
	const struct lb_option *options; /* ends with an entry whose name is NULL */
};

/* Every command, in the order help lists them. */
extern const struct lb_command lb_commands[];
extern const size_t lb_n_commands;

/* The command named name, or NULL. */
const struct lb_command *lb_command_find(const char *name);
/* The command a misspelled name most likely meant (at most two edits, an adjacent swap
 * one: "plna" -> "plan"), or NULL. */
const char *lb_command_suggest(const char *name);

/* What lb_args_parse found. Strings point into argv or the table (not owned). */
struct lb_args {
	const struct lb_command *cmd;
	int given[LB_OPT_COUNT];	 /* times the option appeared on the line */
	const char *str[LB_OPT_COUNT];	 /* its last value, else its default, else NULL */
	long num[LB_OPT_COUNT];		 /* LB_ARG_INT: the value (the default's, else 0) */
	const char **many[LB_OPT_COUNT]; /* LB_OPT_MANY: every value in order (malloc'd) */
	int n_many[LB_OPT_COUNT];
	char **operands; /* the words that are not options, in order (malloc'd array) */
	int n_operands;
};

/*
 * Parse argv[1..argc) of command cmd (argv[0] is its name) against its table. Options
 * come anywhere; "--" ends them; "-" alone is an operand (stdin). Returns 0; or 2 after
 * printing "error: ..." and the usage line to stderr: an unknown option, a missing
 * value, a value to a switch, a number that is not whole or out of range, a value not
 * among the choices, a required option missing, too few or too many operands. Either
 * way release a with lb_args_release.
 */
int lb_args_parse(const char *cmd, int argc, char **argv, struct lb_args *a);
void lb_args_release(struct lb_args *a);

/* The usage of a command, "plan SPEC [--format table|csv|json] [--render DIR]", into
 * buf (truncated to len). Returns buf. */
char *lb_usage_text(const struct lb_command *c, char *buf, size_t len);

/* "usage: layoutbench CMD ..." to stderr (after a usage error). */
void lb_usage(const char *cmd);

/* `layoutbench help CMD`: the usage, the summary, one line per option. */
void lb_help_command(FILE *f, const struct lb_command *c);

/* `layoutbench help`: every command with its summary. */
void lb_help_all(FILE *f);

/* `layoutbench help --markdown`: the README's command table (| command | what it does |). */
void lb_help_markdown(FILE *f);

#endif
