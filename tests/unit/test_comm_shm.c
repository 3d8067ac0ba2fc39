/*
 * Unit tests of the shared-memory communicator, with real processes (fork inside the
 * test): every collective for sizes 1, 7, 1000 and 10^6 (larger than the staging area)
 * on 2, 3, 4 and 8 ranks against a serial computation in rank order, with bitwise
 * equality across ranks; sub-communicators of a tp=2 x dp=2 x pp=2 layout used
 * concurrently; grouped send/recv in a ring both ways (deadlocks if sends block); and the
 * failure paths: a rank that exits, a rank that hangs, an abort with a reason, a
 * rendezvous that misses a rank, a stale segment of a crashed run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/comm/comm_shm.h"
#include "harness/comm/groups.h"
#include "harness/launch.h"

#define MAXP 8

/* Written by the children, read by the test. */
struct shared {
	uint64_t hash[MAXP][64]; /* per rank, per check: FNV-1a of the result bytes */
	int code[MAXP];		 /* a comm return code */
	int err_rank[MAXP];
	double elapsed[MAXP]; /* seconds */
	char msg[MAXP][256];
};
static struct shared *sh;
static int name_counter;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ULL;

	while (n--) {
		h ^= *b++;
		h *= 1099511628211ULL;
	}
	return h;
}

typedef int (*rank_fn)(int rank, int size, const char *name, void *arg);

/*
 * Fork n ranks running fn; wait for all (killing any left after limit_s). codes[r]:
 * exit status, or 128 + signal. Returns the number of ranks that did not exit 0.
 */
static int spawn(int n, rank_fn fn, void *arg, int *codes, double limit_s, char *name_out)
{
	pid_t pids[MAXP];
	char name[64];
	double t0 = now_s();
	int r, live = n, bad = 0;

	snprintf(name, sizeof(name), "/lbtest-%d-%d", (int)getpid(), name_counter++);
	if (name_out)
		strcpy(name_out, name);
	fflush(NULL);
	for (r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			int code = fn(r, n, name, arg);

			fflush(NULL);
			_exit(code);
		}
	}
	while (live > 0) {
		for (r = 0; r < n; r++) {
			int ws;

			if (pids[r] <= 0 || waitpid(pids[r], &ws, WNOHANG) != pids[r])
				continue;
			codes[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
			if (codes[r] != 0)
				bad++;
			pids[r] = 0;
			live--;
		}
		if (live > 0 && now_s() - t0 > limit_s) {
			for (r = 0; r < n; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGKILL);
		}
		usleep(2000);
	}
	shm_unlink(name);
	return bad;
}

static struct lb_comm *join(int rank, int size, const char *name, double timeout)
{
	struct lb_comm *c = NULL;
	char err[256];
	int rc = lb_comm_shm_create(name, rank, size, timeout, &c, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "rank %d: %s\n", rank, err);
		return NULL;
	}
	return c;
}

/* Input of rank r, element i: values with varied magnitudes, so that the order of the
 * additions shows in the low bits. */
static float val(int r, size_t i)
{
	uint32_t h = (uint32_t)i * 2654435761u ^ ((uint32_t)r * 40503u + 17u);

	h ^= h >> 13;
	h *= 0x5bd1e995u;
	h ^= h >> 15;
	return (float)((int)(h % 20001u) - 10000) * 0.37f / (float)(1u + (h >> 28));
}

static int ival(int r, size_t i)
{
	return (int)((i * 7919u + (size_t)r * 104729u) % 200001u) - 100000;
}

static int report(int rank, const char *what, size_t count, size_t i, double got, double want)
{
	fprintf(stderr, "rank %d: %s count %zu: element %zu is %.9g, want %.9g\n", rank, what,
		count, i, got, want);
	return 1;
}

static const size_t sizes[] = {1, 7, 1000, 1000000};

