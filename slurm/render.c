/*
 * Job-script rendering (see render.h): groups a plan's runnable layouts by resource
 * shape into job arrays, splits arrays at MaxArraySize, and writes each array's bash
 * script: #SBATCH header, the spec's environment (single-quoted), the spec's setup lines,
 * a `case "$SLURM_ARRAY_TASK_ID"` table from index to layout (id and quoted trainer
 * flags; no eval of data), then `srun layoutbench-train ... --run-dir DIR`.
 */
#include "slurm/render.h"

#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void slurm_shell_quote(struct lb_strbuf *sb, const char *s)
{
	lb_strbuf_add(sb, "'", 1);
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			lb_strbuf_add(sb, "'\\''", 4);
		else
			lb_strbuf_add(sb, p, 1);
	}
	lb_strbuf_add(sb, "'", 1);
}

/* text as it is, then s quoted for the shell: run_dir='/x/runs'. */
static void add_quoted(struct lb_strbuf *sb, const char *text, const char *s)
{
	lb_strbuf_adds(sb, text);
	slurm_shell_quote(sb, s);
}

static int in_set(const char *s, const char *extra)
{
	for (const char *p = s; *p; p++) {
		char c = *p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			continue;
		if (!strchr(extra, c))
			return 0;
	}
	return 1;
}

int slurm_safe_name(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < 64 && s[0] != '-' && s[0] != '.' && in_set(s, "._-");
}

int slurm_safe_path(const char *s)
{
	return *s && in_set(s, "/._+,:@=-");
}

/* Names of environment variables: [A-Za-z_][A-Za-z0-9_]*. */
static int safe_env_name(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return 0;
	}
	return 1;
}

/* An extra #SBATCH option: "--name" or "--name=value", printable, no quotes, no '#'. */
static int safe_sbatch_extra(const char *s)
{
	if (strncmp(s, "--", 2) || !s[2])
		return 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x21 || *p > 0x7e || *p == '\'' || *p == '"' || *p == '\\' || *p == '`' ||
		    *p == '$' || *p == ';' || *p == '#')
			return 0;
	return 1;
}

void slurm_default_train_path(char *buf, size_t len)
{
	const char *env = getenv("LAYOUTBENCH_TRAIN");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			char cand[PATH_MAX + 32];
			snprintf(cand, sizeof(cand), "%s/layoutbench-train", self);
			if (access(cand, X_OK) == 0) {
				snprintf(buf, len, "%s", cand);
				return;
			}
		}
	}
	snprintf(buf, len, "layoutbench-train");
}

int slurm_abs_runs_dir(const char *runs, char *buf, size_t len, char *err, size_t errlen)
{
	char cwd[PATH_MAX];
	int n;

	if (!runs || !*runs)
		runs = "runs";
	if (runs[0] == '/') {
		n = snprintf(buf, len, "%s", runs);
	} else {
		if (!getcwd(cwd, sizeof(cwd))) {
			snprintf(err, errlen, "cannot read the current directory: %s",
				 strerror(errno));
			return -1;
		}
		if (runs[0] == '.' && runs[1] == '/')
			runs += 2;
		n = snprintf(buf, len, "%s/%s", cwd, runs);
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(err, errlen, "runs directory '%s' is too long", runs);
		return -1;
	}
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	return 0;
}

