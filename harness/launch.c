/*
 * Rank discovery (Slurm or a single process) and the local launcher that forks and
 * supervises the ranks of one node (launch.h). The rank order and the tp/dp/pp
 * communicators built from it are harness/comm/groups.c's.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/launch.h"

/* ---- Slurm ---- */

static int env_int(const char *name, int min, int max, int *out, char *err, size_t errlen)
{
	const char *v = getenv(name);

	if (!v) {
		snprintf(err, errlen, "%s is not set (is this an srun task?)", name);
		return -1;
	}
	if (lb_parse_int(v, min, max, out) != 0) {
		snprintf(err, errlen, "%s='%s': expected an integer in [%d, %d]", name, v, min,
			 max);
		return -1;
	}
	return 0;
}

/* SLURM_TASKS_PER_NODE looks like "4(x2),3": the first node's count is the number before
 * any '(' or ','. */
static int leading_int(const char *s, int *out)
{
	char buf[32];
	size_t n = strcspn(s, "(,");

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	return lb_parse_int(buf, 1, 1 << 20, out);
}

int lb_rank_env_from_slurm(struct lb_rank_env *env, int single_node, char *err, size_t errlen)
{
	struct lb_rank_env e;
	const char *job, *step, *task, *tpn;

	if (!getenv("SLURM_PROCID"))
		return 0;
	memset(&e, 0, sizeof(e));
	e.under_slurm = 1;
	if (env_int("SLURM_NTASKS", 1, 1 << 20, &e.world_size, err, errlen) ||
	    env_int("SLURM_PROCID", 0, e.world_size - 1, &e.rank, err, errlen))
		return -1;
	if (getenv("SLURM_LOCALID")) {
		if (env_int("SLURM_LOCALID", 0, e.world_size - 1, &e.local_rank, err, errlen))
			return -1;
	} else {
		e.local_rank = e.rank;
	}
	e.nnodes = 1;
	if (getenv("SLURM_NNODES") && env_int("SLURM_NNODES", 1, 1 << 20, &e.nnodes, err, errlen))
		return -1;
	e.local_size = e.nnodes == 1 ? e.world_size : 0;
	tpn = getenv("SLURM_NTASKS_PER_NODE");
	if (!tpn)
		tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
	if (!tpn)
		tpn = getenv("SLURM_TASKS_PER_NODE");
	if (tpn && e.nnodes > 1 && leading_int(tpn, &e.local_size) != 0) {
		snprintf(err, errlen, "tasks per node '%s' is not understood", tpn);
		return -1;
	}
	if (single_node && e.nnodes > 1) {
		snprintf(err, errlen,
			 "slurm job spans %d nodes: the shm communicator joins the ranks of one "
			 "node only; run multi-node jobs with the nccl backend (--backend cuda)",
			 e.nnodes);
		return -1;
	}
	job = getenv("SLURM_JOB_ID");
	step = getenv("SLURM_STEP_ID");
	task = getenv("SLURM_ARRAY_TASK_ID");
	if (!job || !*job) {
		snprintf(err, errlen, "SLURM_JOB_ID is not set (is this an srun task?)");
		return -1;
	}
	if (task && *task)
		snprintf(e.job_id, sizeof(e.job_id), "%s_%s", job, task);
	else
		snprintf(e.job_id, sizeof(e.job_id), "%s", job);
	snprintf(e.rdzv_name, sizeof(e.rdzv_name), "/lb-%s-%s", e.job_id,
		 step && *step ? step : "0");
	for (char *p = e.rdzv_name + 1; *p; p++) /* keep the shm name one path component */
		if (*p == '/')
			*p = '_';
	*env = e;
	return 1;
}

static void make_name(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, "/lb-%ld-%lx%09lx", (long)getpid(), (unsigned long)ts.tv_sec,
		 (unsigned long)ts.tv_nsec);
}

void lb_rank_env_single(struct lb_rank_env *env)
{
	memset(env, 0, sizeof(*env));
	env->world_size = 1;
	env->local_size = 1;
	env->nnodes = 1;
	make_name(env->rdzv_name, sizeof(env->rdzv_name));
}

/* ---- the local launcher ---- */

static volatile sig_atomic_t launch_signal;

static void on_signal(int sig)
{
	launch_signal = sig;
}

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	nanosleep(&ts, NULL);
}

struct reaped {
	int rank;
	int status; /* waitpid status */
};

static void describe(struct lb_launch_result *res, int rank, int wstatus)
{
	res->failed_rank = rank;
	if (WIFSIGNALED(wstatus)) {
		res->exit_code = -1;
		res->signal = WTERMSIG(wstatus);
		res->status = 128 + res->signal;
		snprintf(res->message, sizeof(res->message), "rank %d killed by signal %d (%s)",
			 rank, res->signal, strsignal(res->signal));
	} else {
		res->exit_code = WEXITSTATUS(wstatus);
		res->signal = 0;
		res->status = res->exit_code;
		snprintf(res->message, sizeof(res->message), "rank %d exited with status %d", rank,
			 res->exit_code);
	}
}