static int collectives_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 10.0);
	int check = 0, bad = 0;

	if (!c)
		return 2;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t cnt = sizes[si], i;
		float *in = malloc(sizeof(float) * cnt * (size_t)n);
		float *out = malloc(sizeof(float) * cnt * (size_t)n);
		float *want = malloc(sizeof(float) * cnt * (size_t)n);
		int *iin = malloc(sizeof(int) * cnt), *iout = malloc(sizeof(int) * cnt);

		if (!in || !out || !want || !iin || !iout)
			return 3;
		for (int op = 0; op < 3; op++) { /* all_reduce f32: sum, max, avg */
			for (i = 0; i < cnt; i++)
				in[i] = val(r, i);
			for (i = 0; i < cnt; i++) {
				float acc = val(0, i);

				for (int k = 1; k < n; k++) {
					float v = val(k, i);

					if (op == LB_MAX)
						acc = v > acc ? v : acc;
					else
						acc += v;
				}
				want[i] = op == LB_AVG ? acc / (float)n : acc;
			}
			if (c->ops->all_reduce(c, in, out, cnt, LB_F32, (enum lb_redop)op, NULL))
				return 4;
			for (i = 0; i < cnt; i++)
				if (memcmp(&out[i], &want[i], 4) != 0) {
					bad += report(r, "all_reduce", cnt, i, out[i], want[i]);
					break;
				}
			sh->hash[r][check++] = fnv(out, cnt * 4);
		}
		/* in place, i32 sum */
		for (i = 0; i < cnt; i++)
			iin[i] = ival(r, i);
		if (c->ops->all_reduce(c, iin, iin, cnt, LB_I32, LB_SUM, NULL))
			return 5;
		for (i = 0; i < cnt; i++) {
			long want_i = 0;

			for (int k = 0; k < n; k++)
				want_i += ival(k, i);
			if (iin[i] != want_i) {
				bad += report(r, "all_reduce i32", cnt, i, iin[i], (double)want_i);
				break;
			}
		}
		sh->hash[r][check++] = fnv(iin, cnt * 4);
		/* reduce_scatter: in has n chunks of cnt */
		for (i = 0; i < cnt * (size_t)n; i++)
			in[i] = val(r, i);
		if (c->ops->reduce_scatter(c, in, out, cnt, LB_F32, LB_SUM, NULL))
			return 6;
		for (i = 0; i < cnt; i++) {
			size_t g = (size_t)r * cnt + i;
			float acc = val(0, g);

			for (int k = 1; k < n; k++)
				acc += val(k, g);
			if (memcmp(&out[i], &acc, 4) != 0) {
				bad += report(r, "reduce_scatter", cnt, i, out[i], acc);
				break;
			}
		}
		/* all_gather */
		for (i = 0; i < cnt; i++)
			in[i] = val(r, i);
		if (c->ops->all_gather(c, in, out, cnt, LB_F32, NULL))
			return 7;
		for (int k = 0; k < n; k++)
			for (i = 0; i < cnt; i++)
				if (out[(size_t)k * cnt + i] != val(k, i)) {
					bad += report(r, "all_gather", cnt, i,
						      out[(size_t)k * cnt + i], val(k, i));
					k = n;
					break;
				}
		sh->hash[r][check++] = fnv(out, cnt * 4 * (size_t)n);
		/* broadcast from the last rank */
		for (i = 0; i < cnt; i++)
			in[i] = r == n - 1 ? val(n - 1, i) : 0.0f;
		if (c->ops->broadcast(c, in, cnt, LB_F32, n - 1, NULL))
			return 8;
		for (i = 0; i < cnt; i++)
			if (in[i] != val(n - 1, i)) {
				bad += report(r, "broadcast", cnt, i, in[i], val(n - 1, i));
				break;
			}
		sh->hash[r][check++] = fnv(in, cnt * 4);
		if (c->ops->barrier(c))
			return 9;
		free(in);
		free(out);
		free(want);
		free(iin);
		free(iout);
	}
	c->ops->destroy(c);
	return bad ? 10 : 0;
}

static void run_collectives(int n)
{
	int codes[MAXP];

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(n, collectives_rank, NULL, codes, 60, NULL), 0);
	for (int r = 1; r < n; r++)
		for (int k = 0; k < 64; k++)
			assert_true(sh->hash[r][k] == sh->hash[0][k]);
}

static void test_collectives_2(void **state)
{
	run_collectives(2);
}
static void test_collectives_3(void **state)
{
	run_collectives(3);
}
static void test_collectives_4(void **state)
{
	run_collectives(4);
}
static void test_collectives_8(void **state)
{
	run_collectives(8);
}

