/*
 * Helpers shared by every comm table implementation: element sizes and names of the
 * dtypes, and the text of the LB_COMM_E* codes for error messages. libc only.
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
