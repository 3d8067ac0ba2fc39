/*
 * The `where` expression language: a recursive-descent compiler from text to a flat
 * node array (children by index), and an evaluator over integer variables. Values are
 * 64-bit integers or doubles; integer operations check for overflow (an error, not
 * undefined behaviour), division and modulo by zero are errors, and nesting is bounded
 * so that hostile input cannot exhaust the stack. Grammar and semantics: docs/spec.md.
 */
#include "sweeps/expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPR_MAX_DEPTH 64
#define EXPR_MAX_NODES 4096

enum node_kind {
	N_INT,
	N_FLOAT,
	N_VAR,
	N_NEG,
	N_NOT,
	N_ADD,
	N_SUB,
	N_MUL,
	N_DIV,
	N_MOD,
	N_EQ,
	N_NE,
	N_LT,
	N_LE,
	N_GT,
	N_GE,
	N_AND,
	N_OR,
	N_DIVIDES,
	N_MIN,
	N_MAX,
};

struct node {
	enum node_kind kind;
	int col;  /* 1-based column of the operator or operand, for messages */
	int a, b; /* children (node indices), -1 when unused */
	long long i;
	double f;
	int var;
};

struct expr {
	struct node *nodes;
	int n, cap;
	int root;
	unsigned char *uses; /* uses[var]: 1 if read */
	int nvars;
};

/* Parser state. */
struct parser {
	const char *src;
	size_t pos;
	const struct expr_vars *vars;
	struct expr *e;
	char *err;
	size_t errlen;
	int failed;
	int depth;
};

static void perr(struct parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void perr(struct parser *p, size_t pos, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (p->failed)
		return;
	p->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errlen, "column %zu: %s", pos + 1, msg);
}

static int new_node(struct parser *p, enum node_kind k, size_t pos, int a, int b)
{
	struct expr *e = p->e;

	if (p->failed)
		return -1;
	if (e->n >= EXPR_MAX_NODES) {
		perr(p, pos, "expression too long");
		return -1;
	}
	if (e->n == e->cap) {
		int cap = e->cap ? e->cap * 2 : 16;
		struct node *nn = realloc(e->nodes, (size_t)cap * sizeof(*nn));

		if (!nn) {
			perr(p, pos, "out of memory");
			return -1;
		}
		e->nodes = nn;
		e->cap = cap;
	}
	memset(&e->nodes[e->n], 0, sizeof(e->nodes[0]));
	e->nodes[e->n].kind = k;
	e->nodes[e->n].col = (int)pos + 1;
	e->nodes[e->n].a = a;
	e->nodes[e->n].b = b;
	e->nodes[e->n].var = -1;
	return e->n++;
}

static void skip_space(struct parser *p)
{
	while (p->src[p->pos] == ' ' || p->src[p->pos] == '\t' || p->src[p->pos] == '\n' ||
	       p->src[p->pos] == '\r')
		p->pos++;
}

/* Where the next token starts (spaces skipped). */
static size_t token_start(struct parser *p)
{
	skip_space(p);
	return p->pos;
}

/* Token helpers: match an operator (exact text) after spaces. */
static int accept(struct parser *p, const char *op)
{
	size_t n = strlen(op);

	skip_space(p);
	if (strncmp(p->src + p->pos, op, n))
		return 0;
	/* do not split "<=" into "<" or "==" into "=" ..., nor "&&" into "&" */
	if (n == 1 && (op[0] == '<' || op[0] == '>' || op[0] == '!') && p->src[p->pos + 1] == '=')
		return 0;
	p->pos += n;
	return 1;
}

static int is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static int is_ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Accept a keyword (and, or, not) as a whole word. */
static int accept_word(struct parser *p, const char *w)
{
	size_t n = strlen(w);

	skip_space(p);
	if (strncmp(p->src + p->pos, w, n) || is_ident_char(p->src[p->pos + n]))
		return 0;
	p->pos += n;
	return 1;
}

static int parse_or(struct parser *p);

static int enter(struct parser *p)
{
	if (++p->depth > EXPR_MAX_DEPTH) {
		perr(p, p->pos, "expression nested too deeply (more than %d levels)",
		     EXPR_MAX_DEPTH);
		return -1;
	}
	return 0;
}

/* parse, one level deeper: the depth limit keeps "((((..." off the C stack's end. */
static int nested(struct parser *p, int (*parse)(struct parser *))
{
	int n;

	if (enter(p))
		return -1;
	n = parse(p);
	p->depth--;
	return n;
}

/* A constant node of value v. */
static int int_node(struct parser *p, size_t pos, long long v)
{
	int n = new_node(p, N_INT, pos, -1, -1);

	if (n >= 0)
		p->e->nodes[n].i = v;
	return n;
}

