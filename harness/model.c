/*
 * The Llama model over the ops and comm tables: parameter table and initialisation,
 * activation slots per checkpointing mode, and the forward and backward of one model
 * chunk's layers (a pipeline stage's, or one of its virtual stages') for one micro-batch.
 * Shapes and ownership: harness/model.h.
 *
 * Checkpointing (Korthikanti et al. 2022, "Reducing Activation Recomputation"):
 * none keeps every layer's activations per slot; full keeps only each layer's input and
 * re-runs the layer's forward in a shared workspace just before its backward; selective
 * keeps everything except the attention core's saved state (probabilities or the
 * log-sum-exp), which one shared buffer holds and the backward recomputes from q, k, v.
 *
 * Graphs (ops.h graph_begin; --cuda-graphs 1 on a backend that has them): a chunk's
 * forward and backward of one micro-batch are each one segment, keyed by what decides
 * the work and its buffers (direction, chunk, slot, the hook, fresh or first gradients);
 * every collective and the data-parallel hook inside them is host work, between
 * graph_pause and graph_resume. The token uploads come before the segment.
 *
 * Why one file: the forward and backward of a chunk, the activation slots they fill and the
 * tensor-parallel collectives between them are one computation whose order the
 * checkpointing modes and the graph segments rely on; the backward reads next to the
 * forward it differentiates.
 */
#include "harness/model.h"

#include "common/util.h"
#include "harness/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How a shard's rows and columns map to the full tensor, for initialisation. */
enum { MAP_FULL = 0, MAP_ROWS, MAP_COLS, MAP_QKV, MAP_GU };
enum { K_ATTN_NORM = 0, K_WQKV, K_WO, K_MLP_NORM, K_WGU, K_WDOWN };
#define KEY_EMBED 1000000
#define KEY_NORM  1000001
#define KEY_HEAD  1000002

#define INIT_STD 0.02 /* GPT-2 / Megatron-LM default */

/* --- allocation --- */

static void *balloc(struct lb_llama *m, size_t n, enum lb_kind k)
{
	void *p;

	if (m->n_allocs == m->cap_allocs) {
		int cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
		void **a = realloc(m->allocs, (size_t)cap * sizeof(*a));

		if (!a)
			return NULL;
		m->allocs = a;
		m->cap_allocs = cap;
	}
	p = m->ops->alloc(n ? n : 1, k);
	if (p)
		m->allocs[m->n_allocs++] = p;
	return p;
}

void lb_llama_free(struct lb_llama *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_allocs; i++)
		m->ops->free_(m->allocs[i]);
	free(m->allocs);
	for (int c = 0; m->chunks && c < m->n_chunks; c++) {
		for (int s = 0; m->chunks[c].slots && s < m->chunks[c].n_slots; s++)
			free(m->chunks[c].slots[s].layers);
		free(m->chunks[c].slots);
	}
	free(m->chunks);
	free(m->tensors);
	free(m->lt);
	free(m->gmap);
	memset(m, 0, sizeof(*m));
}

/* --- parameters --- */

static int add_tensor(struct lb_llama *m, const char *name, int rows, int cols, int decay, int key,
		      double std, int map)
{
	struct lb_tensor *t = &m->tensors[m->n_tensors];

	snprintf(t->name, sizeof(t->name), "%s", name);
	t->offset = m->n_params;
	t->rows = rows;
	t->cols = cols;
	t->count = (size_t)rows * cols;
	t->decay = decay;
	t->key = key;
	t->init_std = std;
	t->row_kind = map;
	t->layer = -1;
	m->n_params += t->count;
	return m->n_tensors++;
}

/* End a block of the flat buffer: pad it to a multiple of dp (ZeRO's equal slices). */
static size_t end_block(struct lb_llama *m)
{
	size_t per = m->layout.dp > 1 ? (size_t)m->layout.dp : 1;

	m->n_params = (m->n_params + per - 1) / per * per;
	return m->n_params;
}

/* Global (row, col, full cols) of a shard element. */
static void global_index(const struct lb_llama *m, const struct lb_tensor *t, int r, int c,
			 uint64_t *grow, uint64_t *gcol, uint64_t *gcols)
{
	int k = m->tp_rank, tp = m->tp_size;
	int qd = m->nh * m->D, kd = m->nkv * m->D;

	*grow = (uint64_t)r;
	*gcol = (uint64_t)c;
	*gcols = (uint64_t)t->cols;
	switch (t->row_kind) {
	case MAP_ROWS:
		*grow = (uint64_t)k * t->rows + r;
		break;
	case MAP_COLS:
		*gcol = (uint64_t)k * t->cols + c;
		*gcols = (uint64_t)t->cols * tp;
		break;
	case MAP_QKV:
		if (r < qd)
			*grow = (uint64_t)k * qd + r;
		else if (r < qd + kd)
			*grow = (uint64_t)tp * qd + (uint64_t)k * kd + (r - qd);
		else
			*grow = (uint64_t)tp * (qd + kd) + (uint64_t)k * kd + (r - qd - kd);
		break;
	case MAP_GU:
		if (r < m->F)
			*grow = (uint64_t)k * m->F + r;
		else
			*grow = (uint64_t)tp * m->F + (uint64_t)k * m->F + (r - m->F);
		break;
	default:
		break;
	}
}

