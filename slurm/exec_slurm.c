/*
 * The libslurm executor: slurm_init(NULL) reads the cluster's own configuration
 * (/etc/slurm/slurm.conf or $SLURM_CONF); arrays go through slurm_submit_batch_job with
 * the job description filled from the rendered array (the script's #SBATCH lines are for
 * humans and plain sbatch: libslurm does not read them); polls are one slurm_load_jobs;
 * cancels are one slurm_kill_job2 per whole array. Built only with LB_WITH_SLURM.
 *
 * It builds against the libslurm of Slurm 22.05 through 25.11 alike, from the public
 * headers only, the differences chosen at compile time from SLURM_VERSION_NUMBER: a
 * failed call's error is errno (slurm_get_errno, which only returned errno, is gone since
 * 24.11); the submitted job's id moved into a step id in 25.11; and the one library
 * function no header declares, the text of a job's state reason, is looked up by the
 * name the release exports rather than declared here, so a library without it still
 * loads. A binary is tied to the libslurm it was built against (libslurm.so.38 for
 * 22.05, .so.42 for 24.11): build the CLI where it runs.
 */
#include "slurm/exec.h"

#include <stdio.h>
#include <string.h>

#ifndef LB_WITH_SLURM

int exec_slurm_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen)
{
	(void)o;
	*out = NULL;
	snprintf(err, errlen,
		 "layoutbench was built without Slurm support (install libslurm-dev and rebuild)");
	return -1;
}

#else

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

/* The exported name of Slurm's job-state-reason text (scontrol's "Reason="): renamed in
 * 24.05, declared by no release's headers. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 5, 0)
#define REASON_FN "slurm_job_state_reason_string"
#else
#define REASON_FN "slurm_job_reason_string"
#endif

/* The submitted job's id: inside a step id since 25.11. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
#define RESP_JOB_ID(r) ((r)->step_id.job_id)
#else
#define RESP_JOB_ID(r) ((r)->job_id)
#endif

static int g_inited;

/* The fixes for a machine where libslurm finds no configuration. */
#define NO_CONF_FIXES                                                                        \
	"set SLURM_CONF to the cluster's slurm.conf, submit through slurmrestd with "        \
	"--executor rest, or run on this machine with --executor local"

/*
 * 0 when libslurm can establish its configuration, else -1 with err naming the fixes.
 * slurm_init() finds it in $SLURM_CONF, the default slurm.conf (/etc/slurm/slurm.conf on
 * Debian), slurmd's configless cache or a DNS SRV record of slurmctld, and where it finds
 * none it calls fatal(), which exits the process: so a child process tries it first (its
 * output discarded). A SLURM_CONF that cannot be read is named at once (libslurm would
 * retry it for 60 s before its fatal()).
 */