/* Check every spec value that reaches a script; one message per fault. */
static int check_plan(const struct sweep_plan *p, const struct slurm_render_opts *o, char *err,
		      size_t errlen)
{
	const struct sweep_cluster *c = &p->cluster;
	const char *what = NULL, *val = NULL;

	if (lb_sweep_name_check(p->name, err, errlen)) /* the spec reader's rule */
		return -1;
	if (c->partition[0] && !in_set(c->partition, "._,-"))
		what = "partition", val = c->partition;
	else if (c->account[0] && !in_set(c->account, "._-"))
		what = "account", val = c->account;
	else if (c->qos[0] && !in_set(c->qos, "._-"))
		what = "qos", val = c->qos;
	else if (c->device[0] && !slurm_safe_name(c->device))
		what = "device", val = c->device;
	else if (c->gpu_request[0] && strcmp(c->gpu_request, "gpus-per-node") &&
		 strcmp(c->gpu_request, "gres") &&
		 (strncmp(c->gpu_request, "gres:", 5) || !slurm_safe_name(c->gpu_request + 5)))
		what = "gpu_request", val = c->gpu_request;
	if (what) {
		snprintf(err, errlen,
			 "sweep '%s': cluster.%s '%s' is not a valid Slurm name (letters, digits, "
			 "'.', '_', '-')",
			 p->name, what, val);
		return -1;
	}
	for (int i = 0; i < c->n_sbatch_extra; i++)
		if (!safe_sbatch_extra(c->sbatch_extra[i])) {
			snprintf(err, errlen,
				 "sweep '%s': cluster.sbatch_extra[%d] '%s' is not a plain "
				 "'--option=value' (no spaces, quotes or shell characters)",
				 p->name, i, c->sbatch_extra[i]);
			return -1;
		}
	for (int i = 0; i < c->n_env; i++) {
		const char *eq = strchr(c->env[i], '=');
		if (!eq || !safe_env_name(c->env[i], (size_t)(eq - c->env[i]))) {
			snprintf(err, errlen,
				 "sweep '%s': cluster.env[%d] '%s' is not NAME=value with NAME of "
				 "[A-Za-z_][A-Za-z0-9_]*",
				 p->name, i, c->env[i]);
			return -1;
		}
	}
	for (int i = 0; i < c->n_setup; i++)
		if (strchr(c->setup[i], '\n')) {
			snprintf(err, errlen,
				 "sweep '%s': cluster.setup[%d] holds a newline (give one line per "
				 "entry)",
				 p->name, i);
			return -1;
		}
	if (!o->runs_dir || o->runs_dir[0] != '/' || !slurm_safe_path(o->runs_dir)) {
		snprintf(err, errlen,
			 "runs directory '%s' must be an absolute path of letters, digits and "
			 "'/._+,:@=-' (it goes into #SBATCH --output)",
			 o->runs_dir ? o->runs_dir : "");
		return -1;
	}
	if (!o->train_path || !*o->train_path || strchr(o->train_path, '\n')) {
		snprintf(err, errlen, "trainer path '%s' is empty or holds a newline",
			 o->train_path ? o->train_path : "");
		return -1;
	}
	return 0;
}

static int env_in_spec(const struct sweep_cluster *c, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < c->n_env; i++)
		if (!strncmp(c->env[i], name, n) && c->env[i][n] == '=')
			return 1;
	return 0;
}

/* The trainer flags of one layout, each word quoted. */
static int add_flags(struct lb_strbuf *sb, const struct plan_entry *e, char *err, size_t errlen)
{
	char flags[LB_MAX_STAGES * 12 + 2048]; /* --stage-layers adds one number a stage */
	int n = lb_layout_to_flags(&e->layout, flags, sizeof(flags));

	if (n < 0 || (size_t)n >= sizeof(flags)) {
		snprintf(err, errlen, "layout %s: flags too long", e->id);
		return -1;
	}
	if (!slurm_safe_name(e->layout.model.name)) {
		snprintf(err, errlen,
			 "layout %s: model name '%s' is not safe in a job script (letters, digits, "
			 "'.', '_', '-')",
			 e->id, e->layout.model.name);
		return -1;
	}
	char *save = NULL;
	int first = 1;
	for (char *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (!first)
			lb_strbuf_add(sb, " ", 1);
		first = 0;
		/* flag names are fixed text; quote only what is not plain */
		if (in_set(w, "._-="))
			lb_strbuf_adds(sb, w);
		else
			slurm_shell_quote(sb, w);
	}
	return 0;
}

/* The sweep's trainer flags beside the layout's: the cluster's --device, and
 * --peak-tflops for a GPU the peak table lacks; the optimizer settings the spec's run
 * gives (--lr, --weight-decay, --clip). */
static void add_device_flags(struct lb_strbuf *sb, const struct sweep_plan *p)
{
	const struct sweep_cluster *c = &p->cluster;

	if (c->device[0])
		lb_strbuf_addf(sb, " --device %s", c->device);
	if (c->peak_tflops > 0)
		lb_strbuf_addf(sb, " --peak-tflops %.9g", c->peak_tflops);
	if (p->optim.given & SWEEP_OPTIM_LR)
		lb_strbuf_addf(sb, " --lr %.9g", p->optim.lr);
	if (p->optim.given & SWEEP_OPTIM_WD)
		lb_strbuf_addf(sb, " --weight-decay %.9g", p->optim.weight_decay);
	if (p->optim.given & SWEEP_OPTIM_CLIP)
		lb_strbuf_addf(sb, " --clip %.9g", p->optim.clip);
}