static int init_params(struct lb_llama *m)
{
	int maxcols = 0;
	double *row;

	for (int i = 0; i < m->n_tensors; i++)
		if (m->tensors[i].cols > maxcols)
			maxcols = m->tensors[i].cols;
	row = malloc((size_t)maxcols * sizeof(*row));
	if (!row)
		return LB_E_OOM;
	for (int i = 0; i < m->n_tensors; i++) {
		const struct lb_tensor *t = &m->tensors[i];

		if (m->tp_size == 1 && t->init_std != 0) {
			/* one shard is the whole tensor: element (r, c) is draw r * cols + c, made
			 * where the tensor lives (on the GPU, in one kernel) */
			m->ops->fill_normal(lb_at(m->ops, m->params, t->offset, LB_K_ACT), t->count,
					    LB_K_ACT, m->layout.seed, t->key, t->init_std);
			continue;
		}
		for (int r = 0; r < t->rows; r++) {
			for (int c = 0; c < t->cols; c++) {
				uint64_t gr, gc, gcols;

				if (t->init_std == 0) {
					row[c] = 1.0;
					continue;
				}
				global_index(m, t, r, c, &gr, &gc, &gcols);
				row[c] = t->init_std *
					 lb_normal_at(m->layout.seed, t->key, gr * gcols + gc);
			}
			m->ops->write(
			    lb_at(m->ops, m->params, t->offset + (size_t)r * t->cols, LB_K_ACT),
			    row, (size_t)t->cols, LB_K_ACT);
		}
	}
	free(row);
	return 0;
}

static int build_tensors(struct lb_llama *m)
{
	const struct lb_model *md = &m->layout.model;
	int nl = m->n_layers;
	double out_std = INIT_STD / sqrt(2.0 * md->n_layers); /* GPT-2 residual scaling */
	char name[48];

	m->tensors = calloc((size_t)nl * 6 + 3, sizeof(*m->tensors));
	m->lt = calloc((size_t)nl + 1, sizeof(*m->lt));
	if (!m->tensors || !m->lt)
		return LB_E_OOM;
	m->t_embed = m->t_norm = m->t_head = -1;
	if (m->first || (m->last && md->tied))
		m->t_embed = add_tensor(m, "embed", m->V, m->H, 1, KEY_EMBED, INIT_STD, MAP_ROWS);
	m->emb_hi = end_block(m);
	for (int j = 0; j < nl; j++) {
		int l = lb_llama_layer(m, j), key = (l + 1) * 8, first_t = m->n_tensors;

		m->lt[j].lo = m->n_params;

		snprintf(name, sizeof(name), "layers.%d.attn_norm", l);
		m->lt[j].attn_norm =
		    add_tensor(m, name, 1, m->H, 0, key + K_ATTN_NORM, 0, MAP_FULL);
		snprintf(name, sizeof(name), "layers.%d.wqkv", l);
		m->lt[j].wqkv =
		    add_tensor(m, name, m->qkv_dim, m->H, 1, key + K_WQKV, INIT_STD, MAP_QKV);
		snprintf(name, sizeof(name), "layers.%d.wo", l);
		m->lt[j].wo =
		    add_tensor(m, name, m->H, m->nh * m->D, 1, key + K_WO, out_std, MAP_COLS);
		snprintf(name, sizeof(name), "layers.%d.mlp_norm", l);
		m->lt[j].mlp_norm = add_tensor(m, name, 1, m->H, 0, key + K_MLP_NORM, 0, MAP_FULL);
		snprintf(name, sizeof(name), "layers.%d.wgu", l);
		m->lt[j].wgu =
		    add_tensor(m, name, 2 * m->F, m->H, 1, key + K_WGU, INIT_STD, MAP_GU);
		snprintf(name, sizeof(name), "layers.%d.wdown", l);
		m->lt[j].wdown =
		    add_tensor(m, name, m->H, m->F, 1, key + K_WDOWN, out_std, MAP_COLS);
		for (int i = first_t; i < m->n_tensors; i++)
			m->tensors[i].layer = j;
		m->lt[j].hi = end_block(m);
	}
	m->layers_hi = m->n_params;
	if (m->last) {
		m->t_norm = add_tensor(m, "norm", 1, m->H, 0, KEY_NORM, 0, MAP_FULL);
		if (md->tied)
			m->t_head = m->t_embed;
		else
			m->t_head =
			    add_tensor(m, "head", m->V, m->H, 1, KEY_HEAD, INIT_STD, MAP_ROWS);
	}
	end_block(m);
	return 0;
}

/* --- activations --- */

/* Allocate buffer n of sz elements: A for act buffers (bf16 on the GPU), AF for f32 ones
 * (statistics, main gradients, scratch), AK for a kind chosen at run time. */
#define AK(n, kind)                                                                                \
	do {                                                                                       \
		if (!((n) = balloc(m, sz, (kind))))                                                \
			return LB_E_OOM;                                                           \
	} while (0)
#define A(n)  AK(n, LB_K_ACT)
#define AF(n) AK(n, LB_K_F32)

/* flash and cudnn: tiled attention that saves the log-sum-exp, not the probabilities */
static int flash_like(const struct lb_llama *m)
{
	return lb_attn_saves_lse(m->layout.attention);
}

/* The attention core's saved state: the log-sum-exp (f32) for flash, else the
 * probabilities (act). */
static enum lb_kind attp_kind(const struct lb_llama *m)
{
	return flash_like(m) ? LB_K_F32 : LB_K_ACT;
}

static size_t attp_count(const struct lb_llama *m)
{
	if (flash_like(m))
		return (size_t)m->B * m->nh * m->S;
	return (size_t)m->B * m->nh * m->S * m->S;
}

/* The four buffers of a layer that hold every token's row of its attention and MLP: qkv
 * (T, qkv_dim), the attention output (T, nh*D), gate | up (T, 2F) and the activation
 * (T, F): a layer's activations or, of the same shapes, their gradients. */
static int alloc_wide(struct lb_llama *m, void **qkv, void **att, void **gu, void **act)
{
	size_t sz = (size_t)m->T * m->qkv_dim;

	A(*qkv);
	sz = (size_t)m->T * m->nh * m->D;
	A(*att);
	sz = (size_t)m->T * 2 * m->F;
	A(*gu);
	sz = (size_t)m->T * m->F;
	A(*act);
	return 0;
}