static int config_probe(char *err, size_t errlen)
{
	const char *conf = getenv("SLURM_CONF");
	pid_t pid;
	int st = 0, fd;

	if (conf && *conf && access(conf, R_OK)) {
		snprintf(err, errlen, "slurm: cannot read SLURM_CONF '%s': %s (%s)", conf,
			 strerror(errno), NO_CONF_FIXES);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return 0; /* no child to ask: slurm_init decides */
	if (pid == 0) {
		if ((fd = open("/dev/null", O_WRONLY)) >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		slurm_init(NULL);
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (conf && *conf)
		snprintf(err, errlen,
			 "slurm: libslurm cannot load the Slurm configuration '%s' (SLURM_CONF) "
			 "(%s)",
			 conf, NO_CONF_FIXES);
	else
		snprintf(err, errlen,
			 "slurm: no Slurm configuration on this machine (no slurm.conf, no "
			 "SLURM_CONF, no slurmctld found through DNS): %s",
			 NO_CONF_FIXES);
	return -1;
}

/* A job's state reason as Slurm prints it ("Priority", "NonZeroExitCode"), or
 * "reason N" where this libslurm does not export the function. */
static void reason_text(uint32_t reason, char *out, size_t len)
{
	typedef const char *(*reason_fn)(uint32_t);
	static reason_fn fn;
	static int looked;

	if (!looked) {
		void *sym = dlsym(RTLD_DEFAULT, REASON_FN);
		memcpy(&fn, &sym, sizeof(fn)); /* object to function pointer, as POSIX allows */
		looked = 1;
	}
	const char *s = fn ? fn(reason) : NULL;
	if (s)
		snprintf(out, len, "%s", s);
	else
		snprintf(out, len, "reason %u", (unsigned)reason);
}

static const char *state_name(uint32_t st)
{
	static const char *names[] = {"PENDING",   "RUNNING",	"SUSPENDED", "COMPLETED",
				      "CANCELLED", "FAILED",	"TIMEOUT",   "NODE_FAIL",
				      "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
	uint32_t base = st & JOB_STATE_BASE;
	return base < sizeof(names) / sizeof(names[0]) ? names[base] : "UNKNOWN";
}

/* Extra #SBATCH options that map onto the job description. */
static int apply_extra(job_desc_msg_t *d, const char *opt, char *err, size_t errlen)
{
	/* the options whose value is the text of a field (the value stays opt's) */
	const struct {
		const char *name;
		char **field;
	} text[] = {
	    {"--constraint", &d->features}, {"--reservation", &d->reservation},
	    {"--exclude", &d->exc_nodes},   {"--nodelist", &d->req_nodes},
	    {"--comment", &d->comment},	    {"--gres", &d->tres_per_node},
	};
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : "";
	size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
	long mb;

	if (n == 5 && !strncmp(opt, "--mem", 5) && lb_parse_long(v, 1, 1L << 40, &mb) == 0) {
		d->pn_min_memory = (uint64_t)mb;
		return 0;
	}
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (strlen(text[i].name) == n && !strncmp(opt, text[i].name, n)) {
			*text[i].field = (char *)v;
			return 0;
		}
	snprintf(err, errlen,
		 "cluster.sbatch_extra '%s' is not supported by the slurm executor (it takes "
		 "--mem, --constraint, --reservation, --exclude, --nodelist, --comment, --gres; or "
		 "submit the rendered script with sbatch)",
		 opt);
	return -1;
}

struct slurm_priv {
	struct exec_opts o;
};

static int ss_submit(struct executor *x, const struct slurm_array *a, const char *script_path,
		     const char *work_dir, char *array_job_id, size_t idlen, char *err,
		     size_t errlen)
{
	struct slurm_priv *pv = x->priv;
	job_desc_msg_t d;
	submit_response_msg_t *resp = NULL;
	char gres[64];
	size_t nenv = 0;
	char **env = exec_job_environ(&nenv);

	(void)script_path;
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	slurm_init_job_desc_msg(&d);
	d.name = (char *)a->job_name;
	d.script = a->script;
	d.environment = env;
	d.env_size = (uint32_t)nenv;
	d.work_dir = (char *)work_dir;
	d.std_out = (char *)a->out_path;
	d.std_err = (char *)a->err_path;
	d.array_inx = (char *)a->array_spec;
	d.user_id = getuid();
	d.group_id = getgid();
	d.min_nodes = d.max_nodes = (uint32_t)a->nodes;
	d.ntasks_per_node = (uint16_t)a->ntasks_per_node;
	d.num_tasks = (uint32_t)(a->nodes * a->ntasks_per_node);
	if (a->cpus_per_task > 0)
		d.cpus_per_task = (uint16_t)a->cpus_per_task;
	if (a->time_limit_min > 0)
		d.time_limit = (uint32_t)a->time_limit_min;
	if (a->gpus_per_node > 0) {
		snprintf(gres, sizeof(gres), "gres:gpu:%d", a->gpus_per_node);
		d.tres_per_node = gres;
	}
	if (a->partition[0])
		d.partition = (char *)a->partition;
	if (a->account[0])
		d.account = (char *)a->account;
	if (a->qos[0])
		d.qos = (char *)a->qos;
	if (a->exclusive)
		d.shared = JOB_SHARED_NONE;
	if (pv->o.hold)
		d.priority = 0;
	for (int i = 0; i < a->n_extra; i++)
		if (apply_extra(&d, a->extra[i], err, errlen)) {
			free(env);
			return -1;
		}
	if (slurm_submit_batch_job(&d, &resp) != SLURM_SUCCESS) {
		snprintf(err, errlen, "slurm: submitting array '%s' failed: %s", a->job_name,
			 slurm_strerror(errno));
		free(env);
		return -1;
	}
	snprintf(array_job_id, idlen, "%u", RESP_JOB_ID(resp));
	slurm_free_submit_response_response_msg(resp);
	free(env);
	return 0;
}

static void fill(struct exec_state *s, const slurm_job_info_t *j)
{
	int ec = (int)j->exit_code;
	s->known = 1;
	snprintf(s->state, sizeof(s->state), "%s", state_name(j->job_state));
	s->reason[0] = '\0';
	if (j->state_reason)
		reason_text(j->state_reason, s->reason, sizeof(s->reason));
	if (!strcmp(s->reason, "None"))
		s->reason[0] = '\0';
	if (exec_state_final(s->state))
		s->exit_code = WIFEXITED(ec) ? WEXITSTATUS(ec) : 128 + WTERMSIG(ec);
	else
		s->exit_code = -1;
	s->start_time = j->start_time > 0 && (j->job_state & JOB_STATE_BASE) != JOB_PENDING
			    ? (int64_t)j->start_time
			    : 0;
	s->end_time = exec_state_final(s->state) ? (int64_t)j->end_time : 0;
}

static int ss_poll(struct executor *x, const struct results_job *jobs, size_t n,
		   struct exec_state *out, char *err, size_t errlen)
{
	job_info_msg_t *msg = NULL;
	(void)x;
	if (slurm_load_jobs((time_t)0, &msg, SHOW_ALL) != SLURM_SUCCESS) {
		snprintf(err, errlen, "slurm: loading jobs failed: %s", slurm_strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].exit_code = -1;
		long aid = strtol(jobs[i].array_job_id, NULL, 10);
		long jid = strtol(jobs[i].job_id, NULL, 10);
		for (uint32_t r = 0; r < msg->record_count; r++) {
			const slurm_job_info_t *j = &msg->job_array[r];
			int hit;
			if (jobs[i].array_index >= 0 && aid > 0) {
				if (j->array_task_str)
					hit = j->array_job_id == (uint32_t)aid &&
					      exec_task_in(j->array_task_str, jobs[i].array_index);
				else
					hit = j->array_job_id == (uint32_t)aid &&
					      j->array_task_id == (uint32_t)jobs[i].array_index;
				if (!hit && j->array_job_id == 0 && j->job_id == (uint32_t)aid &&
				    jobs[i].array_index == 0)
					hit = 1; /* an array of one shows as a plain job */
			} else {
				hit = j->job_id == (uint32_t)jid;
			}
			if (hit) {
				fill(&out[i], j);
				break;
			}
		}
	}
	slurm_free_job_info_msg(msg);
	return 0;
}

static int ss_cancel(struct executor *x, const struct results_job *jobs, size_t n, char *err,
		     size_t errlen)
{
	int rc = 0;
	(void)x;
	for (size_t i = 0; i < n; i++) {
		const char *id = jobs[i].array_job_id[0] ? jobs[i].array_job_id : jobs[i].job_id;
		if (exec_array_seen(jobs, i))
			continue;
		if (slurm_kill_job2(id, SIGKILL, 0, NULL) != SLURM_SUCCESS) {
			int e = errno;
			if (e == ESLURM_ALREADY_DONE || e == ESLURM_INVALID_JOB_ID)
				continue;
			snprintf(err, errlen, "slurm: cancelling job %s failed: %s", id,
				 slurm_strerror(e));
			rc = -1;
		}
	}
	return rc;
}

static void ss_close(struct executor *x)
{
	free(x->priv);
	free(x);
}

int exec_slurm_open(const struct exec_opts *o, struct executor **out, char *err, size_t errlen)
{
	slurm_conf_t *conf = NULL;
	struct executor *x;

	*out = NULL;
	if (!g_inited) {
		if (config_probe(err, errlen))
			return -1;
		slurm_init(NULL);
		g_inited = 1;
	}
	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS) {
		snprintf(err, errlen,
			 "slurm: cannot reach slurmctld: %s (is Slurm running? for a local test "
			 "cluster: sh scripts/slurm-local.sh start)",
			 slurm_strerror(errno));
		return -1;
	}
	x = calloc(1, sizeof(*x));
	struct slurm_priv *pv = calloc(1, sizeof(*pv));
	if (!x || !pv) {
		free(x);
		free(pv);
		slurm_free_ctl_conf(conf);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pv->o = *o;
	*x = (struct executor){.name = "slurm",
			       .max_array = conf->max_array_sz > 0 ? (int)conf->max_array_sz
								   : SLURM_DEFAULT_MAX_ARRAY,
			       .submit = ss_submit,
			       .poll = ss_poll,
			       .cancel = ss_cancel,
			       .close = ss_close,
			       .priv = pv};
	slurm_free_ctl_conf(conf);
	*out = x;
	return 0;
}

#endif