static int render_script(const struct sweep_plan *p, const struct slurm_render_opts *o,
			 struct slurm_array *a, char *err, size_t errlen)
{
	const struct sweep_cluster *c = &p->cluster;
	struct lb_strbuf sb = LB_STRBUF_INIT;

	lb_strbuf_addf(
	    &sb,
	    "#!/bin/bash\n"
	    "# layoutbench job array: sweep '%s', %zu layout(s), %d node(s) x %d "
	    "rank(s)\n"
	    "# generated by 'layoutbench'; submit with 'layoutbench submit' or 'sbatch'\n",
	    p->name, a->n_tasks, a->nodes, a->ntasks_per_node);
	lb_strbuf_addf(&sb, "#SBATCH --job-name=%s\n", a->job_name);
	lb_strbuf_addf(&sb, "#SBATCH --array=%s\n", a->array_spec);
	lb_strbuf_addf(&sb, "#SBATCH --nodes=%d\n", a->nodes);
	lb_strbuf_addf(&sb, "#SBATCH --ntasks-per-node=%d\n", a->ntasks_per_node);
	if (a->gpus_per_node > 0 && a->gres[0])
		lb_strbuf_addf(&sb, "#SBATCH --gres=%s:%d\n", a->gres, a->gpus_per_node);
	else if (a->gpus_per_node > 0)
		lb_strbuf_addf(&sb, "#SBATCH --gpus-per-node=%d\n", a->gpus_per_node);
	if (a->cpus_per_task > 0)
		lb_strbuf_addf(&sb, "#SBATCH --cpus-per-task=%d\n", a->cpus_per_task);
	if (a->time_limit_min > 0)
		lb_strbuf_addf(&sb, "#SBATCH --time=%d\n", a->time_limit_min);
	if (c->partition[0])
		lb_strbuf_addf(&sb, "#SBATCH --partition=%s\n", c->partition);
	if (c->account[0])
		lb_strbuf_addf(&sb, "#SBATCH --account=%s\n", c->account);
	if (c->qos[0])
		lb_strbuf_addf(&sb, "#SBATCH --qos=%s\n", c->qos);
	if (c->exclusive)
		lb_strbuf_adds(&sb, "#SBATCH --exclusive\n");
	lb_strbuf_addf(&sb, "#SBATCH --output=%s\n", a->out_path);
	lb_strbuf_addf(&sb, "#SBATCH --error=%s\n", a->err_path);
	for (int i = 0; i < c->n_sbatch_extra; i++)
		lb_strbuf_addf(&sb, "#SBATCH %s\n", c->sbatch_extra[i]);

	lb_strbuf_adds(&sb, "set -u\n\n# environment from the spec\n");
	if (!env_in_spec(c, "NCCL_NVLS_ENABLE"))
		lb_strbuf_adds(&sb, "export NCCL_NVLS_ENABLE=0\n");
	for (int i = 0; i < c->n_env; i++) {
		const char *eq = strchr(c->env[i], '=');
		lb_strbuf_adds(&sb, "export ");
		lb_strbuf_add(&sb, c->env[i], (size_t)(eq - c->env[i]) + 1);
		slurm_shell_quote(&sb, eq + 1);
		lb_strbuf_adds(&sb, "\n");
	}
	add_quoted(&sb, "export LAYOUTBENCH_SWEEP=", p->name);
	lb_strbuf_adds(&sb, "\n");
	/* srun does not inherit sbatch's --cpus-per-task since Slurm 22.05; its documentation
	 * says to pass it on through SRUN_CPUS_PER_TASK. The spec's value stands in where
	 * the script runs outside a Slurm job. */
	if (a->cpus_per_task > 0 && !env_in_spec(c, "SRUN_CPUS_PER_TASK"))
		lb_strbuf_addf(&sb,
			       "# srun does not take --cpus-per-task from sbatch (Slurm 22.05 "
			       "and later)\nexport SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-%d}\n",
			       a->cpus_per_task);

	if (c->n_setup > 0) {
		lb_strbuf_adds(&sb, "\n# setup lines from the spec (verbatim)\n");
		for (int i = 0; i < c->n_setup; i++)
			lb_strbuf_addf(&sb, "%s\n", c->setup[i]);
	}

