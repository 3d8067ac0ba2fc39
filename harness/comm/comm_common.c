/*
 * Helpers shared by every comm table implementation: element sizes and names of the
 * dtypes, the text of the LB_COMM_E* codes for error messages and their failure class
 * in the run log (docs/run-log.md), and the defaults of the table's optional members
 * (what the core asks of a device communicator: names, errors, tags, device times).
 * libc only.
 */
#include "harness/comm/comm.h"

#include <stdarg.h>
#include <stdio.h>

/* Each dtype's bytes per element and name, in the enum's order. */
static const struct {
	size_t size;
	const char *name;
} dtypes[] = {
    [LB_F32] = {4, "f32"}, [LB_BF16] = {2, "bf16"}, [LB_F16] = {2, "f16"},
    [LB_I32] = {4, "i32"}, [LB_F64] = {8, "f64"},
};

static int dtype_known(enum lb_dtype t)
{
	return (unsigned)t < sizeof(dtypes) / sizeof(dtypes[0]);
}

size_t lb_dtype_size(enum lb_dtype t)
{
	return dtype_known(t) ? dtypes[t].size : 0;
}

const char *lb_dtype_name(enum lb_dtype t)
{
	return dtype_known(t) ? dtypes[t].name : "unknown";
}

/* The text of each code, indexed by its negation. */
static const char *const comm_errors[] = {
    [0] = "success",
    [-LB_COMM_EFAIL] = "communicator error",
    [-LB_COMM_ETIMEOUT] = "a peer did not arrive within the timeout",
    [-LB_COMM_EPEER] = "a peer rank exited or reported a failure",
};

const char *lb_comm_strerror(int code)
{
	if (code <= 0 && code > -(int)(sizeof(comm_errors) / sizeof(comm_errors[0])))
		return comm_errors[-code];
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

int lb_comm_err_set(struct lb_comm_err *e, int code, int rank, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->rank = rank;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return code;
}

int lb_comm_err_get(const struct lb_comm_err *e, int *rank, char *msg, size_t len)
{
	if (rank)
		*rank = e ? e->rank : -1;
	if (msg && len)
		snprintf(msg, len, "%s", e ? e->msg : "");
	return e ? e->code : 0;
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
