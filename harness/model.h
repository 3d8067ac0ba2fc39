/*
 * The Llama model of layoutbench-train, written once over the ops table (harness/ops.h)
 * and the comm table (harness/comm/comm.h): token embedding; per layer RMSNorm, QKV
 * projection (grouped-query attention when KV heads < heads), RoPE, causal attention,
 * output projection, residual, RMSNorm, SwiGLU MLP, residual; final RMSNorm; LM head
 * (untied, or the embedding when tied); cross-entropy. Forward and backward are written
 * out.
 *
 * Parallel structure: an lb_llama object is one rank's part of the model: the model
 * chunks of its pipeline stage (one contiguous block of layers, or with virtual stages
 * the chunks stage, stage + pp, ... of the pp * virtual_stages chunks in pipeline order;
 * common/layout.h lb_chunk_layers splits the layers; the model's first chunk holds the
 * embedding, its last the final norm and head) and its tensor-parallel shard of each
 * weight (QKV and gate/up column-parallel, output and down row-parallel, embedding and
 * head vocab-parallel), with the tensor-parallel all-reduces in place (no-ops in a group
 * of one). Parameters of all its chunks live in one flat buffer with a table of tensor
 * offsets; gradients likewise, so an optimizer (or ZeRO) works on ranges. Activations
 * live in slots per chunk, one per micro-batch the chunk holds at once, so a pipeline
 * schedule can run several forwards before their backwards; forward, backward and the
 * stage boundary buffers are addressed by (chunk, slot).
 */
#ifndef LB_HARNESS_MODEL_H
#define LB_HARNESS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/layout.h"
#include "harness/comm/comm.h"
#include "harness/ops.h"

/* Status codes of the model (and the trainer's core). */
#define LB_E_OOM     -1 /* an allocation failed or passed the memory limit */
#define LB_E_COMM    -2 /* a collective failed (nccl_error) */
#define LB_E_TIMEOUT -3 /* a peer died or hung (timeout) */
/* A LB_COMM_E* code as an LB_E_* status: 0; LB_E_TIMEOUT for a peer that died or hung
 * (ETIMEOUT, EPEER); LB_E_COMM otherwise. The one map, for the model and the trainer. */
int lb_comm_rc_status(int rc);
#define LB_E_INVAL -4 /* a shape this object cannot run */
/* Inside the model only (never returned): a graph capture failed before anything of its
 * segment ran, which runs again without a graph. */
#define LB_E_RERUN -6

/* One tensor of the flat parameter buffer (this rank's shard). */
struct lb_tensor {
	char name[48];	 /* "embed", "layers.3.wqkv", "norm", "head" */
	size_t offset;	 /* elements into the flat buffer */
	size_t count;	 /* rows * cols */
	int rows, cols;	 /* shard shape, row-major */
	int decay;	 /* 1: AdamW weight decay applies (matrices, not norm gains) */
	int key;	 /* initialisation stream (layer * 8 + kind) */
	double init_std; /* 0: ones (norm gains) */
	int row_kind;	 /* how shard rows/cols map to the full tensor (init), model.c */
	int layer;	 /* local layer index j (m->lt[j]), or -1: the embedding, final norm
			    and head */
};

/* Activations of one layer for one micro-batch (T tokens; shard sizes). Every buffer is
 * act (bf16 on the GPU) except the statistics rstd (f32) and, with flash attention, the
 * saved log-sum-exp attp (f32). */
/* T: tokens of the micro-batch; Tl: of the residual stream on this rank (T / tp with
 * sequence parallelism, else T). */
struct lb_layer_acts {
	void *x_in;  /* (Tl, H) layer input, the residual stream; all that full ckpt saves */
	void *xn1;   /* (Tl, H) attention-norm output (with SP re-gathered into xfull when a
			matmul needs the whole micro-batch) */
	void *rstd1; /* (Tl) */
	void *xhat1; /* (Tl, H) normalized input, unfused norm only (else NULL) */
	void *qkv;   /* (T, (nh + 2*nkv)*D), q and k after RoPE */
	void *attp;  /* naive/fused_softmax: probs (B, nh, S, S); flash: lse (B, nh, S) */
	void *att;   /* (T, nh*D) attention output, the output projection's input */
	void *x_mid; /* (Tl, H) residual stream after attention */
	void *xn2;   /* (Tl, H) MLP-norm output (likewise) */
	void *rstd2; /* (Tl) */
	void *xhat2; /* (Tl, H) unfused norm only */
	void *gu;    /* (T, 2F) gate | up, before the activation */
	void *act;   /* (T, F) silu(gate) * up, the down projection's input */
};

