/*
 * The model's tensor-parallel structure, exercised with two real ranks (lb_launch, the
 * shared-memory communicator): each rank builds its tp=2 shard of a GQA model and, in the
 * same process, the whole tp=1 model, runs one micro-batch forward and backward on both,
 * and checks that the shard's parameters are the right rows or columns of the whole
 * model's (column-parallel QKV and gate/up, row-parallel output and down, vocab-parallel
 * embedding and head; the test spells out the mapping independently of model.c), that its
 * gradients equal the corresponding part of the whole model's, and that the losses agree.
 * The shards are checked one layer of the structure at a time here; test_par_equiv.c runs
 * whole tp > 1 layouts through the trainer against the single rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/model.h"
#include "harness/comm/comm_shm.h"
#include "harness/data.h"
#include "harness/launch.h"
#include "harness/model.h"

#define TP 2

struct tp_case {
	const char *preset;
	enum lb_attn attn;
	enum lb_ckpt ckpt;
};

/* Row r, column c of the whole tensor for element (i, j) of rank k's shard. */
static void full_index(const struct lb_llama *m, const char *name, int k, int i, int j, int *r,
		       int *c)
{
	const struct lb_model *md = &m->layout.model;
	int D = m->D, qd = m->nh * D, kd = m->nkv * D;

	*r = i;
	*c = j;
	if (!strcmp(name, "embed") || !strcmp(name, "head")) {
		*r = k * m->V + i;
	} else if (strstr(name, ".wo") || strstr(name, ".wdown")) {
		*c = k * (strstr(name, ".wo") ? qd : m->F) + j;
	} else if (strstr(name, ".wqkv")) {
		if (i < qd)
			*r = k * qd + i;
		else if (i < qd + kd)
			*r = md->n_heads * D + k * kd + (i - qd);
		else
			*r = md->n_heads * D + md->n_kv_heads * D + k * kd + (i - qd - kd);
	} else if (strstr(name, ".wgu")) {
		*r = i < m->F ? k * m->F + i : md->ffn + k * m->F + (i - m->F);
	}
}

static int check_case(struct lb_comm *tp, const struct tp_case *tc)
{
	const struct lb_ops *o = lb_ops_cpu();
	struct lb_layout l1, l2;
	struct lb_llama whole, shard;
	struct lb_data d;
	int32_t tok[64], tgt[64];
	double loss1 = 0, loss2 = 0;
	char err[256];
	int bad = 0;

	lb_layout_init(&l1);
	lb_model_preset(tc->preset, &l1.model);
	l1.seq_len = 16;
	l1.micro_batch = 2;
	l1.global_batch = 2;
	l1.attention = tc->attn;
	l1.checkpointing = tc->ckpt;
	l2 = l1;
	l2.tp = TP;
	l2.gpus_per_node = TP;
	if (lb_llama_init(&whole, o, NULL, &l1, 0, 1) || lb_llama_init(&shard, o, tp, &l2, 0, 1))
		return 1;
	lb_data_open(&d, NULL, 2, l1.model.vocab, l1.seq_len, 4, err, sizeof(err));
	lb_data_batch(&d, &l1, 0, 0, 0, tok, tgt, err, sizeof(err));
	lb_data_close(&d);
	lb_llama_zero_grads(&whole);
	lb_llama_zero_grads(&shard);
	if (lb_llama_forward(&whole, 0, 0, tok, tgt, NULL, 1.0 / whole.T, &loss1) ||
	    lb_llama_backward(&whole, 0, 0, NULL) ||
	    lb_llama_forward(&shard, 0, 0, tok, tgt, NULL, 1.0 / shard.T, &loss2) ||
	    lb_llama_backward(&shard, 0, 0, NULL)) {
		fprintf(stderr, "rank %d: forward/backward failed\n", tp->rank);
		return 1;
	}
	if (fabs(loss1 - loss2) > 1e-5 * fabs(loss1)) {
		fprintf(stderr, "rank %d: %s: loss %.9g (tp=2) vs %.9g (tp=1)\n", tp->rank,
			tc->preset, loss2, loss1);
		bad = 1;
	}
	for (int t = 0; t < shard.n_tensors; t++) {
		const struct lb_tensor *st = &shard.tensors[t];
		int wt = lb_llama_find(&whole, st->name);
		const struct lb_tensor *wtt = &whole.tensors[wt];
		const float *sp = lb_llama_param(&shard, t), *sg = lb_llama_grad(&shard, t);
		const float *wp = lb_llama_param(&whole, wt), *wg = lb_llama_grad(&whole, wt);
		double gmax = 0, gdiff = 0;

		for (size_t e = 0; e < wtt->count; e++)
			gmax = fmax(gmax, fabs(wg[e]));
		for (int i = 0; i < st->rows; i++)
			for (int j = 0; j < st->cols; j++) {
				int r, c;
				size_t se = (size_t)i * st->cols + j, we;

				full_index(&shard, st->name, tp->rank, i, j, &r, &c);
				we = (size_t)r * wtt->cols + c;
				if (sp[se] != wp[we]) {
					fprintf(stderr,
						"rank %d: %s[%d,%d]: parameter is not "
						"whole[%d,%d]\n",
						tp->rank, st->name, i, j, r, c);
					return 1;
				}
				gdiff = fmax(gdiff, fabs(sg[se] - wg[we]));
			}
		if (gdiff > 1e-5 * gmax + 1e-9) {
			fprintf(stderr, "rank %d: %s %s: gradient differs by %.3g (max %.3g)\n",
				tp->rank, tc->preset, st->name, gdiff, gmax);
			bad = 1;
		}
	}
	lb_llama_free(&whole);
	lb_llama_free(&shard);
	return bad;
}

static int rank_main(const struct lb_rank_env *env, void *arg)
{
	static const struct tp_case cases[] = {
	    {"tiny-gqa", LB_ATTN_FLASH, LB_CKPT_NONE},
	    {"tiny-tied", LB_ATTN_NAIVE, LB_CKPT_FULL},
	    {"tiny", LB_ATTN_FUSED_SOFTMAX, LB_CKPT_SELECTIVE},
	};
	struct lb_comm *world;
	char err[256];
	int bad = 0;

	if (lb_comm_shm_create(env->rdzv_name, env->rank, env->world_size, 60.0, &world, err,
			       sizeof(err))) {
		fprintf(stderr, "rank %d: %s\n", env->rank, err);
		return 6;
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		bad |= check_case(world, &cases[c]);
	world->ops->destroy(world);
	return bad;
}

static void test_tp2_matches_tp1(void **state)
{
	struct lb_launch_result res;
	int rc = lb_launch(TP, rank_main, NULL, NULL, &res);

	if (rc)
		fprintf(stderr, "%s\n", res.message);
	assert_int_equal(rc, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tp2_matches_tp1),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
