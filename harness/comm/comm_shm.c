/*
 * The shared-memory communicator (comm_shm.h): one segment per run holds a header (pid
 * table, abort record, doorbells), a table of communicator contexts (the world and its
 * splits: members, a barrier counter), a pool of per-member staging slots and one ring
 * buffer per ordered pair of ranks for send/recv. Synchronisation uses C11 atomics in the
 * segment and Linux futexes to sleep, never a lock, so a rank that dies cannot leave
 * anything held; each sleep is a slice of at most LB_SHM_SLICE_S seconds after which the
 * waiter checks the abort record, the liveness of its peers and its deadline.
 *
 * Collectives go round by round through half of each member's staging slot (the halves
 * alternate between rounds, so one barrier per round suffices for all-gather, broadcast
 * and reduce-scatter, two for all-reduce). all_reduce: every rank copies its chunk into
 * its slot; after a barrier rank r reduces sub-slice r over the slots in rank order and
 * writes it into its own slot; after a second barrier every rank copies all sub-slices
 * out. The sum of one element is always ((x0 + x1) + x2) + ..., computed once.
 *
 * Why one file: one protocol over one segment. The segment's layout, the waits on it (the
 * futexes, and the abort, liveness and deadline checks every wait makes), the collectives
 * and send/recv that walk it and the splits that carve contexts out of it keep invariants
 * (the slot halves per round, the barrier counters, the ring positions) that only this file
 * knows; split, they would be published to every piece.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "harness/comm/comm_shm.h"

#include "common/util.h"

#define SHM_MAGIC	   0x4c42534dU /* "LBSM" */
#define SHM_VERSION	   1U
#define SHM_MAX_CTX	   64
#define SHM_SLOT_BYTES	   (1U << 20)	/* staging per member per communicator, two halves */
#define SHM_SLOTS_PER_RANK 16		/* => up to 16 live partitions of the world */
#define SHM_CHAN_BYTES	   (256U << 10) /* ring buffer per ordered pair of ranks */
#define SHM_REASON_MAX	   200
#define LB_SHM_SLICE_S	   0.02 /* longest sleep between health checks, seconds */
#define SHM_SPIN	   64
#define SHM_YIELDS	   8

#define MAXR LB_SHM_MAX_RANKS

/* One communicator in the segment. */
struct shm_ctx {
	_Atomic uint32_t state;		/* 0 free, 1 being set up, 2 live */
	int32_t n;			/* members */
	int32_t members[MAXR];		/* world rank of member i */
	int32_t slot[MAXR];		/* staging slot index of member i */
	_Atomic uint32_t bar;		/* barrier arrivals, monotonic (wraps) */
	_Atomic uint32_t arrived[MAXR]; /* barriers entered by member i (for diagnostics) */
	_Atomic uint32_t detached;	/* members that destroyed their handle */
};

/* Ordered pair src -> dst; counters in bytes since the start. */
struct shm_chan {
	_Atomic uint64_t head; /* written by src */
	char pad0[56];
	_Atomic uint64_t tail; /* consumed by dst */
	char pad1[56];
};

struct shm_hdr {
	_Atomic uint32_t magic; /* SHM_MAGIC once initialised (stored last) */
	uint32_t version;
	int32_t size; /* world ranks */
	uint32_t slot_bytes;
	uint32_t chan_bytes;
	uint32_t nslots;
	uint64_t total_bytes;
	uint64_t off_ctx, off_owner, off_chan, off_chanbuf, off_slots; /* bytes from base */
	_Atomic uint32_t joined;	    /* ranks past lb_comm_shm_create's registration */
	_Atomic int32_t pid[MAXR];	    /* process of each world rank, 0 until joined */
	_Atomic uint32_t departed[MAXR];    /* 1 once the rank destroyed its world handle */
	_Atomic uint32_t doorbell[MAXR];    /* bumped when a channel of the rank moved */
	_Atomic uint32_t waiting[MAXR];	    /* 1 while the rank waits for a peer */
	_Atomic uint32_t dev_blocked[MAXR]; /* 1 while blocked in a device call (watchdog) */
	_Atomic uint32_t abort_word;	    /* 0, or world rank + 1 of the first abort */
	_Atomic uint32_t abort_ready;	    /* 1 once abort_reason is written */
	char abort_reason[SHM_REASON_MAX + 1];
};

/* Per process: the mapping, shared by the world handle and its splits. */
struct shm_seg {
	int refs;
	char name[256];
	int world_rank, world_size;
	double timeout_s;
	unsigned char *base;
	size_t bytes;
	struct shm_hdr *hdr;
	struct lb_comm_err err; /* the last failed call */
};

enum { OP_SEND = 0, OP_RECV = 1 };
struct p2p_op {
	int dir;  /* OP_SEND / OP_RECV */
	int peer; /* world rank */
	unsigned char *buf;
	uint64_t len;  /* payload bytes */
	uint64_t done; /* bytes moved, 8-byte size header included */
	uint64_t hdr;  /* size header: sent, or received */
	int finished;
};

struct shm_comm {
	struct lb_comm c;
	struct shm_seg *seg;
	int ctx_id;
	struct shm_ctx *x;
	uint32_t nbar;	/* barriers entered by this rank */
	uint64_t round; /* staging rounds; its parity picks the half */
	int in_group;
	struct p2p_op *ops;
	int nops, capops;
};

static const struct lb_comm_ops shm_ops;

/* ---- time, futex, liveness ---- */

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, double secs)
{
	struct timespec ts;

	if (secs <= 0)
		return;
	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void sleep_s(double secs)
{
	struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};

	nanosleep(&ts, NULL);
}

/* 0 if the process is gone or a zombie (exited, not yet reaped by its parent). */
static int pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 1;
	if (kill(pid, 0) == -1 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : 1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return 0;
	return 1;
}

/* ---- errors ---- */

static void wake_everyone(struct shm_seg *s);

/* Post the abort record for world rank `rank` (first one wins). */
static void post_abort(struct shm_seg *s, int rank, const char *reason)
{
	struct shm_hdr *h = s->hdr;
	uint32_t zero = 0;

	if (!atomic_compare_exchange_strong(&h->abort_word, &zero, (uint32_t)rank + 1))
		return;
	snprintf(h->abort_reason, sizeof(h->abort_reason), "%s", reason ? reason : "");
	atomic_store(&h->abort_ready, 1);
	wake_everyone(s);
}

