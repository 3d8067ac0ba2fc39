/*
 * Pipeline schedules as data (pipeline.h). The 1F1B list follows Megatron-LM's
 * forward_backward_pipelining_without_interleaving: warm-up (recv_forward, forward,
 * send_forward) pp - stage - 1 times, then steady state (forward,
 * send_forward_recv_backward, backward, send_backward_recv_forward), then cool-down
 * (recv_backward, backward, send_backward). The interleaved list follows
 * forward_backward_pipelining_with_interleaving step for step: the same warm-up count,
 * chunk order, and the same receives in the same calls (each iteration's sends and
 * receives in one group, a receive naming what the peer sends at that point, which for
 * the ring's wrap-around is a chunk's input or gradient ahead of its turn). A pass over
 * the finished list gives every (chunk, micro-batch) its activation slot and checks the
 * invariants the trainer's buffers rely on. libc only.
 */
#include "common/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHED_NAME(id, name) [LB_SCHED_##id] = name,
static const char *const sched_names[] = {LB_SCHED_KINDS(SCHED_NAME)};

const char *lb_sched_name(enum lb_sched_kind k)
{
	return (unsigned)k < sizeof(sched_names) / sizeof(sched_names[0]) ? sched_names[k]
									  : "unknown";
}

int lb_sched_parse(const char *s, enum lb_sched_kind *out)
{
	for (size_t k = 0; k < sizeof(sched_names) / sizeof(sched_names[0]); k++)
		if (!strcmp(s, sched_names[k])) {
			*out = (enum lb_sched_kind)k;
			return 0;
		}
	return -1;
}

int lb_step_is_compute(enum lb_step_kind k)
{
	return k == LB_STEP_FORWARD || k == LB_STEP_BACKWARD;
}

int lb_step_is_send(enum lb_step_kind k)
{
	return k == LB_STEP_SEND_ACT || k == LB_STEP_SEND_GRAD;
}

int lb_schedule_group_last(const struct lb_schedule *s, int i)
{
	const struct lb_step *st = &s->steps[i];

	return st->group < 0 || i + 1 == s->n_steps || s->steps[i + 1].group != st->group ||
	       lb_step_is_compute(s->steps[i + 1].kind);
}

const char *lb_step_name(enum lb_step_kind k)
{
	static const char *const names[] = {"forward",	"backward",  "send_act",
					    "recv_act", "send_grad", "recv_grad"};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "unknown";
}

/* ---- building ---- */

struct builder {
	struct lb_schedule *s;
	int cap;
	int next_group;
	int open; /* 1 while a group is being added */
	int failed;
};

static void add(struct builder *b, enum lb_step_kind kind, int chunk, int micro, int peer)
{
	struct lb_step *st;

	if (b->failed)
		return;
	if (b->s->n_steps == b->cap) {
		int cap = b->cap ? b->cap * 2 : 16;
		struct lb_step *p = realloc(b->s->steps, sizeof(*p) * (size_t)cap);

		if (!p) {
			b->failed = 1;
			return;
		}
		b->s->steps = p;
		b->cap = cap;
	}
	st = &b->s->steps[b->s->n_steps++];
	st->kind = kind;
	st->micro = micro;
	st->peer = peer;
	st->chunk = chunk;
	st->slot = 0;
	st->group = -1;
	if (kind != LB_STEP_FORWARD && kind != LB_STEP_BACKWARD)
		st->group = b->open ? b->next_group : b->next_group++;
}

static void group_begin(struct builder *b)
{
	b->open = 1;
}

static void group_end(struct builder *b)
{
	int n = b->s->n_steps;

	b->open = 0;
	if (n > 0 && b->s->steps[n - 1].group == b->next_group)
		b->next_group++; /* the group got at least one step */
}

/* The communication helpers of Megatron's p2p_communication, skipping the missing
 * neighbour at either end (one chunk per stage). */
static void recv_forward(struct builder *b, int m)
{
	if (b->s->stage > 0)
		add(b, LB_STEP_RECV_ACT, 0, m, b->s->stage - 1);
}

