/*
 * The one-rank communicator: every collective over a group of one is a copy (or nothing
 * when in == out); send/recv to oneself is refused, since a single rank has no peer and a
 * schedule that asks for one is wrong; split gives another one-rank communicator.
 */
#include <stdlib.h>
#include <string.h>

#include "harness/comm/comm.h"

static int self_copy(const void *in, void *out, size_t count, enum lb_dtype t)
{
	size_t esz = lb_dtype_size(t);

	if (esz == 0)
		return LB_COMM_EFAIL;
	if (count && in != out)
		memmove(out, in, count * esz);
	return 0;
}

static int self_all_reduce(struct lb_comm *c, const void *in, void *out, size_t count,
			   enum lb_dtype t, enum lb_redop op, void *stream)
{
	if (op != LB_SUM && op != LB_MAX && op != LB_AVG)
		return LB_COMM_EFAIL;
	return self_copy(in, out, count, t);
}

static int self_reduce_scatter(struct lb_comm *c, const void *in, void *out, size_t count,
			       enum lb_dtype t, enum lb_redop op, void *stream)
{
	if (op != LB_SUM && op != LB_MAX && op != LB_AVG)
		return LB_COMM_EFAIL;
	return self_copy(in, out, count, t);
}

static int self_all_gather(struct lb_comm *c, const void *in, void *out, size_t count,
			   enum lb_dtype t, void *stream)
{
	return self_copy(in, out, count, t);
}

static int self_broadcast(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int root,
			  void *stream)
{
	if (root != 0 || lb_dtype_size(t) == 0)
		return LB_COMM_EFAIL;
	return 0;
}

static int self_send(struct lb_comm *c, const void *buf, size_t count, enum lb_dtype t, int peer,
		     void *stream)
{
	return LB_COMM_EFAIL; /* no peer in a group of one */
}

static int self_recv(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int peer,
		     void *stream)
{
	return LB_COMM_EFAIL;
}

/* One rank: nothing to wait for, and no group of sends and receives to open or close. */
static int self_barrier(struct lb_comm *c)
{
	return 0;
}

static void self_destroy(struct lb_comm *c)
{
	free(c);
}

static int self_split(struct lb_comm *c, int color, int key, struct lb_comm **out)
{
	*out = lb_comm_self();
	return *out ? 0 : LB_COMM_EFAIL;
}

static const struct lb_comm_ops self_ops = {
    .name = "self",
    LB_COMM_OPS(self),
    .group_start = self_barrier,
    .group_end = self_barrier,
};

struct lb_comm *lb_comm_self(void)
{
	struct lb_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ops = &self_ops;
	c->rank = 0;
	c->size = 1;
	c->impl = NULL;
	return c;
}