/* LB_COMM_EPEER with the abort record as the error, if one is posted; else 0. */
static int check_abort(struct shm_seg *s)
{
	struct shm_hdr *h = s->hdr;
	uint32_t w = atomic_load(&h->abort_word);
	int i;

	if (!w)
		return 0;
	for (i = 0; i < 1000 && !atomic_load(&h->abort_ready); i++)
		sleep_s(0.0001);
	return lb_comm_err_set(&s->err, LB_COMM_EPEER, (int)w - 1, "rank %d failed: %s", (int)w - 1,
			       atomic_load(&h->abort_ready) ? h->abort_reason : "unknown reason");
}

/* ---- segment layout ---- */

static struct shm_ctx *ctx_at(struct shm_seg *s, int id)
{
	return (struct shm_ctx *)(s->base + s->hdr->off_ctx) + id;
}

static _Atomic uint32_t *slot_owner(struct shm_seg *s, int slot)
{
	return (_Atomic uint32_t *)(s->base + s->hdr->off_owner) + slot;
}

static struct shm_chan *chan_at(struct shm_seg *s, int src, int dst)
{
	return (struct shm_chan *)(s->base + s->hdr->off_chan) + (size_t)src * s->world_size + dst;
}

static unsigned char *chanbuf_at(struct shm_seg *s, int src, int dst)
{
	return s->base + s->hdr->off_chanbuf +
	       ((size_t)src * s->world_size + dst) * s->hdr->chan_bytes;
}

static unsigned char *slot_half(struct shm_comm *sc, int member, int half)
{
	struct shm_seg *s = sc->seg;

	return s->base + s->hdr->off_slots + (size_t)sc->x->slot[member] * s->hdr->slot_bytes +
	       (size_t)half * (s->hdr->slot_bytes / 2);
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

struct layout {
	size_t off_ctx, off_owner, off_chan, off_chanbuf, off_slots, total;
	uint32_t nslots;
};

static void compute_layout(int size, struct layout *l)
{
	size_t o = align_up(sizeof(struct shm_hdr), 4096);

	l->nslots = (uint32_t)size * SHM_SLOTS_PER_RANK;
	l->off_ctx = o;
	o = align_up(o + sizeof(struct shm_ctx) * SHM_MAX_CTX, 64);
	l->off_owner = o;
	o = align_up(o + sizeof(uint32_t) * l->nslots, 64);
	l->off_chan = o;
	o = align_up(o + sizeof(struct shm_chan) * (size_t)size * size, 4096);
	l->off_chanbuf = o;
	o = align_up(o + (size_t)SHM_CHAN_BYTES * size * size, 4096);
	l->off_slots = o;
	o += (size_t)SHM_SLOT_BYTES * l->nslots;
	l->total = o;
}

static void wake_everyone(struct shm_seg *s)
{
	int i;

	for (i = 0; i < SHM_MAX_CTX; i++)
		if (atomic_load(&ctx_at(s, i)->state) == 2)
			futex_wake(&ctx_at(s, i)->bar);
	for (i = 0; i < s->world_size; i++)
		futex_wake(&s->hdr->doorbell[i]);
	futex_wake(&s->hdr->joined);
}

/* ---- waiting ---- */

static int barrier_missing(struct shm_comm *sc, uint32_t k);

/* 1 if world rank w is the peer of a queued send/recv that has not finished. */
static int p2p_involved(const struct shm_comm *sc, int w)
{
	int i;

	for (i = 0; i < sc->nops; i++)
		if (!sc->ops[i].finished && sc->ops[i].peer == w)
			return 1;
	return 0;
}

/* Members of sc that died or left: EPEER (posting the abort record so that every
 * other rank stops at once), else 0. p2p: only the peers of unfinished send/recv count
 * (the others may have finished and left). */
static int check_peers(struct shm_comm *sc, const char *what, int p2p)
{
	struct shm_seg *s = sc->seg;
	struct shm_ctx *x = sc->x;
	char reason[SHM_REASON_MAX];
	int i;

	for (i = 0; i < x->n; i++) {
		int w = x->members[i];
		pid_t pid = atomic_load(&s->hdr->pid[w]);

		if (w == s->world_rank || (p2p && !p2p_involved(sc, w)))
			continue;
		if (atomic_load(&s->hdr->departed[w])) {
			snprintf(reason, sizeof(reason), "left the communicator during %s", what);
			post_abort(s, w, reason);
			return check_abort(s);
		}
		if (!pid_alive(pid)) {
			snprintf(reason, sizeof(reason), "died (pid %d) during %s", (int)pid, what);
			post_abort(s, w, reason);
			return check_abort(s);
		}
	}
	if (!p2p && sc->ctx_id != 0 && atomic_load(&x->detached) > 0)
		return lb_comm_err_set(&s->err, LB_COMM_EPEER, -1,
				       "a member destroyed its %d-rank communicator during %s",
				       x->n, what);
	return 0;
}

/* Wait until (int32)(*word - target) >= 0 (mode 0: barriers) or *word != target (mode 1:
 * the doorbell of send/recv).
 * *deadline_io: the absolute deadline (CLOCK_MONOTONIC seconds), or < 0 to start one
 * timeout from the first sleep. Returns 0, or an error with the segment's error set; on
 * timeout who_missing() names the rank waited for (world numbering, -1 unknown). */
static int wait_word_(struct shm_comm *sc, _Atomic uint32_t *word, uint32_t target, int mode,
		      const char *what, int (*who_missing)(struct shm_comm *, uint32_t),
		      uint32_t who_arg, double *deadline_io)
{
	struct shm_seg *s = sc->seg;
	double deadline = *deadline_io, last_check = 0;
	int spins = 0, rc, extended = 0;

	for (;;) {
		uint32_t v = atomic_load(word);
		double t;

		if (mode == 0 ? (int32_t)(v - target) >= 0 : v != target)
			return 0;
		if (spins < SHM_SPIN) {
			spins++;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		if (spins < SHM_SPIN + SHM_YIELDS) {
			spins++;
			sched_yield();
			continue;
		}
		if ((rc = check_abort(s)))
			return rc;
		t = lb_now_s();
		if (deadline < 0)
			*deadline_io = deadline = t + s->timeout_s;
		if (last_check == 0)
			last_check = t;
		if (t - last_check >= LB_SHM_SLICE_S) {
			last_check = t;
			if ((rc = check_peers(sc, what, mode == 1)))
				return rc;
		}
		if (t >= deadline) {
			int m = who_missing ? who_missing(sc, who_arg) : -1;
			char reason[SHM_REASON_MAX];

			/* the rank waited for is itself waiting for another: give it one more
			 * timeout to name the rank that hangs (the chain's end) */
			if (m >= 0 && !extended && atomic_load(&s->hdr->waiting[m])) {
				extended = 1;
				*deadline_io = deadline = t + s->timeout_s;
				continue;
			}

			if (m >= 0) {
				const char *verb = who_missing == barrier_missing
						       ? "did not arrive"
						       : "sent or received nothing";

				snprintf(reason, sizeof(reason), "%s in %s within %.1f s (%s)",
					 verb, what, s->timeout_s,
					 who_missing == barrier_missing
					     ? "hung"
					     : "hung, or a send/recv deadlock");
				post_abort(s, m, reason);
				return lb_comm_err_set(&s->err, LB_COMM_ETIMEOUT, m,
						       "timeout after %.1f s in %s: rank %d %s",
						       s->timeout_s, what, m, verb);
			}
			return lb_comm_err_set(&s->err, LB_COMM_ETIMEOUT, -1,
					       "timeout after %.1f s in %s", s->timeout_s, what);
		}
		futex_wait(word, v, deadline - t < LB_SHM_SLICE_S ? deadline - t : LB_SHM_SLICE_S);
	}
}

/* wait_word_ with this rank marked as waiting (a peer that times out on it knows it is
 * not the one that hangs). */
static int wait_word(struct shm_comm *sc, _Atomic uint32_t *word, uint32_t target, int mode,
		     const char *what, int (*who_missing)(struct shm_comm *, uint32_t),
		     uint32_t who_arg, double *deadline_io)
{
	_Atomic uint32_t *me = &sc->seg->hdr->waiting[sc->seg->world_rank];
	int rc;

	atomic_store(me, 1);
	rc = wait_word_(sc, word, target, mode, what, who_missing, who_arg, deadline_io);
	atomic_store(me, 0);
	return rc;
}

static int barrier_missing(struct shm_comm *sc, uint32_t k)
{
	int i;

	for (i = 0; i < sc->x->n; i++)
		if ((int32_t)(atomic_load(&sc->x->arrived[i]) - k) < 0)
			return sc->x->members[i];
	return -1;
}

static int ctx_barrier(struct shm_comm *sc, const char *what)
{
	struct shm_ctx *x = sc->x;
	uint32_t k = ++sc->nbar;
	uint32_t target = k * (uint32_t)x->n;
	uint32_t v;

	atomic_store(&x->arrived[sc->c.rank], k);
	v = atomic_fetch_add(&x->bar, 1) + 1;
	if (v == target) {
		futex_wake(&x->bar);
		return 0;
	}
	double deadline = -1;

	return wait_word(sc, &x->bar, target, 0, what, barrier_missing, k, &deadline);
}

/* ---- reductions ---- */

static float bf16_to_f32(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffU) > 0x7f800000U)
		return 0x7fc0;		 /* NaN */
	u += 0x7fffU + ((u >> 16) & 1U); /* round to nearest even */
	return (uint16_t)(u >> 16);
}

