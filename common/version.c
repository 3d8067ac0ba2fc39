/* The build's git commit, passed in by the Makefile as LB_GIT_COMMIT. */
#include "common/version.h"

#ifndef LB_GIT_COMMIT
#define LB_GIT_COMMIT "unknown"
#endif

const char *lb_git_commit(void)
{
	return LB_GIT_COMMIT;
}