/* Where a string literal stands alone, or beside anything but a named field. */
static const char string_alone[] =
    "a string may only be compared with a named field (attention == \"flash\")";

/* A string literal: "..." without escapes. Returns a malloc'd copy or NULL. */
static char *parse_string(struct parser *p)
{
	size_t start = p->pos, end;
	char *s;

	p->pos++; /* opening quote */
	end = p->pos;
	while (p->src[end] && p->src[end] != '"')
		end++;
	if (!p->src[end]) {
		perr(p, start, "unterminated string");
		return NULL;
	}
	s = malloc(end - p->pos + 1);
	if (!s) {
		perr(p, start, "out of memory");
		return NULL;
	}
	memcpy(s, p->src + p->pos, end - p->pos);
	s[end - p->pos] = '\0';
	p->pos = end + 1;
	return s;
}

static int lookup_var(struct parser *p, const char *name)
{
	int i;

	for (i = 0; i < p->vars->n; i++)
		if (!strcmp(p->vars->names[i], name))
			return i;
	return -1;
}

/* The token from p->pos to end into buf, or -1 with "WHAT too long". */
static int token_text(struct parser *p, size_t end, const char *what, char *buf, size_t len)
{
	if (end - p->pos >= len) {
		perr(p, p->pos, "%s too long", what);
		return -1;
	}
	memcpy(buf, p->src + p->pos, end - p->pos);
	buf[end - p->pos] = '\0';
	return 0;
}

static int parse_primary(struct parser *p)
{
	size_t start = token_start(p);
	char c = p->src[start];
	int n;

	if (c == '(') {
		p->pos++;
		n = nested(p, parse_or);
		if (n < 0)
			return -1;
		if (!accept(p, ")")) {
			perr(p, p->pos, "expected ')'");
			return -1;
		}
		return n;
	}
	if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)p->src[p->pos + 1]))) {
		size_t end = p->pos;
		int is_float = 0;
		char buf[64];

		while (isalnum((unsigned char)p->src[end]) || p->src[end] == '.' ||
		       ((p->src[end] == '+' || p->src[end] == '-') &&
			(p->src[end - 1] == 'e' || p->src[end - 1] == 'E') &&
			!(p->src[end - 2] == '0' && (p->src[end - 1] == 'x')))) {
			if (p->src[end] == '.' || p->src[end] == 'e' || p->src[end] == 'E')
				is_float = 1;
			end++;
		}
		if (token_text(p, end, "number", buf, sizeof(buf)))
			return -1;
		if (is_float) {
			char *stop;
			double f;

			errno = 0;
			f = strtod(buf, &stop);
			if (*stop || errno || !isfinite(f)) {
				perr(p, start, "bad number '%s'", buf);
				return -1;
			}
			n = new_node(p, N_FLOAT, start, -1, -1);
			if (n >= 0)
				p->e->nodes[n].f = f;
		} else {
			char *stop;
			long long v;

			errno = 0;
			v = strtoll(buf, &stop, 10);
			if (*stop || errno) {
				perr(p, start, "bad integer '%s'", buf);
				return -1;
			}
			n = int_node(p, start, v);
		}
		p->pos = end;
		return n;
	}
	if (is_ident_start(c)) {
		size_t end = p->pos;
		char name[64];

		while (is_ident_char(p->src[end]))
			end++;
		if (token_text(p, end, "identifier", name, sizeof(name)))
			return -1;
		p->pos = end;
		skip_space(p);
		if (p->src[p->pos] == '(') {
			enum node_kind k;
			int arg[2];

			if (!strcmp(name, "divides"))
				k = N_DIVIDES;
			else if (!strcmp(name, "min"))
				k = N_MIN;
			else if (!strcmp(name, "max"))
				k = N_MAX;
			else {
				perr(p, start, "unknown function '%s' (known: divides, min, max)",
				     name);
				return -1;
			}
			p->pos++;
			for (int i = 0; i < 2; i++) { /* a, then b) */
				arg[i] = nested(p, parse_or);
				if (arg[i] < 0)
					return -1;
				if (!accept(p, i ? ")" : ",")) {
					perr(p, p->pos, "expected '%s' %s %s(a, b)", i ? ")" : ",",
					     i ? "after" : "in", name);
					return -1;
				}
			}
			return new_node(p, k, start, arg[0], arg[1]);
		}
		if (!strcmp(name, "and") || !strcmp(name, "or") || !strcmp(name, "not")) {
			perr(p, start, "expected an operand, got '%s'", name);
			return -1;
		}
		if (!strcmp(name, "true") || !strcmp(name, "false"))
			return int_node(p, start, name[0] == 't');
		int v = lookup_var(p, name);

		if (v < 0) {
			perr(p, start, "unknown identifier '%s'", name);
			return -1;
		}
		n = new_node(p, N_VAR, start, -1, -1);
		if (n >= 0) {
			p->e->nodes[n].var = v;
			p->e->uses[v] = 1;
		}
		return n;
	}
	if (c == '"') {
		perr(p, start, "%s", string_alone);
		return -1;
	}
	if (!c)
		perr(p, start, "unexpected end of expression");
	else if (isprint((unsigned char)c))
		perr(p, start, "unexpected '%c'", c);
	else
		perr(p, start, "unexpected byte 0x%02x", (unsigned char)c);
	return -1;
}