/* bf16 sum: accumulated in fp32 in rank order, rounded once; in-place reduce_scatter and
 * all_gather. */
static int bf16_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 10.0);
	uint16_t buf[100];

	if (!c)
		return 2;
	for (int i = 0; i < 100; i++)
		buf[i] = (uint16_t)(0x3f80 + i); /* 1.0, 1.0078125, ... */
	if (c->ops->all_reduce(c, buf, buf, 100, LB_BF16, LB_SUM, NULL))
		return 3;
	for (int i = 0; i < 100; i++) {
		uint32_t u = (uint32_t)(0x3f80 + i) << 16;
		float f, acc = 0;

		memcpy(&f, &u, 4);
		for (int k = 0; k < n; k++)
			acc += f;
		memcpy(&u, &acc, 4);
		u += 0x7fffu + ((u >> 16) & 1u);
		if (buf[i] != (uint16_t)(u >> 16))
			return 4;
	}
	/* in place, as NCCL allows: reduce_scatter into in + rank * count, all_gather from
	 * out + rank * count; 300000 per rank crosses several staging rounds */
	{
		size_t cnt = 300000, i;
		float *x = malloc(sizeof(float) * cnt * (size_t)n);

		if (!x)
			return 6;
		for (i = 0; i < cnt * (size_t)n; i++)
			x[i] = val(r, i);
		if (c->ops->reduce_scatter(c, x, x + (size_t)r * cnt, cnt, LB_F32, LB_SUM, NULL))
			return 7;
		for (i = 0; i < cnt; i++) {
			size_t g = (size_t)r * cnt + i;
			float acc = val(0, g);

			for (int k = 1; k < n; k++)
				acc += val(k, g);
			if (memcmp(&x[g], &acc, 4))
				return 8;
		}
		for (i = 0; i < cnt; i++)
			x[(size_t)r * cnt + i] = val(r, i);
		if (c->ops->all_gather(c, x + (size_t)r * cnt, x, cnt, LB_F32, NULL))
			return 9;
		for (int k = 0; k < n; k++)
			for (i = 0; i < cnt; i++)
				if (x[(size_t)k * cnt + i] != val(k, i))
					return 10;
		free(x);
	}
	c->ops->destroy(c);
	return 0;
}

static void test_bf16(void **state)
{
	int codes[MAXP];

	assert_int_equal(spawn(3, bf16_rank, NULL, codes, 30, NULL), 0);
}

/* An independent oracle for binary16: the value of every finite non-negative half, and
 * rounding of a float by search in that table (nearest, ties to the even pattern). */
static double half_val[0x7c01];

static void half_table(void)
{
	for (int h = 0; h <= 0x7c00; h++) {
		int e = h >> 10, m = h & 0x3ff;

		half_val[h] = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	}
	half_val[0x7c00] = 65536.0; /* "next" after 65504, for rounding; means inf */
}

static uint16_t half_round(float x)
{
	double a = fabs((double)x);
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	int lo = 0, hi = 0x7c00;

	if (a >= 65520.0)
		return sign | 0x7c00;
	while (hi - lo > 1) { /* half_val[lo] <= a < half_val[hi] */
		int mid = (lo + hi) / 2;

		if (half_val[mid] <= a)
			lo = mid;
		else
			hi = mid;
	}
	if (a - half_val[lo] < half_val[hi] - a)
		return sign | (uint16_t)lo;
	if (a - half_val[lo] > half_val[hi] - a)
		return sign | (uint16_t)hi;
	return sign | (uint16_t)(lo % 2 == 0 ? lo : hi);
}

static float half_float(uint16_t h)
{
	double v = half_val[h & 0x7fff];

	return (float)(h & 0x8000 ? -v : v);
}

static uint16_t finite_half(uint32_t i, int r)
{
	uint32_t x = i * 2654435761u + (uint32_t)r * 97u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	x &= 0xffff;
	if ((x & 0x7c00) == 0x7c00) /* no inf/NaN inputs */
		x &= 0xbbff;
	return (uint16_t)x;
}

