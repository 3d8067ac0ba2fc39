/*
 * Helpers shared by every comm table implementation: element sizes and names of the
 * dtypes, the text of the LB_COMM_E* codes for error messages and their failure class
 * in the run log (docs/run-log.md), and the defaults of the table's optional members
 * (what the core asks of a device communicator: names, errors, tags, device times).
 * libc only.
 */
#include "harness/comm/comm.h"

size_t lb_dtype_size(enum lb_dtype t)
{
	switch (t) {
	case LB_F32:
	case LB_I32:
		return 4;
	case LB_BF16:
	case LB_F16:
		return 2;
	case LB_F64:
		return 8;
	}
	return 0;
}

const char *lb_dtype_name(enum lb_dtype t)
{
	switch (t) {
	case LB_F32:
		return "f32";
	case LB_BF16:
		return "bf16";
	case LB_F16:
		return "f16";
	case LB_I32:
		return "i32";
	case LB_F64:
		return "f64";
	}
	return "unknown";
}

const char *lb_comm_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case LB_COMM_EFAIL:
		return "communicator error";
	case LB_COMM_ETIMEOUT:
		return "a peer did not arrive within the timeout";
	case LB_COMM_EPEER:
		return "a peer rank exited or reported a failure";
	}
	return "unknown communicator error";
}

const char *lb_comm_failure_class(int code)
{
	if (code == 0)
		return NULL;
	if (code == LB_COMM_ETIMEOUT || code == LB_COMM_EPEER)
		return "timeout";
	return "nccl_error";
}

struct lb_comm *lb_comm_host_of(struct lb_comm *c)
{
	return c && c->ops->host ? c->ops->host(c) : c;
}

void lb_comm_set_name(struct lb_comm *c, const char *name)
{
	if (c && c->ops->set_name)
		c->ops->set_name(c, name);
}

int lb_comm_error(const struct lb_comm *c, int *rank, char *msg, size_t len)
{
	if (c && c->ops->error)
		return c->ops->error(c, rank, msg, len);
	if (rank)
		*rank = -1;
	if (msg && len)
		msg[0] = 0;
	return 0;
}

int lb_comm_set_tag(struct lb_comm *c, int tag)
{
	return c && c->ops->set_tag ? c->ops->set_tag(c, tag) : -1;
}

double lb_comm_take_seconds(struct lb_comm *c, double *per_tag, int ntags)
{
	return c && c->ops->take_seconds ? c->ops->take_seconds(c, per_tag, ntags) : -1;
}
