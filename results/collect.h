/*
 * The collector: reads run logs (docs/run-log.md) into the results database. Idempotent:
 * a file seen before with the same size is skipped; a file that grew is read on from the
 * last complete line; one transaction per run. A corrupt line is a warning
 * ("warning: FILE:LINE: fault") and is skipped; a cut-off last line is left for the next
 * collect; a run without an end record stays 'running'. A log that takes a collected
 * run's run_uid is read on only when it is that run (layout, start, hosts and the bytes
 * read so far: runs.log_hash), else refused. Symbolic links are followed, each file read
 * once; only regular files are read. A database failure stops the collect with one
 * error. Also `layoutbench collect`.
 */
#ifndef LB_RESULTS_COLLECT_H
#define LB_RESULTS_COLLECT_H

#include <stddef.h>

#include <sqlite3.h>

#include "results/stats.h" /* the run statistics the collector writes */

struct collect_stats {
	int files;	    /* run logs looked at */
	int runs_new;	    /* runs inserted */
	int runs_updated;   /* runs that had grown (new steps or an end record) */
	int runs_unchanged; /* runs whose log had not changed */
	long steps;	    /* step records written */
	int warnings;	    /* corrupt lines skipped, id mismatches, empty logs, FIFOs */
	int errors;	    /* files refused (no header, newer version, unreadable, another
			     * run's run_uid, a bad sweep name), folders not read, the
			     * database's failure */
	int quiet;	    /* input: 1 = print no warnings or errors to stderr */
	const char *sweep;  /* input: the sweep of a run whose header names none (a run
			     * started by hand); NULL: 'adhoc'. Taken when a run is first
			     * collected: a run already in the database keeps its sweep. */
};

/*
 * Collect one run log, or every run-*.jsonl below a directory (recursively, links
 * followed, in name order). Counts are added to *st (zero it first). Warnings and
 * per-file errors go to stderr unless st->quiet. Call it outside a transaction: each run
 * is its own. Returns 0 when every file was read (warnings allowed), or -1 when a file or
 * folder was refused or the database failed (then no further file is tried); err then
 * holds the last such error.
 */
int results_collect_path(sqlite3 *db, const char *path, struct collect_stats *st, char *err,
			 size_t errlen);


#endif