static int f16_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 10.0);
	size_t cnt = 200000, i;
	uint16_t *x = malloc(cnt * 2), *y = malloc(cnt * 2);

	if (!c || !x || !y)
		return 2;
	half_table();
	for (int op = 0; op < 3; op++) {
		for (i = 0; i < cnt; i++)
			x[i] = finite_half((uint32_t)i, r);
		if (c->ops->all_reduce(c, x, y, cnt, LB_F16, (enum lb_redop)op, NULL))
			return 3;
		for (i = 0; i < cnt; i++) {
			float acc = half_float(finite_half((uint32_t)i, 0));

			for (int k = 1; k < n; k++) {
				float v = half_float(finite_half((uint32_t)i, k));

				acc = op == LB_MAX ? (v > acc ? v : acc) : acc + v;
			}
			if (op == LB_AVG)
				acc /= (float)n;
			if (y[i] != half_round(acc)) {
				fprintf(stderr,
					"rank %d: f16 op %d element %zu: got 0x%04x want 0x%04x\n",
					r, op, i, y[i], half_round(acc));
				return 4;
			}
		}
	}
	c->ops->destroy(c);
	free(x);
	free(y);
	return 0;
}

static void test_f16(void **state)
{
	int codes[MAXP];
	struct lb_comm *c = NULL;
	char name[64], err[256];
	uint16_t *all = malloc(65536 * 2), *out = malloc(65536 * 2);
	size_t n = 0;

	/* one rank: every non-NaN pattern survives f16 -> f32 -> f16 unchanged */
	assert_non_null(all);
	assert_non_null(out);
	for (uint32_t h = 0; h < 65536; h++)
		if ((h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0)
			all[n++] = (uint16_t)h;
	snprintf(name, sizeof(name), "/lbtest-f16-%d", (int)getpid());
	assert_int_equal(lb_comm_shm_create(name, 0, 1, 1.0, &c, err, sizeof(err)), 0);
	assert_int_equal(c->ops->all_reduce(c, all, out, n, LB_F16, LB_MAX, NULL), 0);
	assert_memory_equal(all, out, n * 2);
	c->ops->destroy(c);
	free(all);
	free(out);
	/* sums, max, avg against the oracle */
	assert_int_equal(spawn(2, f16_rank, NULL, codes, 30, NULL), 0);
	assert_int_equal(spawn(3, f16_rank, NULL, codes, 30, NULL), 0);
}

/* tp=2 x dp=2 x pp=2: collectives in the tp and dp groups concurrently, a pp exchange. */
static int groups_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *w = join(r, n, name, 10.0);
	struct lb_groups g;
	struct lb_rank_coords me;
	size_t cnt = 300000, i;
	float *x = malloc(sizeof(float) * cnt * 2), *y = malloc(sizeof(float) * cnt * 2);

	if (!w || !x || !y)
		return 2;
	if (lb_comm_make_groups(w, 2, 2, 2, &g))
		return 3;
	lb_groups_rank_to_coords(r, 2, 2, 2, &me);
	if (g.tp->size != 2 || g.tp->rank != me.tp_rank || g.dp->size != 2 ||
	    g.dp->rank != me.dp_rank || g.pp->size != 2 || g.pp->rank != me.pp_rank)
		return 4;
	if (g.pp_prev != (me.pp_rank ? 0 : -1) || g.pp_next != (me.pp_rank ? -1 : 1))
		return 5;
	for (int rep = 0; rep < 3; rep++) {
		/* tp: sum of the two adjacent ranks */
		for (i = 0; i < cnt; i++)
			x[i] = val(r, i);
		if (g.tp->ops->all_reduce(g.tp, x, x, cnt, LB_F32, LB_SUM, NULL))
			return 6;
		int base = r - me.tp_rank;
		for (i = 0; i < cnt; i++) {
			float want = val(base, i) + val(base + 1, i);

			if (memcmp(&x[i], &want, 4))
				return 7;
		}
		/* dp: all_gather of the ranks r and r +- tp */
		for (i = 0; i < cnt; i++)
			x[i] = val(r, i);
		if (g.dp->ops->all_gather(g.dp, x, y, cnt, LB_F32, NULL))
			return 8;
		for (int k = 0; k < 2; k++) {
			struct lb_rank_coords cc = me;

			cc.dp_rank = k;
			int wr = lb_groups_coords_to_rank(&cc, 2, 2, 2);
			for (i = 0; i < cnt; i++)
				if (y[(size_t)k * cnt + i] != val(wr, i))
					return 9;
		}
		/* dp: reduce_scatter avg */
		for (i = 0; i < 2 * cnt; i++)
			y[i] = val(r, i);
		if (g.dp->ops->reduce_scatter(g.dp, y, x, cnt, LB_F32, LB_AVG, NULL))
			return 10;
		/* pp: stage 0 sends to stage 1 and receives its reply, grouped */
		for (i = 0; i < cnt; i++)
			x[i] = val(r, i);
		if (g.pp->ops->group_start(g.pp))
			return 11;
		if (g.pp_next >= 0) {
			if (g.pp->ops->send(g.pp, x, cnt, LB_F32, g.pp_next, NULL) ||
			    g.pp->ops->recv(g.pp, y, cnt, LB_F32, g.pp_next, NULL))
				return 12;
		} else {
			if (g.pp->ops->send(g.pp, x, cnt, LB_F32, g.pp_prev, NULL) ||
			    g.pp->ops->recv(g.pp, y, cnt, LB_F32, g.pp_prev, NULL))
				return 13;
		}
		if (g.pp->ops->group_end(g.pp))
			return 14;
		struct lb_rank_coords cc = me;
		cc.pp_rank = 1 - me.pp_rank;
		int peer = lb_groups_coords_to_rank(&cc, 2, 2, 2);
		for (i = 0; i < cnt; i++)
			if (y[i] != val(peer, i))
				return 15;
		if (w->ops->barrier(w))
			return 16;
	}
	lb_groups_release(&g);
	/* split again after the release: the contexts are reused */
	if (lb_comm_make_groups(w, 2, 2, 2, &g) || g.tp->ops->barrier(g.tp))
		return 17;
	lb_groups_release(&g);
	w->ops->destroy(w);
	free(x);
	free(y);
	return 0;
}

