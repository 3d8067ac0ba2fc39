/* The build's version and git commit (the commit is compiled in by the Makefile). */
#ifndef LB_VERSION_H
#define LB_VERSION_H

#define LB_VERSION "0.1.0"

/* The commit the binary was built from, or "unknown". */
const char *lb_git_commit(void);

#endif