static void send_forward(struct builder *b, int m)
{
	if (b->s->stage < b->s->pp - 1)
		add(b, LB_STEP_SEND_ACT, 0, m, b->s->stage + 1);
}

static void recv_backward(struct builder *b, int m)
{
	if (b->s->stage < b->s->pp - 1)
		add(b, LB_STEP_RECV_GRAD, 0, m, b->s->stage + 1);
}

static void send_backward(struct builder *b, int m)
{
	if (b->s->stage > 0)
		add(b, LB_STEP_SEND_GRAD, 0, m, b->s->stage - 1);
}

static void build_1f1b(struct builder *b)
{
	int pp = b->s->pp, stage = b->s->stage, nm = b->s->n_micro, i;
	int warmup = pp - stage - 1 < nm ? pp - stage - 1 : nm;
	int remaining = nm - warmup;

	for (i = 0; i < warmup; i++) {
		recv_forward(b, i);
		add(b, LB_STEP_FORWARD, 0, i, -1);
		send_forward(b, i);
	}
	if (remaining > 0)
		recv_forward(b, warmup);
	for (i = 0; i < remaining; i++) {
		int fm = warmup + i, bm = i;

		add(b, LB_STEP_FORWARD, 0, fm, -1);
		group_begin(b); /* send_forward_recv_backward */
		send_forward(b, fm);
		recv_backward(b, bm);
		group_end(b);
		add(b, LB_STEP_BACKWARD, 0, bm, -1);
		if (i == remaining - 1) {
			send_backward(b, bm);
		} else {
			group_begin(b); /* send_backward_recv_forward */
			send_backward(b, bm);
			recv_forward(b, fm + 1);
			group_end(b);
		}
	}
	for (i = 0; i < warmup; i++) {
		int bm = remaining + i;

		recv_backward(b, bm);
		add(b, LB_STEP_BACKWARD, 0, bm, -1);
		send_backward(b, bm);
	}
}

static void build_gpipe(struct builder *b)
{
	int nm = b->s->n_micro, i;

	for (i = 0; i < nm; i++) {
		recv_forward(b, i);
		add(b, LB_STEP_FORWARD, 0, i, -1);
		send_forward(b, i);
	}
	for (i = 0; i < nm; i++) {
		recv_backward(b, i);
		add(b, LB_STEP_BACKWARD, 0, i, -1);
		send_backward(b, i);
	}
}

/*
 * The interleaved schedule. Chunk passes are numbered k = 0 .. n_micro*chunks - 1 in the
 * order a stage runs them: groups of pp micro-batches go through chunk 0, then the same
 * pp through chunk 1, ..., then the next pp micro-batches (forwards); backwards visit the
 * chunks from the last. A chunk's number in pipeline order is chunk*pp + stage: its input
 * comes from the previous stage (stage pp - 1 feeding stage 0's next chunk), its gradient
 * from the next.
 */
struct ring {
	int pp, v, stage;
	/* the chunk passes of this stage that receive, in the order they need their data:
	 * a receive takes the next one (messages between two stages keep their order) */
	int *need_f, *need_b, nf, nb, at_f, at_b;
};

static int chunk_of(const struct ring *r, int k, int forward)
{
	int g = r->pp * r->v, c = ((k % g) + g) % g / r->pp; /* Python's modulo */

	return forward ? c : r->v - 1 - c;
}

static int micro_of(const struct ring *r, int k)
{
	return k / (r->pp * r->v) * r->pp + k % r->pp;
}

static int is_first_chunk(const struct ring *r, int c)
{
	return c == 0 && r->stage == 0;
}

static int is_last_chunk(const struct ring *r, int c)
{
	return c == r->v - 1 && r->stage == r->pp - 1;
}

static void ring_fwd(struct builder *b, struct ring *r, int k)
{
	add(b, LB_STEP_FORWARD, chunk_of(r, k, 1), micro_of(r, k), -1);
}

static void ring_bwd(struct builder *b, struct ring *r, int k)
{
	add(b, LB_STEP_BACKWARD, chunk_of(r, k, 0), micro_of(r, k), -1);
}