static void test_groups(void **state)
{
	int codes[MAXP];

	assert_int_equal(spawn(8, groups_rank, NULL, codes, 60, NULL), 0);
}

/* split: color < 0 gives no communicator; key orders the ranks. */
static int split_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *w = join(r, n, name, 10.0), *s = NULL;
	float v = (float)r, all[4];

	if (!w)
		return 2;
	if (w->ops->split(w, r == 0 ? -1 : 1, -r, &s))
		return 3;
	if (r == 0) {
		if (s)
			return 4;
	} else {
		if (!s || s->size != 3 || s->rank != 3 - r)
			return 5;
		if (s->ops->all_gather(s, &v, all, 1, LB_F32, NULL))
			return 6;
		if (all[0] != 3.0f || all[1] != 2.0f || all[2] != 1.0f)
			return 7;
		s->ops->destroy(s);
	}
	if (w->ops->barrier(w))
		return 8;
	w->ops->destroy(w);
	return 0;
}

static void test_split(void **state)
{
	int codes[MAXP];

	assert_int_equal(spawn(4, split_rank, NULL, codes, 30, NULL), 0);
}

/* Every rank sends to both neighbours first, then receives, in one group: with blocking
 * sends larger than a channel this would deadlock. */
static int ring_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 10.0);
	size_t cnt = 1000000, i;
	int next = (r + 1) % n, prev = (r + n - 1) % n;
	float *a = malloc(cnt * 4), *b = malloc(cnt * 4), *fromprev = malloc(cnt * 4),
	      *fromnext = malloc(cnt * 4);

	if (!c || !a || !b || !fromprev || !fromnext)
		return 2;
	for (int rep = 0; rep < 2; rep++) {
		for (i = 0; i < cnt; i++) {
			a[i] = val(r, i);
			b[i] = -val(r, i);
		}
		if (c->ops->group_start(c) || c->ops->send(c, a, cnt, LB_F32, next, NULL) ||
		    c->ops->send(c, b, cnt, LB_F32, prev, NULL) ||
		    c->ops->recv(c, fromprev, cnt, LB_F32, prev, NULL) ||
		    c->ops->recv(c, fromnext, cnt, LB_F32, next, NULL) || c->ops->group_end(c))
			return 3;
		for (i = 0; i < cnt; i++)
			if (fromprev[i] != val(prev, i) || fromnext[i] != -val(next, i))
				return 4;
	}
	/* ungrouped: small messages fit the channel, so send then recv completes */
	if (c->ops->send(c, a, 10, LB_F32, next, NULL) ||
	    c->ops->recv(c, fromprev, 10, LB_F32, prev, NULL))
		return 5;
	/* a size mismatch is reported, not silently mis-delivered */
	if (c->ops->send(c, a, 10, LB_F32, next, NULL))
		return 6;
	if (c->ops->recv(c, fromprev, 20, LB_F32, prev, NULL) != LB_COMM_EFAIL)
		return 7;
	if (c->ops->send(c, a, 1, LB_F32, r, NULL) != LB_COMM_EFAIL) /* to self */
		return 8;
	free(a);
	free(b);
	free(fromprev);
	free(fromnext);
	return 0; /* the channel is now out of step: no destroy barrier */
}