	lb_strbuf_adds(&sb, "\n# array index -> layout\ncase \"${SLURM_ARRAY_TASK_ID:-0}\" in\n");
	for (size_t i = 0; i < a->n_tasks; i++) {
		const struct plan_entry *e = &p->entries[a->entry[i]];
		lb_strbuf_addf(&sb, "%zu) layout=%s\n   set -- ", i, e->id);
		if (add_flags(&sb, e, err, errlen))
			goto out_release;
		lb_strbuf_adds(&sb, " ;;\n");
	}
	lb_strbuf_adds(&sb,
		       "*) echo \"error: array task '${SLURM_ARRAY_TASK_ID:-}' has no layout in "
		       "this script\" >&2\n   exit 2 ;;\nesac\n");

	add_quoted(&sb, "\nrun_dir=", o->runs_dir);
	add_quoted(&sb, "/", p->name);
	add_quoted(&sb, "/\"$layout\"\ntrain=", o->train_path);
	lb_strbuf_adds(&sb, "\n[ -n \"${LAYOUTBENCH_TRAIN:-}\" ] && train=$LAYOUTBENCH_TRAIN\n");
	lb_strbuf_adds(&sb,
		       "job=${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-0}}_${SLURM_ARRAY_TASK_ID:-0}\n"
		       "export LAYOUTBENCH_LAYOUT=\"$layout\" LAYOUTBENCH_RUN_DIR=\"$run_dir\"\n"
		       "mkdir -p \"$run_dir\" || exit 126\n");
	lb_strbuf_adds(
	    &sb,
	    "if ! command -v \"$train\" >/dev/null 2>&1; then\n"
	    "   echo \"error: trainer '$train' not found on $(hostname) (set LAYOUTBENCH_TRAIN "
	    "or build it there)\" >&2\n"
	    "   echo 127 >\"$run_dir/job-$job.exit\"\n"
	    "   exit 127\nfi\n");
	lb_strbuf_adds(&sb, "echo \"layoutbench: sweep $LAYOUTBENCH_SWEEP layout $layout job "
			    "${SLURM_JOB_ID:-} on $(hostname)\"\n");
	if (!strcmp(c->device, "cuda"))
		lb_strbuf_adds(&sb,
			       "# one rank per GPU: --device cuda takes GPU SLURM_LOCALID of the "
			       "node's visible ones; ranks\n# on one node meet in shared memory, "
			       "across nodes through NCCL, whose id rank 0\n# writes into the run "
			       "directory (a file system every node sees)\n");
	/* under Slurm (or the local executor's lb-srun) srun starts the ranks; a script run by
	 * hand on a host without Slurm (bash a0.sbatch) lets the trainer start its own */
	lb_strbuf_adds(&sb, "if [ -n \"${LB_SRUN:-}\" ] || [ -n \"${SLURM_JOB_ID:-}\" ]; then\n   "
			    "\"${LB_SRUN:-srun}\" --kill-on-bad-exit=1 \"$train\" \"$@\"");
	add_device_flags(&sb, p);
	lb_strbuf_adds(&sb, " --run-dir \"$run_dir\"\n   rc=$?\n");
	if (a->nodes > 1) {
		lb_strbuf_addf(&sb,
			       "else\n   echo \"error: this array needs %d nodes: submit it to "
			       "Slurm\" >&2\n   rc=2\n",
			       a->nodes);
	} else {
		lb_strbuf_addf(&sb,
			       "else # no Slurm: this host runs the %d rank(s)\n   "
			       "\"$train\" \"$@\" --nproc-per-node %d",
			       a->ntasks_per_node, a->ntasks_per_node);
		add_device_flags(&sb, p);
		lb_strbuf_adds(&sb, " --run-dir \"$run_dir\"\n   rc=$?\n");
	}
	lb_strbuf_adds(&sb, "fi\n"
			    "echo \"$rc\" >\"$run_dir/job-$job.exit\"\n"
			    "exit \"$rc\"\n");
	if (sb.failed) {
		snprintf(err, errlen, "out of memory rendering a job script");
		goto out_release;
	}
	a->script = lb_strbuf_detach(&sb);
	return 0;

out_release:
	lb_strbuf_release(&sb);
	return -1;
}

struct shape {
	int nodes, ranks, time;
};

static void shape_of(const struct sweep_plan *p, const struct plan_entry *e, struct shape *s)
{
	s->nodes = e->layout.nodes;
	s->ranks = e->layout.gpus_per_node;
	s->time = p->cluster.time_limit_min;
}

void slurm_batch_free(struct slurm_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_arrays; i++) {
		free(b->arrays[i].entry);
		free(b->arrays[i].script);
	}
	free(b->arrays);
	memset(b, 0, sizeof(*b));
}

