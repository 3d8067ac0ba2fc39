/*
 * Unit tests of the one-rank communicator and the dtype helpers: collectives copy,
 * in-place calls leave the data alone, send/recv to self fail, split gives another self;
 * and the comm table's optional members (what the core asks of a device communicator):
 * their defaults where a table has none, the member's answer where it has one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "harness/comm/comm.h"

static void test_dtype_size(void **state)
{
	assert_int_equal(lb_dtype_size(LB_F32), 4);
	assert_int_equal(lb_dtype_size(LB_I32), 4);
	assert_int_equal(lb_dtype_size(LB_BF16), 2);
	assert_int_equal(lb_dtype_size(LB_F16), 2);
	assert_int_equal(lb_dtype_size((enum lb_dtype)99), 0);
	assert_string_equal(lb_dtype_name(LB_BF16), "bf16");
	assert_string_equal(lb_comm_strerror(LB_COMM_EPEER),
			    "a peer rank exited or reported a failure");
	assert_null(lb_comm_failure_class(0));
	assert_string_equal(lb_comm_failure_class(LB_COMM_ETIMEOUT), "timeout");
	assert_string_equal(lb_comm_failure_class(LB_COMM_EPEER), "timeout");
	assert_string_equal(lb_comm_failure_class(LB_COMM_EFAIL), "nccl_error");
}

static void test_self_collectives(void **state)
{
	struct lb_comm *c = lb_comm_self();
	float in[7], out[7];

	assert_non_null(c);
	assert_int_equal(c->rank, 0);
	assert_int_equal(c->size, 1);
	assert_string_equal(c->ops->name, "self");
	for (int i = 0; i < 7; i++)
		in[i] = (float)i * 1.5f;
	memset(out, 0, sizeof(out));
	assert_int_equal(c->ops->all_reduce(c, in, out, 7, LB_F32, LB_SUM, NULL), 0);
	assert_memory_equal(in, out, sizeof(in));
	memset(out, 0, sizeof(out));
	assert_int_equal(c->ops->reduce_scatter(c, in, out, 7, LB_F32, LB_AVG, NULL), 0);
	assert_memory_equal(in, out, sizeof(in));
	memset(out, 0, sizeof(out));
	assert_int_equal(c->ops->all_gather(c, in, out, 7, LB_F32, NULL), 0);
	assert_memory_equal(in, out, sizeof(in));
	/* in place */
	memcpy(out, in, sizeof(in));
	assert_int_equal(c->ops->all_reduce(c, out, out, 7, LB_F32, LB_MAX, NULL), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(c->ops->broadcast(c, out, 7, LB_F32, 0, NULL), 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(c->ops->broadcast(c, out, 7, LB_F32, 1, NULL), LB_COMM_EFAIL);
	assert_int_equal(c->ops->barrier(c), 0);
	c->ops->destroy(c);
}

static void test_self_send_recv_fail(void **state)
{
	struct lb_comm *c = lb_comm_self();
	float x = 1.0f;

	assert_int_equal(c->ops->group_start(c), 0);
	assert_true(c->ops->send(c, &x, 1, LB_F32, 0, NULL) < 0);
	assert_true(c->ops->recv(c, &x, 1, LB_F32, 0, NULL) < 0);
	assert_int_equal(c->ops->group_end(c), 0);
	c->ops->destroy(c);
}

/* A table with the optional members alone, as a device communicator fills them. */
static int fake_tag = -1;
static const char *fake_name;

static void fake_set_name(struct lb_comm *c, const char *name)
{
	fake_name = name;
}

static int fake_error(const struct lb_comm *c, int *rank, char *msg, size_t len)
{
	*rank = 3;
	strncpy(msg, "rank 3 failed: oom: out of memory", len);
	return LB_COMM_EPEER;
}

static int fake_set_tag(struct lb_comm *c, int tag)
{
	int old = fake_tag;

	fake_tag = tag;
	return old;
}

static double fake_take_seconds(struct lb_comm *c, double *per_tag, int ntags)
{
	for (int i = 0; per_tag && i < ntags; i++)
		per_tag[i] = i == fake_tag ? 0.25 : 0;
	return 0.25;
}

static void test_optional_members(void **state)
{
	static const struct lb_comm_ops fake_ops = {
	    .name = "fake",
	    .set_name = fake_set_name,
	    .error = fake_error,
	    .set_tag = fake_set_tag,
	    .take_seconds = fake_take_seconds,
	};
	struct lb_comm fake = {&fake_ops, 0, 1, NULL};
	struct lb_comm *c = lb_comm_self();
	double per_tag[3] = {-1, -1, -1};
	char msg[64] = "stale";
	int rank = 7;

	/* the defaults: self has none of them, nor has a missing communicator */
	assert_non_null(c);
	lb_comm_set_name(c, "tensor-parallel");
	lb_comm_set_name(NULL, "tensor-parallel");
	assert_int_equal(lb_comm_error(c, &rank, msg, sizeof(msg)), 0);
	assert_int_equal(rank, -1);
	assert_string_equal(msg, "");
	assert_int_equal(lb_comm_error(NULL, NULL, NULL, 0), 0);
	assert_int_equal(lb_comm_set_tag(c, 2), -1);
	assert_int_equal(lb_comm_set_tag(NULL, 2), -1);
	assert_true(lb_comm_take_seconds(c, per_tag, 3) == -1);
	assert_true(lb_comm_take_seconds(NULL, NULL, 0) == -1);
	assert_true(per_tag[0] == -1 && per_tag[1] == -1 && per_tag[2] == -1);
	c->ops->destroy(c);

	/* a table that has them: the wrappers ask it */
	lb_comm_set_name(&fake, "pipeline");
	assert_string_equal(fake_name, "pipeline");
	assert_int_equal(lb_comm_error(&fake, &rank, msg, sizeof(msg)), LB_COMM_EPEER);
	assert_int_equal(rank, 3);
	assert_string_equal(msg, "rank 3 failed: oom: out of memory");
	assert_int_equal(lb_comm_set_tag(&fake, 2), -1);
	assert_int_equal(lb_comm_set_tag(&fake, 1), 2);
	assert_true(lb_comm_take_seconds(&fake, per_tag, 3) == 0.25);
	assert_true(per_tag[0] == 0 && per_tag[1] == 0.25 && per_tag[2] == 0);
}

static void test_self_split(void **state)
{
	struct lb_comm *c = lb_comm_self(), *s = NULL;

	assert_int_equal(c->ops->split(c, 3, 0, &s), 0);
	assert_non_null(s);
	assert_int_equal(s->size, 1);
	assert_int_equal(s->rank, 0);
	s->ops->destroy(s);
	c->ops->destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dtype_size),		cmocka_unit_test(test_self_collectives),
	    cmocka_unit_test(test_self_send_recv_fail), cmocka_unit_test(test_self_split),
	    cmocka_unit_test(test_optional_members),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
