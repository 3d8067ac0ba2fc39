/*
 * Unit tests of the `where` expression language (sweeps/expr.c): precedence and
 * associativity, integer and float arithmetic, the divides/min/max functions, strings
 * compared with enum variables, and the errors with their columns (syntax, unknown
 * identifiers, division by zero, overflow, nesting).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sweeps/expr.h"

static const char *const names[] = {"tp", "pp", "heads", "attention"};
enum { V_TP, V_PP, V_HEADS, V_ATTN };

static int enum_value(int var, const char *s, long long *out)
{
	if (var != V_ATTN)
		return -1;
	if (!strcmp(s, "naive"))
		*out = 0;
	else if (!strcmp(s, "flash"))
		*out = 2;
	else
		return -1;
	return 0;
}

static const struct expr_vars vars = {names, 4, enum_value};

/* Compile and evaluate to a truth value; fails the test on any error. */
static int truth_of(const char *src, const long long *vals)
{
	struct expr *e = NULL;
	char err[256] = "";
	int t = -1;

	if (expr_compile(src, &vars, &e, err, sizeof(err)))
		fail_msg("compile '%s': %s", src, err);
	if (expr_eval(e, vals, &t, err, sizeof(err)))
		fail_msg("eval '%s': %s", src, err);
	expr_free(e);
	return t;
}

static void compile_error(const char *src, const char *want)
{
	struct expr *e = NULL;
	char err[256] = "";

	if (!expr_compile(src, &vars, &e, err, sizeof(err))) {
		expr_free(e);
		fail_msg("'%s' compiled; wanted error '%s'", src, want);
	}
	assert_null(e);
	if (!strstr(err, want))
		fail_msg("'%s': error '%s' does not contain '%s'", src, err, want);
}

static void eval_error(const char *src, const long long *vals, const char *want)
{
	struct expr *e = NULL;
	char err[256] = "";
	int t;

	if (expr_compile(src, &vars, &e, err, sizeof(err)))
		fail_msg("compile '%s': %s", src, err);
	if (!expr_eval(e, vals, &t, err, sizeof(err))) {
		expr_free(e);
		fail_msg("'%s' evaluated; wanted error '%s'", src, want);
	}
	expr_free(e);
	if (!strstr(err, want))
		fail_msg("'%s': error '%s' does not contain '%s'", src, err, want);
}

static const long long v0[] = {2, 4, 40, 2};

static void test_precedence(void **state)
{
	(void)state;
	assert_int_equal(truth_of("1 + 2 * 3 == 7", v0), 1);
	assert_int_equal(truth_of("(1 + 2) * 3 == 9", v0), 1);
	assert_int_equal(truth_of("10 - 4 - 3 == 3", v0), 1); /* left associative */
	assert_int_equal(truth_of("64 / 4 / 2 == 8", v0), 1);
	assert_int_equal(truth_of("2 + 3 % 2 == 3", v0), 1); /* % binds like * */
	assert_int_equal(truth_of("-2 * -3 == 6", v0), 1);
	assert_int_equal(truth_of("1 == 1 or 1 == 2 and 0", v0), 1); /* and before or */
	assert_int_equal(truth_of("(1 == 1 or 1 == 2) and 0", v0), 0);
	assert_int_equal(truth_of("not 1 == 2", v0), 1); /* not binds looser than == */
	assert_int_equal(truth_of("!(tp == 2)", v0), 0);
	assert_int_equal(truth_of("tp == 2 && pp == 4 || 0", v0), 1);
	assert_int_equal(truth_of("1 < 2 and 2 <= 2 and 3 > 2 and 3 >= 3 and 1 != 2", v0), 1);
	assert_int_equal(truth_of("not not 1", v0), 1);
	assert_int_equal(truth_of("true and not false", v0), 1);
}

static void test_arithmetic(void **state)
{
	(void)state;
	assert_int_equal(truth_of("7 / 2 == 3", v0), 1);     /* integers truncate */
	assert_int_equal(truth_of("-7 / 2 == -3", v0), 1);   /* toward zero, as in C */
	assert_int_equal(truth_of("7.0 / 2 == 3.5", v0), 1); /* a float makes it float */
	assert_int_equal(truth_of("7 % 3 == 1", v0), 1);
	assert_int_equal(truth_of("1e3 == 1000", v0), 1);
	assert_int_equal(truth_of("0.5 * heads == 20", v0), 1);
	assert_int_equal(truth_of("tp * pp == 8", v0), 1);
	assert_int_equal(truth_of("heads / tp == 20", v0), 1);
	assert_int_equal(truth_of("2.5 > 2", v0), 1);
	assert_int_equal(truth_of("0", v0), 0);
	assert_int_equal(truth_of("0.0", v0), 0);
	assert_int_equal(truth_of("tp", v0), 1);
}