/* Allocate a layer's activation buffers; with_attp: also the attention core's state. */
static int alloc_layer(struct lb_llama *m, struct lb_layer_acts *a, int with_x_in, int with_attp)
{
	size_t tlh = (size_t)m->Tl * m->H, t = (size_t)m->Tl, sz;
	int unfused = m->layout.norm == LB_NORM_UNFUSED, rc;

	sz = tlh; /* with SP the norm outputs keep this rank's tokens, re-gathered when used */
	A(a->xn1);
	A(a->xn2);
	if (with_x_in)
		A(a->x_in);
	A(a->x_mid);
	if (unfused) {
		A(a->xhat1);
		A(a->xhat2);
	}
	sz = t;
	AF(a->rstd1);
	AF(a->rstd2);
	if ((rc = alloc_wide(m, &a->qkv, &a->att, &a->gu, &a->act)))
		return rc;
	if (with_attp) {
		sz = attp_count(m);
		AK(a->attp, attp_kind(m));
	}
	return 0;
}

/* One slot of chunk ch (common/memory_trainer.c slot_bytes counts it). */
static int alloc_slot(struct lb_llama *m, const struct lb_chunk *ch, struct lb_slot *s)
{
	int nl = ch->layer_hi - ch->layer_lo, rc;
	size_t tlh = (size_t)m->Tl * m->H, sz;
	enum lb_ckpt ck = m->layout.checkpointing;

	s->layers = calloc((size_t)nl, sizeof(*s->layers));
	if (!s->layers)
		return LB_E_OOM;
	sz = (size_t)m->T;
	if (ch->first)
		AK(s->tokens, LB_K_I32);
	if (ch->last)
		AK(s->targets, LB_K_I32);
	for (int j = 0; j < nl; j++) {
		struct lb_layer_acts *a = &s->layers[j];

		if (ck == LB_CKPT_FULL) {
			sz = tlh;
			A(a->x_in);
			continue;
		}
		if ((rc = alloc_layer(m, a, 1, ck == LB_CKPT_NONE)))
			return rc;
		if (ck == LB_CKPT_SELECTIVE)
			a->attp = m->ws.attp;
	}
	sz = tlh;
	A(s->x_out);
	if (ch->last) {
		if (m->layout.norm == LB_NORM_UNFUSED)
			A(s->xhatf);
		A(s->xnf);
		sz = (size_t)m->Tl;
		AF(s->rstdf);
		sz = (size_t)m->T;
		AF(s->losses);
		AF(s->rowmax);
		AF(s->sumexp);
		AF(s->tgt);
		sz = (size_t)m->T * m->V;
		A(s->logits);
	}
	return 0;
}

static int alloc_all(struct lb_llama *m)
{
	size_t th = (size_t)m->T * m->H, tlh = (size_t)m->Tl * m->H, sz;
	enum lb_ckpt ck = m->layout.checkpointing;
	int rc;
	double *cs;

	sz = m->n_alloc;
	A(m->params);
	sz = m->n_grads;
	AF(m->grads);
	if (m->zero2) {
		int nl = m->n_layers;

		m->gmap = calloc((size_t)nl + 1, sizeof(*m->gmap));
		if (!m->gmap)
			return LB_E_OOM;
	}
	sz = 1;
	AK(m->loss_acc, LB_K_F64);
	if (ck == LB_CKPT_FULL) {
		if ((rc = alloc_layer(m, &m->ws, 0, 1)))
			return rc;
	} else if (ck == LB_CKPT_SELECTIVE) {
		sz = attp_count(m);
		AK(m->ws.attp, attp_kind(m));
	}
	for (int c = 0; c < m->n_chunks; c++)
		for (int s = 0; s < m->chunks[c].n_slots; s++)
			if ((rc = alloc_slot(m, &m->chunks[c], &m->chunks[c].slots[s])))
				return rc;
	sz = th;
	A(m->dxn);
	A(m->tmp);
	sz = tlh;
	A(m->dres);
	A(m->tmp2);
	A(m->nloc);
	A(m->dout_buf);
	if (m->sp) {
		sz = th;
		A(m->xfull);
	}
	if ((rc = alloc_wide(m, &m->dqkv, &m->datt, &m->dgu, &m->dact)))
		return rc;
	if (m->layout.norm == LB_NORM_UNFUSED) {
		sz = m->ops->norm_scratch(m->T, m->H);
		AF(m->nscratch);
	}
	sz = m->ops->attn_scratch(m->B, m->S, m->nh, m->D);
	AF(m->ascratch);
	sz = (size_t)m->S * m->D;
	AF(m->rope);
	cs = lb_rope_table_host(m->S, m->D);
	if (!cs)
		return LB_E_OOM;
	m->ops->write(m->rope, cs, sz, LB_K_F32);
	free(cs);
	return 0;
}

#undef A
#undef AF
#undef AK

/* This rank's chunks: their layers (common/layout.c's split rule, uneven stages and
 * explicit splits included), which ends of the model they hold, their slots. */
static int build_chunks(struct lb_llama *m, int stage, const int *slots)
{
	const struct lb_layout *l = &m->layout;
	int v = lb_layout_chunks(l), j0 = 0;

	m->n_chunks = v;
	m->chunks = calloc((size_t)v, sizeof(*m->chunks));
	if (!m->chunks)
		return LB_E_OOM;
	for (int c = 0; c < v; c++) {
		struct lb_chunk *ch = &m->chunks[c];

		if (slots[c] < 1 || lb_chunk_layers(l, stage, c, &ch->layer_lo, &ch->layer_hi))
			return LB_E_INVAL;
		ch->j0 = j0;
		j0 += ch->layer_hi - ch->layer_lo;
		ch->first = stage == 0 && c == 0;
		ch->last = stage == l->pp - 1 && c == v - 1;
		ch->n_slots = slots[c];
		ch->slots = calloc((size_t)slots[c], sizeof(*ch->slots));
		if (!ch->slots)
			return LB_E_OOM;
	}
	m->n_layers = j0;
	return 0;
}

int lb_llama_init(struct lb_llama *m, const struct lb_ops *ops, struct lb_comm *tp,
		  const struct lb_layout *layout, int stage, int n_slots)
{
	int slots[LB_MAX_VIRTUAL_STAGES];

	for (int c = 0; c < LB_MAX_VIRTUAL_STAGES; c++)
		slots[c] = n_slots;
	return lb_llama_init_slots(m, ops, tp, layout, stage, slots);
}

