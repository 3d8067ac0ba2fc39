/* The build's git commit: $(BUILD)/gen/git_commit.h, which the Makefile rewrites whenever
 * HEAD changes (and this file's object depends on it). */
#include "common/version.h"

#include "git_commit.h"

const char *lb_git_commit(void)
{
	return LB_GIT_COMMIT;
}
