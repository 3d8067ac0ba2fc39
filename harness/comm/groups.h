/*
 * The groups of a layout: the rank order of a (tp, pp, dp) layout (Megatron's: tensor-
 * parallel ranks adjacent, then data-parallel, then pipeline) and the tp/dp/pp
 * communicators split from the world in that order. libc only. See docs/parallelism.md.
 */
#ifndef LB_GROUPS_H
#define LB_GROUPS_H

#include "harness/comm/comm.h"

/*
 * Rank order: rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank (Megatron): the
 * tensor-parallel group is tp adjacent ranks (one node), a data-parallel group strides
 * by tp, a pipeline strides by dp * tp.
 */
struct lb_rank_coords {
	int tp_rank, pp_rank, dp_rank;
};
/* 0, or -1 when a size is < 1 or rank is not in [0, tp * pp * dp). */
int lb_groups_rank_to_coords(int rank, int tp, int pp, int dp, struct lb_rank_coords *out);
/* The rank, or -1 when a coordinate is out of range. */
int lb_groups_coords_to_rank(const struct lb_rank_coords *c, int tp, int pp, int dp);

/*
 * The communicators of a layout, split from world (size tp * pp * dp): tp (size tp,
 * rank tp_rank), dp (size dp, rank dp_rank), pp (size pp, rank pp_rank). pp_prev and
 * pp_next are the neighbouring stages in pp's numbering (pp_rank - 1, pp_rank + 1), -1
 * at the ends. world stays the caller's.
 */
struct lb_groups {
	struct lb_comm *tp, *dp, *pp; /* owned: lb_groups_release */
	struct lb_rank_coords me;
	int tp_size, pp_size, dp_size;
	int pp_prev, pp_next;
};
/* Collective over world. Returns 0, or the split's LB_COMM_E* code (nothing to release),
 * or LB_COMM_EFAIL when tp * pp * dp != world->size. */
int lb_comm_make_groups(struct lb_comm *world, int tp, int pp, int dp, struct lb_groups *out);
void lb_groups_release(struct lb_groups *g);

#endif
