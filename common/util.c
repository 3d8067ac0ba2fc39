/*
 * Small shared helpers: checked number parsing, FNV-1a, a growable string buffer and
 * JSON string escaping. libc only.
 */
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/stat.h>

int lb_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int lb_parse_int(const char *s, int min, int max, int *out)
{
	long v;

	if (lb_parse_long(s, min, max, &v))
		return -1;
	*out = (int)v;
	return 0;
}

int lb_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int base = 10;

	if (!s || !*s || !isxdigit((unsigned char)*s))
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		if (!isxdigit((unsigned char)s[2]))
			return -1;
	}
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || end == s || *end)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int lb_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v))
		return -1;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

uint64_t lb_fnv1a64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

void lb_strbuf_init(struct lb_strbuf *sb)
{
	sb->buf = NULL;
	sb->len = 0;
	sb->cap = 0;
	sb->failed = 0;
}

void lb_strbuf_release(struct lb_strbuf *sb)
{
	free(sb->buf);
	lb_strbuf_init(sb);
}

static int strbuf_grow(struct lb_strbuf *sb, size_t extra)
{
	size_t need, cap;
	char *p;

	if (sb->failed)
		return -1;
	if (extra > (size_t)-1 / 2 - sb->len) {
		sb->failed = 1;
		return -1;
	}
	need = sb->len + extra + 1;
	if (need <= sb->cap)
		return 0;
	cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap *= 2;
	p = realloc(sb->buf, cap);
	if (!p) {
		sb->failed = 1;
		return -1;
	}
	sb->buf = p;
	sb->cap = cap;
	return 0;
}

void lb_strbuf_add(struct lb_strbuf *sb, const char *s, size_t n)
{
	if (strbuf_grow(sb, n))
		return;
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void lb_strbuf_adds(struct lb_strbuf *sb, const char *s)
{
	lb_strbuf_add(sb, s, strlen(s));
}

void lb_strbuf_vaddf(struct lb_strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0) {
		sb->failed = 1;
		return;
	}
	if (strbuf_grow(sb, (size_t)n))
		return;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void lb_strbuf_addf(struct lb_strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	lb_strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

const char *lb_strbuf_str(const struct lb_strbuf *sb)
{
	return sb->buf ? sb->buf : "";
}

char *lb_strbuf_detach(struct lb_strbuf *sb)
{
	char *p;

	if (sb->failed) {
		lb_strbuf_release(sb);
		return NULL;
	}
	p = sb->buf ? sb->buf : calloc(1, 1);
	lb_strbuf_init(sb);
	return p;
}

/* The escape of one byte into out (at most 7 bytes incl. NUL); returns its length. */
static int json_escape_byte(unsigned char c, char out[8])
{
	switch (c) {
	case '"':
		return snprintf(out, 8, "\\\"");
	case '\\':
		return snprintf(out, 8, "\\\\");
	case '\n':
		return snprintf(out, 8, "\\n");
	case '\r':
		return snprintf(out, 8, "\\r");
	case '\t':
		return snprintf(out, 8, "\\t");
	case '\b':
		return snprintf(out, 8, "\\b");
	case '\f':
		return snprintf(out, 8, "\\f");
	default:
		if (c < 0x20 || c == 0x7f)
			return snprintf(out, 8, "\\u%04x", c);
		out[0] = (char)c;
		out[1] = '\0';
		return 1;
	}
}

void lb_strbuf_add_json(struct lb_strbuf *sb, const char *s)
{
	char e[8];
	int n;

	lb_strbuf_add(sb, "\"", 1);
	for (; s && *s; s++) {
		n = json_escape_byte((unsigned char)*s, e);
		lb_strbuf_add(sb, e, (size_t)n);
	}
	lb_strbuf_add(sb, "\"", 1);
}

size_t lb_json_escape(const char *s, char *buf, size_t len)
{
	char e[8];
	size_t need = 0;
	int n, i;

#define PUT(ch)                                                                                    \
	do {                                                                                       \
		if (need + 1 < len)                                                                \
			buf[need] = (ch);                                                          \
		need++;                                                                            \
	} while (0)
	PUT('"');
	for (; s && *s; s++) {
		n = json_escape_byte((unsigned char)*s, e);
		for (i = 0; i < n; i++)
			PUT(e[i]);
	}
	PUT('"');
#undef PUT
	if (len)
		buf[need < len ? need : len - 1] = '\0';
	return need;
}

double lb_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int lb_read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat sb;
	char *b;

	*buf = NULL;
	*len = 0;
	if (!f)
		return -1;
	if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
		fclose(f);
		errno = EINVAL;
		return -1;
	}
	b = malloc((size_t)sb.st_size + 1);
	if (!b) {
		fclose(f);
		errno = ENOMEM;
		return -1;
	}
	*len = fread(b, 1, (size_t)sb.st_size, f);
	b[*len] = 0;
	fclose(f);
	*buf = b;
	return 0;
}

int lb_mkdir_p(const char *path, char *err, size_t errlen)
{
	char buf[4096];

	if (strlen(path) >= sizeof(buf)) {
		snprintf(err, errlen, "cannot create '%.200s...': the path is too long", path);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(buf, 0777) && errno != EEXIST)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot create '%s': %s", buf, strerror(errno));
	return -1;
}

int lb_path_join(char *out, size_t len, const char *dir, const char *name)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return snprintf(out, len, "%.*s%s%s", (int)n, dir, n && dir[n - 1] == '/' ? "" : "/",
			name);
}

int lb_sweep_name_check(const char *name, char *err, size_t errlen)
{
	static const char rule[] = "a sweep name is 1 to 63 letters, digits, '.', '_' or '-', "
				   "starting with a letter or a digit";
	size_t n;
	int shown = 1; /* the name goes into the message only when every byte is printable */

	if (!name || !*name) {
		snprintf(err, errlen, "the sweep name is empty: %s", rule);
		return -1;
	}
	for (n = 0; name[n]; n++)
		if ((unsigned char)name[n] < 0x20 || (unsigned char)name[n] >= 0x7f)
			shown = 0;
	for (n = 0; name[n]; n++) {
		unsigned char c = (unsigned char)name[n];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			continue;
		if (n > 0 && (c == '.' || c == '_' || c == '-'))
			continue;
		if (!shown)
			snprintf(err, errlen,
				 "sweep name has the byte 0x%02x at character %zu: %s", c, n + 1,
				 rule);
		else if (n == 0 && (c == '.' || c == '_' || c == '-'))
			snprintf(err, errlen, "sweep name '%.80s' starts with '%c': %s", name, c,
				 rule);
		else if (c >= 0x20 && c < 0x7f)
			snprintf(err, errlen, "sweep name '%.80s' has '%c' at character %zu: %s",
				 name, c, n + 1, rule);
		else
			snprintf(err, errlen,
				 "sweep name has the byte 0x%02x at character %zu: %s", c, n + 1,
				 rule);
		return -1;
	}
	if (n > LB_SWEEP_NAME_MAX) {
		snprintf(err, errlen, "sweep name '%.20s...' is %zu characters long: %s", name, n,
			 rule);
		return -1;
	}
	return 0;
}

int lb_name_ok(const char *s, size_t max)
{
	size_t n = 0;

	if (!s || !*s)
		return 0;
	for (; s[n]; n++) {
		char c = s[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return n < max;
}