static int parse_unary(struct parser *p)
{
	size_t start = token_start(p);
	int a;

	if (accept(p, "-") || accept(p, "+")) {
		int neg = p->src[start] == '-';

		a = nested(p, parse_unary);
		if (a < 0)
			return -1;
		return neg ? new_node(p, N_NEG, start, a, -1) : a;
	}
	return parse_primary(p);
}

/* The binary operators of one precedence level: a symbol, or a word ("and") that must
 * stand alone, and the node it makes. */
struct binop {
	const char *tok;
	int word;
	enum node_kind k;
};

/* One precedence level, left-associative: operand (op operand)*. */
static int parse_level(struct parser *p, int (*operand)(struct parser *), const struct binop *ops,
		       size_t nops)
{
	int a = operand(p), b;

	while (a >= 0) {
		size_t at, i;

		at = token_start(p);
		for (i = 0; i < nops; i++)
			if (ops[i].word ? accept_word(p, ops[i].tok) : accept(p, ops[i].tok))
				break;
		if (i == nops)
			break;
		b = operand(p);
		if (b < 0)
			return -1;
		a = new_node(p, ops[i].k, at, a, b);
	}
	return a;
}

static int parse_mul(struct parser *p)
{
	static const struct binop ops[] = {{"*", 0, N_MUL}, {"/", 0, N_DIV}, {"%", 0, N_MOD}};

	return parse_level(p, parse_unary, ops, sizeof(ops) / sizeof(ops[0]));
}

static int parse_add(struct parser *p)
{
	static const struct binop ops[] = {{"+", 0, N_ADD}, {"-", 0, N_SUB}};

	return parse_level(p, parse_mul, ops, sizeof(ops) / sizeof(ops[0]));
}

/* One side of a comparison that may be a string literal. Returns a node index, or -2
 * (and *str) for a string. */
static int parse_cmp_operand(struct parser *p, char **str, size_t *strpos)
{
	skip_space(p);
	if (p->src[p->pos] == '"') {
		*strpos = p->pos;
		*str = parse_string(p);
		return *str ? -2 : -1;
	}
	return parse_add(p);
}

/* Turn (variable, string) into a constant node holding the enum's code. */
static int resolve_string(struct parser *p, int var_node, const char *s, size_t spos)
{
	long long code;

	if (var_node < 0 || p->e->nodes[var_node].kind != N_VAR) {
		perr(p, spos, "%s", string_alone);
		return -1;
	}
	int v = p->e->nodes[var_node].var;

	if (!p->vars->enum_value || p->vars->enum_value(v, s, &code)) {
		perr(p, spos, "\"%s\" is not a value of '%s'", s, p->vars->names[v]);
		return -1;
	}
	return int_node(p, spos, code);
}

static int parse_cmp(struct parser *p)
{
	static const struct {
		const char *op;
		enum node_kind k;
	} ops[] = {{"==", N_EQ}, {"!=", N_NE}, {"<=", N_LE},
		   {">=", N_GE}, {"<", N_LT},  {">", N_GT}};
	char *sa = NULL, *sb = NULL;
	size_t pa = 0, pb = 0, at;
	int a, b, r = -1;
	size_t i;

	a = parse_cmp_operand(p, &sa, &pa);
	if (a == -1)
		goto out_free;
	at = token_start(p);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (accept(p, ops[i].op))
			break;
	if (i == sizeof(ops) / sizeof(ops[0])) {
		if (a == -2) {
			perr(p, pa, "%s", string_alone);
			goto out_free;
		}
		if (p->src[p->pos] == '=' && p->src[p->pos + 1] != '=') {
			perr(p, p->pos, "'=' is not an operator; use '=='");
			goto out_free;
		}
		r = a;
		goto out_free;
	}
	b = parse_cmp_operand(p, &sb, &pb);
	if (b == -1)
		goto out_free;
	if (a == -2 && b == -2) {
		perr(p, pa, "comparing two strings");
		goto out_free;
	}
	if ((a == -2 || b == -2) && ops[i].k != N_EQ && ops[i].k != N_NE) {
		perr(p, at, "strings compare only with == or !=");
		goto out_free;
	}
	if (a == -2)
		a = resolve_string(p, b, sa, pa);
	else if (b == -2)
		b = resolve_string(p, a, sb, pb);
	if (a < 0 || b < 0)
		goto out_free;
	skip_space(p);
	for (size_t j = 0; j < sizeof(ops) / sizeof(ops[0]); j++)
		if (!strncmp(p->src + p->pos, ops[j].op, strlen(ops[j].op))) {
			perr(p, p->pos, "comparisons do not chain; use 'and'");
			goto out_free;
		}
	r = new_node(p, ops[i].k, at, a, b);
out_free:
	free(sa);
	free(sb);
	return r;
}

