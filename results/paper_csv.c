/*
 * Parser of the paper's CSV files (see paper_csv.h): splits lines and fields (RFC 4180
 * quotes allowed), maps the header's names to columns, and converts each row with
 * checked number parsing. Pure: no I/O.
 */
#include "results/paper_csv.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel_names.h"
#include "common/model.h"
#include "common/util.h"

#define MAX_FIELDS 32
#define FIELD_MAX  256

/* One parsed line: up to MAX_FIELDS fields, each NUL-terminated in its own slot. */
struct csv_line {
	int nf;
	char f[MAX_FIELDS][FIELD_MAX];
};

/* Split one line [p, end) into fields. Returns 0, or -1 with err set. */
static int split_line(const char *p, const char *end, int lineno, struct csv_line *out, char *err,
		      size_t errlen)
{
	size_t k;

	out->nf = 0;
	for (;;) {
		char *dst;
		int quoted = 0;

		if (out->nf == MAX_FIELDS) {
			snprintf(err, errlen, "line %d: more than %d fields", lineno, MAX_FIELDS);
			return -1;
		}
		dst = out->f[out->nf++];
		k = 0;
		if (p < end && *p == '"') {
			quoted = 1;
			p++;
		}
		while (p < end) {
			char c = *p;

			if (quoted) {
				if (c == '"') {
					if (p + 1 < end && p[1] == '"') {
						p += 2;
						c = '"';
					} else {
						quoted = 0;
						p++;
						continue;
					}
				} else {
					p++;
				}
			} else {
				if (c == ',')
					break;
				p++;
			}
			if (c == '\0') {
				snprintf(err, errlen, "line %d: NUL byte in field %d", lineno,
					 out->nf);
				return -1;
			}
			if (k + 1 >= FIELD_MAX) {
				snprintf(err, errlen, "line %d: field %d longer than %d bytes",
					 lineno, out->nf, FIELD_MAX - 1);
				return -1;
			}
			dst[k++] = c;
		}
		dst[k] = '\0';
		if (quoted) {
			snprintf(err, errlen, "line %d: unterminated quote in field %d", lineno,
				 out->nf);
			return -1;
		}
		if (p >= end)
			return 0;
		p++; /* the comma */
	}
}

/* Trim leading and trailing blanks in place. */
static void trim(char *s)
{
	size_t n = strlen(s), i = 0;

	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	while (s[i] && isspace((unsigned char)s[i]))
		i++;
	if (i)
		memmove(s, s + i, n - i + 1);
}

enum col {
	C_TRIAL,
	C_WORLD,
	C_STEP,
	C_MFU,
	C_CKPT,
	C_KERNEL,
	C_MB,
	C_TP,
	C_PP,
	C_SP,
	C_N,
};

static const char *const col_names[C_N] = {
    "Trial ID",
    "World Size",
    "Average Step Time",
    "Average MFU",
    "activation_checkpointing_type",
    "kernel",
    "micro_batch_size",
    "model_parallel_size",
    "pipe_parallel_size",
    "sequence_parallel",
};

static const char *const failures[] = {"OOM Error", "Kernel not available", "Other Error"};

static int is_failure(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(failures) / sizeof(failures[0]); i++)
		if (!strcmp(s, failures[i]))
			return 1;
	return 0;
}

/* The field of column c, or NULL after the message when the row is too short. */
static const char *field(const struct csv_line *ln, const int *col, enum col c, int lineno,
			 char *err, size_t errlen)
{
	if (col[c] < ln->nf)
		return ln->f[col[c]];
	snprintf(err, errlen, "line %d: short row, no '%s' (column %d)", lineno, col_names[c],
		 col[c] + 1);
	return NULL;
}

static int get_int(const struct csv_line *ln, const int *col, enum col c, int lineno, long min,
		   long max, long *out, char *err, size_t errlen)
{
	const char *s = field(ln, col, c, lineno, err, errlen);

	if (!s)
		return -1;
	if (lb_parse_long(s, min, max, out)) {
		snprintf(err, errlen, "line %d: '%s': expected an integer in [%ld, %ld], got '%s'",
			 lineno, col_names[c], min, max, s);
		return -1;
	}
	return 0;
}

