/*
 * The one command-line parser: `layoutbench`'s commands, `layoutbench-train` and the
 * benchmarks all read their argv with it, and their usage and help come from the same
 * tables (git's parse-options is the model). Each command's file owns its table of
 * options (struct lb_option, with the command's own ids) and its struct lb_command, whose
 * run function gets the line already parsed and checked against the table (lb_args_run,
 * the one dispatch); the registry of `layoutbench`'s commands is cli/commands.c, so no
 * room includes cli/. Every option takes `--name VALUE` and `--name=VALUE` alike; numbers
 * are read with strtol or strtod and a range, choices against their list, and a usage
 * error is reported the same way everywhere (exit status 2).
 */
#ifndef LB_CMDLINE_H
#define LB_CMDLINE_H

#include <stddef.h>
#include <stdio.h>

#include "common/util.h"

enum lb_opt_type {
	LB_ARG_NONE,   /* a switch: --wait */
	LB_ARG_STRING, /* --db PATH */
	LB_ARG_INT,    /* --throttle K, a whole number in [min, max] */
	LB_ARG_CHOICE, /* --format table|csv|json: one of the choices */
	LB_ARG_NUMBER, /* --lr X, a number in [min, max] */
	LB_ARG_BYTES,  /* --mem-limit BYTES, a byte count (K, M, G, T suffixes) in [min, max] */
};

#define LB_OPT_REQUIRED 1u /* the command fails without it */
#define LB_OPT_HIDDEN	2u /* internal: in no usage or help text */
#define LB_OPT_MANY	4u /* one or more values: "--class oom timeout" */

#define LB_ARGS_MAX 32 /* a command's options at most; an option's id is below */

struct lb_option {
	int id;		  /* the command's own number for it (an enum beside its table) */
	const char *name; /* without the dashes: "db" */
	enum lb_opt_type type;
	const char *arg;     /* the value's name in usage ("PATH"); NULL for a choice: its list */
	const char *choices; /* LB_ARG_CHOICE: "table|csv|json" */
	const char *def;     /* the value when not given (NULL: none); shown by help */
	double min, max;     /* LB_ARG_INT, LB_ARG_NUMBER, LB_ARG_BYTES */
	unsigned flags;	     /* LB_OPT_REQUIRED, LB_OPT_HIDDEN, LB_OPT_MANY */
	const char *help;    /* one line for `help CMD` */
};

/* One option of each kind, struct lb_option's fields in order; a table ends with
 * LB_OPT_END. */
#define LB_SWITCH(id, name, flags, help)                                                           \
	{                                                                                          \
		id, name, LB_ARG_NONE, NULL, NULL, NULL, 0, 0, flags, help                         \
	}
#define LB_TEXT(id, name, arg, def, help)                                                          \
	{                                                                                          \
		id, name, LB_ARG_STRING, arg, NULL, def, 0, 0, 0, help                             \
	}
#define LB_WHOLE(id, name, arg, def, min, max, help)                                               \
	{                                                                                          \
		id, name, LB_ARG_INT, arg, NULL, def, min, max, 0, help                            \
	}
#define LB_CHOICE(id, name, arg, choices, def, flags, help)                                        \
	{                                                                                          \
		id, name, LB_ARG_CHOICE, arg, choices, def, 0, 0, flags, help                      \
	}
#define LB_NUMBER(id, name, arg, def, min, max, help)                                              \
	{                                                                                          \
		id, name, LB_ARG_NUMBER, arg, NULL, def, min, max, 0, help                         \
	}
#define LB_BYTES(id, name, arg, def, min, max, help)                                               \
	{                                                                                          \
		id, name, LB_ARG_BYTES, arg, NULL, def, min, max, 0, help                          \
	}
#define LB_OPT_END                                                                                 \
	{                                                                                          \
		-1, NULL, LB_ARG_NONE, NULL, NULL, NULL, 0, 0, 0, NULL                             \
	}

/* The options several commands share, spelled once (id: the command's own). */
#define LB_OPTION_DB(id)                                                                           \
	LB_TEXT(id, "db", "PATH", NULL,                                                            \
		"the results database (default $LAYOUTBENCH_DB, else ./results.db)")
#define LB_OPTION_SWEEP(id)                                                                        \
	LB_TEXT(id, "sweep", "NAME", NULL, "only this sweep (default every sweep in the database)")
#define LB_OPTION_THROTTLE(id)                                                                     \
	LB_WHOLE(id, "throttle", "K", NULL, 0, 1000000,                                            \
		 "at most K tasks of one array at once (0: no limit)")
#define LB_OPTION_MACHINE(id)                                                                      \
	LB_TEXT(id, "machine", "NAME|FILE", NULL,                                                  \
		"the machine whose step times are predicted (default the one shipped for the "     \
		"GPU; layoutbench help calibrate lists them)")
#define LB_OPTION_WAIT(id)                                                                         \
	LB_SWITCH(id, "wait", 0,                                                                   \
		  "block until every job ended, collecting the runs as they "                      \
		  "finish")

struct lb_args;

struct lb_command {
	const char *name;
	const char *operands;		 /* usage of the operands ("SPEC", "[RUN_DIR|FILE ...]") */
	int min_operands, max_operands;	 /* max_operands -1: any number */
	int operands_first;		 /* 1: usage names them before the options */
	const char *summary;		 /* one line: what it does (help, README) */
	const struct lb_option *options; /* ends with LB_OPT_END */
	/* The work, on the line lb_args_run parsed against options (a->operands the
	 * operands, a->cmd this struct; a is released after it returns): the exit status (0
	 * success, 1 failure, 2 usage error). */
	int (*run)(const struct lb_args *a);
	const char *word; /* what its options are called in messages: "flag"; NULL: "option" */
	unsigned flags;	  /* LB_CMD_KEEP_UNKNOWN, LB_CMD_PROGRAM */
};