int lb_llama_init_slots(struct lb_llama *m, const struct lb_ops *ops, struct lb_comm *tp,
			const struct lb_layout *layout, int stage, const int *slots)
{
	const struct lb_model *md = &layout->model;
	int tps = tp ? tp->size : 1, rc;

	memset(m, 0, sizeof(*m));
	m->ops = ops;
	m->tp = tp;
	m->layout = *layout;
	m->tp_rank = tp ? tp->rank : 0;
	m->tp_size = tps;
	if (tps != layout->tp || layout->pp < 1 || stage < 0 || stage >= layout->pp ||
	    lb_layout_chunks(layout) > LB_MAX_VIRTUAL_STAGES || md->n_heads % tps ||
	    md->n_kv_heads % tps || md->ffn % tps || md->vocab % tps || md->hidden % md->n_heads ||
	    md->n_heads % md->n_kv_heads ||
	    (layout->attention == LB_ATTN_CUDNN && !ops->attn_cudnn_fwd)) /* the CPU has none */
		return LB_E_INVAL;
	m->B = layout->micro_batch;
	m->S = layout->seq_len;
	m->T = m->B * m->S;
	m->H = md->hidden;
	m->D = md->hidden / md->n_heads;
	m->nh = md->n_heads / tps;
	m->nkv = md->n_kv_heads / tps;
	m->F = md->ffn / tps;
	m->V = md->vocab / tps;
	m->v0 = m->tp_rank * m->V;
	m->qkv_dim = (m->nh + 2 * m->nkv) * m->D;
	m->sp = layout->sequence_parallel && tps > 1;
	if (m->sp && m->T % tps)
		return LB_E_INVAL;
	m->Tl = m->sp ? m->T / tps : m->T;
	m->first = stage == 0;
	m->last = stage == layout->pp - 1;
	if ((rc = build_chunks(m, stage, slots)) || (rc = build_tensors(m))) {
		lb_llama_free(m);
		return rc;
	}
	m->n_alloc = m->n_params; /* every block padded to a multiple of dp (build_tensors) */
	m->zero2 = layout->zero_stage == 2 && layout->dp > 1;
	m->n_grads = m->zero2 ? m->n_alloc - (m->layers_hi - m->emb_hi) : m->n_alloc;
	if ((rc = alloc_all(m)) || (rc = init_params(m))) {
		lb_llama_free(m);
		return LB_E_OOM;
	}
	return 0;
}

void *lb_llama_param(struct lb_llama *m, int i)
{
	return lb_at(m->ops, m->params, m->tensors[i].offset, LB_K_ACT);
}

void *lb_llama_grad_at(struct lb_llama *m, size_t off)
{
	if (m->zero2 && off >= m->layers_hi)
		off -= m->layers_hi - m->emb_hi; /* the tail follows the embedding */
	return lb_at(m->ops, m->grads, off, LB_K_F32);
}

void *lb_llama_grad(struct lb_llama *m, int i)
{
	const struct lb_tensor *t = &m->tensors[i];

	if (m->zero2 && t->layer >= 0)
		return lb_at(m->ops, m->gmap[t->layer], t->offset - m->lt[t->layer].lo, LB_K_F32);
	return lb_llama_grad_at(m, t->offset);
}

static const struct lb_chunk *chunk_of_layer(const struct lb_llama *m, int j)
{
	int c = 0;

	while (c + 1 < m->n_chunks && j >= m->chunks[c + 1].j0)
		c++;
	return &m->chunks[c];
}

int lb_llama_layer(const struct lb_llama *m, int j)
{
	const struct lb_chunk *ch = chunk_of_layer(m, j);

	return ch->layer_lo + (j - ch->j0);
}

int lb_llama_chunk_j0(const struct lb_llama *m, int j)
{
	return chunk_of_layer(m, j)->j0;
}

