/*
 * Small shared helpers: checked number parsing, FNV-1a, a growable string buffer, JSON
 * string escaping, UTF-8 checks and terminal-safe text, whole-file reads and all-or-nothing
 * writes, growing arrays, CSV fields and name lookups. libc only.
 */
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

/* s read whole, as strtol (integer: base 10, into *l) or strtod (into *d) reads it: not
 * empty, no leading space (strto* would skip it), nothing after the number, and no range
 * error. 0, or -1. */
static int read_number(const char *s, int integer, long *l, double *d)
{
	char *end;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	if (integer)
		*l = strtol(s, &end, 10);
	else
		*d = strtod(s, &end);
	return errno || end == s || *end ? -1 : 0;
}

int lb_parse_long(const char *s, long min, long max, long *out)
{
	long v;

	if (read_number(s, 1, &v, NULL) || v < min || v > max)
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

int lb_parse_bytes(const char *s, uint64_t *out)
{
	static const char suffixes[] = "KMGT"; /* 2^10, 2^20, 2^30, 2^40 */
	char num[64];
	size_t n = strlen(s);
	const char *suf;
	uint64_t mul = 1, v;

	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	suf = strchr(suffixes, toupper((unsigned char)num[n - 1]));
	if (suf && *suf) {
		mul = 1ULL << (10 * (suf - suffixes + 1));
		num[n - 1] = '\0';
	}
	if (lb_parse_u64(num, &v) || (v && v > UINT64_MAX / mul))
		return -1;
	*out = v * mul;
	return 0;
}

int lb_parse_double(const char *s, double min, double max, double *out)
{
	double v;

	if (read_number(s, 0, NULL, &v) || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

void lb_csv_put(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int lb_name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; s && i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
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
	static const char *const named[128] = {
	    ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\r'] = "\\r",
	    ['\t'] = "\\t", ['\b'] = "\\b",  ['\f'] = "\\f",
	};

	if (c < 128 && named[c])
		return snprintf(out, 8, "%s", named[c]);
	if (c < 0x20 || c == 0x7f)
		return snprintf(out, 8, "\\u%04x", c);
	out[0] = (char)c;
	out[1] = '\0';
	return 1;
}

size_t lb_utf8_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned c = n ? p[0] : 0;
	size_t len;
	unsigned cp;

	if (!n)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0; /* a continuation byte, 0xc0/0xc1 (overlong), or 0xf5.. */
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The JSON text of s, quotes included, handed to put(bytes, n, arg) piece by piece. */
static void json_string(const char *s, void (*put)(const char *, size_t, void *), void *arg)
{
	char e[8];
	size_t n = s ? strlen(s) : 0, k;

	put("\"", 1, arg);
	for (size_t i = 0; i < n; i += k) {
		k = lb_utf8_len(s + i, n - i);
		if (k > 1) {
			put(s + i, k, arg);
		} else if (k == 1) {
			put(e, (size_t)json_escape_byte((unsigned char)s[i], e), arg);
		} else {
			put("\\ufffd", 6, arg); /* not UTF-8: the replacement character */
			k = 1;
		}
	}
	put("\"", 1, arg);
}

static void put_strbuf(const char *p, size_t n, void *arg)
{
	lb_strbuf_add(arg, p, n);
}

void lb_strbuf_add_json(struct lb_strbuf *sb, const char *s)
{
	json_string(s, put_strbuf, sb);
}

struct fixed_buf {
	char *buf;
	size_t len, need;
};

static void put_fixed(const char *p, size_t n, void *arg)
{
	struct fixed_buf *b = arg;

	for (size_t i = 0; i < n; i++, b->need++)
		if (b->need + 1 < b->len)
			b->buf[b->need] = p[i];
}

size_t lb_json_escape(const char *s, char *buf, size_t len)
{
	struct fixed_buf b = {buf, len, 0};

	json_string(s, put_fixed, &b);
	if (len)
		buf[b.need < len ? b.need : len - 1] = '\0';
	return b.need;
}

char *lb_json_utf8_fix(const char *text)
{
	struct lb_strbuf sb = LB_STRBUF_INIT;
	size_t n = strlen(text), k;

	for (size_t i = 0; i < n; i += k) {
		k = lb_utf8_len(text + i, n - i);
		if (k) {
			lb_strbuf_add(&sb, text + i, k);
		} else {
			lb_strbuf_add(&sb, "\\ufffd", 6);
			k = 1;
		}
	}
	return lb_strbuf_detach(&sb);
}

/* What lb_strbuf_add_visible does with the sequence of k bytes at s (k from lb_utf8_len,
 * 0: not UTF-8): 0 keep, 1 escape byte by byte. */
static int needs_escape(const unsigned char *s, size_t k, int keep_lines)
{
	if (!k)
		return 1;
	if (k == 1)
		return (s[0] < 0x20 || s[0] == 0x7f) &&
		       !(keep_lines && (s[0] == '\n' || s[0] == '\t'));
	return k == 2 && s[0] == 0xc2 && s[1] < 0xa0; /* C1: U+0080..U+009F */
}

int lb_text_needs_escape(const char *s, size_t n, int keep_lines)
{
	size_t k;

	for (size_t i = 0; i < n; i += k ? k : 1) {
		k = lb_utf8_len(s + i, n - i);
		if (needs_escape((const unsigned char *)s + i, k, keep_lines))
			return 1;
	}
	return 0;
}

void lb_strbuf_add_visible(struct lb_strbuf *sb, const char *s, size_t n, int keep_lines)
{
	static const char hex[] = "0123456789abcdef";
	size_t k;

	for (size_t i = 0; i < n; i += k) {
		const unsigned char *p = (const unsigned char *)s + i;

		k = lb_utf8_len(s + i, n - i);
		if (!needs_escape(p, k, keep_lines)) {
			lb_strbuf_add(sb, s + i, k);
			continue;
		}
		if (!k)
			k = 1;
		for (size_t j = 0; j < k; j++) {
			char e[4] = {'\\', 'x', hex[p[j] >> 4], hex[p[j] & 15]};
			if (p[j] == '\t' || p[j] == '\n' || p[j] == '\r') {
				e[1] = p[j] == '\t' ? 't' : p[j] == '\n' ? 'n' : 'r';
				lb_strbuf_add(sb, e, 2);
			} else {
				lb_strbuf_add(sb, e, 4);
			}
		}
	}
}

double lb_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int lb_grow(void *arrayp, size_t n, size_t *cap, size_t first, size_t size)
{
	size_t nc = *cap ? *cap * 2 : first;
	void *v;

	if (n < *cap)
		return 0;
	memcpy(&v, arrayp, sizeof(v)); /* the caller's T *, read without aliasing it */
	v = realloc(v, nc * size);
	if (!v)
		return -1;
	memcpy(arrayp, &v, sizeof(v));
	*cap = nc;
	return 0;
}

char *lb_text_dup(const char *text, size_t len, char *err, size_t errlen)
{
	char *buf = malloc(len + 1);

	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	return buf;
}

int lb_read_file(const char *path, char **buf, size_t *len)
{
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), e;
	struct stat sb;
	size_t got = 0;
	char *b = NULL;

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb)) {
		e = errno;
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode)) {
		e = EINVAL;
		goto out_close;
	}
	b = malloc((size_t)sb.st_size + 1);
	if (!b) {
		e = ENOMEM;
		goto out_close;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, b + got, (size_t)sb.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			e = errno;
			goto out_close;
		}
		if (r == 0)
			break; /* truncated meanwhile: what is there */
		got += (size_t)r;
	}
	close(fd);
	b[got] = 0;
	*buf = b;
	*len = got;
	return 0;