int slurm_render_batch(const struct sweep_plan *p, const size_t *sel, size_t n_sel,
		       const struct slurm_render_opts *o, struct slurm_batch *out, char *err,
		       size_t errlen)
{
	size_t n = sel ? n_sel : p->n_entries;
	size_t *idx = NULL;
	struct shape *shapes = NULL;
	size_t n_idx = 0,
	       max_array = o->max_array > 0 ? (size_t)o->max_array : SLURM_DEFAULT_MAX_ARRAY;
	int cpu = !strcmp(p->cluster.device, "cpu");

	memset(out, 0, sizeof(*out));
	if (check_plan(p, o, err, errlen))
		return -1;
	idx = calloc(n ? n : 1, sizeof(*idx));
	shapes = calloc(n ? n : 1, sizeof(*shapes));
	if (!idx || !shapes)
		goto out_oom;
	for (size_t i = 0; i < n; i++) {
		size_t k = sel ? sel[i] : i;
		if (k >= p->n_entries) {
			snprintf(err, errlen, "layout index %zu out of range", k);
			goto out_free;
		}
		if (p->entries[k].status != PLAN_OK) {
			if (sel) {
				snprintf(err, errlen, "layout %s is %s, not runnable",
					 p->entries[k].id, sweep_status_name(p->entries[k].status));
				goto out_free;
			}
			continue;
		}
		idx[n_idx++] = k;
	}
	/* group by shape, in order of first appearance; split at max_array */
	int *done = calloc(n_idx ? n_idx : 1, sizeof(*done));
	if (!done)
		goto out_oom;
	for (size_t i = 0; i < n_idx; i++)
		shape_of(p, &p->entries[idx[i]], &shapes[i]);
	for (size_t i = 0; i < n_idx; i++) {
		if (done[i])
			continue;
		size_t members = 0;
		for (size_t j = i; j < n_idx; j++)
			if (!done[j] && !memcmp(&shapes[j], &shapes[i], sizeof(shapes[i])))
				members++;
		while (members > 0) {
			size_t take = members < max_array ? members : max_array;
			struct slurm_array *na =
			    realloc(out->arrays, (out->n_arrays + 1) * sizeof(*na));
			if (!na) {
				free(done);
				goto out_oom;
			}
			out->arrays = na;
			struct slurm_array *a = &out->arrays[out->n_arrays++];
			memset(a, 0, sizeof(*a));
			a->entry = calloc(take, sizeof(*a->entry));
			if (!a->entry) {
				free(done);
				goto out_oom;
			}
			for (size_t j = i; j < n_idx && a->n_tasks < take; j++)
				if (!done[j] &&
				    !memcmp(&shapes[j], &shapes[i], sizeof(shapes[i]))) {
					a->entry[a->n_tasks++] = idx[j];
					done[j] = 1;
				}
			members -= take;
			snprintf(a->tag, sizeof(a->tag), "a%zu", out->n_arrays - 1);
			if (a->n_tasks == 1)
				snprintf(a->job_name, sizeof(a->job_name), "%s.%s", p->name,
					 p->entries[a->entry[0]].id);
			else
				snprintf(a->job_name, sizeof(a->job_name), "%s.%s", p->name,
					 a->tag);
			a->nodes = shapes[i].nodes;
			a->ntasks_per_node = shapes[i].ranks;
			a->gpus_per_node = cpu ? 0 : shapes[i].ranks;
			if (!strncmp(p->cluster.gpu_request, "gres", 4))
				snprintf(a->gres, sizeof(a->gres), "gpu%s%.56s",
					 p->cluster.gpu_request[4] ? ":" : "",
					 p->cluster.gpu_request[4] ? p->cluster.gpu_request + 5
								   : "");
			a->cpus_per_task = p->cluster.cpus_per_task;
			a->time_limit_min = shapes[i].time;
			a->throttle = o->throttle > 0 ? o->throttle : 0;
			snprintf(a->partition, sizeof(a->partition), "%s", p->cluster.partition);
			snprintf(a->account, sizeof(a->account), "%s", p->cluster.account);
			snprintf(a->qos, sizeof(a->qos), "%s", p->cluster.qos);
			a->exclusive = p->cluster.exclusive;
			a->extra = p->cluster.sbatch_extra;
			a->n_extra = p->cluster.n_sbatch_extra;
			if (a->n_tasks == 1)
				snprintf(a->array_spec, sizeof(a->array_spec), "0");
			else
				snprintf(a->array_spec, sizeof(a->array_spec), "0-%zu",
					 a->n_tasks - 1);
			if (a->throttle > 0 && (size_t)a->throttle < a->n_tasks) {
				size_t l = strlen(a->array_spec);
				snprintf(a->array_spec + l, sizeof(a->array_spec) - l, "%%%d",
					 a->throttle);
			}
			snprintf(a->out_path, sizeof(a->out_path), "%s/%s/logs/%s-%%A_%%a.out",
				 o->runs_dir, p->name, a->tag);
			snprintf(a->err_path, sizeof(a->err_path), "%s/%s/logs/%s-%%A_%%a.err",
				 o->runs_dir, p->name, a->tag);
			if (render_script(p, o, a, err, errlen)) {
				free(done);
				goto out_free;
			}
			out->n_tasks += a->n_tasks;
		}
	}
	free(done);
	free(idx);
	free(shapes);
	return 0;

out_oom:
	snprintf(err, errlen, "out of memory rendering job scripts");
out_free:
	free(idx);
	free(shapes);
	slurm_batch_free(out);
	return -1;
}