/* A `layoutbench` command's struct, and a program's (LB_CMD_PROGRAM: a benchmark; its
 * options are "flags"). */
#define LB_COMMAND(name, operands, min_operands, max_operands, operands_first, options, run,     \
		   summary)                                                                        \
	{                                                                                          \
		name, operands, min_operands, max_operands, operands_first, summary, options, run, \
		    NULL, 0                                                                        \
	}
#define LB_PROGRAM(name, options, run, summary)                                                    \
	{                                                                                          \
		name, NULL, 0, 0, 0, summary, options, run, "flag", LB_CMD_PROGRAM                 \
	}
/* A program's struct and its main (lb_args_run on its whole line), at the end of its
 * file after run. */
#define LB_PROGRAM_MAIN(name, options, run, summary)                                               \
	static const struct lb_command lb_program = LB_PROGRAM(name, options, run, summary);       \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		return lb_args_run(&lb_program, argc, argv);                                       \
	}

/* An option the table and the group do not know is an operand, as a word that is no
 * option is (lb_layout_parse_args: the other flags of a line that also holds the layout's). */
#define LB_CMD_KEEP_UNKNOWN 1u
/* A program of its own (a benchmark), not a `layoutbench` command: its usage reads
 * "usage: NAME ...". */
#define LB_CMD_PROGRAM 2u

/* Flags a command takes that its table does not list, read by their own code: the
 * layout's (common/layout.h), which the trainer takes beside its own. */
struct lb_flag_group {
	int (*known)(const char *flag); /* 1 when flag ("--tp") is one of them */
	/* Take flag's value (NULL: the line ends without one): 0, or -1 with err set. */
	int (*set)(void *ctx, const char *flag, const char *value, char *err, size_t errlen);
	void *ctx;
};

/* What the parser found. Strings point into argv or the table (not owned). Each array is
 * indexed by an option's id. */
struct lb_args {
	const struct lb_command *cmd;
	int given[LB_ARGS_MAX];		/* times the option appeared on the line */
	const char *str[LB_ARGS_MAX];	/* its last value, else its default, else NULL */
	long num[LB_ARGS_MAX];		/* LB_ARG_INT, LB_ARG_BYTES: the value (the default's,
					   else 0); LB_ARG_CHOICE: the index of its choice */
	double dbl[LB_ARGS_MAX];	/* LB_ARG_NUMBER: likewise */
	const char **many[LB_ARGS_MAX]; /* LB_OPT_MANY: every value in order (malloc'd) */
	int n_many[LB_ARGS_MAX];
	char **operands; /* the words that are not options, in order (malloc'd array) */
	int n_operands;
};

/* What a usage error was. */
enum lb_args_error {
	LB_ARGS_OK = 0,
	LB_ARGS_UNKNOWN, /* an option neither the table nor the group has */
	LB_ARGS_BAD,	 /* anything else: a value, a missing option, the operands */
};

/*
 * Parse argv[1..argc) (argv[0] is the command's name) against c's table and, when g is
 * not NULL, g's flags. Options come anywhere; "--" ends them; "-" alone is an operand
 * (stdin). Returns LB_ARGS_OK, or the error's kind with err set ("unknown option
 * '--bogus'", "option '--throttle' expects a whole number from 0 to 1000000, got '2x'",
 * "--format: unknown value 'xml' (expected table, csv or json)"). Either way release a
 * with lb_args_release.
 */
int lb_args_scan(const struct lb_command *c, const struct lb_flag_group *g, int argc, char **argv,
		 struct lb_args *a, char *err, size_t errlen);
/* lb_args_scan without a group, for a `layoutbench` command: returns 0, or 2 after
 * printing "error: ..." and the usage line to stderr. */
int lb_args_parse(const struct lb_command *c, int argc, char **argv, struct lb_args *a);
void lb_args_release(struct lb_args *a);

/* The id of c's option name ("db"), or -1. */
int lb_option_id(const struct lb_command *c, const char *name);

/* The usage of a command, "plan SPEC [--format table|csv|json] [--render DIR]", into
 * buf (truncated to len). Returns buf. */
char *lb_usage_text(const struct lb_command *c, char *buf, size_t len);

/* "usage: layoutbench CMD ..." to stderr (after a usage error). */
void lb_usage(const struct lb_command *c);

/*
 * Run command c on argv[0..argc) (argv[0] its name), the one dispatch of every command
 * and program: "--help" (or "-h") before any "--" prints its help to stdout and returns 0;
 * a usage error prints "error: ..." and the usage to stderr and returns 2 (lb_args_parse);
 * else c->run gets the parsed line, which is released after it. Returns the exit status.
 */
int lb_args_run(const struct lb_command *c, int argc, char **argv);

/* One line per option of table o (those not hidden): the flag, its value and its help
 * with the default (lb_strbuf_add_usage's lines). */
void lb_options_help(struct lb_strbuf *sb, const struct lb_option *o);

/* `layoutbench help CMD`: the usage, the summary, one line per option. */
void lb_help_command(FILE *f, const struct lb_command *c);

/* `layoutbench help`: every command of cmds[0..n) with its summary. */
void lb_help_all(FILE *f, const struct lb_command *const *cmds, size_t n);

/* `layoutbench help --markdown`: the README's command table (| command | what it does |). */
void lb_help_markdown(FILE *f, const struct lb_command *const *cmds, size_t n);

/* The name of the command among cmds[0..n) that a misspelled name most likely meant (at
 * most two edits, an adjacent swap one: "plna" -> "plan"), or NULL. */
const char *lb_args_nearest(const char *name, const struct lb_command *const *cmds, size_t n);

#endif