/* One iteration's communication, in Megatron's send_forward_backward_recv_forward_backward:
 * fk / bk the chunk passes whose output / input gradient goes out (-1: none), then the
 * receives. Sends first and activations before gradients on both sides, so that two
 * stages exchanging both (pp = 2) post them in the same order. */
static void ring_comm(struct builder *b, struct ring *r, int fk, int bk, int recv_prev,
		      int recv_next)
{
	int pp = r->pp, next = (r->stage + 1) % pp, prev = (r->stage + pp - 1) % pp, k;

	group_begin(b);
	if (fk >= 0 && !is_last_chunk(r, chunk_of(r, fk, 1)))
		add(b, LB_STEP_SEND_ACT, chunk_of(r, fk, 1), micro_of(r, fk), next);
	if (bk >= 0 && !is_first_chunk(r, chunk_of(r, bk, 0)))
		add(b, LB_STEP_SEND_GRAD, chunk_of(r, bk, 0), micro_of(r, bk), prev);
	if (recv_prev) {
		if (r->at_f < r->nf) {
			k = r->need_f[r->at_f++];
			add(b, LB_STEP_RECV_ACT, chunk_of(r, k, 1), micro_of(r, k), prev);
		} else {
			b->failed = 2; /* more receives than inputs: a builder bug */
		}
	}
	if (recv_next) {
		if (r->at_b < r->nb) {
			k = r->need_b[r->at_b++];
			add(b, LB_STEP_RECV_GRAD, chunk_of(r, k, 0), micro_of(r, k), next);
		} else {
			b->failed = 2;
		}
	}
	group_end(b);
}

static void build_interleaved(struct builder *b)
{
	struct ring r;
	int pp = b->s->pp, v = b->s->chunks, stage = b->s->stage, nm = b->s->n_micro;
	int total = nm * v, warmup, remaining, all_warmup = 0, k;

	memset(&r, 0, sizeof(r));
	r.pp = pp;
	r.v = v;
	r.stage = stage;
	r.need_f = malloc(sizeof(int) * (size_t)total);
	r.need_b = malloc(sizeof(int) * (size_t)total);
	if (!r.need_f || !r.need_b) {
		b->failed = 1;
		goto out;
	}
	for (k = 0; k < total; k++) {
		if (!is_first_chunk(&r, chunk_of(&r, k, 1)))
			r.need_f[r.nf++] = k;
		if (!is_last_chunk(&r, chunk_of(&r, k, 0)))
			r.need_b[r.nb++] = k;
	}
	if (nm == pp) {
		warmup = total;
		all_warmup = 1;
	} else {
		warmup = (pp - stage - 1) * 2 + (v - 1) * pp;
		if (warmup > total)
			warmup = total;
	}
	remaining = total - warmup;

	if (stage > 0) /* recv_forward of the first chunk pass */
		ring_comm(b, &r, -1, -1, 1, 0);
	for (k = 0; k < warmup; k++) {
		int recv_prev = !(stage == 0 && chunk_of(&r, k + 1, 1) == 0) && k != total - 1;

		ring_fwd(b, &r, k);
		if (k == warmup - 1 && !all_warmup)
			ring_comm(b, &r, k, -1, recv_prev, stage != pp - 1);
		else
			ring_comm(b, &r, k, -1, recv_prev, 0);
	}
	for (k = 0; k < remaining; k++) {
		int fk = k + warmup, bk = k, recv_prev = 1, recv_next = 1;

		ring_fwd(b, &r, fk);
		ring_bwd(b, &r, bk);
		/* the first stage runs pp - 1 passes ahead of the last, which feeds it */
		if (stage == 0 && chunk_of(&r, fk - (pp - 1), 1) == v - 1)
			recv_prev = 0;
		if (stage == pp - 1 && chunk_of(&r, bk - (pp - 1), 0) == 0)
			recv_next = 0;
		if (k == remaining - 1)
			recv_prev = 0;
		ring_comm(b, &r, fk, bk, recv_prev, recv_next);
	}
	if (all_warmup && stage != pp - 1)
		ring_comm(b, &r, -1, -1, 0, 1);
	for (k = remaining; k < total; k++) {
		int recv_next =
		    !(stage == pp - 1 && chunk_of(&r, k + 1, 0) == v - 1) && k != total - 1;

		ring_bwd(b, &r, k);
		ring_comm(b, &r, -1, k, 0, recv_next);
	}
	if (!b->failed && (r.at_f != r.nf || r.at_b != r.nb))
		b->failed = 2; /* an input or gradient never received */
out:
	free(r.need_f);
	free(r.need_b);
}