/* IEEE binary16: subnormals, infinities and NaN kept. */
static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000U) << 16, exp = (h >> 10) & 0x1fU, man = h & 0x3ffU;
	uint32_t u;
	float f;

	if (exp == 0 && man == 0) {
		u = sign;
	} else if (exp == 0) { /* subnormal: normalise */
		exp = 127 - 15 + 1;
		while (!(man & 0x400U)) {
			man <<= 1;
			exp--;
		}
		u = sign | (exp << 23) | ((man & 0x3ffU) << 13);
	} else if (exp == 31) {
		u = sign | 0x7f800000U | (man << 13);
	} else {
		u = sign | ((exp + 127 - 15) << 23) | (man << 13);
	}
	memcpy(&f, &u, 4);
	return f;
}

/* Round to nearest even; overflow gives infinity, NaN a quiet NaN. */
static uint16_t f32_to_f16(float f)
{
	uint32_t u, a, sign;

	memcpy(&u, &f, 4);
	sign = (u >> 16) & 0x8000U;
	a = u & 0x7fffffffU;
	if (a > 0x7f800000U)
		return (uint16_t)(sign | 0x7e00U);
	if (a >= 0x477ff000U) /* >= 65520: rounds to infinity */
		return (uint16_t)(sign | 0x7c00U);
	if (a < 0x38800000U) { /* below 2^-14: a multiple of 2^-24, exact after scaling */
		float v;
		uint32_t r;
		float frac;

		memcpy(&v, &a, 4);
		v *= 16777216.0f;
		r = (uint32_t)v;
		frac = v - (float)r;
		if (frac > 0.5f || (frac == 0.5f && (r & 1U)))
			r++;
		return (uint16_t)(sign | r); /* r == 0x400 is the smallest normal */
	}
	a += 0xc8000fffU + ((a >> 13) & 1U); /* exponent -112, rounding bias */
	return (uint16_t)(sign | (a >> 13));
}

static int reducible(enum lb_dtype t, enum lb_redop op)
{
	return (t == LB_F32 || t == LB_I32 || t == LB_BF16 || t == LB_F16) &&
	       (op == LB_SUM || op == LB_MAX || op == LB_AVG);
}

static float load_f(enum lb_dtype t, const unsigned char *p, size_t i)
{
	if (t == LB_F32)
		return ((const float *)p)[i];
	if (t == LB_BF16)
		return bf16_to_f32(((const uint16_t *)p)[i]);
	return f16_to_f32(((const uint16_t *)p)[i]);
}

static void store_f(enum lb_dtype t, void *p, size_t i, float v)
{
	if (t == LB_F32)
		((float *)p)[i] = v;
	else if (t == LB_BF16)
		((uint16_t *)p)[i] = f32_to_bf16(v);
	else
		((uint16_t *)p)[i] = f32_to_f16(v);
}

#define RBLK 1024

/* dst[i] = op over k = 0..n-1, in order, of src[k][i]. dst may be one of the src. */
static void reduce_into(void *dst, unsigned char *const *src, int n, size_t count, enum lb_dtype t,
			enum lb_redop op)
{
	size_t b, i;
	int k;

