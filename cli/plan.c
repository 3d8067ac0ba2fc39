/*
 * `layoutbench plan SPEC [--format table|csv|json] [--render DIR] [--machine M] [--sort K]`:
 * expand a sweep spec (sweeps/), predict the step time of every layout that fits
 * (sweeps/plan_predict.h), print it (sweeps/plan_print.h) and, with --render, write its
 * job scripts (slurm/render.h). The shell lives in cli/ because it joins two rooms: the
 * planner and the renderer.
 */
#include <stdio.h>

#include <stdlib.h>

#include "cli/commands.h"
#include "common/cmdline.h"
#include "common/predict.h"
#include "slurm/render.h"
#include "sweeps/plan_print.h"
#include "sweeps/sweep.h"

/* The ids of its options (struct lb_option.id). */
enum { OPT_FORMAT, OPT_RENDER, OPT_MACHINE, OPT_SORT };

static const struct lb_option plan_opts[] = {
    LB_CHOICE(OPT_FORMAT, "format", NULL, "table|csv|json", "table", 0,
	      "the output format (csv and json: the summary goes to stderr)"),
    LB_TEXT(OPT_RENDER, "render", "DIR", NULL,
	    "also write the job scripts of the runnable layouts into DIR"),
    LB_OPTION_MACHINE(OPT_MACHINE),
    LB_CHOICE(OPT_SORT, "sort", NULL, "spec|mfu|time|gpu-hours", "spec", 0,
	      "the order of the layouts: as the spec expands them, or by predicted MFU (best "
	      "first), step time or GPU-hours (least first)"),
    LB_OPT_END,
};

static int run_plan(const struct lb_args *a)
{
	struct sweep_plan plan;
	struct plan_predictions pred = {0};
	struct plan_print_opts po = {0};
	struct lb_machine *m = NULL;
	enum plan_format fmt = PLAN_TABLE;
	enum plan_sort sort = PLAN_SORT_SPEC;
	size_t *order = NULL;
	const char *render = a->str[OPT_RENDER];
	char err[1024], note[512];
	int rc = 1, have;

	plan_format_parse(a->str[OPT_FORMAT], &fmt); /* the table's choices */
	plan_sort_parse(a->str[OPT_SORT], &sort);
	if (sweep_plan_load(a->operands[0], &plan, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	m = malloc(sizeof(*m));
	order = malloc((plan.n_entries ? plan.n_entries : 1) * sizeof(*order));
	if (!m || !order) {
		fprintf(stderr, "error: out of memory\n");
		goto out_free_plan;
	}
	have = plan_machine(&plan, a->str[OPT_MACHINE], m, note, sizeof(note), err, sizeof(err));
	if (have < 0) {
		fprintf(stderr, "error: --machine: %s\n", err);
		goto out_free_plan;
	}
	if (plan_predict(&plan, have ? m : NULL, note, &pred, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out_free_plan;
	}
	if (sort != PLAN_SORT_SPEC && !pred.p) {
		fprintf(stderr, "error: --sort %s: %s\n", a->str[OPT_SORT],
			note[0] ? note : "a CPU sweep has no step-time prediction");
		goto out_free_plan;
	}
	plan_sort(&plan, &pred, sort, order);
	if (have || note[0])
		po.pred = &pred;
	po.order = order;
	if (plan_print_ex(stdout, stderr, &plan, fmt, &po, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out_free_plan;
	}
	if (render) {
		if (slurm_render_plan(&plan, render, err, sizeof(err))) {
			fprintf(stderr, "error: render '%s': %s\n", render, err);
			goto out_free_plan;
		}
		fprintf(stderr, "rendered the job scripts of plan '%s' into '%s'\n", plan.name,
			render);
	}
	rc = 0;
out_free_plan:
	plan_predictions_free(&pred);
	free(order);
	free(m);
	sweep_plan_free(&plan);
	return rc;
}

const struct lb_command cmd_plan =
    LB_COMMAND("plan", "SPEC", 1, 1, 1, plan_opts, run_plan,
	       "every grid point with its id, fields, memory per GPU, status (ok, oom or invalid "
	       "with the reason) and predicted step time, MFU and GPU-hours; --render writes the "
	       "job scripts");