static int write_file(const char *path, const char *text, int mode, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	fputs(text, f);
	if (fclose(f)) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	chmod(path, (mode_t)mode);
	return 0;
}

int slurm_render_plan(const struct sweep_plan *p, const char *dir, char *err, size_t errlen)
{
	struct slurm_render_opts o = {0};
	struct slurm_batch b;
	char runs[SLURM_PATH_MAX], train[SLURM_PATH_MAX], path[SLURM_PATH_MAX + 64];
	char logerr[SLURM_PATH_MAX + 128];
	int n;
	const char *thr = getenv("LAYOUTBENCH_THROTTLE");
	struct lb_strbuf tsv = LB_STRBUF_INIT;
	int rc = -1;

	if (slurm_abs_runs_dir(getenv("LAYOUTBENCH_RUNS"), runs, sizeof(runs), err, errlen))
		return -1;
	slurm_default_train_path(train, sizeof(train));
	o.runs_dir = runs;
	o.train_path = train;
	if (thr && *thr && lb_parse_int(thr, 0, 1000000, &o.throttle)) {
		snprintf(err, errlen, "LAYOUTBENCH_THROTTLE '%s' is not a count of tasks", thr);
		return -1;
	}
	if (slurm_render_batch(p, NULL, 0, &o, &b, err, errlen))
		return -1;
	if (lb_mkdir_p(dir, err, errlen)) /* with its parents, as mkdir -p */
		goto out_free;
	/* the folder of #SBATCH --output/--error: Slurm opens those files before the script
	 * runs and does not create their folder, so the script cannot make it itself */
	n = snprintf(path, sizeof(path), "%s/%s/logs", runs, p->name);
	if (n < 0 || (size_t)n >= sizeof(path))
		snprintf(logerr, sizeof(logerr), "the path is too long");
	else if (lb_mkdir_p(path, logerr, sizeof(logerr)))
		n = -1;
	if (n < 0 || (size_t)n >= sizeof(path))
		fprintf(stderr,
			"warning: %s: create '%s' before submitting with sbatch (Slurm does "
			"not create the folder of --output and --error)\n",
			logerr, path);
	lb_strbuf_adds(&tsv, "array\tarray_spec\tnodes\tranks_per_node\tlayouts\n");
	for (size_t i = 0; i < b.n_arrays; i++) {
		struct slurm_array *a = &b.arrays[i];
		snprintf(path, sizeof(path), "%s/%s.sbatch", dir, a->tag);
		if (write_file(path, a->script, 0755, err, errlen))
			goto out_free;
		lb_strbuf_addf(&tsv, "%s\t%s\t%d\t%d\t", a->tag, a->array_spec, a->nodes,
			       a->ntasks_per_node);
		for (size_t t = 0; t < a->n_tasks; t++)
			lb_strbuf_addf(&tsv, "%s%s", t ? "," : "", p->entries[a->entry[t]].id);
		lb_strbuf_adds(&tsv, "\n");
	}
	snprintf(path, sizeof(path), "%s/arrays.tsv", dir);
	if (write_file(path, lb_strbuf_str(&tsv), 0644, err, errlen))
		goto out_free;
	rc = 0;
out_free:
	lb_strbuf_release(&tsv);
	slurm_batch_free(&b);
	return rc;
}