	if (t == LB_F32 && op != LB_MAX) { /* the common case, without conversions */
		float acc[RBLK];

		for (b = 0; b < count; b += RBLK) {
			size_t m = count - b < RBLK ? count - b : RBLK;
			const float *s0 = (const float *)src[0] + b;

			for (i = 0; i < m; i++)
				acc[i] = s0[i];
			for (k = 1; k < n; k++) {
				const float *sk = (const float *)src[k] + b;

				for (i = 0; i < m; i++)
					acc[i] += sk[i];
			}
			if (op == LB_AVG)
				for (i = 0; i < m; i++)
					acc[i] /= (float)n;
			memcpy((float *)dst + b, acc, m * sizeof(float));
		}
		return;
	}
	for (b = 0; b < count; b += RBLK) {
		size_t m = count - b < RBLK ? count - b : RBLK;

		if (t != LB_I32) { /* f32 max, bf16, f16: through fp32 */
			float acc[RBLK], v[RBLK];

			for (i = 0; i < m; i++)
				acc[i] = load_f(t, src[0], b + i);
			for (k = 1; k < n; k++) {
				for (i = 0; i < m; i++)
					v[i] = load_f(t, src[k], b + i);
				if (op == LB_MAX) {
					for (i = 0; i < m; i++)
						acc[i] = v[i] > acc[i] ? v[i] : acc[i];
				} else {
					for (i = 0; i < m; i++)
						acc[i] += v[i];
				}
			}
			if (op == LB_AVG)
				for (i = 0; i < m; i++)
					acc[i] /= (float)n;
			for (i = 0; i < m; i++)
				store_f(t, dst, b + i, acc[i]);
		} else { /* LB_I32 */
			int64_t acc[RBLK];

			for (i = 0; i < m; i++)
				acc[i] = ((const int32_t *)src[0])[b + i];
			for (k = 1; k < n; k++)
				for (i = 0; i < m; i++) {
					int64_t v = ((const int32_t *)src[k])[b + i];

					if (op == LB_MAX)
						acc[i] = v > acc[i] ? v : acc[i];
					else
						acc[i] += v;
				}
			for (i = 0; i < m; i++) {
				int64_t r = op == LB_AVG ? acc[i] / n : acc[i];

				((int32_t *)dst)[b + i] = (int32_t)(uint32_t)(uint64_t)r;
			}
		}
	}
}

/* ---- collectives ---- */

static struct shm_comm *SC(struct lb_comm *c)
{
	return (struct shm_comm *)c;
}

/* Every call's first checks: no abort posted, a known dtype. */
static int call_ok(struct shm_comm *sc, const char *what, enum lb_dtype t)
{
	int rc = check_abort(sc->seg);

	if (rc || lb_dtype_size(t) != 0)
		return rc;
	return lb_comm_err_set(&sc->seg->err, LB_COMM_EFAIL, -1, "%s: unknown dtype %d", what,
			       (int)t);
}

/* A collective's first checks: call_ok, and not inside a group. */
static int enter(struct shm_comm *sc, const char *what, enum lb_dtype t)
{
	int rc = call_ok(sc, what, t);

	if (rc)
		return rc;
	if (sc->in_group)
		return lb_comm_err_set(&sc->seg->err, LB_COMM_EFAIL, -1,
				       "%s inside group_start/group_end: only send and recv may be "
				       "grouped",
				       what);
	return 0;
}

/* enter() for a reduction: also the type and operation it can reduce. */
static int enter_reduce(struct shm_comm *sc, const char *what, enum lb_dtype t, enum lb_redop op)
{
	int rc = enter(sc, what, t);

	if (rc == 0 && !reducible(t, op))
		return lb_comm_err_set(
		    &sc->seg->err, LB_COMM_EFAIL, -1,
		    "%s: %s with op %d is not supported by the shm communicator (use "
		    "f32, bf16, f16 or i32 with sum, max or avg)",
		    what, lb_dtype_name(t), (int)op);
	return rc;
}

/* One round of a collective: elements [o, o + len) of its count, staged in half h of the
 * slots (the halves alternate between rounds). */
struct round {
	size_t o, len;
	int h;
};

/* Elements of esz bytes that half a slot holds when it is cut in parts. */
static size_t round_cap(const struct shm_comm *sc, size_t esz, int parts)
{
	return sc->seg->hdr->slot_bytes / 2 / esz / (size_t)parts;
}

/* Moves rd (zeroed before the first round) to the next round of a collective over count
 * elements, cap a round; 0 when the collective is done. */
static int round_next(struct shm_comm *sc, struct round *rd, size_t count, size_t cap)
{
	rd->o += rd->len;
	if (rd->o >= count)
		return 0;
	rd->h = (int)(sc->round++ & 1);
	rd->len = count - rd->o < cap ? count - rd->o : cap;
	return 1;
}

/* dst := the reduction, in member order, of len elements at byte offset off of every
 * member's half h (dst may be one of them). */
static void reduce_halves(struct shm_comm *sc, int h, size_t off, void *dst, size_t len,
			  enum lb_dtype t, enum lb_redop op)
{
	unsigned char *src[MAXR];

	for (int k = 0; k < sc->c.size; k++)
		src[k] = slot_half(sc, k, h) + off;
	reduce_into(dst, src, sc->c.size, len, t, op);
}

/* all_reduce (scatter 0) or reduce_scatter (scatter 1); what: its name in messages. A
 * round stages its piece of in (reduce_scatter: its piece of each of the n parts of in, each
 * in its own n-th of the half); then reduce_scatter reduces part r into out, and all_reduce
 * reduces rank r's n-th of the piece in place in its slot, which every rank gathers. */
static int shm_reduce(struct lb_comm *c, const char *what, const void *in, void *out, size_t count,
		      enum lb_dtype t, enum lb_redop op, int scatter)
{
	struct shm_comm *sc = SC(c);
	size_t esz = lb_dtype_size(t);
	int n = c->size, r = c->rank, rc, k;
	struct round rd = {0};

