/*
 * The one command-line parser and the usage and help writers that read the option tables
 * (common/cmdline.h). The tables themselves live beside their commands.
 */
#include "common/cmdline.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ parsing */

static const struct lb_option *find_option(const struct lb_command *c, const char *name, size_t len)
{
	for (const struct lb_option *o = c->options; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

int lb_option_id(const struct lb_command *c, const char *name)
{
	const struct lb_option *o = c && name ? find_option(c, name, strlen(name)) : NULL;

	return o ? o->id : -1;
}

/* The index of v among the '|'-separated choices, or -1. */
static long choice_index(const char *choices, const char *v)
{
	size_t n = strlen(v);
	long i = 0;

	for (const char *p = choices; p && *p; i++) {
		const char *bar = strchr(p, '|');
		size_t k = bar ? (size_t)(bar - p) : strlen(p);
		if (k == n && !strncmp(p, v, n))
			return i;
		p = bar ? bar + 1 : NULL;
	}
	return -1;
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

/* The parse in progress: where its error goes. */
struct scan {
	const struct lb_command *cmd;
	struct lb_args *a;
	char *err;
	size_t errlen;
};

static int fail(struct scan *s, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct scan *s, int kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, s->errlen, fmt, ap);
	va_end(ap);
	return kind;
}

/* What the command calls its options: "option", "flag". */
static const char *word(const struct scan *s)
{
	return s->cmd->word ? s->cmd->word : "option";
}

/* Take value v for option o. Returns LB_ARGS_OK or LB_ARGS_BAD (err set). */
static int take_value(struct scan *s, const struct lb_option *o, const char *v, int argc)
{
	struct lb_args *a = s->a;
	char words[256];
	uint64_t bytes;

	switch (o->type) {
	case LB_ARG_INT:
		if (lb_parse_long(v, (long)o->min, (long)o->max, &a->num[o->id]))
			return fail(s, LB_ARGS_BAD,
				    "%s '--%s' expects a whole number from %ld to %ld, got '%s'",
				    word(s), o->name, (long)o->min, (long)o->max, v);
		break;
	case LB_ARG_NUMBER:
		if (lb_parse_double(v, o->min, o->max, &a->dbl[o->id]))
			return fail(s, LB_ARGS_BAD,
				    "%s '--%s' expects a number from %g to %g, got '%s'", word(s),
				    o->name, o->min, o->max, v);
		break;
	case LB_ARG_BYTES:
		if (lb_parse_bytes(v, &bytes) || (double)bytes < o->min || (double)bytes > o->max ||
		    bytes > (uint64_t)LONG_MAX)
			return fail(s, LB_ARGS_BAD,
				    "%s '--%s' expects a byte count from %.0f to %.0f (K, M, G, T "
				    "suffixes), got '%s'",
				    word(s), o->name, o->min, o->max, v);
		a->num[o->id] = (long)bytes;
		break;
	case LB_ARG_CHOICE:
		if ((a->num[o->id] = choice_index(o->choices, v)) < 0)
			return fail(s, LB_ARGS_BAD, "--%s: unknown value '%s' (expected %s)",
				    o->name, v, choice_words(o->choices, words, sizeof(words)));
		break;
	case LB_ARG_STRING:
		if (!*v)
			return fail(s, LB_ARGS_BAD, "%s '--%s' needs a value", word(s), o->name);
		break;
	case LB_ARG_NONE:
		break;
	}
	a->str[o->id] = v;
	if (o->flags & LB_OPT_MANY) {
		if (!a->many[o->id]) {
			a->many[o->id] = calloc((size_t)argc + 1, sizeof(char *));
			if (!a->many[o->id])
				return fail(s, LB_ARGS_BAD, "out of memory");
		}
		a->many[o->id][a->n_many[o->id]++] = v;
	}
	return LB_ARGS_OK;
}

/* The defaults of c's table into a. */
static void take_defaults(const struct lb_command *c, struct lb_args *a)
{
	for (const struct lb_option *o = c->options; o->name; o++) {
		uint64_t bytes;

		a->str[o->id] = o->def;
		if (!o->def)
			continue;
		if (o->type == LB_ARG_INT)
			lb_parse_long(o->def, (long)o->min, (long)o->max, &a->num[o->id]);
		else if (o->type == LB_ARG_NUMBER)
			lb_parse_double(o->def, o->min, o->max, &a->dbl[o->id]);
		else if (o->type == LB_ARG_BYTES && !lb_parse_bytes(o->def, &bytes))
			a->num[o->id] = (long)bytes;
		else if (o->type == LB_ARG_CHOICE)
			a->num[o->id] = choice_index(o->choices, o->def);
	}
}

/* The checks after every word was read: required options, the operands. */
static int check_after(struct scan *s)
{
	const struct lb_command *c = s->cmd;
	struct lb_args *a = s->a;
	char words[256];

	for (const struct lb_option *o = c->options; o->name; o++)
		if ((o->flags & LB_OPT_REQUIRED) && !a->given[o->id]) {
			if (o->type == LB_ARG_CHOICE)
				return fail(s, LB_ARGS_BAD, "%s '--%s' is required (%s)", word(s),
					    o->name,
					    choice_words(o->choices, words, sizeof(words)));
			return fail(s, LB_ARGS_BAD, "%s '--%s' is required", word(s), o->name);
		}
	if (a->n_operands < c->min_operands)
		return fail(s, LB_ARGS_BAD, "%s needs %s", c->name, c->operands);
	if (c->max_operands >= 0 && a->n_operands > c->max_operands) {
		if (c->max_operands == 0)
			return fail(s, LB_ARGS_BAD, "%s takes no operand, got '%s'", c->name,
				    a->operands[0]);
		return fail(s, LB_ARGS_BAD,
			    "%s takes one %s, got '%s' and '%s' (quote a value that has spaces)",
			    c->name, c->operands, a->operands[0], a->operands[1]);
	}
	return LB_ARGS_OK;
}

int lb_args_scan(const struct lb_command *c, const struct lb_flag_group *g, int argc, char **argv,
		 struct lb_args *a, char *err, size_t errlen)
{
	struct scan s = {c, a, err, errlen};
	int only_operands = 0, rc;

	memset(a, 0, sizeof(*a));
	a->cmd = c;
	if (errlen)
		err[0] = '\0';
	for (const struct lb_option *o = c->options; o->name; o++)
		if (o->id < 0 || o->id >= LB_ARGS_MAX) /* the table's fault, not the line's */
			return fail(&s, LB_ARGS_BAD, "%s: option '--%s' has id %d, not in 0..%d",
				    c->name, o->name, o->id, LB_ARGS_MAX - 1);
	take_defaults(c, a);
	a->operands = calloc((size_t)(argc > 0 ? argc : 1), sizeof(char *));
	if (!a->operands)
		return fail(&s, LB_ARGS_BAD, "out of memory");
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];

		if (only_operands || w[0] != '-' || !w[1] ||
		    (w[1] != '-' && (c->flags & LB_CMD_KEEP_UNKNOWN))) {
			a->operands[a->n_operands++] = argv[i];
			continue;
		}
		if (!strcmp(w, "--") && !(c->flags & LB_CMD_KEEP_UNKNOWN)) {
			only_operands = 1;
			continue;
		}
		if (w[1] != '-')
			return fail(&s, LB_ARGS_UNKNOWN, "unknown %s '%s'", word(&s), w);
		const char *name = w + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct lb_option *o = find_option(c, name, len);
		const char *v = eq ? eq + 1 : NULL;

		if (!o && g) { /* the group's: "--tp 2" or "--tp=2" */
			char flag[128];

			snprintf(flag, sizeof(flag), "--%.*s", (int)(len < 120 ? len : 120), name);
			if (len < 120 && g->known(flag)) {
				if (!v && i + 1 < argc)
					v = argv[++i];
				if (g->set(g->ctx, flag, v, err, errlen))
					return LB_ARGS_BAD; /* a bad value, or none */
				continue;
			}
		}
		if (!o && (c->flags & LB_CMD_KEEP_UNKNOWN)) {
			a->operands[a->n_operands++] = argv[i];
			continue;
		}
		if (!o)
			return fail(&s, LB_ARGS_UNKNOWN, "unknown %s '--%.*s'", word(&s), (int)len,
				    name);
		a->given[o->id]++;
		if (o->type == LB_ARG_NONE) {
			if (eq)
				return fail(&s, LB_ARGS_BAD, "%s '--%s' takes no value", word(&s),
					    o->name);
			continue;
		}
		if (!v) {
			if (i + 1 >= argc)
				return fail(&s, LB_ARGS_BAD, "%s '--%s' needs a value", word(&s),
					    o->name);
			v = argv[++i];
		}
		if ((rc = take_value(&s, o, v, argc)))
			return rc;
		/* more values: the words that follow, up to the next option */
		while ((o->flags & LB_OPT_MANY) && i + 1 < argc && argv[i + 1][0] != '-')
			if ((rc = take_value(&s, o, argv[++i], argc)))
				return rc;
	}
	return check_after(&s);
}

