/* The build's git commit: $(BUILD)/gen/git_commit.h, which the Makefile rewrites whenever
 * HEAD changes (and this file's object depends on it). A build outside the Makefile (the
 * fuzzers') passes -DLB_GIT_COMMIT instead. */
#include "common/version.h"

#ifndef LB_GIT_COMMIT
#include "git_commit.h"
#endif

const char *lb_git_commit(void)
{
	return LB_GIT_COMMIT;
}