/*
 * Slots: a (chunk, micro-batch) takes the lowest free slot of its chunk when its input
 * arrives (its receive, or its forward on the first chunk) and frees it at its backward;
 * n_slots[chunk] is the most taken at once. Also checks what the trainer's buffers rely
 * on: each pass's output is sent while its slot is held; an input gradient is sent before
 * the next backward (one buffer holds it); and counts the received gradients waiting for
 * their backward (n_grad_bufs). Returns 0, or -1 with err set.
 */
static int assign_slots(struct lb_schedule *s, char *err, size_t errlen)
{
	size_t cells = (size_t)s->chunks * (size_t)s->n_micro;
	int *slot = malloc(cells * sizeof(int)), *busy = NULL, waiting = 0;
	int unsent = -1, rc = -1; /* index of the backward whose gradient is not sent yet */
	unsigned char *used;

	used = calloc(cells, 1); /* per chunk, slot: 1 while taken (slots <= micro-batches) */
	busy = calloc((size_t)s->chunks, sizeof(int));
	if (!slot || !used || !busy) {
		snprintf(err, errlen, "pipeline schedule: out of memory");
		goto out;
	}
	for (size_t i = 0; i < cells; i++)
		slot[i] = -1;
	memset(s->n_slots, 0, sizeof(s->n_slots));
	s->n_grad_bufs = 0;
	for (int i = 0; i < s->n_steps; i++) {
		struct lb_step *st = &s->steps[i];
		size_t k = (size_t)st->chunk * (size_t)s->n_micro + (size_t)st->micro;
		unsigned char *u = used + (size_t)st->chunk * (size_t)s->n_micro;

		if (st->chunk < 0 || st->chunk >= s->chunks || st->micro < 0 ||
		    st->micro >= s->n_micro)
			goto bad;
		if ((st->kind == LB_STEP_RECV_ACT || st->kind == LB_STEP_FORWARD) &&
		    slot[k] == -1) {
			int j = 0;

			while (u[j])
				j++;
			u[j] = 1;
			slot[k] = j;
			if (++busy[st->chunk] > s->n_slots[st->chunk])
				s->n_slots[st->chunk] = busy[st->chunk];
		}
		if (slot[k] < 0 && st->kind != LB_STEP_SEND_GRAD && st->kind != LB_STEP_RECV_GRAD)
			goto bad; /* a send or backward of a pass that holds no slot */
		st->slot = slot[k] < 0 ? 0 : slot[k];
		switch (st->kind) {
		case LB_STEP_RECV_GRAD:
			if (++waiting > s->n_grad_bufs)
				s->n_grad_bufs = waiting;
			break;
		case LB_STEP_BACKWARD:
			if (unsent >= 0)
				goto bad; /* the previous input gradient was overwritten */
			if (st->chunk * s->pp + s->stage < s->pp * s->chunks - 1)
				waiting--;
			if (st->chunk * s->pp + s->stage > 0)
				unsent = i;
			u[slot[k]] = 0;
			slot[k] = -2; /* done: no second slot */
			busy[st->chunk]--;
			break;
		case LB_STEP_SEND_GRAD:
			if (unsent < 0 || s->steps[unsent].chunk != st->chunk ||
			    s->steps[unsent].micro != st->micro)
				goto bad;
			unsent = -1;
			st->slot = 0;
			break;
		default:
			break;
		}
	}
	rc = 0;
	goto out;
bad:
	snprintf(err, errlen,
		 "pipeline schedule %s, stage %d: its buffers cannot follow the list (an internal "
		 "error)",
		 lb_sched_name(s->kind), s->stage);
out:
	free(slot);
	free(used);
	free(busy);
	return rc;
}

