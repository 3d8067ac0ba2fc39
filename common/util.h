/*
 * Small shared helpers for every stage (libc only; the trainer links them on compute
 * nodes): checked number parsing (strtol/strtod with range checks, never atoi), JSON
 * string escaping for writers that do not use cJSON, a growable string buffer, the
 * FNV-1a hash behind the layout id, the monotonic clock, making text from files safe to
 * show on a terminal, and writing a file whole or not at all; and the small pieces
 * several files spelled alike: growing an array, copying a text to parse, a CSV field, a
 * name's index in a list.
 */
#ifndef LB_UTIL_H
#define LB_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Parse a whole string as a base-10 integer in [min, max]. Leading/trailing spaces and
 * trailing garbage are rejected. Returns 0, or -1 (and leaves *out alone). */
int lb_parse_long(const char *s, long min, long max, long *out);
int lb_parse_int(const char *s, int min, int max, int *out);
/* Unsigned 64-bit, base 10 (or 0x-prefixed hex). No sign allowed. */
int lb_parse_u64(const char *s, uint64_t *out);
/* Parse a whole string as a finite double in [min, max]. Returns 0 or -1. */
int lb_parse_double(const char *s, double min, double max, double *out);
/* A byte count with an optional K, M, G or T suffix (powers of 1024): 0, or -1 for
 * anything else (a sign, a fraction, an overflow). */
int lb_parse_bytes(const char *s, uint64_t *out);

/* The name rule for sweep names and Slurm names: [A-Za-z0-9_.-]+, shorter than max. */
int lb_name_ok(const char *s, size_t max);

/* The one rule for a sweep's name, which names its run folder, its job scripts and Slurm
 * jobs and its rows: 1 to LB_SWEEP_NAME_MAX letters, digits, '.', '_' and '-', starting
 * with a letter or a digit (so never '.', '..', a hidden folder or an option such as
 * '-rf'). Applied where a name comes in: a spec's "name", --sweep, a run log's header.
 * Returns 0, or -1 with err saying what is wrong with the name and what a name is. */
#define LB_SWEEP_NAME_MAX 63
int lb_sweep_name_check(const char *name, char *err, size_t errlen);

/* dir + "/" + name into out (snprintf's contract), with one slash however many dir ends
 * with ("rep/" and "report.html" make "rep/report.html"; "/" and "x" make "/x"). */
int lb_path_join(char *out, size_t len, const char *dir, const char *name);

/* Create path and its missing parents (mkdir -p, mode 0777 less the umask). 0, or -1 with
 * err naming the folder that could not be made and why. */
int lb_mkdir_p(const char *path, char *err, size_t errlen);

/* Read the whole regular file at path into *buf (malloc'd, NUL-terminated; the caller
 * frees) and its length into *len: the bytes it had when opened (a file that grows
 * meanwhile is read to that size). Never blocks on a FIFO or a device: anything but a
 * regular file fails with EINVAL without being read. Returns 0, or -1 with errno set
 * (EINVAL: not a regular file; EIO and others: the read failed) and *buf NULL. */
int lb_read_file(const char *path, char **buf, size_t *len);

/*
 * Room for one more element in the malloc'd array *arrayp (arrayp: the address of the
 * array's pointer, as &rs->v) of n elements of size bytes, room for *cap: reallocated to
 * twice *cap (first when it has none) when full, *cap updated. Returns 0, or -1 when out
 * of memory (the array left as it was, still the caller's to free).
 */
int lb_grow(void *arrayp, size_t n, size_t *cap, size_t first, size_t size);

/* A copy of len bytes of text with a NUL after them, for parsing in place (malloc'd; the
 * caller frees), or NULL with err "out of memory". */
char *lb_text_dup(const char *text, size_t len, char *err, size_t errlen);

/*
 * Write len bytes to path whole or not at all: into a new temporary file beside it
 * (PATH.tmp-XXXXXX, mode 0666 less the umask), every write checked, flushed to the disk,
 * then renamed over path. On failure (a full disk, a quota, an I/O error) the temporary
 * file is removed, path is left as it was, and err says "cannot write 'PATH': <the OS's
 * reason>". Returns 0 or -1.
 */