/* One micro-batch in flight through one chunk. */
struct lb_slot {
	struct lb_layer_acts *layers; /* per layer of the chunk; full ckpt: only x_in is per
					 slot */
	void *x_out;  /* (Tl, H) output of the stage's last layer (final-norm input / sent on) */
	void *xnf;    /* (Tl, H) final-norm output (last stage; likewise) */
	void *rstdf;  /* (Tl) */
	void *xhatf;  /* (Tl, H) unfused norm only */
	void *logits; /* (T, V) logits, replaced by dlogits in the forward (last chunk) */
	void *losses; /* (T) per-token loss */
	void *rowmax, *sumexp, *tgt; /* (T) cross-entropy statistics */
	int32_t *tokens;	     /* (T) i32 backend memory: this micro-batch's inputs
					(the model's first chunk; else NULL) */
	int32_t *targets;	     /* (T) i32 backend memory: next tokens (last chunk) */
};

/* One model chunk of this rank: a contiguous block of layers and its slots. */
struct lb_chunk {
	int layer_lo, layer_hi; /* its layers of the whole model, [lo, hi) */
	int j0;			/* its first layer among this rank's (an index into lt) */
	int first, last;	/* 1: the model's first chunk (embedding) / last (final norm,
				   head, loss) */
	int n_slots;
	struct lb_slot *slots; /* n_slots */
};

struct lb_llama {
	const struct lb_ops *ops;
	struct lb_comm *tp; /* tensor-parallel group, or NULL (no communication) */
	struct lb_layout layout;
	int B, S, T;	   /* micro-batch, sequence, tokens per micro-batch */
	int H, nh, nkv, D; /* hidden; query and KV heads of this shard; head dim */
	int F, V, v0;	   /* SwiGLU inner size, vocab rows of this shard, first row */
	int qkv_dim;	   /* (nh + 2*nkv) * D */
	int tp_rank, tp_size;
	int sp;		 /* 1: sequence parallelism (tp > 1): the residual stream, the
			    norms and the stage boundary hold Tl = T / tp tokens */
	int Tl;		 /* tokens of the residual stream on this rank: T or T / tp */
	int first, last; /* 1: this rank holds the embedding (stage 0) / the head
			    (stage pp - 1) */
	int n_chunks;	 /* model chunks on this rank (layout virtual_stages) */
	struct lb_chunk *chunks;
	int n_layers; /* layers on this rank over its chunks */

