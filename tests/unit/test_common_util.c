/*
 * Unit tests of the shared helpers (common/util.c): checked number parsing, FNV-1a, the
 * growable string buffer, JSON string escaping (invalid UTF-8 included), text made safe
 * for a terminal, reading a whole file (never blocking on a FIFO) and writing one whole
 * or not at all (a full disk, a file-size limit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/util.h"

static void test_parse_long(void **state)
{
	long v = 7;
	int i = 7;

	assert_int_equal(lb_parse_long("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(lb_parse_long("-5", -10, 10, &v), 0);
	assert_int_equal(v, -5);
	v = 7;
	assert_int_equal(lb_parse_long("101", 0, 100, &v), -1);
	assert_int_equal(lb_parse_long("", 0, 100, &v), -1);
	assert_int_equal(lb_parse_long(NULL, 0, 100, &v), -1);
	assert_int_equal(lb_parse_long("4x", 0, 100, &v), -1);
	assert_int_equal(lb_parse_long(" 4", 0, 100, &v), -1);
	assert_int_equal(lb_parse_long("4 ", 0, 100, &v), -1);
	assert_int_equal(lb_parse_long("99999999999999999999999", 0, 100, &v), -1);
	assert_int_equal(v, 7);
	assert_int_equal(lb_parse_int("2147483647", 0, 2147483647, &i), 0);
	assert_int_equal(i, 2147483647);
	assert_int_equal(lb_parse_int("2147483648", 0, 2147483647, &i), -1);
}

static void test_parse_u64_double(void **state)
{
	uint64_t u = 0;
	double d = 0;

	assert_int_equal(lb_parse_u64("18446744073709551615", &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(lb_parse_u64("0x1F", &u), 0);
	assert_true(u == 31);
	assert_int_equal(lb_parse_u64("-1", &u), -1);
	assert_int_equal(lb_parse_u64("18446744073709551616", &u), -1);
	assert_int_equal(lb_parse_u64("0x", &u), -1);
	assert_int_equal(lb_parse_double("53.80616998672485", 0, 1e9, &d), 0);
	assert_true(d > 53.806 && d < 53.807);
	assert_int_equal(lb_parse_double("1e-3", 0, 1, &d), 0);
	assert_int_equal(lb_parse_double("OOM Error", 0, 1e9, &d), -1);
	assert_int_equal(lb_parse_double("nan", -1e9, 1e9, &d), -1);
	assert_int_equal(lb_parse_double("inf", -1e9, 1e300, &d), -1);
	assert_int_equal(lb_parse_double("2", 0, 1, &d), -1);
	assert_int_equal(lb_parse_double("0.5 ", 0, 1, &d), -1);
}

static void test_fnv(void **state)
{
	/* reference values of 64-bit FNV-1a */
	assert_true(lb_fnv1a64("", 0) == 0xcbf29ce484222325ULL);
	assert_true(lb_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
	assert_true(lb_fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
}

static void test_strbuf(void **state)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char *s;
	int i;

	assert_string_equal(lb_strbuf_str(&sb), "");
	lb_strbuf_adds(&sb, "tp=");
	lb_strbuf_addf(&sb, "%d", 4);
	lb_strbuf_add(&sb, " pp=2xx", 5);
	assert_string_equal(lb_strbuf_str(&sb), "tp=4 pp=2");
	assert_int_equal(sb.len, 9);
	for (i = 0; i < 1000; i++)
		lb_strbuf_addf(&sb, "%03d", i % 1000);
	assert_int_equal(sb.len, 9 + 3000);
	assert_int_equal(sb.failed, 0);
	s = lb_strbuf_detach(&sb);
	assert_non_null(s);
	assert_int_equal(strncmp(s, "tp=4 pp=2000001002", 18), 0);
	assert_null(sb.buf);
	assert_int_equal(sb.len, 0);
	free(s);
	s = lb_strbuf_detach(&sb);
	assert_string_equal(s, "");
	free(s);
	lb_strbuf_release(&sb);
}

static void test_json(void **state)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char buf[64];
	size_t n;

	lb_strbuf_add_json(&sb, "a\"b\\c\nd\te\x01");
	assert_string_equal(lb_strbuf_str(&sb), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
	lb_strbuf_release(&sb);
	n = lb_json_escape("flash_attention2 + RMS kernel", buf, sizeof(buf));
	assert_string_equal(buf, "\"flash_attention2 + RMS kernel\"");
	assert_int_equal(n, strlen(buf));
	/* truncation keeps snprintf semantics */
	n = lb_json_escape("abc\"", buf, 4);
	assert_int_equal(n, 7);
	assert_string_equal(buf, "\"ab");
	n = lb_json_escape("", buf, sizeof(buf));
	assert_int_equal(n, 2);
	assert_string_equal(buf, "\"\"");
	/* UTF-8 passes through */
	lb_json_escape("\xc3\xa9", buf, sizeof(buf));
	assert_string_equal(buf, "\"\xc3\xa9\"");
}

