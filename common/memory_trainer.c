/*
 * The memory layoutbench-train allocates on one rank, buffer for buffer: the planner's
 * model for sweeps that our trainer runs (lb_memory_trainer, common/model.h), beside the
 * paper-calibrated one (lb_memory_estimate) for the paper's Megatron-style stack.
 *
 * Every device buffer of the trainer is allocated once, before the first step, through
 * the backend's counting allocator (harness/model.c alloc_all / alloc_slot / alloc_layer,
 * harness/train_step.c, harness/optim.c, the CUDA backend's init); nothing is allocated
 * per step. The activation slots of each model chunk are the ones its pipeline schedule
 * needs (common/pipeline.h's n_slots, from the same list the trainer runs). So the peak
 * the run log reports is the sum below, and a test checks it to the byte against the
 * CPU backend's counter for layouts of every kind
 * (tests/unit/test_common_memory_trainer.c); the H200's measured peaks check the GPU
 * sizes (docs/results/h200/README.md). Keep it in step with those files.
 */
#include <math.h>
#include <string.h>

#include "common/layout.h"
#include "common/model.h"
#include "common/pipeline.h"

/* The CUDA backend's own buffers: the cuBLASLt workspace and the one-double reduction
 * target (harness/cuda/memory.cu, reduce.cu); and the trainer's, on that backend only: AdamW's
 * per-step scalars on the device (LB_ADAMW_SC = 4 doubles, harness/train_step.c). */
#define CUDA_FIXED_BYTES ((double)(32u << 20) + 8.0 + 32.0)

struct dims {
	double B, S, T, H, D, nh, nkv, F, V, qkv, Tl, a; /* a: bytes of an act element */
	int sp, unfused, flash_like, gpu;
};

/* The attention core's saved state per layer: lse (f32) for flash and cudnn, else the
 * probabilities (act). */
static double attp_bytes(const struct dims *d)
{
	return d->flash_like ? d->B * d->nh * d->S * 4.0 : d->B * d->nh * d->S * d->S * d->a;
}

/* alloc_layer(with_x_in, with_attp) */
static double layer_bytes(const struct dims *d, int with_x_in, int with_attp)
{
	double tlh = d->Tl * d->H, b;

	b = (3.0 + with_x_in + (d->unfused ? 2.0 : 0.0)) * tlh * d->a;
	b += 2.0 * d->Tl * 4.0;		 /* rstd1, rstd2 */
	b += d->T * d->qkv * d->a;	 /* qkv */
	b += d->T * d->nh * d->D * d->a; /* att */
	b += d->T * 3.0 * d->F * d->a;	 /* gu, act */
	if (with_attp)
		b += attp_bytes(d);
	return b;
}

/* The backend's attention scratch (ops->attn_scratch), f32 elements. */
static double attn_scratch(const struct dims *d)
{
	if (d->gpu) { /* lbc_attn_scratch */
		double flash = d->B * d->S * d->nh * d->D + d->B * d->nh * d->S;
		double dp = (double)(((size_t)d->S * (size_t)d->S + 1) / 2);

		return flash > dp ? flash : dp;
	}
	return d->S * d->S;
}

/* One slot of one model chunk (alloc_slot): nl layers; first: it embeds the tokens;
 * last: it holds the final norm, the head and the loss. *logits gets the head's part. */
static double slot_bytes(const struct lb_layout *l, const struct dims *d, int nl, int first,
			 int last, double *logits)
{
	double tlh = d->Tl * d->H, act = 0;

	*logits = 0;
	if (first)
		act += d->T * 4.0; /* tokens */
	if (last)
		act += d->T * 4.0; /* targets */
	if (l->checkpointing == LB_CKPT_FULL)
		act += nl * tlh * d->a;
	else
		act += nl * layer_bytes(d, 1, l->checkpointing == LB_CKPT_NONE);
	act += tlh * d->a; /* x_out */
	if (last)
		*logits = ((d->unfused ? 2.0 : 1.0) * tlh * d->a) + d->Tl * 4.0 + 4.0 * d->T * 4.0 +
			  d->T * d->V * d->a;
	return act;
}

/* Elements n padded to a multiple of per (harness/model.c end_block). */
static double pad(double n, double per)
{
	return (double)(long long)((n + per - 1) / per) * per;
}

/* One stage's rank. Returns 0, or -1 when the layout's schedule cannot be built. */
static int stage_bytes(const struct lb_layout *l, const struct dims *d, int stage, int gpipe,
		       struct lb_mem_estimate *out)
{
	const struct lb_model *m = &l->model;
	int n_slots[LB_MAX_VIRTUAL_STAGES];
	char err[256];
	int first = stage == 0, last = stage == l->pp - 1, v = lb_layout_chunks(l), lo, hi;
	double nl, n_alloc, dp = l->dp > 0 ? l->dp : 1, tlh = d->Tl * d->H, act = 0;
	double per_layer, work = 0, emb = 0, tail = 0, lay, chunk_max = 0;
	int zero = dp > 1 ? l->zero_stage : 0;