out_close:
	free(b);
	close(fd);
	errno = e;
	return -1;
}

int lb_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int lb_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
	char tmp[4200];
	mode_t mask;
	int fd, e;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >= sizeof(tmp)) {
		snprintf(err, errlen, "cannot write '%s': the path is too long", path);
		return -1;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) || lb_write_all(fd, data, len) || fsync(fd)) {
		e = errno;
		close(fd);
		goto out_unlink;
	}
	if (close(fd)) {
		e = errno;
		goto out_unlink;
	}
	if (rename(tmp, path)) {
		e = errno;
		goto out_unlink;
	}
	return 0;
out_unlink:
	unlink(tmp);
	snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
	return -1;
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
	return snprintf(out, len, "%.*s%s%s", (int)n, dir, n && dir[n - 1] == '/' ? "" : "/", name);
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
			snprintf(err, errlen, "sweep name has the byte 0x%02x at character %zu: %s",
				 c, n + 1, rule);
		else if (n == 0 && (c == '.' || c == '_' || c == '-'))
			snprintf(err, errlen, "sweep name '%.80s' starts with '%c': %s", name, c,
				 rule);
		else if (c >= 0x20 && c < 0x7f)
			snprintf(err, errlen, "sweep name '%.80s' has '%c' at character %zu: %s",
				 name, c, n + 1, rule);
		else
			snprintf(err, errlen, "sweep name has the byte 0x%02x at character %zu: %s",
				 c, n + 1, rule);
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

void lb_strbuf_add_usage(struct lb_strbuf *sb, const char *flag, const char *arg, const char *help)
{
	enum { COL = 26, WIDTH = 92 };
	size_t start = sb->len, n;
	const char *p = help;
	int first = 1;

	lb_strbuf_addf(sb, "  %s%s%s", flag, arg && *arg ? " " : "", arg && *arg ? arg : "");
	n = sb->len - start;
	lb_strbuf_addf(sb, "%*s", n < COL ? (int)(COL - n) : 2, "");
	n = n < COL ? COL : n + 2;
	while (*p) { /* word by word: a word that does not fit starts a line */
		size_t w;

		while (*p == ' ')
			p++;
		w = strcspn(p, " ");
		if (!w)
			break;
		if (!first && n + 1 + w > WIDTH) {
			lb_strbuf_addf(sb, "\n%*s", COL, "");
			n = COL;
		} else if (!first) {
			lb_strbuf_add(sb, " ", 1);
			n++;
		}
		lb_strbuf_add(sb, p, w);
		n += w;
		p += w;
		first = 0;
	}
	lb_strbuf_add(sb, "\n", 1);
}
