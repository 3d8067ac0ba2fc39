/*
 * Unit tests of the data-parallel gradient reduction's plan (harness/gradsync.h): the flat
 * buffer's blocks padded to a multiple of dp, the buckets that tile it (layer buckets top
 * first, at least the target where the layers allow, within one model chunk, then the
 * embedding and tail blocks),
 * each rank's slices laid out in flat order, and the optimizer's ranges that partition
 * the buffer over the data-parallel ranks. The reductions themselves are checked by the
 * equivalence suite (test_par_equiv: ZeRO 0, 1 and 2 with one-layer and whole-stage
 * buckets against the single rank).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/model.h"
#include "harness/gradsync.h"
#include "harness/model.h"

static void deep_layout(struct lb_layout *l, int dp, int zero, int tied)
{
	lb_layout_init(l);
	assert_int_equal(lb_model_preset(tied ? "tiny-tied" : "tiny-deep", &l->model), 0);
	l->seq_len = 16;
	l->micro_batch = 1;
	l->global_batch = 8;
	l->dp = dp;
	l->zero_stage = zero;
}

/* The buckets of a model tile its flat buffer; every length is a multiple of dp. */
static void check_tiling(const struct lb_llama *m, const struct lb_bucket *b, int n, int n_layer,
			 int dp)
{
	size_t covered = 0;
	int prev_lo = m->n_layers;

	for (int i = 0; i < n; i++) {
		assert_int_equal((b[i].hi - b[i].lo) % (size_t)dp, 0);
		assert_true(b[i].hi > b[i].lo);
		covered += b[i].hi - b[i].lo;
		if (i < n_layer) { /* top first, contiguous layers */
			assert_int_equal(b[i].layer_hi, prev_lo);
			assert_true(b[i].layer_lo < b[i].layer_hi);
			assert_int_equal(b[i].lo, m->lt[b[i].layer_lo].lo);
			assert_int_equal(b[i].hi, m->lt[b[i].layer_hi - 1].hi);
			prev_lo = b[i].layer_lo;
		} else {
			assert_int_equal(b[i].layer_lo, -1);
		}
	}
	assert_int_equal(prev_lo, 0);
	assert_int_equal(covered, m->n_alloc);
}

static void test_blocks_and_buckets(void **state)
{
	static const int dps[] = {1, 2, 3, 4, 8};

	(void)state;
	for (size_t k = 0; k < sizeof(dps) / sizeof(dps[0]); k++) {
		struct lb_layout l;
		struct lb_llama m;
		struct lb_bucket *b;
		int n, nl;
		size_t layer_len;

		deep_layout(&l, dps[k], 1, 0);
		assert_int_equal(lb_llama_init(&m, lb_ops_cpu(), NULL, &l, 0, 1), 0);
		layer_len = m.lt[0].hi - m.lt[0].lo;
		assert_int_equal(m.emb_hi % (size_t)dps[k], 0);
		assert_int_equal(m.n_alloc % (size_t)dps[k], 0);
		/* every bucket one layer */
		assert_int_equal(lb_grad_buckets(&m, dps[k], 0, 1, &b, &n, &nl), 0);
		assert_int_equal(nl, l.model.n_layers);
		assert_int_equal(n, nl + 2);
		check_tiling(&m, b, n, nl, dps[k]);
		free(b);
		/* three layers' worth: buckets of 3, 3 and the 2 left at the bottom */
		assert_int_equal(lb_grad_buckets(&m, dps[k], 0, 3 * layer_len, &b, &n, &nl), 0);
		assert_int_equal(nl, 3);
		assert_int_equal(b[0].layer_hi - b[0].layer_lo, 3);
		assert_int_equal(b[2].layer_hi - b[2].layer_lo, 2);
		check_tiling(&m, b, n, nl, dps[k]);
		free(b);
		/* a target above the stage: one layer bucket */
		assert_int_equal(
		    lb_grad_buckets(&m, dps[k], 0, LB_GRAD_BUCKET_DEFAULT, &b, &n, &nl), 0);
		assert_int_equal(nl, 1);
		check_tiling(&m, b, n, nl, dps[k]);
		free(b);
		lb_llama_free(&m);
	}
}

/* With virtual stages a layer bucket stays within one model chunk: tiny-deep's 8 layers
 * on pp 2 with 2 chunks per stage, stage 0 holding layers 0-1 and 4-5. */
static void test_buckets_within_chunks(void **state)
{
	struct lb_layout l;
	struct lb_llama m;
	struct lb_bucket *b;
	int n, nl;

	(void)state;
	deep_layout(&l, 2, 1, 0);
	l.pp = 2;
	l.virtual_stages = 2;
	assert_int_equal(lb_llama_init(&m, lb_ops_cpu(), NULL, &l, 0, 1), 0);
	assert_int_equal(m.n_layers, 4);
	assert_int_equal(lb_llama_layer(&m, 2), 4);
	assert_int_equal(lb_llama_chunk_j0(&m, 3), 2);
	/* a target above the stage: one bucket per chunk, the top chunk first */
	assert_int_equal(lb_grad_buckets(&m, 2, 0, LB_GRAD_BUCKET_DEFAULT, &b, &n, &nl), 0);
	assert_int_equal(nl, 2);
	assert_int_equal(b[0].layer_lo, 2);
	assert_int_equal(b[0].layer_hi, 4);
	assert_int_equal(b[1].layer_lo, 0);
	assert_int_equal(b[1].layer_hi, 2);
	check_tiling(&m, b, n, nl, 2);
	free(b);
	lb_llama_free(&m);
}

/* ZeRO: the ranks' ranges partition the buffer; each rank's state layout is its slices in
 * flat order, one after the other. */
static void test_slices_partition(void **state)
{
	enum { DP = 4 };
	struct lb_layout l;
	struct lb_llama m[DP];
	struct lb_gradsync g[DP];
	unsigned char *owner;

	(void)state;
	deep_layout(&l, DP, 2, 1);
	for (int r = 0; r < DP; r++) {
		struct lb_comm fake = {.ops = NULL, .rank = r, .size = DP};

		assert_int_equal(lb_llama_init(&m[r], lb_ops_cpu(), NULL, &l, 0, 1), 0);
		assert_true(m[r].zero2);
		assert_int_equal(m[r].n_grads, m[r].n_alloc - (m[r].layers_hi - m[r].emb_hi));
		assert_int_equal(
		    lb_gradsync_init(&g[r], lb_ops_cpu(), &m[r], &fake, r, 2, 1, 1, -1), 0);
		assert_int_equal(g[r].n_state, m[r].n_alloc / DP);
	}
	owner = calloc(m[0].n_alloc, 1);
	assert_non_null(owner);
	for (int r = 0; r < DP; r++) {
		size_t soff = 0;

		for (int i = 0; i < g[r].n_r; i++) {
			assert_int_equal(g[r].r[i].soff, soff);
			if (i)
				assert_true(g[r].r[i].lo >= g[r].r[i - 1].hi);
			soff += g[r].r[i].hi - g[r].r[i].lo;
			for (size_t e = g[r].r[i].lo; e < g[r].r[i].hi; e++)
				owner[e]++;
		}
		assert_int_equal(soff, g[r].n_state);
	}
	for (size_t e = 0; e < m[0].n_alloc; e++)
		assert_int_equal(owner[e], 1);
	free(owner);
	for (int r = 0; r < DP; r++) {
		lb_gradsync_free(&g[r]);
		lb_llama_free(&m[r]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_blocks_and_buckets),
	    cmocka_unit_test(test_buckets_within_chunks),
	    cmocka_unit_test(test_slices_partition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