int lb_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Write len bytes to the open descriptor fd, retrying short writes and EINTR. Returns 0, or
 * -1 with errno set (ENOSPC, EDQUOT, EFBIG, EIO, ...). */
int lb_write_all(int fd, const void *data, size_t len);

/* Seconds of CLOCK_MONOTONIC (for intervals). */
double lb_now_s(void);

/* s as one CSV field (RFC 4180): in double quotes, its quotes doubled, when it holds a
 * comma, a quote or a line break; else as it is. */
void lb_csv_put(FILE *f, const char *s);

/* The index of s among names[0..n), or -1 (also when s is NULL). */
int lb_name_index(const char *const *names, int n, const char *s);

/* 64-bit FNV-1a of len bytes, starting from the standard offset basis. */
uint64_t lb_fnv1a64(const void *data, size_t len);

/* Growable NUL-terminated string. Initialise with LB_STRBUF_INIT or lb_strbuf_init;
 * release with lb_strbuf_release (which frees buf). On allocation failure the buffer
 * records it in .failed and further appends are ignored; check .failed at the end. */
struct lb_strbuf {
	char *buf;  /* NUL-terminated once anything was added; NULL when empty */
	size_t len; /* bytes, excluding the NUL */
	size_t cap; /* bytes allocated */
	int failed; /* 1 after an allocation failure */
};
#define LB_STRBUF_INIT                                                                             \
	{                                                                                          \
		NULL, 0, 0, 0                                                                      \
	}
void lb_strbuf_init(struct lb_strbuf *sb);
void lb_strbuf_release(struct lb_strbuf *sb);
void lb_strbuf_add(struct lb_strbuf *sb, const char *s, size_t n);
void lb_strbuf_adds(struct lb_strbuf *sb, const char *s);
void lb_strbuf_addf(struct lb_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void lb_strbuf_vaddf(struct lb_strbuf *sb, const char *fmt, va_list ap);
/* The buffer's text ("" when empty); owned by sb. */
const char *lb_strbuf_str(const struct lb_strbuf *sb);
/* Detach the text: the caller frees it with free(). sb is left empty. NULL on failure. */
char *lb_strbuf_detach(struct lb_strbuf *sb);

/* Append s as a JSON string literal, quotes included (escapes ", \, control bytes; a byte
 * that is not part of valid UTF-8 becomes \ufffd, so the result is always valid JSON). */
void lb_strbuf_add_json(struct lb_strbuf *sb, const char *s);
/* Write s as a JSON string literal into buf (snprintf semantics: returns the length the
 * full literal needs, writes at most len bytes including the NUL). */
size_t lb_json_escape(const char *s, char *buf, size_t len);

/* Length of the valid UTF-8 sequence that starts s (1 to 4 bytes, at most n), or 0 when
 * the bytes there are not valid UTF-8 (a stray continuation byte, a cut-off sequence, an
 * overlong form, a surrogate, a code point above U+10FFFF). */
size_t lb_utf8_len(const char *s, size_t n);

/* JSON text (as cJSON prints it: structure in ASCII, strings as the caller gave them) with
 * every byte that is not valid UTF-8 replaced by the escape \ufffd, so that JSON readers
 * accept it. Returns a malloc'd copy (the caller frees), or NULL when out of memory. */
char *lb_json_utf8_fix(const char *text);

/*
 * Append n bytes of s to sb with what a terminal would act on made visible: control
 * characters (C0, DEL, and C1 as UTF-8 U+0080..U+009F) and bytes that are not valid
 * UTF-8 become \xHH (tab, newline and carriage return \t, \n, \r). keep_lines: newline
 * and tab pass as they are (a whole rendered table or page). Text from run logs, specs
 * and the database goes through this before it reaches a terminal.
 */
void lb_strbuf_add_visible(struct lb_strbuf *sb, const char *s, size_t n, int keep_lines);

/* One line of a flag's usage: "  --flag ARG" (ARG may be NULL or "") in a column of 24,
 * then help, wrapped at 92 columns under the help's start. */
void lb_strbuf_add_usage(struct lb_strbuf *sb, const char *flag, const char *arg, const char *help);

/* 1 when s (n bytes) holds something lb_strbuf_add_visible would change, else 0. */
int lb_text_needs_escape(const char *s, size_t n, int keep_lines);

#endif
