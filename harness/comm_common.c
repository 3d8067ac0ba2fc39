/*
 * Helpers shared by every comm table implementation: element sizes and names of the
 * dtypes, the text of the LB_COMM_E* codes for error messages and their failure class
 * in the run log (docs/run-log.md). libc only.
 */
#include "harness/comm.h"

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