	struct lb_tensor *tensors; /* n_tensors entries */
	int n_tensors;
	size_t n_params; /* elements of the flat buffer (blocks and their padding) */
	size_t n_alloc;	 /* = n_params: with dp > 1 every block (the embedding;
			    each layer; the final norm with the head) is padded to
			    a multiple of dp, so a bucket of blocks splits into dp
			    equal slices (ZeRO); the padding stays zero */
	size_t emb_hi;	 /* blocks: the embedding [0, emb_hi), the layers
			    [emb_hi, layers_hi), the tail [layers_hi, n_alloc) */
	size_t layers_hi;
	void *params;	/* flat, n_alloc, act (bf16 on the GPU) */
	void *grads;	/* f32 main gradients; backward accumulates over the
			   micro-batches. Flat (n_alloc), or with ZeRO-2 only the
			   embedding and tail blocks (n_grads), the layers'
			   gradients living where gmap points */
	size_t n_grads; /* elements of grads */
	int zero2;	/* 1: ZeRO-2 (dp > 1): layer gradients through gmap */
	void **gmap;	/* ZeRO-2: per local layer, where its block's gradients
			   are (set by the trainer before the layer's backward) */
	int grad_fresh; /* 1: the layers' weight gradients of this backward
			   overwrite instead of accumulate (ZeRO-2: a new slot per
			   micro-batch) */
	int grad_first; /* 1: this backward is its chunk's first of the optimizer
			   step: every weight gradient it produces is written, not
			   added (the trainer then zeroes no gradient buffer before
			   a step; set per backward by the trainer, 0 otherwise) */
	int graphs;	/* 1: forward and backward run as graph segments where the
			   backend has graphs (ops.h graph_begin; --cuda-graphs) */
	/* segments by what graph_end said (LB_GRAPH_*) */
	long graph_runs[LB_GRAPH_NRUNS];
	/* Called before (after = 0) and after (after = 1) each layer's backward, when set:
	 * where the data-parallel reduction hooks in (harness/gradsync.h). 0 or an LB_E_*
	 * code, which ends the backward. */
	int (*bwd_hook)(void *arg, int j, int after);
	void *bwd_hook_arg;
	void *loss_acc;		     /* one f64 element: every forward adds its token-loss
					sum (the trainer zeroes it per step and reads it once) */
	int t_embed, t_norm, t_head; /* tensor indices; -1 when not on this stage */
	struct {
		int attn_norm, wqkv, wo, mlp_norm, wgu, wdown;
		size_t lo, hi; /* the layer's block of the flat buffer, padding included */
	} * lt;		       /* per layer on this rank (local index j), chunk by chunk */

	struct lb_layer_acts ws; /* full: recompute workspace; selective: shared attp */
	void *dres;		 /* (Tl, H) gradient of the residual stream; after a
				    backward the input gradient (sent back) */
	void *dxn;		 /* (T, H) gradient of a norm output */
	void *dqkv;		 /* (T, qkv_dim) */
	void *datt;		 /* (T, nh*D) */
	void *dgu;		 /* (T, 2F) */
	void *dact;		 /* (T, F) */
	void *tmp;		 /* (T, H) projection outputs before the all-reduce; with
				    SP also the gathered gradient of the residual stream */
	void *tmp2;		 /* (Tl, H) discarded output of a recomputed layer */
	void *nloc;		 /* (Tl, H) SP: a norm output before its all-gather, a
				    reduce-scatter's result */
	void *dout_buf;		 /* (Tl, H) gradient of a chunk's output, from a receive
				    (the schedule keeps at most one waiting) */
	void *xfull;		 /* SP only: (T, H) a norm output all-gathered for a matmul
				    (forward) or a weight gradient (backward) */
	double comm_s;		 /* seconds spent in tensor-parallel collectives (summed
				    until the caller resets it) */
	void *nscratch;		 /* f32, ops->norm_scratch(T, H): unfused norm passes */
	void *ascratch;		 /* f32, ops->attn_scratch(B, S, nh, D) */
	void *rope;		 /* (S, D/2, 2) f32 cos/sin table */

	void **allocs; /* every backend buffer, freed by lb_llama_free */
	int n_allocs, cap_allocs;
};

/*
 * Build this rank's part: stage `stage` of layout->pp with its layout->virtual_stages
 * chunks (lb_chunk_layers), shard tp->rank of layout->tp (tp NULL: rank 0 of 1),
 * slots[c] activation slots for chunk c (lb_llama_init: n_slots for each), parameters
 * initialised deterministically from layout->seed (the same full model whatever the
 * sharding or split). Returns 0, LB_E_OOM (everything allocated so far is freed) or
 * LB_E_INVAL. Release with lb_llama_free.
 */
int lb_llama_init_slots(struct lb_llama *m, const struct lb_ops *ops, struct lb_comm *tp,
			const struct lb_layout *layout, int stage, const int *slots);
int lb_llama_init(struct lb_llama *m, const struct lb_ops *ops, struct lb_comm *tp,
		  const struct lb_layout *layout, int stage, int n_slots);
void lb_llama_free(struct lb_llama *m);

