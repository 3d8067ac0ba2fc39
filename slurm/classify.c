/*
 * Failure classes (classify.h). Order of evidence: the scheduler's own verdict on the
 * allocation (time limit, node failure, preemption, cancellation, cgroup OOM) first; then
 * the trainer's (its end record, its exit code: 3 = oom, 126/127 = the script could not
 * start it); no run log at all means the trainer never started (launch_error).
 */
#include "slurm/classify.h"

#include <string.h>

#define CLASS_NAME(c) #c,
const char *const slurm_classes[SLURM_N_CLASSES] = {SLURM_CLASSES(CLASS_NAME)};

int slurm_class_valid(const char *name)
{
	for (size_t i = 0; i < SLURM_N_CLASSES; i++)
		if (!strcmp(name, slurm_classes[i]))
			return 1;
	return 0;
}

static int is(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

/* The trainer's side: its end record, else its exit code. */
static const char *from_trainer(const struct slurm_class_in *in)
{
	if (in->exit_code == 126 || in->exit_code == 127)
		return "launch_error";
	if (in->has_run && is(in->run_status, "ok") && in->exit_code <= 0)
		return "";
	if (is(in->run_class, "oom") || in->exit_code == 3)
		return "oom";
	if (!in->has_run)
		return in->exit_code >= 0 ? "launch_error" : "unknown";
	return "failed";
}

const char *slurm_classify(const struct slurm_class_in *in)
{
	const char *s = in->state ? in->state : "";

	if (!*s || is(s, "UNKNOWN")) {
		if (!in->has_run && in->exit_code < 0)
			return "unknown";
		if (in->has_run && is(in->run_status, "running") && in->exit_code < 0)
			return "unknown";
		return from_trainer(in);
	}
	if (is(s, "TIMEOUT") || is(s, "DEADLINE"))
		return "timeout";
	if (is(s, "NODE_FAIL") || is(s, "BOOT_FAIL"))
		return "node_fail";
	if (is(s, "PREEMPTED"))
		return "preempted";
	if (is(s, "CANCELLED"))
		return "cancelled";
	if (is(s, "OUT_OF_MEMORY"))
		return "oom";
	if (is(s, "COMPLETED")) {
		/* a log without its end record is no success (a full disk cut it short) */
		if (in->has_run && (is(in->run_status, "failed") || is(in->run_status, "running")))
			return from_trainer(in);
		return in->has_run ? "" : "launch_error";
	}
	if (is(s, "FAILED"))
		return from_trainer(in);
	return "unknown";
}

const char *slurm_run_end_class(const char *job_class, int exit_code)
{
	/* the trainer's exit codes (docs/run-log.md; harness/trainlog.h), 0..7 */
	static const char *const by_exit[] = {"error",	    "error",	NULL,	   "oom",
					      "nccl_error", "diverged", "timeout", "io_error"};

	if (is(job_class, "timeout"))
		return "timeout";
	if (is(job_class, "cancelled") || is(job_class, "preempted") || is(job_class, "node_fail"))
		return "killed";
	if (is(job_class, "oom"))
		return "oom";
	if (exit_code >= 0 && exit_code < (int)(sizeof(by_exit) / sizeof(by_exit[0])) &&
	    by_exit[exit_code])
		return by_exit[exit_code];
	return "killed";
}

const char *slurm_purged_state(const struct slurm_class_in *in)
{
	const char *c = slurm_classify(in);
	if (!*c)
		return "COMPLETED";
	if (!strcmp(c, "unknown"))
		return "UNKNOWN";
	return "FAILED";
}
