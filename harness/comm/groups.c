/*
 * The groups of a layout (groups.h): the rank order and the three splits of the world.
 */
#include <string.h>

#include "harness/comm/groups.h"

int lb_groups_rank_to_coords(int rank, int tp, int pp, int dp, struct lb_rank_coords *out)
{
	if (tp < 1 || pp < 1 || dp < 1 || rank < 0 || (long)rank >= (long)tp * pp * dp)
		return -1;
	out->tp_rank = rank % tp;
	out->dp_rank = rank / tp % dp;
	out->pp_rank = rank / (tp * dp);
	return 0;
}

int lb_groups_coords_to_rank(const struct lb_rank_coords *c, int tp, int pp, int dp)
{
	if (tp < 1 || pp < 1 || dp < 1 || c->tp_rank < 0 || c->tp_rank >= tp || c->pp_rank < 0 ||
	    c->pp_rank >= pp || c->dp_rank < 0 || c->dp_rank >= dp)
		return -1;
	return c->pp_rank * (dp * tp) + c->dp_rank * tp + c->tp_rank;
}

int lb_comm_make_groups(struct lb_comm *world, int tp, int pp, int dp, struct lb_groups *out)
{
	struct lb_rank_coords me;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!world || lb_groups_rank_to_coords(world->rank, tp, pp, dp, &me) != 0 ||
	    (long)tp * pp * dp != world->size)
		return LB_COMM_EFAIL;
	/* every rank makes the three splits in the same order */
	rc = world->ops->split(world, me.pp_rank * dp + me.dp_rank, me.tp_rank, &out->tp);
	if (rc == 0)
		rc = world->ops->split(world, me.pp_rank * tp + me.tp_rank, me.dp_rank, &out->dp);
	if (rc == 0)
		rc = world->ops->split(world, me.dp_rank * tp + me.tp_rank, me.pp_rank, &out->pp);
	if (rc != 0) {
		lb_groups_release(out);
		return rc;
	}
	out->me = me;
	out->tp_size = tp;
	out->pp_size = pp;
	out->dp_size = dp;
	out->pp_prev = me.pp_rank > 0 ? me.pp_rank - 1 : -1;
	out->pp_next = me.pp_rank < pp - 1 ? me.pp_rank + 1 : -1;
	return 0;
}

void lb_groups_release(struct lb_groups *g)
{
	if (g->tp)
		g->tp->ops->destroy(g->tp);
	if (g->dp)
		g->dp->ops->destroy(g->dp);
	if (g->pp)
		g->pp->ops->destroy(g->pp);
	memset(g, 0, sizeof(*g));
	g->pp_prev = g->pp_next = -1;
}