/* The arguments of a schedule: 0, or -1 with err set (lb_schedule_build's contract). */
static int check_args(enum lb_sched_kind kind, int pp, int chunks, int stage, int n_micro,
		      char *err, size_t errlen)
{
	if (pp < 1 || pp > LB_SCHED_MAX_PP) {
		snprintf(err, errlen, "pipeline of %d stages: expected 1 to %d", pp,
			 LB_SCHED_MAX_PP);
		return -1;
	}
	if (stage < 0 || stage >= pp) {
		snprintf(err, errlen, "stage %d is not in a pipeline of %d stages", stage, pp);
		return -1;
	}
	if (n_micro < 1 || n_micro > 1 << 20) {
		snprintf(err, errlen, "%d micro-batches: expected 1 to %d", n_micro, 1 << 20);
		return -1;
	}
	if (kind != LB_SCHED_1F1B && kind != LB_SCHED_GPIPE && kind != LB_SCHED_INTERLEAVED) {
		snprintf(err, errlen, "unknown pipeline schedule %d (1f1b, gpipe or interleaved)",
			 (int)kind);
		return -1;
	}
	if (kind == LB_SCHED_INTERLEAVED) {
		if (chunks < 2 || chunks > LB_MAX_VIRTUAL_STAGES) {
			snprintf(err, errlen,
				 "the interleaved schedule needs 2 to %d model chunks per stage, "
				 "got %d",
				 LB_MAX_VIRTUAL_STAGES, chunks);
			return -1;
		}
		if (n_micro % pp) {
			snprintf(err, errlen,
				 "the interleaved schedule needs the micro-batches (%d) to be a "
				 "multiple of pp=%d",
				 n_micro, pp);
			return -1;
		}
		if ((long long)n_micro * chunks > 1 << 20) {
			snprintf(err, errlen, "%d micro-batches through %d chunks: too many",
				 n_micro, chunks);
			return -1;
		}
	} else if (chunks != 1) {
		snprintf(err, errlen, "the %s schedule runs one model chunk per stage, got %d",
			 lb_sched_name(kind), chunks);
		return -1;
	}
	return 0;
}

int lb_schedule_build(enum lb_sched_kind kind, int pp, int chunks, int stage, int n_micro,
		      struct lb_schedule *out, char *err, size_t errlen)
{
	struct builder b;

	memset(out, 0, sizeof(*out));
	if (check_args(kind, pp, chunks, stage, n_micro, err, errlen))
		return -1;
	out->kind = kind;
	out->pp = pp;
	out->stage = stage;
	out->n_micro = n_micro;
	out->chunks = chunks;
	memset(&b, 0, sizeof(b));
	b.s = out;
	if (kind == LB_SCHED_1F1B)
		build_1f1b(&b);
	else if (kind == LB_SCHED_GPIPE)
		build_gpipe(&b);
	else
		build_interleaved(&b);
	if (b.failed) {
		lb_schedule_release(out);
		snprintf(err, errlen,
			 b.failed == 1 ? "pipeline schedule: out of memory"
				       : "pipeline schedule: the receives do not match the inputs "
					 "(an internal error)");
		return -1;
	}
	if (assign_slots(out, err, errlen)) {
		lb_schedule_release(out);
		return -1;
	}
	return 0;
}

void lb_schedule_release(struct lb_schedule *s)
{
	free(s->steps);
	s->steps = NULL;
	s->n_steps = 0;
}

enum lb_sched_kind lb_schedule_effective(const struct lb_layout *l, enum lb_sched_kind asked)
{
	if (lb_layout_chunks(l) > 1)
		return LB_SCHED_INTERLEAVED;
	if (l->pp <= 1 || asked == LB_SCHED_INTERLEAVED)
		return LB_SCHED_1F1B;
	return asked;
}