	if ((rc = enter_reduce(sc, what, t, op)))
		return rc;
	while (round_next(sc, &rd, count, round_cap(sc, esz, scatter ? n : 1))) {
		unsigned char *mine = slot_half(sc, r, rd.h);
		size_t L = rd.len, lo = L * (size_t)r / (size_t)n,
		       hi = L * (size_t)(r + 1) / (size_t)n;

		if (scatter)
			for (k = 0; k < n; k++)
				memcpy(mine + (size_t)k * L * esz,
				       (const unsigned char *)in + ((size_t)k * count + rd.o) * esz,
				       L * esz);
		else
			memcpy(mine, (const unsigned char *)in + rd.o * esz, L * esz);
		if ((rc = ctx_barrier(sc, what)))
			return rc;
		if (scatter) {
			reduce_halves(sc, rd.h, (size_t)r * L * esz,
				      (unsigned char *)out + rd.o * esz, L, t, op);
			continue;
		}
		if (hi > lo)
			reduce_halves(sc, rd.h, lo * esz, mine + lo * esz, hi - lo, t, op);
		if ((rc = ctx_barrier(sc, what)))
			return rc;
		for (k = 0; k < n; k++) {
			size_t klo = L * (size_t)k / (size_t)n,
			       khi = L * (size_t)(k + 1) / (size_t)n;

			memcpy((unsigned char *)out + (rd.o + klo) * esz,
			       slot_half(sc, k, rd.h) + klo * esz, (khi - klo) * esz);
		}
	}
	return 0;
}

static int shm_all_reduce(struct lb_comm *c, const void *in, void *out, size_t count,
			  enum lb_dtype t, enum lb_redop op, void *stream)
{
	return shm_reduce(c, "all_reduce", in, out, count, t, op, 0);
}

static int shm_reduce_scatter(struct lb_comm *c, const void *in, void *out, size_t count,
			      enum lb_dtype t, enum lb_redop op, void *stream)
{
	return shm_reduce(c, "reduce_scatter", in, out, count, t, op, 1);
}

static int shm_all_gather(struct lb_comm *c, const void *in, void *out, size_t count,
			  enum lb_dtype t, void *stream)
{
	struct shm_comm *sc = SC(c);
	size_t esz = lb_dtype_size(t);
	int n = c->size, r = c->rank, rc, k;
	struct round rd = {0};

	if ((rc = enter(sc, "all_gather", t)))
		return rc;
	while (round_next(sc, &rd, count, round_cap(sc, esz, 1))) {
		const unsigned char *mine = (const unsigned char *)in + rd.o * esz;

		memcpy(slot_half(sc, r, rd.h), mine, rd.len * esz);
		if ((rc = ctx_barrier(sc, "all_gather")))
			return rc;
		for (k = 0; k < n; k++) {
			unsigned char *dst =
			    (unsigned char *)out + ((size_t)k * count + rd.o) * esz;

			if (k != r || mine != dst) /* in place: rank r's part is there already */
				memcpy(dst, slot_half(sc, k, rd.h), rd.len * esz);
		}
	}
	return 0;
}

static int shm_broadcast(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int root,
			 void *stream)
{
	struct shm_comm *sc = SC(c);
	size_t esz = lb_dtype_size(t);
	int r = c->rank, rc;
	struct round rd = {0};

	if ((rc = enter(sc, "broadcast", t)))
		return rc;
	if (root < 0 || root >= c->size)
		return lb_comm_err_set(
		    &sc->seg->err, LB_COMM_EFAIL, -1,
		    "broadcast: root %d is not a rank of this %d-rank communicator", root, c->size);
	while (round_next(sc, &rd, count, round_cap(sc, esz, 1))) {
		unsigned char *part = (unsigned char *)buf + rd.o * esz;

		if (r == root)
			memcpy(slot_half(sc, root, rd.h), part, rd.len * esz);
		if ((rc = ctx_barrier(sc, "broadcast")))
			return rc;
		if (r != root)
			memcpy(part, slot_half(sc, root, rd.h), rd.len * esz);
	}
	return 0;
}

static int shm_barrier(struct lb_comm *c)
{
	struct shm_comm *sc = SC(c);
	int rc = enter(sc, "barrier", LB_F32);

	return rc ? rc : ctx_barrier(sc, "barrier");
}

/* ---- send / recv ---- */

/* Move bytes of op through its channel as far as possible; returns bytes moved. */
static uint64_t op_progress(struct shm_comm *sc, struct p2p_op *op)
{
	struct shm_seg *s = sc->seg;
	uint64_t total = 8 + op->len, cap = s->hdr->chan_bytes, moved = 0;
	int src = op->dir == OP_SEND ? s->world_rank : op->peer;
	int dst = op->dir == OP_SEND ? op->peer : s->world_rank;
	struct shm_chan *ch = chan_at(s, src, dst);
	unsigned char *ring = chanbuf_at(s, src, dst);

	while (op->done < total) {
		uint64_t head = atomic_load(&ch->head), tail = atomic_load(&ch->tail);
		uint64_t pos = op->dir == OP_SEND ? head : tail;
		uint64_t avail = op->dir == OP_SEND ? cap - (head - tail) : head - tail;
		uint64_t n = total - op->done, ring_off = pos % cap, i;

		if (op->done < 8) /* the size header travels on its own */
			n = 8 - op->done;
		if (n > avail)
			n = avail;
		if (n > cap - ring_off)
			n = cap - ring_off;
		if (n == 0)
			break;
		for (i = 0; i < n;) { /* header bytes, then payload */
			uint64_t at = op->done + i, m;
			unsigned char *mem;

			if (at < 8) {
				mem = (unsigned char *)&op->hdr + at;
				m = 8 - at;
			} else {
				mem = op->buf + (at - 8);
				m = total - at;
			}
			if (m > n - i)
				m = n - i;
			if (op->dir == OP_SEND)
				memcpy(ring + ring_off + i, mem, m);
			else
				memcpy(mem, ring + ring_off + i, m);
			i += m;
		}
		op->done += n;
		moved += n;
		if (op->dir == OP_SEND)
			atomic_store(&ch->head, head + n);
		else
			atomic_store(&ch->tail, tail + n);
		if (op->dir == OP_RECV && op->done == 8 && op->hdr != op->len)
			break; /* size mismatch: reported by the caller */
	}
	if (moved) {
		atomic_fetch_add(&s->hdr->doorbell[op->peer], 1);
		futex_wake(&s->hdr->doorbell[op->peer]);
	}
	return moved;
}

