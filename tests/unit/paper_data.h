/*
 * What the tests that read the paper's measured runs share: where the CSV files are
 * ($LB_PAPER_DATA, else ../shared/paper-data relative to the repository root) and a
 * whole-file reader. Header-only: each test binary is one .c file.
 */
#ifndef LB_TEST_PAPER_DATA_H
#define LB_TEST_PAPER_DATA_H

#include <stdio.h>
#include <stdlib.h>

static inline const char *paper_data_dir(void)
{
	const char *d = getenv("LB_PAPER_DATA");
	return d && *d ? d : "../shared/paper-data";
}

/* The file's bytes, NUL-terminated (caller frees), length in *len; NULL if unreadable. */
static inline char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

#endif
