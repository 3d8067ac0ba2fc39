/* The build's version and git commit (the commit is compiled in by the Makefile). */
#ifndef LB_VERSION_H
#define LB_VERSION_H

#define LB_VERSION "0.1.0"

/* The run-log format version (docs/run-log.md): the trainer writes it in every header,
 * the collector refuses a newer one. */
#define LB_RUNLOG_VERSION 1

/* The commit the binary was built from, or "unknown". */
const char *lb_git_commit(void);

#endif
