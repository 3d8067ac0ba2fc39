/*
 * Rank discovery and launch for layoutbench-train. Under Slurm every rank is a task of
 * srun and reads its place from SLURM_* (lb_rank_env_from_slurm); without Slurm one
 * process forks --nproc-per-node ranks and supervises them (lb_launch): when one exits
 * non-zero or is killed, the others are stopped (SIGTERM, then SIGKILL after a grace
 * period) and the first failure is returned, so the exit code and the run log name the
 * rank and the reason. libc only. See docs/parallelism.md.
 */
#ifndef LB_LAUNCH_H
#define LB_LAUNCH_H

#include <stddef.h>

struct lb_rank_env {
	int rank;	     /* world rank, 0..world_size-1 */
	int world_size;	     /* ranks in the job */
	int local_rank;	     /* rank on this node */
	int local_size;	     /* ranks on this node */
	int nnodes;	     /* nodes of the job */
	int under_slurm;     /* 1 when read from SLURM_* */
	char job_id[64];     /* SLURM_JOB_ID[_<array task>] or "" */
	char rdzv_name[128]; /* shm name shared by the ranks of this run ("/lb-...") */
};

/*
 * Fill env from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NNODES,
 * SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE), SLURM_JOB_ID, SLURM_STEP_ID,
 * SLURM_ARRAY_TASK_ID. rdzv_name is "/lb-<job>-<step>[-<array task>]", the same in
 * every task of the step. single_node = 1 (the shm communicator) refuses a job of more
 * than one node. Returns 1 (under Slurm), 0 (SLURM_PROCID unset: not under Slurm, env
 * untouched) or -1 with err set (e.g. "slurm job spans 2 nodes: the shm communicator
 * joins the ranks of one node only; run multi-node jobs with the nccl backend").
 */
int lb_rank_env_from_slurm(struct lb_rank_env *env, int single_node, char *err, size_t errlen);

/* env for a single process without Slurm: rank 0 of 1, rdzv_name from the pid. */
void lb_rank_env_single(struct lb_rank_env *env);

typedef int (*lb_rank_main_fn)(const struct lb_rank_env *env, void *arg);

struct lb_launch_opts {
	double grace_s;	       /* SIGTERM to SIGKILL, seconds (default 5) */
	int peer_exit_code;    /* exit status meaning "a peer failed first" (the trainer's 6,
				  timeout): such a rank is reported only when no other failed in
				  the same instant; 0 disables (default 6) */
	const char *rdzv_name; /* NULL: "/lb-<launcher pid>-<nanoseconds>" */
};
#define LB_LAUNCH_OPTS_INIT                                                                        \
	{                                                                                          \
		5.0, 6, NULL                                                                       \
	}

struct lb_launch_result {
	int failed_rank;  /* first failing rank, -1 if none */
	int exit_code;	  /* its exit status, -1 if it was killed by a signal */
	int signal;	  /* the signal that killed it, 0 if none */
	int status;	  /* exit status to propagate: 0, exit_code, or 128 + signal */
	int n_stopped;	  /* ranks the launcher had to terminate */
	double elapsed_s; /* wall time of the whole launch, seconds */
	char rdzv_name[128];
	char message[256]; /* "rank 3 exited with status 3", "rank 1 killed by signal 9" */
};

/*
 * Fork nproc ranks (1..LB_LAUNCH_MAX_RANKS); rank r runs fn(env, arg) with env.rank = r
 * and exits with its return value (0..255). The children die with the launcher
 * (PR_SET_PDEATHSIG) and restore default SIGINT/SIGTERM/SIGHUP. While they run, SIGINT,
 * SIGTERM or SIGHUP to the launcher stops them too. On the first failure the others get
 * SIGTERM, then SIGKILL after grace_s; the rendezvous segment is unlinked at the end. opts may be
 * NULL. Returns 0 when every rank exited 0, 1 when one failed (res says which and why),
 * -1 when the launcher could not start them (res->message says why).
 */
#define LB_LAUNCH_MAX_RANKS 1024
int lb_launch(int nproc, lb_rank_main_fn fn, void *arg, const struct lb_launch_opts *opts,
	      struct lb_launch_result *res);

#endif
