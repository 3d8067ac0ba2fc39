/*
 * `layoutbench plan SPEC [--format table|csv|json] [--render DIR]`: expand a sweep spec
 * (sweeps/), print it (sweeps/plan_print.h) and, with --render, write its job scripts
 * (slurm/render.h). The shell lives in cli/ because it joins two rooms: the planner and
 * the renderer.
 */
#include <stdio.h>

#include "cli/commands.h"
#include "common/cmdline.h"
#include "slurm/render.h"
#include "sweeps/plan_print.h"
#include "sweeps/sweep.h"

int cmd_plan(int argc, char **argv)
{
	struct lb_args a;
	struct sweep_plan plan;
	enum plan_format fmt = PLAN_TABLE;
	const char *render;
	char err[1024];
	int rc;

	if ((rc = lb_args_parse("plan", argc, argv, &a)))
		goto out_release_args;
	plan_format_parse(a.str[LB_OPT_FORMAT], &fmt); /* the table's choices */
	render = a.str[LB_OPT_RENDER];
	rc = 1;
	if (sweep_plan_load(a.operands[0], &plan, err, sizeof(err))) {
		fprintf(stderr, "error: %s\n", err);
		goto out_release_args;
	}
	if (plan_print(stdout, stderr, &plan, fmt, err, sizeof(err))) {
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
	sweep_plan_free(&plan);
out_release_args:
	lb_args_release(&a);
	return rc;
}