static void test_ring(void **state)
{
	int codes[MAXP];

	assert_int_equal(spawn(4, ring_rank, NULL, codes, 30, NULL), 0);
	assert_int_equal(spawn(2, ring_rank, NULL, codes, 30, NULL), 0);
}

/* Rank `arg` exits right after joining; the others must fail within the timeout. */
static int early_exit_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 2.0);
	float x[1000];
	double t0;
	int rc;

	if (!c)
		return 2;
	if (r == *(int *)arg)
		_exit(7);
	memset(x, 0, sizeof(x));
	t0 = now_s();
	rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++)
		rc = c->ops->all_reduce(c, x, x, 1000, LB_F32, LB_SUM, NULL);
	sh->elapsed[r] = now_s() - t0;
	sh->code[r] = lb_comm_shm_error(c, &sh->err_rank[r], sh->msg[r], sizeof(sh->msg[r]));
	return rc == 0 ? 3 : 0;
}

static void test_peer_exits(void **state)
{
	int codes[MAXP], dead = 2;

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(4, early_exit_rank, &dead, codes, 20, NULL), 1);
	assert_int_equal(codes[2], 7);
	for (int r = 0; r < 4; r++) {
		if (r == dead)
			continue;
		assert_int_equal(codes[r], 0);
		assert_int_equal(sh->code[r], LB_COMM_EPEER);
		assert_int_equal(sh->err_rank[r], 2);
		assert_non_null(strstr(sh->msg[r], "rank 2"));
		assert_true(sh->elapsed[r] < 5.0);
	}
}

/* Rank 1 hangs (sleeps past the timeout); rank 0 must get a timeout naming it. */
static int hang_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 1.0);
	double t0;
	int rc;

	if (!c)
		return 2;
	if (r == 1) {
		usleep(1600000); /* past rank 0's 1 s timeout */
		return 0;
	}
	t0 = now_s();
	rc = c->ops->barrier(c);
	sh->elapsed[r] = now_s() - t0;
	sh->code[r] = rc;
	lb_comm_shm_error(c, &sh->err_rank[r], sh->msg[r], sizeof(sh->msg[r]));
	return 0;
}

static void test_peer_hangs(void **state)
{
	int codes[MAXP];

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(2, hang_rank, NULL, codes, 20, NULL), 0);
	assert_int_equal(sh->code[0], LB_COMM_ETIMEOUT);
	assert_int_equal(sh->err_rank[0], 1);
	assert_non_null(strstr(sh->msg[0], "rank 1 did not arrive"));
	assert_true(sh->elapsed[0] >= 0.9 && sh->elapsed[0] < 4.0);
}

/* Rank 3 aborts with a reason; the others, waiting in a collective, see it. */
static int abort_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 10.0);
	float x = 1;
	double t0;

	if (!c)
		return 2;
	if (r == 3) {
		usleep(200000);
		lb_comm_shm_abort(c, "oom");
		usleep(1200000); /* alive: the others must learn from the abort record */
		return 3;
	}
	t0 = now_s();
	sh->code[r] = c->ops->all_reduce(c, &x, &x, 1, LB_F32, LB_SUM, NULL);
	sh->elapsed[r] = now_s() - t0;
	lb_comm_shm_error(c, &sh->err_rank[r], sh->msg[r], sizeof(sh->msg[r]));
	/* later calls fail at once too */
	return c->ops->barrier(c) == LB_COMM_EPEER ? 0 : 4;
}

