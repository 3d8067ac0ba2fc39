/*
 * The `where` constraint language of sweep specs: a small expression language over
 * integer variables (layout fields), compiled once per spec and evaluated once per grid
 * point. Integer and float arithmetic (+ - * / %), comparisons (== != < <= > >=),
 * and/or/not (also && || !), parentheses, the functions divides(a, b), min(a, b),
 * max(a, b), and string literals compared with enum-valued variables
 * (attention == "flash"). Grammar, precedence and semantics: docs/spec.md.
 * Pure: no I/O, no globals.
 */
#ifndef LB_EXPR_H
#define LB_EXPR_H

#include <stddef.h>

struct expr;

/* The variables an expression may name, given by the caller. names[i] is variable i.
 * enum_value, when not NULL, maps a string literal compared with variable i to its
 * integer code: returns 0 and sets *out, or -1 when the string is not a value of that
 * variable (or the variable takes no strings). */
struct expr_vars {
	const char *const *names;
	int n;
	int (*enum_value)(int var, const char *s, long long *out);
};

/* Compile src. Returns 0 and *out (caller frees with expr_free), or -1 with err set to
 * "column N: fault" (N is 1-based), e.g. "column 5: unknown identifier 'tpp'". */
int expr_compile(const char *src, const struct expr_vars *vars, struct expr **out, char *err,
		 size_t errlen);

/* Evaluate with vals[i] the value of variable i. Returns 0 and sets *truth to 0 or 1
 * (nonzero result), or -1 with err set ("column N: division by zero"). */
int expr_eval(const struct expr *e, const long long *vals, int *truth, char *err, size_t errlen);

/* 1 if the expression reads variable var. */
int expr_uses(const struct expr *e, int var);

void expr_free(struct expr *e);

#endif
