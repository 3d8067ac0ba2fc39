/*
 * The option tables and their parser (common/cmdline.c): both spellings of a value,
 * switches, numbers with ranges, choices, several values, required options, operands and
 * "--", every usage error exiting 2; the usage text built from the table; and the
 * tables' lists against the code that reads the values (figures, failure classes, sql
 * formats, plan formats), so that a choice the table offers is one the command knows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cmdline.h"
#include "report/halving.h"
#include "report/report.h"
#include "results/sql.h"
#include "slurm/classify.h"
#include "sweeps/plan_print.h"

/* The id of the option named name of a's command. */
#define ID(a, name) lb_option_id((a)->cmd, name)

/* Parse a NULL-terminated word list as command cmd; stderr goes to /dev/null. */
static int parse(struct lb_args *a, const char *cmd, ...)
{
	char *argv[32];
	int argc = 0, rc;
	va_list ap;

	argv[argc++] = (char *)cmd;
	va_start(ap, cmd);
	for (char *w; (w = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = w;
	va_end(ap);
	argv[argc] = NULL;
	fflush(stderr);
	FILE *saved = stderr;
	stderr = fopen("/dev/null", "w");
	rc = lb_args_parse(lb_command_find(cmd), argc, argv, a);
	fclose(stderr);
	stderr = saved;
	return rc;
}

static void test_values(void **state)
{
	struct lb_args a;

	assert_int_equal(parse(&a, "submit", "s.json", "--db", "x.db", "--throttle=3", "--wait",
			       "--executor=local", NULL),
			 0);
	assert_string_equal(a.operands[0], "s.json");
	assert_int_equal(a.n_operands, 1);
	assert_string_equal(a.str[ID(&a, "db")], "x.db");
	assert_int_equal(a.num[ID(&a, "throttle")], 3);
	assert_int_equal(a.given[ID(&a, "wait")], 1);
	assert_int_equal(a.given[ID(&a, "force")], 0);
	assert_string_equal(a.str[ID(&a, "executor")], "local");
	lb_args_release(&a);

	/* defaults: the table's */
	assert_int_equal(parse(&a, "submit", "s.json", NULL), 0);
	assert_string_equal(a.str[ID(&a, "executor")], "slurm");
	assert_null(a.str[ID(&a, "db")]);
	assert_int_equal(a.num[ID(&a, "throttle")], 0);
	assert_true(a.dbl[ID(&a, "alpha")] == 0.05); /* a number's default, read */
	lb_args_release(&a);
	assert_int_equal(parse(&a, "quickstart", NULL), 0);
	assert_int_equal(a.num[ID(&a, "jobs")], 1);
	assert_string_equal(a.str[ID(&a, "out")], "layoutbench-quickstart");
	lb_args_release(&a);

	/* "-" is an operand (stdin); "--" ends the options */
	assert_int_equal(parse(&a, "plan", "-", NULL), 0);
	assert_string_equal(a.operands[0], "-");
	lb_args_release(&a);
	assert_int_equal(parse(&a, "sql", "--db", "d", "--", "--write", NULL), 0);
	assert_string_equal(a.operands[0], "--write");
	assert_int_equal(a.given[ID(&a, "write")], 0);
	lb_args_release(&a);
}

static void test_many(void **state)
{
	struct lb_args a;

	assert_int_equal(
	    parse(&a, "resubmit", "--class", "oom", "timeout", "--wait", "--class=failed", NULL),
	    0);
	assert_int_equal(a.n_many[ID(&a, "class")], 3);
	assert_string_equal(a.many[ID(&a, "class")][0], "oom");
	assert_string_equal(a.many[ID(&a, "class")][1], "timeout");
	assert_string_equal(a.many[ID(&a, "class")][2], "failed");
	assert_int_equal(a.given[ID(&a, "wait")], 1);
	lb_args_release(&a);
}

static void test_usage_errors(void **state)
{
	struct lb_args a;
	static const char *const bad[][6] = {
	    {"plan", NULL},				  /* no SPEC */
	    {"plan", "a", "b", NULL},			  /* two */
	    {"plan", "a", "--format", "xml", NULL},	  /* not a choice */
	    {"plan", "a", "--format", NULL},		  /* no value */
	    {"plan", "a", "--bogus", NULL},		  /* unknown */
	    {"plan", "a", "-x", NULL},			  /* no short options */
	    {"submit", "a", "--wait=1", NULL},		  /* a switch with a value */
	    {"submit", "a", "--throttle", "-1", NULL},	  /* out of range */
	    {"submit", "a", "--throttle", "2x", NULL},	  /* not whole */
	    {"quickstart", "--jobs", "0", NULL},	  /* below the range */
	    {"report", "--format", "md", NULL},		  /* --figure required */
	    {"report", "--figure", "all", "extra", NULL}, /* no operands */
	    {"resubmit", "--class", "nope", NULL},	  /* not a class */
	    {"import", "a.csv", NULL},			  /* --format required */
	    {"status", "--db=", NULL},			  /* an empty value */
	    {"submit", "a", "--alpha", "0.7", NULL},	  /* a number out of range */
	    {"submit", "a", "--margin", "x", NULL},	  /* not a number */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[8];
		int argc = 0;
		for (; bad[i][argc]; argc++)
			argv[argc] = (char *)bad[i][argc];
		argv[argc] = NULL;
		FILE *saved = stderr;
		stderr = fopen("/dev/null", "w");
		int rc = lb_args_parse(lb_command_find(bad[i][0]), argc, argv, &a);
		fclose(stderr);
		stderr = saved;
		if (rc != 2)
			fail_msg("case %zu (%s %s): rc %d, want 2", i, bad[i][0],
				 bad[i][1] ? bad[i][1] : "", rc);
		lb_args_release(&a);
	}
}

static void test_usage_text(void **state)
{
	char u[1024];

	assert_string_equal(lb_usage_text(lb_command_find("plan"), u, sizeof(u)),
			    "plan SPEC [--format table|csv|json] [--render DIR] [--machine "
			    "NAME|FILE] [--sort spec|mfu|time|gpu-hours]");
	assert_string_equal(lb_usage_text(lb_command_find("import"), u, sizeof(u)),
			    "import --format paper [--db PATH] FILE.csv ...");
	/* the local worker is internal: in no usage */
	assert_null(strstr(lb_usage_text(lb_command_find("submit"), u, sizeof(u)), "worker"));
	assert_non_null(strstr(lb_usage_text(lb_command_find("resubmit"), u, sizeof(u)),
			       "[--class CLASS ...]"));
}

/* Each '|'-separated choice of an option of a command, to fn. */
static void each_choice(const char *cmd, const char *name, void (*fn)(const char *))
{
	const struct lb_command *c = lb_command_find(cmd);
	int found = 0;

	assert_non_null(c);
	for (const struct lb_option *o = c->options; o->name; o++) {
		if (strcmp(o->name, name))
			continue;
		found = 1;
		char buf[512], *save = NULL;
		snprintf(buf, sizeof(buf), "%s", o->choices);
		for (char *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
			fn(t);
	}
	assert_true(found);
}

/* every figure but "all" and "predicted" (report/predicted.h) is a kind of report.h's */
static void figure_known(const char *s)
{
	enum report_kind k;
	if (strcmp(s, "all") && strcmp(s, "predicted") && strcmp(s, REPORT_HALVING_NAME))
		assert_int_equal(report_kind_parse(s, &k), 0);
}

static void plan_sort_known(const char *s)
{
	enum plan_sort k;
	assert_int_equal(plan_sort_parse(s, &k), 0);
}

static void class_known(const char *s)
{
	assert_true(slurm_class_valid(s));
}

static void sql_format_known(const char *s)
{
	enum sql_format f;
	assert_int_equal(sql_format_parse(s, &f), 0);
}

static void plan_format_known(const char *s)
{
	enum plan_format f;
	assert_int_equal(plan_format_parse(s, &f), 0);
}

static void test_choices_match_code(void **state)
{
	each_choice("report", "figure", figure_known);
	each_choice("resubmit", "class", class_known);
	each_choice("sql", "format", sql_format_known);
	each_choice("plan", "format", plan_format_known);
	each_choice("plan", "sort", plan_sort_known);
	/* and every figure the report builds is offered */
	for (int k = 0; k < REPORT_KIND_COUNT; k++) {
		char u[1024];
		lb_usage_text(lb_command_find("report"), u, sizeof(u));
		assert_non_null(strstr(u, report_kind_name((enum report_kind)k)));
	}
}

/* A misspelled command gets the one it most likely meant; a far one gets none. */
static void test_command_suggest(void **state)
{
	(void)state;
	assert_string_equal(lb_command_suggest("plna"), "plan");
	assert_string_equal(lb_command_suggest("sumbit"), "submit");
	assert_string_equal(lb_command_suggest("stauts"), "status");
	assert_string_equal(lb_command_suggest("colect"), "collect");
	assert_string_equal(lb_command_suggest("pla"), "plan");
	assert_null(lb_command_suggest("xyzzy"));
	assert_null(lb_command_suggest("a"));
	assert_null(lb_command_suggest(""));
	assert_null(lb_command_suggest(NULL));
}

/* `help report` names every figure beyond the paper's five in --figure's line. */
static void test_figure_help_names_every_figure(void **state)
{
	const struct lb_command *c = lb_command_find("report");
	const struct lb_option *o;
	char list[256], *tok, *save = NULL;

	(void)state;
	assert_non_null(c);
	for (o = c->options; o->name && strcmp(o->name, "figure"); o++)
		;
	assert_non_null(o->name);
	snprintf(list, sizeof(list), "%s", o->choices);
	for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
		static const char *const paper[] = {"kernels", "checkpointing", "microbatch",
						    "tp-pp", "seqpar"}; /* "figures 1-5" */
		int is_paper = 0;

		for (size_t i = 0; i < 5; i++)
			is_paper |= !strcmp(tok, paper[i]);
		if (!is_paper && !strstr(o->help, tok))
			fail_msg("--figure's help '%s' leaves out '%s'", o->help, tok);
	}
}

/* Every command of the registry: its table's ids below LB_ARGS_MAX and unique, its names
 * unique, its struct's run function there; and a table with an id out of range is refused
 * rather than written past. */
static void test_tables(void **state)
{
	static const struct lb_option bad_opts[] = {
	    LB_SWITCH(LB_ARGS_MAX, "far", 0, "an id the arrays do not have"), LB_OPT_END};
	static const struct lb_command bad = {.name = "bad", .options = bad_opts};
	char *argv[] = {"bad", NULL}, err[256];
	struct lb_args a;

	(void)state;
	for (size_t i = 0; i < lb_command_count; i++) {
		const struct lb_command *c = lb_commands[i];
		int seen[LB_ARGS_MAX] = {0};

		assert_non_null(c->run);
		assert_ptr_equal(lb_command_find(c->name), c);
		for (const struct lb_option *o = c->options; o->name; o++) {
			if (o->id < 0 || o->id >= LB_ARGS_MAX || seen[o->id]++)
				fail_msg("%s --%s: id %d out of range or taken", c->name, o->name,
					 o->id);
			assert_int_equal(lb_option_id(c, o->name), o->id);
		}
	}
	assert_int_equal(lb_args_scan(&bad, NULL, 1, argv, &a, err, sizeof(err)), LB_ARGS_BAD);
	assert_non_null(strstr(err, "option '--far' has id"));
	lb_args_release(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tables),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_many),
	    cmocka_unit_test(test_usage_errors),
	    cmocka_unit_test(test_usage_text),
	    cmocka_unit_test(test_choices_match_code),
	    cmocka_unit_test(test_command_suggest),
	    cmocka_unit_test(test_figure_help_names_every_figure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