static void test_functions(void **state)
{
	(void)state;
	assert_int_equal(truth_of("divides(tp, heads)", v0), 1);
	assert_int_equal(truth_of("divides(3, heads)", v0), 0);
	assert_int_equal(truth_of("divides(pp, 8)", v0), 1);
	assert_int_equal(truth_of("divides(0, 0)", v0), 1);
	assert_int_equal(truth_of("divides(0, 5)", v0), 0);
	assert_int_equal(truth_of("min(tp, pp) == 2 and max(tp, pp) == 4", v0), 1);
	assert_int_equal(truth_of("max(1.5, 1) == 1.5", v0), 1);
}

static void test_strings(void **state)
{
	(void)state;
	assert_int_equal(truth_of("attention == \"flash\"", v0), 1);
	assert_int_equal(truth_of("\"naive\" != attention", v0), 1);
	compile_error("attention == \"flush\"",
		      "column 14: \"flush\" is not a value of 'attention'");
	compile_error("tp == \"flash\"", "is not a value of 'tp'");
	compile_error("\"flash\"", "a string may only be compared with a named field");
	compile_error("attention < \"flash\"", "strings compare only with == or !=");
	compile_error("attention == \"flash", "unterminated string");
	compile_error("\"a\" == \"b\"", "comparing two strings");
}

static void test_compile_errors(void **state)
{
	(void)state;
	compile_error("tp + tpp", "column 6: unknown identifier 'tpp'");
	compile_error("1 +", "column 4: unexpected end of expression");
	compile_error("(1 + 2", "column 7: expected ')'");
	compile_error("1 + 2)", "column 6: unbalanced ')'");
	compile_error("tp = 2", "column 4: '=' is not an operator; use '=='");
	compile_error("tp < pp < 3", "column 9: comparisons do not chain");
	compile_error("tp & pp", "column 4: unexpected '&'; use '&&'");
	compile_error("foo(1, 2)", "column 1: unknown function 'foo'");
	compile_error("divides(1)", "expected ','");
	compile_error("1 2", "column 3: unexpected text after the expression");
	compile_error("", "column 1: unexpected end of expression");
	compile_error("tp $ 2", "column 4: unexpected text after the expression");
	compile_error("12abc", "column 1: bad integer '12abc'");
	compile_error("99999999999999999999", "bad integer");
	compile_error("and", "expected an operand");
	compile_error("@", "column 1: unexpected '@'");
}

static void test_nesting(void **state)
{
	char deep[512];
	int i;

	(void)state;
	for (i = 0; i < 200; i++)
		deep[i] = '(';
	deep[200] = '1';
	for (i = 0; i < 200; i++)
		deep[201 + i] = ')';
	deep[401] = '\0';
	compile_error(deep, "nested too deeply");
	for (i = 0; i < 200; i++)
		deep[i] = '-';
	deep[200] = '1';
	deep[201] = '\0';
	compile_error(deep, "nested too deeply");
	/* 20 levels are fine */
	assert_int_equal(truth_of("((((((((((((((((((((1))))))))))))))))))))", v0), 1);
}

static void test_eval_errors(void **state)
{
	const long long v1[] = {2, 1, 40, 0};

	(void)state;
	eval_error("tp / (pp - 1)", v1, "column 4: division by zero");
	eval_error("heads % (pp - 1) == 0", v1, "column 7: modulo by zero");
	eval_error("1.5 / (pp - 1)", v1, "division by zero");
	eval_error("9223372036854775807 + pp", v1, "integer overflow");
	eval_error("-9223372036854775807 - 2", v1, "integer overflow");
	eval_error("4611686018427387904 * 2", v1, "integer overflow");
	eval_error("2.5 % 2", v1, "'%' needs integers");
	/* short-circuit: the right side is not evaluated */
	assert_int_equal(truth_of("pp == 4 or tp / 0", v0), 1);
	assert_int_equal(truth_of("pp == 1 and tp / 0", v0), 0);
}

static void test_uses(void **state)
{
	struct expr *e = NULL;
	char err[128];

	(void)state;
	assert_int_equal(expr_compile("divides(tp, heads)", &vars, &e, err, sizeof(err)), 0);
	assert_true(expr_uses(e, V_TP));
	assert_true(expr_uses(e, V_HEADS));
	assert_false(expr_uses(e, V_PP));
	expr_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_precedence),	   cmocka_unit_test(test_arithmetic),
	    cmocka_unit_test(test_functions),	   cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_compile_errors), cmocka_unit_test(test_nesting),
	    cmocka_unit_test(test_eval_errors),	   cmocka_unit_test(test_uses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