/* lb_read_file: a whole file, NUL-terminated; a folder or a missing file refused. */
static void test_path_join(void **state)
{
	char buf[64];

	(void)state;
	lb_path_join(buf, sizeof(buf), "rep/", "report.html");
	assert_string_equal(buf, "rep/report.html");
	lb_path_join(buf, sizeof(buf), "rep", "report.html");
	assert_string_equal(buf, "rep/report.html");
	lb_path_join(buf, sizeof(buf), "a/b///", "x");
	assert_string_equal(buf, "a/b/x");
	lb_path_join(buf, sizeof(buf), "/", "x");
	assert_string_equal(buf, "/x");
	lb_path_join(buf, sizeof(buf), "//", "x");
	assert_string_equal(buf, "/x");
	assert_int_equal(lb_path_join(buf, 4, "rep", "report.html"), 15);
	assert_string_equal(buf, "rep");
}

/* The one sweep-name rule (common/util.h): what passes, and what each refusal says. */
static void test_sweep_name_check(void **state)
{
	static const char *const ok[] = {"a", "paper-13b-2k", "h200_1gpu", "a..b", "9x", "Z.-_",
					 "x123456789012345678901234567890123456789012345678901234567890z"};
	static const struct {
		const char *name, *want;
	} no[] = {
	    {"", "the sweep name is empty: a sweep name is 1 to 63 letters"},
	    {".", "sweep name '.' starts with '.': a sweep name is"},
	    {"..", "sweep name '..' starts with '.'"},
	    {"-rf", "sweep name '-rf' starts with '-'"},
	    {"_x", "sweep name '_x' starts with '_'"},
	    {"a/b", "sweep name 'a/b' has '/' at character 2"},
	    {"a b", "has ' ' at character 2"},
	    {"a\nb", "has the byte 0x0a at character 2"},
	    {"a b\033[2J", "sweep name has the byte 0x20 at character 2"}, /* never shown */
	    {"x1234567890123456789012345678901234567890123456789012345678901234",
	     "sweep name 'x1234567890123456789...' is 65 characters long"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (lb_sweep_name_check(ok[i], err, sizeof(err)))
			fail_msg("'%s' refused: %s", ok[i], err);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		err[0] = '\0';
		assert_int_equal(lb_sweep_name_check(no[i].name, err, sizeof(err)), -1);
		if (!strstr(err, no[i].want))
			fail_msg("'%s': said '%s', want '%s'", no[i].name, err, no[i].want);
		assert_non_null(strstr(err, "starting with a letter or a digit"));
	}
	assert_int_equal(lb_sweep_name_check(NULL, err, sizeof(err)), -1);
}

static void test_read_file(void **state)
{
	char dir[] = "/tmp/lb-util-XXXXXX", path[64], *buf = (char *)1;
	size_t len = 7;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a.txt", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("two\nlines\n", f);
	fclose(f);
	assert_int_equal(lb_read_file(path, &buf, &len), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "two\nlines\n");
	free(buf);
	assert_int_equal(lb_read_file(dir, &buf, &len), -1);
	assert_int_equal(errno, EINVAL);
	assert_null(buf);
	assert_int_equal(len, 0);
	unlink(path);
	assert_int_equal(lb_read_file(path, &buf, &len), -1);
	assert_int_equal(errno, ENOENT);
	rmdir(dir);
}

/* Invalid UTF-8 (a spec's description, a run log's label) never makes invalid JSON: each
 * byte that is not part of a valid sequence becomes \ufffd, in both escapers and in
 * text printed by cJSON. */
static void test_json_utf8(void **state)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	char buf[64], *fixed;

	assert_int_equal(lb_utf8_len("a", 1), 1);
	assert_int_equal(lb_utf8_len("\xc3\xa9", 2), 2);
	assert_int_equal(lb_utf8_len("\xe2\x82\xac", 3), 3);
	assert_int_equal(lb_utf8_len("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(lb_utf8_len("\xc3", 1), 0);		 /* cut off */
	assert_int_equal(lb_utf8_len("\xa9", 1), 0);		 /* stray continuation */
	assert_int_equal(lb_utf8_len("\xc0\xaf", 2), 0);	 /* overlong '/' */
	assert_int_equal(lb_utf8_len("\xe0\x80\xaf", 3), 0);	 /* overlong */
	assert_int_equal(lb_utf8_len("\xed\xa0\x80", 3), 0);	 /* surrogate */
	assert_int_equal(lb_utf8_len("\xf4\x90\x80\x80", 4), 0); /* above U+10FFFF */
	lb_strbuf_add_json(&sb, "a\xff\xc3\xa9\xc3");
	assert_string_equal(lb_strbuf_str(&sb), "\"a\\ufffd\xc3\xa9\\ufffd\"");
	lb_strbuf_release(&sb);
	lb_json_escape("\x80x", buf, sizeof(buf));
	assert_string_equal(buf, "\"\\ufffdx\"");
	fixed = lb_json_utf8_fix("{\"d\": \"bad \xfe\xff, good \xc3\xa9\"}");
	assert_string_equal(fixed, "{\"d\": \"bad \\ufffd\\ufffd, good \xc3\xa9\"}");
	free(fixed);
}

/* Text for a terminal: ESC, other controls, C1 and invalid bytes made visible; UTF-8
 * kept; keep_lines lets a page's newlines and tabs through. */
static void test_visible(void **state)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	const char *evil = "ok\x1b[2J\x07\r\n\t\xc2\x9b"
			   "1m\xc3\xa9\xff\x7f";

	lb_strbuf_add_visible(&sb, evil, strlen(evil), 0);
	assert_string_equal(lb_strbuf_str(&sb),
			    "ok\\x1b[2J\\x07\\r\\n\\t\\xc2\\x9b1m\xc3\xa9\\xff\\x7f");
	lb_strbuf_release(&sb);
	lb_strbuf_add_visible(&sb, evil, strlen(evil), 1);
	assert_string_equal(lb_strbuf_str(&sb),
			    "ok\\x1b[2J\\x07\\r\n\t\\xc2\\x9b1m\xc3\xa9\\xff\\x7f");
	lb_strbuf_release(&sb);
	assert_int_equal(lb_text_needs_escape("plain \xc3\xa9\n", 9, 1), 0);
	assert_int_equal(lb_text_needs_escape("plain \xc3\xa9\n", 9, 0), 1);
	assert_int_equal(lb_text_needs_escape("\x1b", 1, 1), 1);
}

/* A FIFO is refused at once (EINVAL), never waited on; nothing is read from it. */
static void test_read_fifo(void **state)
{
	char dir[] = "/tmp/lb-util-XXXXXX", path[64], *buf = (char *)1;
	size_t len = 7;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/run-x.jsonl", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10); /* a hang fails the test instead of stalling the suite */
	assert_int_equal(lb_read_file(path, &buf, &len), -1);
	alarm(0);
	assert_int_equal(errno, EINVAL);
	assert_null(buf);
	unlink(path);
	rmdir(dir);
}

/* Count the entries of dir (. and .. aside). */
static int entries(const char *dir)
{
	char cmd[128];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

/* lb_write_file_atomic: the whole text, or (a file-size limit: the kernel's EFBIG, as a
 * full disk's ENOSPC) the old file untouched and no temporary file left; lb_write_all to
 * /dev/full says ENOSPC. */
static void test_write_atomic(void **state)
{
	char dir[] = "/tmp/lb-util-XXXXXX", path[64], err[256], *buf;
	char big[8192];
	size_t len;
	pid_t pid;
	int st, fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/report.html", dir);
	assert_int_equal(lb_write_file_atomic(path, "old\n", 4, err, sizeof(err)), 0);
	assert_int_equal(lb_read_file(path, &buf, &len), 0);
	assert_string_equal(buf, "old\n");
	free(buf);
	memset(big, 'x', sizeof(big));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {1024, 1024};
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		if (lb_write_file_atomic(path, big, sizeof(big), err, sizeof(err)) != -1)
			_exit(1);
		_exit(strstr(err, "cannot write '") && strstr(err, "report.html': File too large")
			  ? 0
			  : 2);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(lb_read_file(path, &buf, &len), 0);
	assert_string_equal(buf, "old\n"); /* untouched */
	free(buf);
	assert_int_equal(entries(dir), 1); /* no temporary file left */
	fd = open("/dev/full", O_WRONLY);
	if (fd >= 0) {
		assert_int_equal(lb_write_all(fd, "x", 1), -1);
		assert_int_equal(errno, ENOSPC);
		close(fd);
	}
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_long), cmocka_unit_test(test_parse_u64_double),
	    cmocka_unit_test(test_fnv),	       cmocka_unit_test(test_strbuf),
	    cmocka_unit_test(test_json),       cmocka_unit_test(test_read_file),
	    cmocka_unit_test(test_json_utf8),  cmocka_unit_test(test_visible),
	    cmocka_unit_test(test_read_fifo),  cmocka_unit_test(test_write_atomic),
	    cmocka_unit_test(test_sweep_name_check), cmocka_unit_test(test_path_join),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