static int get_text(const struct csv_line *ln, const int *col, enum col c, int lineno, char *dst,
		    size_t dlen, char *err, size_t errlen)
{
	const char *s = field(ln, col, c, lineno, err, errlen);

	if (!s)
		return -1;
	if (strlen(s) >= dlen) {
		snprintf(err, errlen, "line %d: '%s': value longer than %zu bytes", lineno,
			 col_names[c], dlen - 1);
		return -1;
	}
	snprintf(dst, dlen, "%s", s);
	return 0;
}

static int parse_row(const struct csv_line *ln, const int *col, int lineno, struct paper_row *r,
		     char *err, size_t errlen)
{
	const char *step, *mfu;
	long v;

	memset(r, 0, sizeof(*r));
	r->line = lineno;
	if (get_int(ln, col, C_TRIAL, lineno, 0, 2147483647L, &v, err, errlen))
		return -1;
	r->trial_id = v;
	if (get_int(ln, col, C_WORLD, lineno, 1, 1L << 24, &v, err, errlen))
		return -1;
	r->world_size = (int)v;
	if (get_text(ln, col, C_STEP, lineno, r->failure, sizeof(r->failure), err, errlen) ||
	    get_text(ln, col, C_CKPT, lineno, r->checkpointing, sizeof(r->checkpointing), err,
		     errlen) ||
	    get_text(ln, col, C_KERNEL, lineno, r->kernel, sizeof(r->kernel), err, errlen))
		return -1;
	if (col[C_MFU] >= ln->nf) {
		snprintf(err, errlen, "line %d: short row, no '%s'", lineno, col_names[C_MFU]);
		return -1;
	}
	step = ln->f[col[C_STEP]];
	mfu = ln->f[col[C_MFU]];
	if (is_failure(step)) {
		r->failed = 1;
	} else {
		r->failure[0] = '\0';
		if (lb_parse_double(step, 1e-9, 1e9, &r->step_time_s)) {
			snprintf(err, errlen,
				 "line %d: 'Average Step Time': expected seconds or a failure "
				 "(OOM Error, Kernel not available, Other Error), got '%s'",
				 lineno, step);
			return -1;
		}
		if (lb_parse_double(mfu, 0.0, 1.0, &r->mfu)) {
			snprintf(err, errlen,
				 "line %d: 'Average MFU': expected a fraction in [0, 1], got '%s'",
				 lineno, mfu);
			return -1;
		}
	}
	if (strcmp(r->checkpointing, "disabled") && strcmp(r->checkpointing, "every_layer")) {
		snprintf(err, errlen,
			 "line %d: 'activation_checkpointing_type': expected disabled or "
			 "every_layer, got '%s'",
			 lineno, r->checkpointing);
		return -1;
	}
	if (get_int(ln, col, C_MB, lineno, 1, 1 << 20, &v, err, errlen))
		return -1;
	r->micro_batch = (int)v;
	if (get_int(ln, col, C_TP, lineno, 1, 1 << 20, &v, err, errlen))
		return -1;
	r->tp = (int)v;
	if (get_int(ln, col, C_PP, lineno, 1, 1 << 20, &v, err, errlen))
		return -1;
	r->pp = (int)v;
	r->sequence_parallel = -1;
	if (col[C_SP] >= 0) {
		if (get_int(ln, col, C_SP, lineno, 0, 1, &v, err, errlen))
			return -1;
		r->sequence_parallel = (int)v;
	}
	return 0;
}

/* A line is blank when it holds only commas and spaces. */
static int blank(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ',' && !isspace((unsigned char)*p))
			return 0;
	return 1;
}