int lb_args_parse(const struct lb_command *c, int argc, char **argv, struct lb_args *a)
{
	char err[512];

	if (lb_args_scan(c, NULL, argc, argv, a, err, sizeof(err)) == LB_ARGS_OK)
		return 0;
	fprintf(stderr, "error: %s\n", err);
	lb_usage(c);
	return 2;
}

void lb_args_release(struct lb_args *a)
{
	for (int k = 0; k < LB_ARGS_MAX; k++)
		free(a->many[k]);
	free(a->operands);
	memset(a, 0, sizeof(*a));
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

const char *lb_args_nearest(const char *name, const struct lb_command *const *cmds, size_t n)
{
	const char *best = NULL;
	int best_d = 3; /* at most two edits */

	for (size_t i = 0; name && i < n; i++) {
		int dist = edit_distance(name, cmds[i]->name);

		if (dist < best_d && (size_t)dist < strlen(cmds[i]->name)) {
			best_d = dist;
			best = cmds[i]->name;
		}
	}
	return best;
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

/* "layoutbench " before a command's usage; nothing before a program's. */
static const char *usage_prefix(const struct lb_command *c)
{
	return (c->flags & LB_CMD_PROGRAM) ? "" : "layoutbench ";
}

void lb_usage(const struct lb_command *c)
{
	char u[1024];

	if (c)
		fprintf(stderr, "usage: %s%s\n", usage_prefix(c), lb_usage_text(c, u, sizeof(u)));
}

int lb_args_run(const struct lb_command *c, int argc, char **argv)
{
	struct lb_args a;
	int rc;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			lb_help_command(stdout, c);
			return 0;
		}
	if (!(rc = lb_args_parse(c, argc, argv, &a)))
		rc = c->run(&a);
	lb_args_release(&a);
	return rc;
}

void lb_options_help(struct lb_strbuf *sb, const struct lb_option *o)
{
	for (; o->name; o++) {
		char flag[64], help[1024];
		const char *arg = o->arg ? o->arg : o->choices;

		if (o->flags & LB_OPT_HIDDEN)
			continue;
		snprintf(flag, sizeof(flag), "--%s", o->name);
		snprintf(help, sizeof(help), "%s", o->help);
		if (o->def && o->type != LB_ARG_NONE && !strstr(o->help, "default"))
			snprintf(help + strlen(help), sizeof(help) - strlen(help), " (default %s)",
				 o->def);
		if (o->type == LB_ARG_NONE)
			arg = NULL;
		if (arg && (o->flags & LB_OPT_MANY)) {
			char many[128];

			snprintf(many, sizeof(many), "%s ...", arg);
			lb_strbuf_add_usage(sb, flag, many, help);
		} else {
			lb_strbuf_add_usage(sb, flag, arg, help);
		}
	}
}

void lb_help_command(FILE *f, const struct lb_command *c)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char u[1024];

	fprintf(f, "usage: %s%s\n\n%s\n", usage_prefix(c), lb_usage_text(c, u, sizeof(u)),
		c->summary);
	lb_options_help(&sb, c->options);
	if (sb.len)
		fprintf(f, "\n%s", lb_strbuf_str(&sb));
	lb_strbuf_release(&sb);
}

void lb_help_all(FILE *f, const struct lb_command *const *cmds, size_t n)
{
	fprintf(f, "usage: layoutbench <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-11s %s\n", cmds[i]->name, cmds[i]->summary);
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

void lb_help_markdown(FILE *f, const struct lb_command *const *cmds, size_t n)
{
	fprintf(f, "| command | what it does |\n| --- | --- |\n");
	for (size_t i = 0; i < n; i++) {
		char u[1024];
		fputs("| `", f);
		md_cell(f, lb_usage_text(cmds[i], u, sizeof(u)));
		fputs("` | ", f);
		md_cell(f, cmds[i]->summary);
		fputs(" |\n", f);
	}
}