/* The micro-batches per step of layout l (its accumulation steps), or -1 with err set. */
static int layout_micro(const struct lb_layout *l, char *err, size_t errlen)
{
	int accum = lb_layout_accum_steps(l);

	if (accum < 1) {
		snprintf(err, errlen, "global_batch=%d is not divisible by micro_batch*dp=%lld",
			 l->global_batch, (long long)l->micro_batch * l->dp);
		return -1;
	}
	return accum;
}

int lb_schedule_for_layout(const struct lb_layout *l, enum lb_sched_kind asked, int stage,
			   struct lb_schedule *out, char *err, size_t errlen)
{
	int accum = layout_micro(l, err, errlen);

	if (accum < 0) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return lb_schedule_build(lb_schedule_effective(l, asked), l->pp, lb_layout_chunks(l), stage,
				 accum, out, err, errlen);
}

int lb_schedule_slots(enum lb_sched_kind kind, int pp, int chunks, int stage, int n_micro,
		      int n_slots[LB_MAX_VIRTUAL_STAGES], char *err, size_t errlen)
{
	struct lb_schedule s;
	int n = n_micro;

	if (check_args(kind, pp, chunks, stage, n_micro, err, errlen))
		return -1;
	/* One chunk per stage: the count the list gives, without the list (the planner asks
	 * this for every stage of every layout of a grid). 1F1B: the pp - stage - 1 warm-up
	 * forwards and the steady state's one more, at most the step's micro-batches; GPipe:
	 * every micro-batch. test_schedule_pipeline checks both against the whole list. */
	if (kind != LB_SCHED_INTERLEAVED) {
		memset(n_slots, 0, sizeof(int) * LB_MAX_VIRTUAL_STAGES);
		n_slots[0] = kind == LB_SCHED_GPIPE || n_micro < pp - stage ? n_micro : pp - stage;
		return 0;
	}
	/* the interleaved schedule holds no more once n reaches 2 * pp: a margin
	 * of twice that (a multiple of pp, as the interleaved schedule needs) */
	if (n > LB_SCHED_SLOTS_CAP * pp)
		n = LB_SCHED_SLOTS_CAP * pp;
	if (lb_schedule_build(kind, pp, chunks, stage, n, &s, err, errlen))
		return -1;
	memcpy(n_slots, s.n_slots, sizeof(s.n_slots));
	lb_schedule_release(&s);
	return 0;
}

int lb_schedule_slots_for_layout(const struct lb_layout *l, enum lb_sched_kind asked, int stage,
				 int n_slots[LB_MAX_VIRTUAL_STAGES], char *err, size_t errlen)
{
	int accum = layout_micro(l, err, errlen);

	if (accum < 0)
		return -1;
	return lb_schedule_slots(lb_schedule_effective(l, asked), l->pp, lb_layout_chunks(l), stage,
				 accum, n_slots, err, errlen);
}

int lb_schedule_format(const struct lb_schedule *s, char *buf, size_t len)
{
	static const char *const abbr[] = {"F", "B", "sa", "ra", "sg", "rg"};
	size_t used = 0;
	int i, n;

	if (len)
		buf[0] = 0;
	for (i = 0; i < s->n_steps; i++) {
		const struct lb_step *st = &s->steps[i];
		int opens = st->group >= 0 && (i == 0 || s->steps[i - 1].group != st->group);
		int closes =
		    st->group >= 0 && (i == s->n_steps - 1 || s->steps[i + 1].group != st->group);
		int alone = opens && closes;
		char chunk[16] = "";

		if (s->chunks > 1)
			snprintf(chunk, sizeof(chunk), ".%d", st->chunk);
		n = snprintf(used < len ? buf + used : NULL, used < len ? len - used : 0,
			     "%s%s%s%d%s%s", i ? " " : "", opens && !alone ? "[" : "",
			     abbr[st->kind], st->micro, chunk, closes && !alone ? "]" : "");
		if (n < 0)
			return -1;
		used += (size_t)n;
	}
	return (int)used;
}