	memset(out, 0, sizeof(*out));
	if ((nl = lb_stage_layer_count(l, stage)) < 0)
		return -1;
	for (int c = 0; c < v; c++) /* the most layers of one chunk (a bucket stays in one) */
		if (lb_chunk_layers(l, stage, c, &lo, &hi) == 0 && hi - lo > chunk_max)
			chunk_max = hi - lo;
	/* the flat buffer's blocks, each padded to a multiple of dp (model.h) */
	per_layer = pad(2.0 * d->H + d->qkv * d->H + d->H * d->nh * d->D + 3.0 * d->F * d->H, dp);
	if (first || (last && m->tied))
		emb = pad(d->V * d->H, dp); /* embedding (a tied last stage keeps its copy) */
	if (last)
		tail = pad(d->H + (m->tied ? 0.0 : d->V * d->H), dp); /* final norm, head */
	lay = nl * per_layer;
	n_alloc = emb + lay + tail;
	out->weights = n_alloc * d->a;
	if (zero >= 1) /* master, m, v and the reduced gradients of this rank's slices */
		out->optimizer = 4.0 * (n_alloc / dp) * 4.0;
	else
		out->optimizer = 3.0 * n_alloc * 4.0;
	if (zero == 2) {
		/* whole gradients of the embedding and tail blocks only; the layers' through
		 * two bucket slots (harness/gradsync.c: layer buckets top first, within one
		 * model chunk, each at least LB_GRAD_BUCKET_DEFAULT elements where the chunk's
		 * layers allow) and one
		 * reduce-scatter output */
		double per_b = ceil((double)LB_GRAD_BUCKET_DEFAULT / per_layer), slot;

		if (per_b < 1)
			per_b = 1;
		slot = (per_b < chunk_max ? per_b : chunk_max) * per_layer;
		out->grads = ((emb + tail) > 0 ? emb + tail : 1.0) * 4.0;
		out->grads += 2.0 * (slot > 0 ? slot : 1.0) * 4.0;
		out->grads += (double)((long long)(slot / dp) + 1) * 4.0;
	} else {
		out->grads = n_alloc * 4.0;
	}
	if (m->tied && l->pp > 1 && (first || last))
		out->optimizer += d->V * d->H * 4.0; /* the tied gradient exchange buffer */

	/* the activation slots of each chunk: as many as its schedule holds at once */
	if (lb_schedule_slots_for_layout(l, gpipe ? LB_SCHED_GPIPE : LB_SCHED_1F1B, stage, n_slots,
					 err, sizeof(err)))
		return -1;
	for (int c = 0; c < v; c++) {
		double logits, a;

		if (lb_chunk_layers(l, stage, c, &lo, &hi))
			return -1;
		a = slot_bytes(l, d, hi - lo, first && c == 0, last && c == v - 1, &logits);
		act += n_slots[c] * a;
		out->logits += n_slots[c] * logits;
	}
	/* alloc_all: the recompute workspace, the backward's buffers, scratch */
	if (l->checkpointing == LB_CKPT_FULL)
		work += layer_bytes(d, 0, 1);
	else if (l->checkpointing == LB_CKPT_SELECTIVE)
		work += attp_bytes(d);
	work += 2.0 * d->T * d->H * d->a; /* dxn, tmp */
	work += 4.0 * tlh * d->a;	  /* dres, tmp2, nloc, dout_buf */
	if (d->sp)
		work += d->T * d->H * d->a; /* xfull */
	work += d->T * d->qkv * d->a + d->T * d->nh * d->D * d->a + d->T * 3.0 * d->F * d->a;
	if (d->unfused)
		work += (d->T * d->H + d->T) * 4.0; /* norm scratch */
	work += attn_scratch(d) * 4.0;
	work += d->S * d->D * 4.0; /* RoPE table */
	work += 8.0 + 16.0;	   /* loss accumulator, the step's statistics */
	if (d->gpu)
		work += CUDA_FIXED_BYTES;
	out->activations = act;
	out->workspace = work;
	out->total = out->weights + out->grads + out->optimizer + out->activations + out->logits +
		     out->workspace;
	return 0;
}

int lb_memory_trainer(const struct lb_layout *l, int gpu, int gpipe, struct lb_mem_estimate *out)
{
	const struct lb_model *m = &l->model;
	struct dims d;
	int tp = l->tp > 0 ? l->tp : 1;

	memset(out, 0, sizeof(*out));
	if (l->tp <= 0 || l->pp <= 0 || l->dp <= 0 || m->n_layers < l->pp || l->seq_len <= 0 ||
	    l->micro_batch <= 0 || m->n_heads <= 0 || m->hidden % m->n_heads ||
	    l->pp > LB_SCHED_MAX_PP)
		return -1;
	memset(&d, 0, sizeof(d));
	d.gpu = gpu;
	d.a = gpu ? 2.0 : 4.0; /* act: bf16 on the GPU, the CPU backend's fp32 */
	d.B = l->micro_batch;
	d.S = l->seq_len;
	d.T = d.B * d.S;
	d.H = m->hidden;
	d.D = (double)(m->hidden / m->n_heads);
	d.nh = (double)(m->n_heads / tp);
	d.nkv = (double)(m->n_kv_heads / tp);
	d.F = (double)(m->ffn / tp);
	d.V = (double)(m->vocab / tp);
	d.qkv = (d.nh + 2.0 * d.nkv) * d.D;
	d.sp = l->sequence_parallel && tp > 1;
	d.Tl = d.sp ? d.T / tp : d.T;
	d.unfused = l->norm == LB_NORM_UNFUSED;
	d.flash_like = lb_attn_saves_lse(l->attention);
	for (int s = 0; s < l->pp; s++) {
		struct lb_mem_estimate st;

		if (stage_bytes(l, &d, s, gpipe, &st)) {
			memset(out, 0, sizeof(*out));
			return -1;
		}
		if (s == 0 || st.total > out->total)
			*out = st;
	}
	return 0;
}
