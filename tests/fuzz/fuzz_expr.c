/*
 * libFuzzer target: arbitrary bytes as a `where` expression, compiled and evaluated
 * over variables taken from the input's tail. Compilation and evaluation must fail
 * cleanly (an error naming a column) or succeed; never crash, overflow or leak.
 */
// fuzz-sources: sweeps/expr.c
// fuzz-libs: -lm
// fuzz-seeds: tests/fuzz/seeds/expr/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sweeps/expr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"tp", "pp", "dp", "heads", "attention"};

static int enum_value(int var, const char *s, long long *out)
{
	if (var != 4 || strcmp(s, "flash"))
		return -1;
	*out = 2;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct expr_vars vars = {names, 5, enum_value};
	long long vals[5] = {1, 2, 0, 40, 2};
	struct expr *e = NULL;
	char err[256], *src;
	size_t n = size, i;
	int truth;

	if (size > 4096)
		return 0;
	/* the last 5 bytes (when present) pick the variable values, some extreme */
	if (n >= 5) {
		n -= 5;
		for (i = 0; i < 5; i++) {
			uint8_t b = data[n + i];

			vals[i] = b == 255   ? 0x7fffffffffffffffLL
				  : b == 254 ? (-0x7fffffffffffffffLL - 1)
					     : (long long)b - 8;
		}
	}
	src = malloc(n + 1);
	if (!src)
		return 0;
	memcpy(src, data, n);
	src[n] = '\0';
	if (expr_compile(src, &vars, &e, err, sizeof(err))) {
		if (e || strncmp(err, "column ", 7))
			__builtin_trap();
	} else {
		if (expr_eval(e, vals, &truth, err, sizeof(err)) == 0 && truth != 0 && truth != 1)
			__builtin_trap();
		expr_free(e);
	}
	free(src);
	return 0;
}