int paper_csv_parse(const char *text, size_t len, struct paper_row **rows, size_t *n, char *title,
		    size_t titlelen, char *err, size_t errlen)
{
	struct csv_line *ln;
	struct paper_row *out = NULL;
	size_t nout = 0, cap = 0;
	const char *p = text, *end = text + len;
	int col[C_N];
	int lineno = 0, i, c, have_header = 0, rc = -1;

	*rows = NULL;
	*n = 0;
	if (title && titlelen)
		title[0] = '\0';
	if (errlen)
		err[0] = '\0';
	ln = malloc(sizeof(*ln));
	if (!ln) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *next = eol ? eol + 1 : end;

		if (!eol)
			eol = end;
		if (eol > p && eol[-1] == '\r')
			eol--;
		lineno++;
		if (lineno == 1) {
			if (split_line(p, eol, lineno, ln, err, errlen))
				goto out_free;
			trim(ln->f[0]);
			if (!ln->f[0][0]) {
				snprintf(err, errlen, "line 1: empty title");
				goto out_free;
			}
			if (title && titlelen)
				snprintf(title, titlelen, "%s", ln->f[0]);
			p = next;
			continue;
		}
		if (blank(p, eol)) {
			p = next;
			continue;
		}
		if (split_line(p, eol, lineno, ln, err, errlen))
			goto out_free;
		for (i = 0; i < ln->nf; i++)
			trim(ln->f[i]);
		if (!have_header) {
			for (c = 0; c < C_N; c++) {
				col[c] = -1;
				for (i = 0; i < ln->nf; i++)
					if (!strcmp(ln->f[i], col_names[c])) {
						col[c] = i;
						break;
					}
				if (col[c] < 0 && c != C_SP) {
					snprintf(err, errlen,
						 "line %d: missing column '%s' in the header",
						 lineno, col_names[c]);
					goto out_free;
				}
			}
			have_header = 1;
			p = next;
			continue;
		}
		if (lb_grow(&out, nout, &cap, 64, sizeof(*out))) {
			snprintf(err, errlen, "out of memory");
			goto out_free;
		}
		if (parse_row(ln, col, lineno, &out[nout], err, errlen))
			goto out_free;
		nout++;
		p = next;
	}
	if (!have_header) {
		snprintf(err, errlen,
			 "line %d: no header line (expected the title, then the header)",
			 lineno + 1);
		goto out_free;
	}
	*rows = out; /* the caller's now */
	*n = nout;
	out = NULL;
	rc = 0;
out_free:
	free(ln);
	free(out);
	return rc;
}

int paper_file_info(const char *basename, char *model, size_t mlen, int *seq_len, int *global_batch)
{
	const char *p;
	const char *slash;
	char *endp;
	long size;

	if (!basename)
		return -1;
	slash = strrchr(basename, '/');
	if (slash)
		basename = slash + 1;
	p = strstr(basename, "llama_");
	if (!p || !isdigit((unsigned char)p[6]))
		return -1;
	size = strtol(p + 6, &endp, 10);
	if ((*endp != 'B' && *endp != 'b') || size <= 0 || size > 100000)
		return -1;
	snprintf(model, mlen, "llama-%ldb", size);
	if (strstr(basename, "8k") || strstr(basename, "8K")) {
		*seq_len = 8192;
		*global_batch = 512;
	} else {
		*seq_len = 2048;
		*global_batch = 2048;
	}
	return 0;
}

int paper_row_layout(const struct paper_row *r, const char *model, int seq_len, int global_batch,
		     struct lb_layout *out)
{
	int rc = 0;
	long long mp;

	lb_layout_init(out);
	if (lb_model_preset(model, &out->model))
		rc = -1;
	out->model.vocab = 128000;
	out->model.tied = 0;
	out->seq_len = seq_len;
	out->global_batch = global_batch;
	out->micro_batch = r->micro_batch;
	out->tp = r->tp;
	out->pp = r->pp;
	mp = (long long)r->tp * r->pp;
	out->dp = mp > 0 ? (int)(r->world_size / mp) : 0;
	out->gpus_per_node = r->world_size < 8 ? r->world_size : 8;
	out->nodes = r->world_size < 8 ? 1 : r->world_size / 8;
	out->sequence_parallel = r->sequence_parallel == 1 && r->tp > 1;
	out->zero_stage = 1;
	out->checkpointing = strcmp(r->checkpointing, "every_layer") ? LB_CKPT_NONE : LB_CKPT_FULL;
	if (lb_kernel_name_map(r->kernel, &out->attention, &out->norm)) {
		out->attention = LB_ATTN_FLASH;
		out->norm = LB_NORM_FUSED;
		rc = -1;
	}
	out->steps = 10;
	out->warmup = 1;
	return rc;
}