static void test_abort(void **state)
{
	int codes[MAXP];

	memset(sh, 0, sizeof(*sh));
	spawn(4, abort_rank, NULL, codes, 20, NULL);
	assert_int_equal(codes[3], 3);
	for (int r = 0; r < 3; r++) {
		assert_int_equal(codes[r], 0);
		assert_int_equal(sh->code[r], LB_COMM_EPEER);
		assert_int_equal(sh->err_rank[r], 3);
		assert_string_equal(sh->msg[r], "rank 3 failed: oom");
		assert_true(sh->elapsed[r] < 1.0); /* before rank 3 exits, not the timeout */
	}
}

/* send/recv waits are bounded too: rank 1 exits (arg 0) or stays alive without sending
 * (arg 1); rank 0's grouped exchange with it must fail with EPEER or ETIMEOUT. */
static int p2p_fail_rank(int r, int n, const char *name, void *arg)
{
	int hang = *(int *)arg;
	struct lb_comm *c = join(r, n, name, 1.0);
	size_t cnt = 200000; /* 800 KB: more than a channel holds */
	float *a = calloc(cnt, 4), *b = calloc(cnt, 4);
	double t0;

	if (!c || !a || !b)
		return 2;
	if (r == 1) {
		if (hang)
			usleep(1600000);
		_exit(0);
	}
	t0 = now_s();
	if (c->ops->group_start(c) || c->ops->send(c, a, cnt, LB_F32, 1, NULL) ||
	    c->ops->recv(c, b, cnt, LB_F32, 1, NULL))
		return 3;
	sh->code[r] = c->ops->group_end(c);
	sh->elapsed[r] = now_s() - t0;
	lb_comm_shm_error(c, &sh->err_rank[r], sh->msg[r], sizeof(sh->msg[r]));
	free(a);
	free(b);
	return 0;
}

static void test_p2p_peer_fails(void **state)
{
	int codes[MAXP], hang = 0;

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(2, p2p_fail_rank, &hang, codes, 20, NULL), 0);
	assert_int_equal(sh->code[0], LB_COMM_EPEER);
	assert_int_equal(sh->err_rank[0], 1);
	assert_true(sh->elapsed[0] < 3.0);
	hang = 1;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(2, p2p_fail_rank, &hang, codes, 20, NULL), 0);
	assert_int_equal(sh->code[0], LB_COMM_ETIMEOUT);
	assert_int_equal(sh->err_rank[0], 1);
	assert_non_null(strstr(sh->msg[0], "in group_end: rank 1 sent or received nothing"));
	assert_true(sh->elapsed[0] >= 0.9 && sh->elapsed[0] < 3.0);
}

/* A rank that finished and left does not disturb a send/recv between two others. */
static int left_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 5.0);
	size_t cnt = 300000, i;
	float *a = malloc(cnt * 4), *b = malloc(cnt * 4);

	if (!c || !a || !b)
		return 2;
	if (r == 2) {
		c->ops->destroy(c);
		return 0;
	}
	usleep(r == 0 ? 100000 : 300000); /* rank 2 is gone; rank 0 waits for rank 1 */
	for (i = 0; i < cnt; i++)
		a[i] = val(r, i);
	if (c->ops->group_start(c) || c->ops->send(c, a, cnt, LB_F32, 1 - r, NULL) ||
	    c->ops->recv(c, b, cnt, LB_F32, 1 - r, NULL) || c->ops->group_end(c))
		return 3;
	for (i = 0; i < cnt; i++)
		if (b[i] != val(1 - r, i))
			return 4;
	/* a collective of the world does notice */
	if (c->ops->barrier(c) != LB_COMM_EPEER)
		return 5;
	free(a);
	free(b);
	return 0;
}

static void test_p2p_after_other_left(void **state)
{
	int codes[MAXP];

	assert_int_equal(spawn(3, left_rank, NULL, codes, 20, NULL), 0);
}

/* Two of three ranks start: the rendezvous times out with a message. */
static int missing_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = NULL;
	int rc = lb_comm_shm_create(name, r, 3, 0.5, &c, sh->msg[r], sizeof(sh->msg[r]));

	sh->code[r] = rc;
	return c ? 2 : 0;
}

