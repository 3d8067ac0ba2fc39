#!/bin/sh
# tests/run.sh counts a cmocka binary whose every test skipped as SKIP, with the message
# the test printed before skipping as its reason (cmocka itself exits 0 then); one that
# passed some tests and skipped others is a PASS that names its skips; an exit 77 stays a
# skip and a failure a failure. Two small cmocka programs, built here, are the binaries.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/tests"
cat >"$tmp/demo.c" <<'C'
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

static void skipped(void **state)
{
	(void)state;
	print_message("the demo data is absent\n");
	skip();
}

static void passed(void **state)
{
	(void)state;
	assert_int_equal(1, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest only_skips[] = {cmocka_unit_test(skipped),
						cmocka_unit_test(skipped)};
	const struct CMUnitTest mixed[] = {cmocka_unit_test(passed), cmocka_unit_test(skipped)};

	(void)argv;
	if (argc > 1)
		return cmocka_run_group_tests(mixed, NULL, NULL);
	return cmocka_run_group_tests(only_skips, NULL, NULL);
}
C
if ! cc -o "$tmp/demo" "$tmp/demo.c" -lcmocka 2>"$tmp/cc.log"; then
	cat "$tmp/cc.log"
	echo "FAIL: the cmocka demo did not build"
	exit 1
fi
printf '#!/bin/sh\nexec %s\n' "$tmp/demo" >"$tmp/build/tests/test_skipdemo_all"
printf '#!/bin/sh\nexec %s mixed\n' "$tmp/demo" >"$tmp/build/tests/test_skipdemo_mixed"
printf '#!/bin/sh\necho "no device here"\nexit 77\n' >"$tmp/build/tests/test_skipdemo_77"
chmod +x "$tmp/build/tests/"test_skipdemo_*
BUILD="$tmp/build" TESTS=test_skipdemo LB_FUZZ=0 sh tests/run.sh >"$tmp/out" 2>&1
rc=$?
fail=0
check() { # pattern what
	grep -qE "$1" "$tmp/out" || { echo "FAIL: $2"; fail=1; }
}
check '^  SKIP  test_skipdemo_all +\(the demo data is absent\)$' \
	"a binary whose every test skipped is not SKIP with its reason"
check '^  PASS  test_skipdemo_mixed .*\(1 skipped: the demo data is absent\)$' \
	"a binary that passed one test and skipped one does not name its skip"
check '^  SKIP  test_skipdemo_77 +\(no device here\)$' "an exit 77 is not a skip"
check '^passed with tests skipped: test_skipdemo_mixed \(1\)$' "the partial skip is not listed before the summary"
check '^1 passed, 0 failed, 2 skipped$' "the summary does not count the skips as skips"
[ $rc = 0 ] || { echo "FAIL: run.sh exited $rc"; fail=1; }
[ $fail = 0 ] || sed 's/^/    | /' "$tmp/out"
exit $fail