/* Pointer to tensor i's parameters / gradients. */
void *lb_llama_param(struct lb_llama *m, int i);
void *lb_llama_grad(struct lb_llama *m, int i);
/* The gradient at flat element off of the embedding or tail block (or of any block when
 * the gradients are flat). */
void *lb_llama_grad_at(struct lb_llama *m, size_t off);
/* Index of the tensor named name, or -1. */
int lb_llama_find(const struct lb_llama *m, const char *name);
/* Of this rank's layer j (0 <= j < n_layers): its layer in the whole model, and the first
 * rank layer index of its chunk. */
int lb_llama_layer(const struct lb_llama *m, int j);
int lb_llama_chunk_j0(const struct lb_llama *m, int j);

void lb_llama_zero_grads(struct lb_llama *m);

/*
 * Forward of one micro-batch through chunk `chunk` in its slot `slot`. The model's first
 * chunk: tokens (T host ids) are embedded; other chunks read the input activation (T, H)
 * from `in`, or, when in is NULL, from lb_llama_stage_input() where a receive put it. The
 * model's last chunk: targets (T) give the loss; the gradient of the logits is computed
 * at once with weight loss_scale per token (1 / tokens of the global batch) and kept for
 * the backward; the sum of this micro-batch's token losses is added to loss_acc on the
 * device, and when loss_sum is not NULL also read back into it (tests; that waits for
 * the device). tokens/targets (host) are uploaded into the slot.
 * Returns 0 or an LB_E_* code.
 */
int lb_llama_forward(struct lb_llama *m, int chunk, int slot, const int32_t *tokens,
		     const int32_t *targets, const void *in, double loss_scale, double *loss_sum);
/*
 * Backward of the micro-batch in chunk's slot `slot`, accumulating into the gradients.
 * The model's last chunk: from the loss; other chunks from dout (T, H), or from
 * lb_llama_stage_doutput() when NULL. Afterwards lb_llama_stage_dinput() holds the
 * gradient of the chunk's input (not the model's first chunk) until the next backward.
 * Returns 0 or an LB_E_* code.
 */
int lb_llama_backward(struct lb_llama *m, int chunk, int slot, const void *dout);

/* Chunk boundary buffers, (Tl, H) each (lb_llama_stage_count elements): the input of
 * (chunk, slot)'s forward, its output (to send on), the gradient arriving from the next
 * chunk (a backward with dout NULL reads it), the gradient of the input (to send back).
 * Owned by the model. */
void *lb_llama_stage_input(struct lb_llama *m, int chunk, int slot);
void *lb_llama_stage_output(struct lb_llama *m, int chunk, int slot);
void *lb_llama_stage_doutput(struct lb_llama *m);
void *lb_llama_stage_dinput(struct lb_llama *m);
size_t lb_llama_stage_count(const struct lb_llama *m);

/* 1 if tensor i is replicated over the tensor-parallel group (the norm gains): its
 * gradient is counted once in the global norm and, with SP, summed over tp. */
int lb_llama_tp_replicated(const struct lb_llama *m, int i);
/* 1 if tensor i is the last stage's copy of a tied embedding (pp > 1): the first stage
 * owns it, the copies' gradients are summed between the two stages. */
int lb_llama_tied_copy(const struct lb_llama *m, int i);

/* With sequence parallelism each tp rank's norm-gain gradients cover its tokens only:
 * sum them over the tensor-parallel group: those of local layers [j_lo, j_hi), and with
 * edges also the final norm's. 0 or an LB_E_* code; a no-op without SP. */
int lb_llama_sync_sp_grads(struct lb_llama *m, int j_lo, int j_hi, int edges);

/* Elements of the whole model in the single-rank order of the flat buffer (embedding,
 * per layer attn_norm, wqkv, wo, mlp_norm, wgu, wdown, final norm, head when untied). */
size_t lb_llama_full_count(const struct lb_model *md);
/* Add the parameters this rank owns (tp_rank 0 for the replicated norm gains, the first
 * stage for a tied embedding) into full (lb_llama_full_count floats, host) at their
 * place in the whole model; summed over the ranks of one data-parallel replica, full is
 * the whole model. */
void lb_llama_add_full(struct lb_llama *m, float *full);

#endif