static int failed(int wstatus)
{
	return WIFSIGNALED(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0);
}

int lb_launch(int nproc, lb_rank_main_fn fn, void *arg, const struct lb_launch_opts *opts,
	      struct lb_launch_result *res)
{
	struct lb_launch_opts o = LB_LAUNCH_OPTS_INIT;
	struct sigaction sa, old_int, old_term, old_hup, old_chld;
	pid_t parent = getpid(), *pids;
	struct reaped *round;
	double t0 = lb_now_s(), stop_at = -1;
	int live = 0, r, rc = 0, nround, killed_hard = 0;

	memset(res, 0, sizeof(*res));
	res->failed_rank = -1;
	if (opts)
		o = *opts;
	if (!(o.grace_s >= 0))
		o.grace_s = 5.0;
	if (o.rdzv_name)
		snprintf(res->rdzv_name, sizeof(res->rdzv_name), "%s", o.rdzv_name);
	else
		make_name(res->rdzv_name, sizeof(res->rdzv_name));
	if (nproc < 1 || nproc > LB_LAUNCH_MAX_RANKS || !fn) {
		snprintf(res->message, sizeof(res->message),
			 "--nproc-per-node %d: expected 1 to %d ranks", nproc, LB_LAUNCH_MAX_RANKS);
		return -1;
	}
	pids = calloc((size_t)nproc, sizeof(*pids));
	round = calloc((size_t)nproc, sizeof(*round));
	if (!pids || !round) {
		free(pids);
		free(round);
		snprintf(res->message, sizeof(res->message), "launcher: out of memory");
		return -1;
	}
	launch_signal = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup); /* a closed terminal, a stopped session */
	sa.sa_handler = SIG_DFL; /* SIG_IGN would reap the ranks before we see their status */
	sigaction(SIGCHLD, &sa, &old_chld);
	sa.sa_handler = on_signal;
	fflush(NULL);
	for (r = 0; r < nproc; r++) {
		pid_t pid = fork();

		if (pid < 0) {
			snprintf(res->message, sizeof(res->message), "fork of rank %d: %s", r,
				 strerror(errno));
			rc = -1;
			break;
		}
		if (pid == 0) {
			struct lb_rank_env env;
			int code;

			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(128 + SIGKILL);
			memset(&env, 0, sizeof(env));
			env.rank = r;
			env.world_size = nproc;
			env.local_rank = r;
			env.local_size = nproc;
			env.nnodes = 1;
			snprintf(env.rdzv_name, sizeof(env.rdzv_name), "%s", res->rdzv_name);
			code = fn(&env, arg);
			fflush(NULL);
			_exit(code & 0xff);
		}
		pids[r] = pid;
		live++;
	}
	while (live > 0) {
		pid_t pid;
		int ws, i, pick = -1;

		nround = 0;
		while (live > 0 && (pid = waitpid(-1, &ws, WNOHANG)) > 0) {
			for (r = 0; r < nproc && pids[r] != pid; r++)
				;
			if (r == nproc)
				continue; /* not ours */
			pids[r] = 0;
			live--;
			round[nround].rank = r;
			round[nround].status = ws;
			nround++;
		}
		/* the first failure: prefer a rank that did not just report a peer's failure */
		for (i = 0; i < nround && res->failed_rank < 0 && stop_at < 0; i++) {
			int ws2 = round[i].status;

			if (!failed(ws2))
				continue;
			if (pick < 0 || (o.peer_exit_code && WIFEXITED(round[pick].status) &&
					 WEXITSTATUS(round[pick].status) == o.peer_exit_code))
				pick = i;
		}
		if (pick >= 0) {
			describe(res, round[pick].rank, round[pick].status);
			if (rc == 0)
				rc = 1;
		}
		if (stop_at < 0 && (rc != 0 || launch_signal)) { /* stop the others */
			if (launch_signal && rc == 0) {
				res->status = 128 + launch_signal;
				snprintf(res->message, sizeof(res->message),
					 "launcher received signal %d; stopped the ranks",
					 (int)launch_signal);
				rc = 1;
			}
			stop_at = lb_now_s();
			for (r = 0; r < nproc; r++)
				if (pids[r] > 0) {
					kill(pids[r], SIGTERM);
					res->n_stopped++;
				}
		}
		if (stop_at >= 0 && !killed_hard && lb_now_s() - stop_at >= o.grace_s) {
			killed_hard = 1;
			for (r = 0; r < nproc; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGKILL);
		}
		if (live > 0 && nround == 0)
			nap(0.002);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	sigaction(SIGCHLD, &old_chld, NULL);
	shm_unlink(res->rdzv_name); /* rank 0 did if it got that far; a no-op then */
	res->elapsed_s = lb_now_s() - t0;
	free(pids);
	free(round);
	return rc;
}