static int parse_not(struct parser *p)
{
	size_t start = token_start(p);
	int a;

	if (accept_word(p, "not") ||
	    (p->src[p->pos] == '!' && p->src[p->pos + 1] != '=' && accept(p, "!"))) {
		a = nested(p, parse_not);
		if (a < 0)
			return -1;
		return new_node(p, N_NOT, start, a, -1);
	}
	return parse_cmp(p);
}

static int parse_and(struct parser *p)
{
	static const struct binop ops[] = {{"and", 1, N_AND}, {"&&", 0, N_AND}};

	return parse_level(p, parse_not, ops, sizeof(ops) / sizeof(ops[0]));
}

static int parse_or(struct parser *p)
{
	static const struct binop ops[] = {{"or", 1, N_OR}, {"||", 0, N_OR}};

	return parse_level(p, parse_and, ops, sizeof(ops) / sizeof(ops[0]));
}

int expr_compile(const char *src, const struct expr_vars *vars, struct expr **out, char *err,
		 size_t errlen)
{
	struct parser p;
	struct expr *e;
	int root;

	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->nvars = vars->n;
	e->uses = calloc((size_t)(vars->n > 0 ? vars->n : 1), 1);
	if (!e->uses) {
		free(e);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p = (struct parser){.src = src, .vars = vars, .e = e, .err = err, .errlen = errlen};
	root = parse_or(&p);
	if (root >= 0) {
		skip_space(&p);
		if (p.src[p.pos]) {
			if (p.src[p.pos] == '&' || p.src[p.pos] == '|')
				perr(&p, p.pos, "unexpected '%c'; use '%c%c'", p.src[p.pos],
				     p.src[p.pos], p.src[p.pos]);
			else if (p.src[p.pos] == '=')
				perr(&p, p.pos, "'=' is not an operator; use '=='");
			else if (p.src[p.pos] == ')')
				perr(&p, p.pos, "unbalanced ')'");
			else
				perr(&p, p.pos, "unexpected text after the expression");
			root = -1;
		}
	}
	if (root < 0 || p.failed) {
		if (!p.failed)
			snprintf(err, errlen, "column 1: bad expression");
		expr_free(e);
		return -1;
	}
	e->root = root;
	*out = e;
	return 0;
}

/* Evaluation. */
struct value {
	int is_float;
	long long i;
	double f;
};

struct evalctx {
	const struct expr *e;
	const long long *vals;
	char *err;
	size_t errlen;
};

static double as_float(const struct value *v)
{
	return v->is_float ? v->f : (double)v->i;
}

static int truthy(const struct value *v)
{
	return v->is_float ? v->f != 0.0 : v->i != 0;
}

static int eval_fail(struct evalctx *c, const struct node *n, const char *msg)
{
	snprintf(c->err, c->errlen, "column %d: %s", n->col, msg);
	return -1;
}

/* A comparison node's result (1 or 0) from its operands' order, exact for two integers,
 * in double precision otherwise: 1 and *out set, or 0 when k is not a comparison. */
static int comparison(enum node_kind k, const struct value *a, const struct value *b,
		      long long *out)
{
	int order;

	if (a->is_float || b->is_float) {
		double x = as_float(a), y = as_float(b);
		order = x < y ? -1 : x > y;
	} else {
		order = a->i < b->i ? -1 : a->i > b->i;
	}
	switch (k) {
	case N_EQ:
		*out = order == 0;
		return 1;
	case N_NE:
		*out = order != 0;
		return 1;
	case N_LT:
		*out = order < 0;
		return 1;
	case N_LE:
		*out = order <= 0;
		return 1;
	case N_GT:
		*out = order > 0;
		return 1;
	case N_GE:
		*out = order >= 0;
		return 1;
	default:
		return 0;
	}
}

static int eval_node(struct evalctx *c, int idx, struct value *out)
{
	const struct node *n = &c->e->nodes[idx];
	struct value a, b;

	out->is_float = 0;
	out->i = 0;
	out->f = 0.0;
	switch (n->kind) {
	case N_INT:
		out->i = n->i;
		return 0;
	case N_FLOAT:
		out->is_float = 1;
		out->f = n->f;
		return 0;
	case N_VAR:
		out->i = c->vals[n->var];
		return 0;
	case N_NEG:
		if (eval_node(c, n->a, &a))
			return -1;
		if (a.is_float) {
			out->is_float = 1;
			out->f = -a.f;
		} else if (__builtin_sub_overflow(0LL, a.i, &out->i)) {
			return eval_fail(c, n, "integer overflow");
		}
		return 0;
	case N_NOT:
		if (eval_node(c, n->a, &a))
			return -1;
		out->i = !truthy(&a);
		return 0;
	case N_AND:
		if (eval_node(c, n->a, &a))
			return -1;
		if (!truthy(&a))
			return 0;
		if (eval_node(c, n->b, &b))
			return -1;
		out->i = truthy(&b);
		return 0;
	case N_OR:
		if (eval_node(c, n->a, &a))
			return -1;
		if (truthy(&a)) {
			out->i = 1;
			return 0;
		}
		if (eval_node(c, n->b, &b))
			return -1;
		out->i = truthy(&b);
		return 0;
	default:
		break;
	}
	if (eval_node(c, n->a, &a) || eval_node(c, n->b, &b))
		return -1;
	if (comparison(n->kind, &a, &b, &out->i))
		return 0;
	if (a.is_float || b.is_float) {
		double x = as_float(&a), y = as_float(&b), r = 0.0;

		switch (n->kind) {
		case N_ADD:
			r = x + y;
			break;
		case N_SUB:
			r = x - y;
			break;
		case N_MUL:
			r = x * y;
			break;
		case N_DIV:
			if (y == 0.0)
				return eval_fail(c, n, "division by zero");
			r = x / y;
			break;
		case N_MOD:
			return eval_fail(c, n, "'%' needs integers");
		case N_DIVIDES:
			return eval_fail(c, n, "divides() needs integers");
		case N_MIN:
			r = x < y ? x : y;
			break;
		case N_MAX:
			r = x > y ? x : y;
			break;
		default:
			return eval_fail(c, n, "internal error");
		}
		if (!isfinite(r))
			return eval_fail(c, n, "result is not finite");
		out->is_float = 1;
		out->f = r;
		return 0;
	}
	long long x = a.i, y = b.i;

	switch (n->kind) {
	case N_ADD:
		if (__builtin_add_overflow(x, y, &out->i))
			return eval_fail(c, n, "integer overflow");
		return 0;
	case N_SUB:
		if (__builtin_sub_overflow(x, y, &out->i))
			return eval_fail(c, n, "integer overflow");
		return 0;
	case N_MUL:
		if (__builtin_mul_overflow(x, y, &out->i))
			return eval_fail(c, n, "integer overflow");
		return 0;
	case N_DIV:
	case N_MOD:
		if (y == 0)
			return eval_fail(c, n,
					 n->kind == N_DIV ? "division by zero" : "modulo by zero");
		if (y == -1 && x == (-0x7fffffffffffffffLL - 1))
			return eval_fail(c, n, "integer overflow");
		out->i = n->kind == N_DIV ? x / y : x % y;
		return 0;
	case N_DIVIDES:
		/* divides(a, b): a divides b, i.e. b % a == 0; divides(0, b) is b == 0 */
		if (x == 0)
			out->i = y == 0;
		else if (x == -1)
			out->i = 1;
		else
			out->i = y % x == 0;
		return 0;
	case N_MIN:
		out->i = x < y ? x : y;
		return 0;
	case N_MAX:
		out->i = x > y ? x : y;
		return 0;
	default:
		return eval_fail(c, n, "internal error");
	}
}

int expr_eval(const struct expr *e, const long long *vals, int *truth, char *err, size_t errlen)
{
	struct evalctx c = {e, vals, err, errlen};
	struct value v;

	if (eval_node(&c, e->root, &v))
		return -1;
	*truth = truthy(&v);
	return 0;
}

int expr_uses(const struct expr *e, int var)
{
	return var >= 0 && var < e->nvars && e->uses[var];
}

void expr_free(struct expr *e)
{
	if (!e)
		return;
	free(e->nodes);
	free(e->uses);
	free(e);
}