static int p2p_missing(struct shm_comm *sc, uint32_t unused)
{
	int i;

	for (i = 0; i < sc->nops; i++)
		if (!sc->ops[i].finished)
			return sc->ops[i].peer;
	return -1;
}

/* Complete every queued op; ops on one channel complete in the order queued. */
static int run_ops(struct shm_comm *sc, const char *what)
{
	struct shm_seg *s = sc->seg;
	double deadline = -1;
	int rc = 0, i, j;

	for (;;) {
		uint32_t bell = atomic_load(&s->hdr->doorbell[s->world_rank]);
		int pending = 0;
		uint64_t moved = 0;

		for (i = 0; i < sc->nops; i++) {
			struct p2p_op *op = &sc->ops[i];

			if (op->finished)
				continue;
			for (j = 0; j < i; j++)
				if (!sc->ops[j].finished && sc->ops[j].dir == op->dir &&
				    sc->ops[j].peer == op->peer)
					break;
			if (j < i) {
				pending++;
				continue;
			}
			moved += op_progress(sc, op);
			if (op->dir == OP_RECV && op->done >= 8 && op->hdr != op->len) {
				rc = lb_comm_err_set(
				    &s->err, LB_COMM_EFAIL, op->peer,
				    "%s: rank %d sent %llu bytes, rank %d expected %llu "
				    "(mismatched send/recv sizes or order)",
				    what, op->peer, (unsigned long long)op->hdr, s->world_rank,
				    (unsigned long long)op->len);
				goto out;
			}
			if (op->done == 8 + op->len)
				op->finished = 1;
			else
				pending++;
		}
		if (!pending)
			break;
		if (moved) {
			deadline = -1; /* the timeout bounds a wait without progress */
			continue;
		}
		rc = wait_word(sc, &s->hdr->doorbell[s->world_rank], bell, 1, what, p2p_missing, 0,
			       &deadline);
		if (rc)
			goto out;
	}
out:
	sc->nops = 0;
	return rc;
}

static int queue_op(struct shm_comm *sc, int dir, const void *buf, size_t count, enum lb_dtype t,
		    int peer)
{
	const char *what = dir == OP_SEND ? "send" : "recv";
	struct p2p_op *op;
	int rc = call_ok(sc, what, t);

	if (rc)
		return rc;
	if (peer < 0 || peer >= sc->c.size || peer == sc->c.rank)
		return lb_comm_err_set(
		    &sc->seg->err, LB_COMM_EFAIL, -1,
		    "%s: peer %d is not another rank of this %d-rank communicator", what, peer,
		    sc->c.size);
	if (sc->nops == sc->capops) {
		int cap = sc->capops ? sc->capops * 2 : 8;
		struct p2p_op *p = realloc(sc->ops, sizeof(*p) * (size_t)cap);

		if (!p)
			return lb_comm_err_set(&sc->seg->err, LB_COMM_EFAIL, -1,
					       "%s: out of memory", what);
		sc->ops = p;
		sc->capops = cap;
	}
	op = &sc->ops[sc->nops++];
	memset(op, 0, sizeof(*op));
	op->dir = dir;
	op->peer = sc->x->members[peer];
	op->buf = (unsigned char *)buf;
	op->len = (uint64_t)count * lb_dtype_size(t);
	op->hdr = dir == OP_SEND ? op->len : 0;
	return sc->in_group ? 0 : run_ops(sc, what);
}

static int shm_send(struct lb_comm *c, const void *buf, size_t count, enum lb_dtype t, int peer,
		    void *stream)
{
	return queue_op(SC(c), OP_SEND, buf, count, t, peer);
}

static int shm_recv(struct lb_comm *c, void *buf, size_t count, enum lb_dtype t, int peer,
		    void *stream)
{
	return queue_op(SC(c), OP_RECV, buf, count, t, peer);
}

/* Open (open 1) a group of sends and receives, or close it (0), which runs them. */
static int shm_group(struct lb_comm *c, int open)
{
	struct shm_comm *sc = SC(c);

	if (sc->in_group == open)
		return lb_comm_err_set(
		    &sc->seg->err, LB_COMM_EFAIL, -1, "%s",
		    open ? "group_start: a group is already open (groups do not nest)"
			 : "group_end without group_start");
	sc->in_group = open;
	if (open)
		sc->nops = 0;
	return open ? 0 : run_ops(sc, "group_end");
}

static int shm_group_start(struct lb_comm *c)
{
	return shm_group(c, 1);
}

static int shm_group_end(struct lb_comm *c)
{
	return shm_group(c, 0);
}

/* ---- split, destroy ---- */

static struct shm_comm *comm_new(struct shm_seg *s, int ctx_id, int rank, int size)
{
	struct shm_comm *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	sc->c.ops = &shm_ops;
	sc->c.rank = rank;
	sc->c.size = size;
	sc->c.impl = sc;
	sc->seg = s;
	sc->ctx_id = ctx_id;
	sc->x = ctx_at(s, ctx_id);
	s->refs++;
	return sc;
}

/* Claim a context and slots for the given world ranks; the context id, or -1. */
static int ctx_alloc(struct shm_seg *s, const int *members, int n)
{
	int id, i, got = 0, sl;

	for (id = 1; id < SHM_MAX_CTX; id++) {
		uint32_t zero = 0;

		if (atomic_compare_exchange_strong(&ctx_at(s, id)->state, &zero, 1))
			break;
	}
	if (id == SHM_MAX_CTX)
		return -1;
	struct shm_ctx *x = ctx_at(s, id);
	for (sl = 0; sl < (int)s->hdr->nslots && got < n; sl++) {
		uint32_t zero = 0;

		if (atomic_compare_exchange_strong(slot_owner(s, sl), &zero, (uint32_t)id + 1))
			x->slot[got++] = sl;
	}
	if (got < n) {
		for (i = 0; i < got; i++)
			atomic_store(slot_owner(s, x->slot[i]), 0);
		atomic_store(&x->state, 0);
		return -1;
	}
	x->n = n;
	for (i = 0; i < n; i++) {
		x->members[i] = members[i];
		atomic_store(&x->arrived[i], 0);
	}
	atomic_store(&x->bar, 0);
	atomic_store(&x->detached, 0);
	atomic_store(&x->state, 2);
	return id;
}