static void test_rendezvous_timeout(void **state)
{
	int codes[MAXP];

	memset(sh, 0, sizeof(*sh));
	assert_int_equal(spawn(2, missing_rank, NULL, codes, 10, NULL), 0);
	assert_int_equal(sh->code[0], LB_COMM_ETIMEOUT);
	assert_int_equal(sh->code[1], LB_COMM_ETIMEOUT);
	assert_non_null(strstr(sh->msg[0], "2 of 3 ranks arrived"));
}

/* A crashed run leaves its segment; the next run with the same name still works, even
 * when rank 1 finds the stale segment before rank 0 replaces it. */
static int crash_rank(int r, int n, const char *name, void *arg)
{
	struct lb_comm *c = join(r, n, name, 5.0);

	(void)c;
	_exit(c ? 0 : 2); /* no destroy: the segment stays behind */
}

static int late_rank0(int r, int n, const char *name, void *arg)
{
	const char *stale = arg;
	struct lb_comm *c;
	float x = (float)r;

	if (r == 0)
		usleep(300000);
	c = join(r, n, stale, 5.0);
	if (!c)
		return 2;
	if (c->ops->all_reduce(c, &x, &x, 1, LB_F32, LB_SUM, NULL) || x != 1.0f)
		return 3;
	c->ops->destroy(c);
	return 0;
}

static void test_stale_segment(void **state)
{
	int codes[MAXP], r, ws;
	char name[64], path[128];
	pid_t p[2];

	snprintf(name, sizeof(name), "/lbtest-stale-%d", (int)getpid());
	fflush(NULL);
	for (r = 0; r < 2; r++) {
		p[r] = fork();
		if (p[r] == 0)
			crash_rank(r, 2, name, NULL);
	}
	for (r = 0; r < 2; r++) {
		assert_int_equal(waitpid(p[r], &ws, 0), p[r]);
		assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	}
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	assert_int_equal(access(path, F_OK), 0); /* the stale segment is there */
	assert_int_equal(spawn(2, late_rank0, name, codes, 20, NULL), 0);
	assert_int_not_equal(access(path, F_OK), 0); /* and rank 0's destroy removed it */
}

static void test_bad_args(void **state)
{
	struct lb_comm *c = NULL;
	char err[256];

	assert_int_equal(lb_comm_shm_create("noslash", 0, 1, 1.0, &c, err, sizeof(err)),
			 LB_COMM_EFAIL);
	assert_non_null(strstr(err, "not valid"));
	assert_int_equal(lb_comm_shm_create("/x", 2, 2, 1.0, &c, err, sizeof(err)), LB_COMM_EFAIL);
	assert_int_equal(lb_comm_shm_create("/x", 0, 65, 1.0, &c, err, sizeof(err)), LB_COMM_EFAIL);
	assert_int_equal(lb_comm_shm_create("/x", 0, 1, 0.0, &c, err, sizeof(err)), LB_COMM_EFAIL);
	assert_null(c);
	/* one rank: everything works without peers */
	char name[64];
	float v[3] = {1, 2, 3}, o[3];
	snprintf(name, sizeof(name), "/lbtest-one-%d", (int)getpid());
	assert_int_equal(lb_comm_shm_create(name, 0, 1, 1.0, &c, err, sizeof(err)), 0);
	assert_true(lb_comm_is_shm(c));
	assert_int_equal(c->ops->all_reduce(c, v, o, 3, LB_F32, LB_AVG, NULL), 0);
	assert_memory_equal(v, o, sizeof(v));
	assert_int_equal(c->ops->barrier(c), 0);
	assert_int_equal(lb_comm_shm_error(c, NULL, NULL, 0), 0);
	c->ops->destroy(c);
	assert_false(lb_comm_is_shm(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_collectives_2),
	    cmocka_unit_test(test_collectives_3),
	    cmocka_unit_test(test_collectives_4),
	    cmocka_unit_test(test_collectives_8),
	    cmocka_unit_test(test_bf16),
	    cmocka_unit_test(test_f16),
	    cmocka_unit_test(test_split),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_peer_exits),
	    cmocka_unit_test(test_peer_hangs),
	    cmocka_unit_test(test_abort),
	    cmocka_unit_test(test_p2p_peer_fails),
	    cmocka_unit_test(test_p2p_after_other_left),
	    cmocka_unit_test(test_rendezvous_timeout),
	    cmocka_unit_test(test_stale_segment),
	};

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
