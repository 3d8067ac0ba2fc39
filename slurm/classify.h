/*
 * Failure classes of a finished job, from what the scheduler said (state, exit code) and
 * what the run log's end record said (through the runs table). Pure. The classes are
 * SLURM_CLASSES below; "" is success, which needs the run's end record to say ok: a job that
 * completed while its run log stopped without one failed. docs/slurm.md has the table.
 */
#ifndef LB_SLURM_CLASSIFY_H
#define LB_SLURM_CLASSIFY_H

/* The failure classes, the one list: slurm_classes[] (in this order, as status counts
 * them) and the choices of resubmit --class are made from it. */
#define SLURM_CLASSES(X)                                                                           \
	X(oom)                                                                                     \
	X(timeout) X(node_fail) X(preempted) X(cancelled) X(launch_error) X(failed) X(unknown)
#define SLURM_CLASS_COUNT_ONE(c) +1
#define SLURM_N_CLASSES		 (0 SLURM_CLASSES(SLURM_CLASS_COUNT_ONE))
#define SLURM_CLASS_BAR(c)	 "|" #c
/* "oom|timeout|...|unknown", an option's choices */
#define SLURM_CLASS_CHOICES (&(SLURM_CLASSES(SLURM_CLASS_BAR))[1])
extern const char *const slurm_classes[SLURM_N_CLASSES];

struct slurm_class_in {
	const char *state;	/* scheduler state; "" or NULL when the scheduler no longer
				   knows the job (purged after MinJobAge) */
	int exit_code;		/* the script's exit status (128+N: signal N); -1 unknown */
	int has_run;		/* 1: a run log of this job was collected */
	const char *run_status; /* "ok", "failed", "running" (no end record) */
	const char *run_class;	/* the end record's class ("oom", "nccl_error", ...); "" none */
};

/* The class ("" = success), as a static string. */
const char *slurm_classify(const struct slurm_class_in *in);

/* The state to record for a purged job: "COMPLETED" when its run ended ok, "FAILED" when
 * it failed, else "UNKNOWN". */
const char *slurm_purged_state(const struct slurm_class_in *in);

/*
 * The class of a run whose log stops without its end record, closed once its job ended:
 * the scheduler's verdict where it has one (a time limit: timeout; a cgroup OOM: oom;
 * cancelled, preempted, a node failure: killed), else the trainer's exit status read
 * through its table (docs/run-log.md: 1 error, 3 oom, 4 nccl_error, 5 diverged, 6 timeout,
 * 7 io_error; 0, which an end record should have said, error), else killed (a signal, or
 * no status). job_class: the job's class ("" none). A static string.
 */
const char *slurm_run_end_class(const char *job_class, int exit_code);

/* 1 if name is one of the classes (not ""). */
int slurm_class_valid(const char *name);

#endif