static int shm_split(struct lb_comm *c, int color, int key, struct lb_comm **out)
{
	struct shm_comm *sc = SC(c), *nc;
	int n = c->size, i, j, rc, leader = -1, m = 0, myrank = 0, id = -1;
	int32_t mine[2] = {color, key}, *all, *ids;
	int order[MAXR], wr[MAXR];

	*out = NULL;
	all = malloc(sizeof(int32_t) * 2 * (size_t)n);
	ids = malloc(sizeof(int32_t) * (size_t)n);
	if (!all || !ids) {
		free(all);
		free(ids);
		return lb_comm_err_set(&sc->seg->err, LB_COMM_EFAIL, -1, "split: out of memory");
	}
	if ((rc = shm_all_gather(c, mine, all, 2, LB_I32, NULL)))
		goto out;
	/* my group, ordered by (key, parent rank) */
	for (j = 0; j < n && color >= 0; j++) {
		if (all[2 * j] != color)
			continue;
		for (i = m; i > 0 && all[2 * order[i - 1] + 1] > all[2 * j + 1]; i--)
			order[i] = order[i - 1];
		order[i] = j;
		m++;
	}
	for (i = 0; i < m; i++) {
		wr[i] = sc->x->members[order[i]];
		if (order[i] == c->rank)
			myrank = i;
		if (leader < 0 || order[i] < leader)
			leader = order[i];
	}
	int32_t myid = -1; /* the leader claims the context; -2: none free */
	if (color >= 0 && leader == c->rank) {
		myid = ctx_alloc(sc->seg, wr, m);
		if (myid < 0)
			myid = -2;
	}
	if ((rc = shm_all_gather(c, &myid, ids, 1, LB_I32, NULL)))
		goto out;
	if (color < 0)
		goto out;
	id = ids[leader];
	if (id < 0 || id >= SHM_MAX_CTX) {
		rc = lb_comm_err_set(
		    &sc->seg->err, LB_COMM_EFAIL, -1,
		    "split: no free communicator in the shm segment (at most %d live, "
		    "%d staging slots); destroy unused sub-communicators",
		    SHM_MAX_CTX - 1, (int)sc->seg->hdr->nslots);
		goto out;
	}
	nc = comm_new(sc->seg, id, myrank, m);
	if (!nc) {
		rc = lb_comm_err_set(&sc->seg->err, LB_COMM_EFAIL, -1, "split: out of memory");
		goto out;
	}
	*out = &nc->c;
out:
	free(all);
	free(ids);
	return rc;
}

static void seg_put(struct shm_seg *s)
{
	if (--s->refs > 0)
		return;
	munmap(s->base, s->bytes);
	free(s);
}

static void shm_destroy(struct lb_comm *c)
{
	struct shm_comm *sc;
	struct shm_seg *s;

	if (!c)
		return;
	sc = SC(c);
	s = sc->seg;
	if (sc->ctx_id == 0) {
		atomic_store(&s->hdr->departed[s->world_rank], 1);
		if (s->world_rank == 0)
			shm_unlink(s->name);
	} else {
		struct shm_ctx *x = sc->x;

		if ((int)atomic_fetch_add(&x->detached, 1) + 1 == x->n) {
			int i;

			for (i = 0; i < x->n; i++)
				atomic_store(slot_owner(s, x->slot[i]), 0);
			atomic_store(&x->state, 0);
		}
	}
	free(sc->ops);
	free(sc);
	seg_put(s);
}

static const struct lb_comm_ops shm_ops = {
    .name = "shm",
    LB_COMM_OPS(shm),
    .group_start = shm_group_start,
    .group_end = shm_group_end,
};

/* ---- create ---- */

static int name_ok(const char *name)
{
	size_t len;

	if (!name || name[0] != '/')
		return 0;
	len = strlen(name);
	return len >= 2 && len <= 201 && !strchr(name + 1, '/');
}

