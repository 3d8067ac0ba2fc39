/*
 * Importing external measurements as runs: the paper's CSV files (results/paper_csv.h)
 * become a sweep named after the file (source 'paper'), one run per row, with the sheet's
 * step time and MFU kept beside the FLOPs our model arithmetic gives for the row's
 * layout. Idempotent (run_uid 'paper:<sweep>:<trial id>'). Also `layoutbench import`.
 */
#ifndef LB_RESULTS_IMPORT_H
#define LB_RESULTS_IMPORT_H

#include <stddef.h>

#include <sqlite3.h>

struct import_stats {
	int files;    /* files imported */
	int rows;     /* runs written (inserted or updated) */
	int ok;	      /* rows with a measurement */
	int failed;   /* rows with a failure (oom, kernel_unavailable, error) */
	int warnings; /* rows whose layout could not be fully mapped */
	int quiet;    /* input: 1 = print no warnings to stderr */
};

/* The failure class of a sheet's failure text: "OOM Error" -> "oom", "Kernel not
 * available" -> "kernel_unavailable", anything else -> "error". */
const char *results_paper_failure_class(const char *failure);

/*
 * Import one paper CSV file in one transaction. Counts are added to *st. Returns 0, or
 * -1 with err set ("FILE: line 7: ..."; nothing of that file is kept).
 */
int results_import_paper(sqlite3 *db, const char *path, struct import_stats *st, char *err,
			 size_t errlen);

#endif