int lb_llama_find(const struct lb_llama *m, const char *name)
{
	for (int i = 0; i < m->n_tensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return i;
	return -1;
}

void lb_llama_zero_grads(struct lb_llama *m)
{
	m->ops->zero(m->grads, m->n_grads, LB_K_F32);
}

void *lb_llama_stage_input(struct lb_llama *m, int chunk, int slot)
{
	return m->chunks[chunk].slots[slot].layers[0].x_in;
}

void *lb_llama_stage_output(struct lb_llama *m, int chunk, int slot)
{
	return m->chunks[chunk].slots[slot].x_out;
}

void *lb_llama_stage_doutput(struct lb_llama *m)
{
	return m->dout_buf;
}

void *lb_llama_stage_dinput(struct lb_llama *m)
{
	return m->dres;
}

size_t lb_llama_stage_count(const struct lb_llama *m)
{
	return (size_t)m->Tl * m->H;
}

int lb_llama_tp_replicated(const struct lb_llama *m, int i)
{
	return m->tensors[i].row_kind == MAP_FULL;
}

int lb_llama_tied_copy(const struct lb_llama *m, int i)
{
	return i == m->t_embed && !m->first;
}

size_t lb_llama_full_count(const struct lb_model *md)
{
	size_t H = (size_t)md->hidden, D = H / (size_t)md->n_heads;
	size_t qkv = ((size_t)md->n_heads + 2 * (size_t)md->n_kv_heads) * D;
	size_t layer =
	    H + qkv * H + H * md->n_heads * D + H + 2 * (size_t)md->ffn * H + H * (size_t)md->ffn;

	return (size_t)md->vocab * H * (md->tied ? 1 : 2) + (size_t)md->n_layers * layer + H;
}

/* Offset of tensor t in the whole model's flat buffer (lb_llama_full_count's order). */
static size_t full_base(const struct lb_llama *m, const struct lb_tensor *t)
{
	const struct lb_model *md = &m->layout.model;
	size_t H = (size_t)md->hidden, D = H / (size_t)md->n_heads;
	size_t qkv = ((size_t)md->n_heads + 2 * (size_t)md->n_kv_heads) * D;
	size_t sz[6] = {
	    H, qkv * H, H * md->n_heads * D, H, 2 * (size_t)md->ffn * H, H * (size_t)md->ffn};
	size_t layer = sz[0] + sz[1] + sz[2] + sz[3] + sz[4] + sz[5];
	size_t emb = (size_t)md->vocab * H, off;

	if (t->key == KEY_EMBED)
		return 0;
	if (t->key == KEY_NORM)
		return emb + (size_t)md->n_layers * layer;
	if (t->key == KEY_HEAD)
		return emb + (size_t)md->n_layers * layer + H;
	off = emb + (size_t)(t->key / 8 - 1) * layer;
	for (int k = 0; k < t->key % 8; k++)
		off += sz[k];
	return off;
}

void lb_llama_add_full(struct lb_llama *m, float *full)
{
	double *row = NULL;
	int maxcols = 0;

	for (int i = 0; i < m->n_tensors; i++)
		if (m->tensors[i].cols > maxcols)
			maxcols = m->tensors[i].cols;
	row = malloc((size_t)maxcols * sizeof(*row));
	if (!row)
		return;
	for (int i = 0; i < m->n_tensors; i++) {
		const struct lb_tensor *t = &m->tensors[i];
		size_t base = full_base(m, t);

		if (lb_llama_tied_copy(m, i) || (lb_llama_tp_replicated(m, i) && m->tp_rank))
			continue;
		for (int r = 0; r < t->rows; r++) {
			m->ops->read(
			    row,
			    lb_at(m->ops, m->params, t->offset + (size_t)r * t->cols, LB_K_ACT),
			    (size_t)t->cols, LB_K_ACT);
			for (int c = 0; c < t->cols; c++) {
				uint64_t gr, gc, gcols;

				global_index(m, t, r, c, &gr, &gc, &gcols);
				full[base + gr * gcols + gc] += (float)row[c];
			}
		}
	}
	free(row);
}

/* --- communication: tensor-parallel collectives, no-ops without a group --- */

int lb_comm_rc_status(int rc)
{
	if (rc == 0)
		return 0;
	return (rc == LB_COMM_ETIMEOUT || rc == LB_COMM_EPEER) ? LB_E_TIMEOUT : LB_E_COMM;
}

/* Host work inside a segment (a collective, the backward hook): the segment's graph
 * pauses around it. host_begin: 0, or LB_E_RERUN (the capture failed before anything of
 * the segment ran: stop; the segment runs again without a graph). */
static int host_begin(struct lb_llama *m)
{
	if (m->ops->graph_pause && m->ops->graph_pause() == LB_GRAPH_RERUN)
		return LB_E_RERUN;
	return 0;
}

static void host_end(struct lb_llama *m)
{
	if (m->ops->graph_resume)
		m->ops->graph_resume();
}

static int tp_all_reduce(struct lb_llama *m, void *buf, size_t n, enum lb_kind k, enum lb_redop op)
{
	double t0;
	int rc;

	if (!m->tp || m->tp->size == 1)
		return 0;
	if ((rc = host_begin(m)))
		return rc;
	t0 = lb_now_s();
	rc = m->tp->ops->all_reduce(m->tp, buf, buf, n, m->ops->dtype[k], op, m->ops->stream());
	m->comm_s += lb_now_s() - t0;
	host_end(m);
	return lb_comm_rc_status(rc);
}

/* Sum the partial products full (T, H) over tp. SP: reduce-scatter into local (Tl, H),
 * *res = local; else all-reduce in place, *res = full. */
static int tp_reduce(struct lb_llama *m, void *full, void *local, void **res)
{
	double t0;
	int rc;

	*res = full;
	if (!m->sp)
		return tp_all_reduce(m, full, (size_t)m->T * m->H, LB_K_ACT, LB_SUM);
	if ((rc = host_begin(m)))
		return rc;
	t0 = lb_now_s();
	rc = m->tp->ops->reduce_scatter(m->tp, full, local, (size_t)m->Tl * m->H,
					m->ops->dtype[LB_K_ACT], LB_SUM, m->ops->stream());
	m->comm_s += lb_now_s() - t0;
	host_end(m);
	*res = local;
	return lb_comm_rc_status(rc);
}

/* SP: gather the tokens of every tp rank, local (Tl, H) -> full (T, H). */
static int tp_gather(struct lb_llama *m, const void *local, void *full)
{
	double t0;
	int rc;

	if ((rc = host_begin(m)))
		return rc;
	t0 = lb_now_s();
	rc = m->tp->ops->all_gather(m->tp, local, full, (size_t)m->Tl * m->H,
				    m->ops->dtype[LB_K_ACT], m->ops->stream());
	m->comm_s += lb_now_s() - t0;
	host_end(m);
	return lb_comm_rc_status(rc);
}

int lb_llama_sync_sp_grads(struct lb_llama *m, int j_lo, int j_hi, int edges)
{
	if (!m->sp)
		return 0;
	for (int i = 0; i < m->n_tensors; i++) {
		int j = m->tensors[i].layer;

		if (!lb_llama_tp_replicated(m, i) || (j < 0 ? !edges : j < j_lo || j >= j_hi))
			continue;
		int rc =
		    tp_all_reduce(m, lb_llama_grad(m, i), m->tensors[i].count, LB_K_F32, LB_SUM);

		if (rc)
			return rc;
	}
	return 0;
}

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* --- layer forward and backward --- */

#define P(idx) lb_llama_param(m, (idx))
#define G(idx) lb_llama_grad(m, (idx))

/* Norms run on the residual stream's Tl tokens. */
static void norm_fwd(struct lb_llama *m, void *y, void *xhat, void *rstd, const void *x,
		     const void *w)
{
	if (m->layout.norm == LB_NORM_FUSED)
		m->ops->rmsnorm_fwd(y, rstd, x, w, m->Tl, m->H);
	else
		m->ops->rmsnorm_unfused_fwd(y, xhat, rstd, m->nscratch, x, w, m->Tl, m->H);
}

/* The norm of x (Tl, H) into y (Tl, H, saved); *full gets the whole micro-batch's
 * (T, H): y itself, or with SP y all-gathered into the workspace xfull. */
static int norm_fwd_full(struct lb_llama *m, void *y, void *xhat, void *rstd, const void *x,
			 const void *w, void **full)
{
	norm_fwd(m, y, xhat, rstd, x, w);
	*full = y;
	if (!m->sp)
		return 0;
	*full = m->xfull;
	return tp_gather(m, y, m->xfull);
}

/* A saved norm output (Tl, H) as the whole micro-batch's (T, H), for a weight gradient. */
static int whole(struct lb_llama *m, void *y, void **full)
{
	*full = y;
	if (!m->sp)
		return 0;
	*full = m->xfull;
	return tp_gather(m, y, m->xfull);
}

/* dx += the norm's input gradient; dw += its weight gradient. */
static void norm_bwd(struct lb_llama *m, void *dx, void *dw, const void *dy, const void *x,
		     const void *xhat, const void *w, const void *rstd)
{
	if (m->layout.norm == LB_NORM_FUSED)
		m->ops->rmsnorm_bwd(dx, dw, dy, x, w, rstd, m->Tl, m->H);
	else
		m->ops->rmsnorm_unfused_bwd(dx, dw, dy, xhat, w, rstd, m->nscratch, m->Tl, m->H);
}

static void attn_fwd(struct lb_llama *m, struct lb_layer_acts *a)
{
	const struct lb_ops *o = m->ops;

	switch (m->layout.attention) {
	case LB_ATTN_NAIVE:
		o->attn_naive_fwd(a->att, a->attp, m->ascratch, a->qkv, m->B, m->S, m->nh, m->nkv,
				  m->D);
		break;
	case LB_ATTN_FUSED_SOFTMAX:
		o->attn_fused_fwd(a->att, a->attp, a->qkv, m->B, m->S, m->nh, m->nkv, m->D);
		break;
	case LB_ATTN_CUDNN:
		o->attn_cudnn_fwd(a->att, a->attp, m->ascratch, a->qkv, m->B, m->S, m->nh, m->nkv,
				  m->D);
		break;
	default:
		o->attn_flash_fwd(a->att, a->attp, m->ascratch, a->qkv, m->B, m->S, m->nh, m->nkv,
				  m->D);
		break;
	}
}

/* out = x + the row-parallel projection of in (T, K) through w (H, K): one GEMM whose
 * epilogue adds the residual where the backend has it and nothing is to be reduced over
 * tp, else the GEMM into tmp, the reduction over tp, then the add. */
static int proj_residual(struct lb_llama *m, void *out, const void *x, const void *in,
			 const void *w, int kdim)
{
	const struct lb_ops *o = m->ops;
	void *r;

	if (o->matmul_add && (!m->tp || m->tp->size == 1)) {
		o->matmul_add(out, in, w, x, m->T, m->H, kdim, 0, 1);
		return 0;
	}
	o->matmul(m->tmp, in, w, m->T, m->H, kdim, 0, 1, 1.0, 0, 0);
	CHECK(tp_reduce(m, m->tmp, m->nloc, &r));
	o->add(out, x, r, (size_t)m->Tl * m->H);
	return 0;
}

/* One layer's forward: a->x_in -> y (T, H). */
static int layer_fwd(struct lb_llama *m, int j, struct lb_layer_acts *a, void *y)
{
	const struct lb_ops *o = m->ops;
	int T = m->T, H = m->H, hd = m->nh * m->D;
	void *xf;

	CHECK(norm_fwd_full(m, a->xn1, a->xhat1, a->rstd1, a->x_in, P(m->lt[j].attn_norm), &xf));
	o->matmul(a->qkv, xf, P(m->lt[j].wqkv), T, m->qkv_dim, H, 0, 1, 1.0, 0, 0);
	o->rope_fwd(a->qkv, m->rope, T, m->S, m->qkv_dim, m->nh + m->nkv, m->D);
	attn_fwd(m, a);
	CHECK(proj_residual(m, a->x_mid, a->x_in, a->att, P(m->lt[j].wo), hd)); /* row-parallel */
	CHECK(norm_fwd_full(m, a->xn2, a->xhat2, a->rstd2, a->x_mid, P(m->lt[j].mlp_norm), &xf));
	o->matmul(a->gu, xf, P(m->lt[j].wgu), T, 2 * m->F, H, 0, 1, 1.0, 0, 0);
	o->swiglu_fwd(a->act, a->gu, T, m->F);
	CHECK(proj_residual(m, y, a->x_mid, a->act, P(m->lt[j].wdown), m->F)); /* row-parallel */
	return 0;
}

/* One layer's backward: m->dres holds d(output) on entry and d(x_in) on exit. */
static int layer_bwd(struct lb_llama *m, int j, struct lb_layer_acts *a)
{
	const struct lb_ops *o = m->ops;
	int fresh = m->grad_fresh || m->grad_first, acc = !fresh;
	int T = m->T, H = m->H, F = m->F, hd = m->nh * m->D;
	void *dy = m->dres, *d, *xf;

	if (fresh) { /* the norms' weight gradients accumulate over the tokens */
		o->zero(G(m->lt[j].attn_norm), (size_t)H, LB_K_F32);
		o->zero(G(m->lt[j].mlp_norm), (size_t)H, LB_K_F32);
	}
	/* MLP: y = x_mid + down(swiglu(gu(norm(x_mid)))); SP: gather dy's tokens first */
	if (m->sp) {
		CHECK(tp_gather(m, m->dres, m->tmp));
		dy = m->tmp;
	}
	o->matmul(m->dact, dy, P(m->lt[j].wdown), T, F, H, 0, 0, 1.0, 0, 0);
	o->matmul(G(m->lt[j].wdown), dy, a->act, H, F, T, 1, 0, 1.0, acc, 1);
	o->swiglu_bwd(m->dgu, m->dact, a->gu, T, F);
	o->matmul(m->dxn, m->dgu, P(m->lt[j].wgu), T, H, 2 * F, 0, 0, 1.0, 0, 0);
	CHECK(whole(m, a->xn2, &xf));
	o->matmul(G(m->lt[j].wgu), m->dgu, xf, 2 * F, H, T, 1, 0, 1.0, acc, 1);
	CHECK(tp_reduce(m, m->dxn, m->nloc, &d)); /* column-parallel input */
	norm_bwd(m, m->dres, G(m->lt[j].mlp_norm), d, a->x_mid, a->xhat2, P(m->lt[j].mlp_norm),
		 a->rstd2);

	/* attention: x_mid = x_in + wo(attn(rope(qkv(norm(x_in))))) */
	dy = m->dres;
	if (m->sp) {
		CHECK(tp_gather(m, m->dres, m->tmp));
		dy = m->tmp;
	}
	o->matmul(m->datt, dy, P(m->lt[j].wo), T, hd, H, 0, 0, 1.0, 0, 0);
	o->matmul(G(m->lt[j].wo), dy, a->att, H, hd, T, 1, 0, 1.0, acc, 1);
	if (m->layout.checkpointing == LB_CKPT_SELECTIVE)
		attn_fwd(m, a); /* recompute the attention core's saved state */
	if (m->layout.attention == LB_ATTN_CUDNN)
		o->attn_cudnn_bwd(m->dqkv, m->ascratch, m->datt, a->att, a->attp, a->qkv, m->B,
				  m->S, m->nh, m->nkv, m->D);
	else if (m->layout.attention == LB_ATTN_FLASH)
		o->attn_flash_bwd(m->dqkv, m->ascratch, m->datt, a->att, a->attp, a->qkv, m->B,
				  m->S, m->nh, m->nkv, m->D);
	else
		o->attn_probs_bwd(m->dqkv, m->ascratch, m->datt, a->attp, a->qkv, m->B, m->S, m->nh,
				  m->nkv, m->D);
	o->rope_bwd(m->dqkv, m->rope, T, m->S, m->qkv_dim, m->nh + m->nkv, m->D);
	o->matmul(m->dxn, m->dqkv, P(m->lt[j].wqkv), T, H, m->qkv_dim, 0, 0, 1.0, 0, 0);
	CHECK(whole(m, a->xn1, &xf));
	o->matmul(G(m->lt[j].wqkv), m->dqkv, xf, m->qkv_dim, H, T, 1, 0, 1.0, acc, 1);
	CHECK(tp_reduce(m, m->dxn, m->nloc, &d));
	norm_bwd(m, m->dres, G(m->lt[j].attn_norm), d, a->x_in, a->xhat1, P(m->lt[j].attn_norm),
		 a->rstd1);
	return 0;
}

/* The activation set layer j runs with in slot s (full: the shared workspace). */
static struct lb_layer_acts layer_acts(struct lb_llama *m, struct lb_slot *s, int j)
{
	struct lb_layer_acts a = s->layers[j];

	if (m->layout.checkpointing == LB_CKPT_FULL) {
		a = m->ws;
		a.x_in = s->layers[j].x_in;
	}
	return a;
}

/* --- chunk forward and backward --- */

/* The forward's device work (the segment): the tokens and targets are in the slot. */
static int fwd_body(struct lb_llama *m, int chunk, int slot, const void *in, double loss_scale)
{
	const struct lb_ops *o = m->ops;
	const struct lb_chunk *ch = &m->chunks[chunk];
	struct lb_slot *s = &ch->slots[slot];
	int nl = ch->layer_hi - ch->layer_lo, T = m->T, H = m->H;
	size_t tlh = (size_t)m->Tl * H;
	void *r, *xf;

	if (ch->first) {
		void *e = m->sp ? m->tmp : s->layers[0].x_in;

		o->embed_fwd(e, P(m->t_embed), s->tokens, T, H, m->v0, m->V);
		CHECK(tp_reduce(m, e, s->layers[0].x_in, &r)); /* vocab-parallel */
	} else if (in) {
		o->copy(s->layers[0].x_in, in, tlh, LB_K_ACT);
	}
	for (int j = 0; j < nl; j++) {
		struct lb_layer_acts a = layer_acts(m, s, j);
		void *y = j + 1 < nl ? s->layers[j + 1].x_in : s->x_out;

		CHECK(layer_fwd(m, ch->j0 + j, &a, y));
	}
	if (!ch->last)
		return 0;

	/* final norm, vocab-parallel head, cross-entropy with its gradient */
	CHECK(norm_fwd_full(m, s->xnf, s->xhatf, s->rstdf, s->x_out, P(m->t_norm), &xf));
	o->matmul(s->logits, xf, P(m->t_head), T, m->V, H, 0, 1, 1.0, 0, 0);
	o->xent_max(s->rowmax, s->logits, T, m->V);
	CHECK(tp_all_reduce(m, s->rowmax, (size_t)T, LB_K_F32, LB_MAX));
	o->xent_sum(s->sumexp, s->tgt, s->logits, s->rowmax, s->targets, T, m->V, m->v0);
	CHECK(tp_all_reduce(m, s->sumexp, (size_t)T, LB_K_F32, LB_SUM));
	CHECK(tp_all_reduce(m, s->tgt, (size_t)T, LB_K_F32, LB_SUM));
	o->xent_grad(s->logits, s->losses, s->rowmax, s->sumexp, s->tgt, s->targets, T, m->V, m->v0,
		     loss_scale);
	o->sum_acc(m->loss_acc, s->losses, (size_t)T);
	return 0;
}

/* The backward's device work (the segment). */
static int bwd_body(struct lb_llama *m, int chunk, int slot, const void *dout)
{
	const struct lb_ops *o = m->ops;
	const struct lb_chunk *ch = &m->chunks[chunk];
	struct lb_slot *s = &ch->slots[slot];
	int nl = ch->layer_hi - ch->layer_lo, T = m->T, H = m->H, rc;
	size_t tlh = (size_t)m->Tl * H;
	void *d, *xf;

	if (ch->last) {
		o->matmul(m->dxn, s->logits, P(m->t_head), T, H, m->V, 0, 0, 1.0, 0, 0);
		CHECK(whole(m, s->xnf, &xf));
		/* the first backward of the step writes the head's gradient (a tied head's
		 * embedding gradient too: the embedding's backward adds to it below) */
		o->matmul(G(m->t_head), s->logits, xf, m->V, H, T, 1, 0, 1.0, !m->grad_first, 1);
		CHECK(tp_reduce(m, m->dxn, m->nloc, &d));
		o->zero(m->dres, tlh, LB_K_ACT);
		if (m->grad_first)
			o->zero(G(m->t_norm), (size_t)H, LB_K_F32);
		norm_bwd(m, m->dres, G(m->t_norm), d, s->x_out, s->xhatf, P(m->t_norm), s->rstdf);
	} else if (!dout) {
		o->copy(m->dres, m->dout_buf, tlh, LB_K_ACT);
	} else if (dout != m->dres) {
		o->copy(m->dres, dout, tlh, LB_K_ACT);
	}
	for (int j = nl - 1; j >= 0; j--) {
		struct lb_layer_acts a = layer_acts(m, s, j);

		if (m->bwd_hook) {
			CHECK(host_begin(m));
			rc = m->bwd_hook(m->bwd_hook_arg, ch->j0 + j, 0);
			host_end(m);
			CHECK(rc);
		}
		if (m->layout.checkpointing == LB_CKPT_FULL)
			CHECK(layer_fwd(m, ch->j0 + j, &a, m->tmp2)); /* recompute from the input */
		CHECK(layer_bwd(m, ch->j0 + j, &a));
		if (m->bwd_hook) {
			CHECK(host_begin(m));
			rc = m->bwd_hook(m->bwd_hook_arg, ch->j0 + j, 1);
			host_end(m);
			CHECK(rc);
		}
	}
	if (ch->first) {
		void *dy = m->dres;

		if (m->sp) {
			CHECK(tp_gather(m, m->dres, m->tmp));
			dy = m->tmp;
		}
		/* the embedding's backward adds; the first backward of the step starts it at
		 * zero, unless this stage's tied head wrote it above */
		if (m->grad_first && !(m->layout.model.tied && m->last))
			o->zero(G(m->t_embed), m->tensors[m->t_embed].count, LB_K_F32);
		o->embed_bwd(G(m->t_embed), dy, s->tokens, T, H, m->v0, m->V);
	}
	return 0;
}

/* What decides a segment's work and buffers: its graph's key (ops.h graph_begin). */
struct seg_key {
	char name[48]; /* "forward of chunk 0, slot 1", for messages */
	int bwd, chunk, slot, hook, fresh, first;
	const void *in, *dout;
	double loss_scale;
};

/* Run a chunk's forward (bwd 0) or backward as a graph segment when graphs are on, else
 * as it is. */
static int segment(struct lb_llama *m, int bwd, int chunk, int slot, const void *in,
		   const void *dout, double loss_scale)
{
	const struct lb_ops *real = m->ops;
	struct seg_key k;
	int rc, st;

	/* ZeRO-2's hook points the layers' gradients at a new slot per micro-batch: the
	 * backward's buffers change from call to call, so it runs without a graph */
	if (!m->graphs || !real->graph_begin || (bwd && m->zero2))
		return bwd ? bwd_body(m, chunk, slot, dout)
			   : fwd_body(m, chunk, slot, in, loss_scale);
	memset(&k, 0, sizeof(k)); /* the key is compared as bytes */
	snprintf(k.name, sizeof(k.name), "%s of chunk %d, slot %d", bwd ? "backward" : "forward",
		 chunk, slot);
	k.bwd = bwd;
	k.chunk = chunk;
	k.slot = slot;
	k.hook = bwd && m->bwd_hook != NULL;
	k.fresh = bwd && m->grad_fresh;
	k.first = bwd && m->grad_first;
	k.in = in;
	k.dout = dout;
	k.loss_scale = bwd ? 0 : loss_scale;
	m->ops = real->graph_begin(&k, sizeof(k));
	rc = bwd ? bwd_body(m, chunk, slot, dout) : fwd_body(m, chunk, slot, in, loss_scale);
	m->ops = real;
	st = real->graph_end(rc == 0);
	if (st == LB_GRAPH_RERUN || rc == LB_E_RERUN) /* nothing of it ran: again, eagerly */
		rc =
		    bwd ? bwd_body(m, chunk, slot, dout) : fwd_body(m, chunk, slot, in, loss_scale);
	if (st >= 0 && st < LB_GRAPH_NRUNS)
		m->graph_runs[st]++;
	return rc;
}

int lb_llama_forward(struct lb_llama *m, int chunk, int slot, const int32_t *tokens,
		     const int32_t *targets, const void *in, double loss_scale, double *loss_sum)
{
	const struct lb_chunk *ch;
	struct lb_slot *s;
	int rc;

	if (chunk < 0 || chunk >= m->n_chunks || slot < 0 || slot >= m->chunks[chunk].n_slots)
		return LB_E_INVAL;
	ch = &m->chunks[chunk];
	s = &ch->slots[slot];
	/* the host's ids go up before the device work (a graph cannot hold them) */
	if (ch->first)
		m->ops->write_i32(s->tokens, tokens, (size_t)m->T);
	if (ch->last)
		m->ops->write_i32(s->targets, targets, (size_t)m->T);
	if ((rc = segment(m, 0, chunk, slot, in, NULL, loss_scale)))
		return rc;
	if (ch->last && loss_sum)
		*loss_sum = m->ops->sum(s->losses, (size_t)m->T);
	return 0;
}

int lb_llama_backward(struct lb_llama *m, int chunk, int slot, const void *dout)
{
	if (chunk < 0 || chunk >= m->n_chunks || slot < 0 || slot >= m->chunks[chunk].n_slots)
		return LB_E_INVAL;
	return segment(m, 1, chunk, slot, NULL, dout, 0);
}