int lb_comm_shm_create(const char *name, int rank, int size, double timeout_s, struct lb_comm **out,
		       char *err, size_t errlen)
{
	struct layout l;
	struct shm_seg *s = NULL;
	struct shm_hdr *h;
	struct shm_comm *sc;
	unsigned char *base = MAP_FAILED;
	double deadline, t;
	int fd = -1, i;

	*out = NULL;
	if (!name_ok(name)) {
		snprintf(err, errlen,
			 "shm name '%s' is not valid: it must be '/' and 1 to 200 characters "
			 "without '/'",
			 name ? name : "(null)");
		return LB_COMM_EFAIL;
	}
	if (size < 1 || size > LB_SHM_MAX_RANKS || rank < 0 || rank >= size) {
		snprintf(err, errlen,
			 "shm communicator '%s': rank %d of %d is out of range (1 to %d ranks)",
			 name, rank, size, LB_SHM_MAX_RANKS);
		return LB_COMM_EFAIL;
	}
	if (!(timeout_s > 0) || timeout_s > 1e6) {
		snprintf(err, errlen, "shm communicator '%s': timeout %g s must be in (0, 1e6]",
			 name, timeout_s);
		return LB_COMM_EFAIL;
	}
	compute_layout(size, &l);
	deadline = lb_now_s() + timeout_s;
	if (rank == 0) {
		fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd < 0 && errno == EEXIST) { /* stale segment of a crashed run */
			shm_unlink(name);
			fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
		}
		if (fd < 0) {
			snprintf(err, errlen, "shm_open '%s': %s", name, strerror(errno));
			return LB_COMM_EFAIL;
		}
		if (ftruncate(fd, (off_t)l.total) != 0) {
			snprintf(err, errlen, "ftruncate '%s' to %zu bytes: %s (is /dev/shm full?)",
				 name, l.total, strerror(errno));
			goto fail;
		}
		base = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (base == MAP_FAILED) {
			snprintf(err, errlen, "mmap '%s': %s", name, strerror(errno));
			goto fail;
		}
		close(fd);
		fd = -1;
		h = (struct shm_hdr *)base;
		h->version = SHM_VERSION;
		h->size = size;
		h->slot_bytes = SHM_SLOT_BYTES;
		h->chan_bytes = SHM_CHAN_BYTES;
		h->nslots = l.nslots;
		h->total_bytes = l.total;
		h->off_ctx = l.off_ctx;
		h->off_owner = l.off_owner;
		h->off_chan = l.off_chan;
		h->off_chanbuf = l.off_chanbuf;
		h->off_slots = l.off_slots;
		atomic_store(&h->pid[0], (int32_t)getpid());
		{ /* the world: context 0, slots 0..size-1 (the mapping is zeroed) */
			struct shm_ctx *x = (struct shm_ctx *)(base + l.off_ctx);

			x->n = size;
			for (i = 0; i < size; i++) {
				x->members[i] = i;
				x->slot[i] = i;
				atomic_store((_Atomic uint32_t *)(base + l.off_owner) + i, 1);
			}
			atomic_store(&x->state, 2);
		}
		atomic_store(&h->magic, SHM_MAGIC);
	} else {
		for (;;) {
			struct stat st;

			if (lb_now_s() > deadline) {
				snprintf(
				    err, errlen,
				    "rendezvous '%s': rank 0 did not create the segment within "
				    "%.1f s",
				    name, timeout_s);
				return LB_COMM_ETIMEOUT;
			}
			fd = shm_open(name, O_RDWR, 0600);
			if (fd < 0) {
				if (errno != ENOENT) {
					snprintf(err, errlen, "shm_open '%s': %s", name,
						 strerror(errno));
					return LB_COMM_EFAIL;
				}
				sleep_s(0.002);
				continue;
			}
			if (fstat(fd, &st) != 0 || (size_t)st.st_size < l.total) {
				close(fd);
				sleep_s(0.002);
				continue;
			}
			base = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			close(fd);
			fd = -1;
			if (base == MAP_FAILED) {
				snprintf(err, errlen, "mmap '%s': %s", name, strerror(errno));
				return LB_COMM_EFAIL;
			}
			h = (struct shm_hdr *)base;
			if (atomic_load(&h->magic) == SHM_MAGIC &&
			    pid_alive(atomic_load(&h->pid[0])) && !atomic_load(&h->departed[0])) {
				if (h->size == size && h->version == SHM_VERSION &&
				    h->total_bytes == l.total)
					break;
				snprintf(
				    err, errlen,
				    "shm segment '%s' was created for %d ranks, rank %d expects "
				    "%d (check that every rank was started with the same size)",
				    name, h->size, rank, size);
				munmap(base, l.total);
				return LB_COMM_EFAIL;
			}
			munmap(base, l.total); /* not ready yet, or stale */
			base = MAP_FAILED;
			sleep_s(0.002);
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "shm communicator: out of memory");
		goto fail;
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->world_rank = rank;
	s->world_size = size;
	s->timeout_s = timeout_s;
	s->base = base;
	s->bytes = l.total;
	s->hdr = h;
	s->err.rank = -1;
	atomic_store(&h->pid[rank], (int32_t)getpid());
	atomic_fetch_add(&h->joined, 1);
	futex_wake(&h->joined);
	while ((int)atomic_load(&h->joined) < size) {
		uint32_t v = atomic_load(&h->joined);

		if (check_abort(s)) {
			snprintf(err, errlen, "rendezvous '%s': %s", name, s->err.msg);
			goto fail_peer;
		}
		t = lb_now_s();
		if (t > deadline) {
			snprintf(
			    err, errlen,
			    "rendezvous '%s': %u of %d ranks arrived within %.1f s (check that "
			    "every rank was started with the same name and size)",
			    name, v, size, timeout_s);
			free(s);
			munmap(base, l.total);
			if (rank == 0)
				shm_unlink(name);
			return LB_COMM_ETIMEOUT;
		}
		futex_wait(&h->joined, v, deadline - t < 0.05 ? deadline - t : 0.05);
	}
	sc = comm_new(s, 0, rank, size);
	if (!sc) {
		snprintf(err, errlen, "shm communicator: out of memory");
		goto fail;
	}
	*out = &sc->c;
	return 0;
fail_peer:
	free(s);
	munmap(base, l.total);
	return LB_COMM_EPEER;
fail:
	free(s);
	if (base != MAP_FAILED)
		munmap(base, l.total);
	if (fd >= 0)
		close(fd);
	if (rank == 0)
		shm_unlink(name);
	return LB_COMM_EFAIL;
}

/* ---- queries ---- */

int lb_comm_is_shm(const struct lb_comm *c)
{
	return c && c->ops == &shm_ops;
}

void lb_comm_shm_abort(struct lb_comm *c, const char *reason)
{
	struct shm_seg *s;

	if (!lb_comm_is_shm(c))
		return;
	s = SC(c)->seg;
	post_abort(s, s->world_rank, reason);
}

int lb_comm_shm_error(const struct lb_comm *c, int *rank, char *msg, size_t len)
{
	struct shm_seg *s;
	int code;

	if (rank)
		*rank = -1;
	if (msg && len)
		msg[0] = 0;
	if (!lb_comm_is_shm(c))
		return 0;
	s = ((const struct shm_comm *)c)->seg;
	code = s->err.code;
	if (!code && atomic_load(&s->hdr->abort_word))
		code = check_abort(s);
	if (!code)
		return 0;
	lb_comm_err_get(&s->err, rank, msg, len);
	return code;
}

void lb_comm_shm_set_blocked(struct lb_comm *c, int on)
{
	struct shm_seg *s;

	if (!lb_comm_is_shm(c))
		return;
	s = SC(c)->seg;
	atomic_store(&s->hdr->dev_blocked[s->world_rank], on ? 1U : 0U);
}

int lb_comm_shm_blame(struct lb_comm *c, char *msg, size_t len)
{
	struct shm_seg *s;
	struct shm_hdr *h;

	if (msg && len)
		msg[0] = 0;
	if (!lb_comm_is_shm(c))
		return -1;
	s = SC(c)->seg;
	h = s->hdr;
	for (int r = 0; r < s->world_size; r++) {
		pid_t pid = (pid_t)atomic_load(&h->pid[r]);

		if (r != s->world_rank && pid > 0 && !pid_alive(pid)) {
			if (msg && len)
				snprintf(msg, len, "rank %d died (pid %d)", r, (int)pid);
			return r;
		}
	}
	for (int r = 0; r < s->world_size; r++) {
		if (r == s->world_rank || atomic_load(&h->departed[r]))
			continue;
		if (!atomic_load(&h->dev_blocked[r]) && !atomic_load(&h->waiting[r])) {
			if (msg && len)
				snprintf(msg, len, "rank %d is alive but not in the collective", r);
			return r;
		}
	}
	return -1;
}
