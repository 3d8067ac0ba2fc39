/*
 * Unit tests of the trainer's core and shell: flag parsing and refusals, the loss falling
 * on a repeated batch and on the synthetic stream, bitwise-equal losses for one seed,
 * token files (u16, u32, wrap, an id >= vocab naming its offset), the data-parallel
 * slicing rule, the memory limit as an out-of-memory, and the run-log writer (keys,
 * escaping, the end record); a step zeroes no gradient buffer (each chunk's first
 * backward writes the gradients) and issues one AdamW call per run of tensors and one
 * norm reduction per run of counted ones.
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
#include <unistd.h>

#include "common/util.h"
#include "harness/comm/bootstrap.h"
#include "harness/comm/comm_cuda.h"
#include "harness/train.h"

static void tiny_opts(struct lb_train_opts *o)
{
	lb_train_opts_init(o);
	o->layout.seq_len = 32;
	o->layout.global_batch = 4;
	o->layout.micro_batch = 2;
	o->layout.steps = 8;
	o->quiet = 1;
}

static int parse(struct lb_train_opts *o, const char *line, char *err, size_t errlen)
{
	char buf[1024], *argv[64];
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", line);
	argv[argc++] = "layoutbench-train";
	for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	lb_train_opts_init(o);
	return lb_train_parse_args(o, argc, argv, err, errlen);
}

static void test_parse_flags(void **state)
{
	struct lb_train_opts o;
	char err[512], reason[512];

	assert_int_equal(parse(&o,
			       "--model tiny-gqa --seq-len 64 --global-batch 8 --micro-batch 2 "
			       "--checkpointing selective --attention naive --norm unfused "
			       "--steps 3 --warmup 1 --seed 9 --device cpu --run-dir /tmp/x "
			       "--lr=0.01 --weight-decay 0 --clip 0.5 --mem-limit 2M "
			       "--data-dtype u32 --nproc-per-node 1 --comm-timeout 30 --quiet",
			       err, sizeof(err)),
			 0);
	assert_string_equal(o.layout.model.name, "tiny-gqa");
	assert_int_equal(o.layout.seq_len, 64);
	assert_int_equal(o.layout.checkpointing, LB_CKPT_SELECTIVE);
	assert_int_equal(o.layout.attention, LB_ATTN_NAIVE);
	assert_int_equal(o.layout.norm, LB_NORM_UNFUSED);
	assert_true(o.layout.seed == 9);
	assert_string_equal(o.run_dir, "/tmp/x");
	assert_true(o.lr == 0.01 && o.weight_decay == 0 && o.clip == 0.5);
	assert_true(o.mem_limit == 2u << 20);
	assert_int_equal(o.data_elem, 4);
	assert_true(o.quiet && o.comm_timeout == 30);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), 0);

	assert_int_equal(parse(&o, "--frobnicate 3", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown flag '--frobnicate'"));
	assert_int_equal(parse(&o, "--lr fast", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--lr"));
	assert_int_equal(parse(&o, "--mem-limit 12Q", err, sizeof(err)), -1);
	assert_int_equal(parse(&o, "--device tpu", err, sizeof(err)), -1);
	assert_int_equal(parse(&o, "--lr", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "needs a value"));
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.pipe_overlap, 1); /* the default */
	assert_int_equal(parse(&o, "--pipe-overlap 0", err, sizeof(err)), 0);
	assert_int_equal(o.pipe_overlap, 0);
	assert_int_equal(parse(&o, "--pipe-overlap 2", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--pipe-overlap: unknown value '2' (expected 0 or 1)"));
	/* --cuda-graphs: off by default, LAYOUTBENCH_CUDA_GRAPHS sets the default, the flag
	 * wins, anything but 0 or 1 is refused naming what is expected */
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.cuda_graphs, 0);
	assert_int_equal(parse(&o, "--cuda-graphs 1", err, sizeof(err)), 0);
	assert_int_equal(o.cuda_graphs, 1);
	assert_int_equal(parse(&o, "--cuda-graphs yes", err, sizeof(err)), -1);
	assert_string_equal(err, "--cuda-graphs: unknown value 'yes' (expected 0 or 1)");
	setenv("LAYOUTBENCH_CUDA_GRAPHS", "1", 1);
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.cuda_graphs, 1);
	assert_int_equal(parse(&o, "--cuda-graphs=0", err, sizeof(err)), 0);
	assert_int_equal(o.cuda_graphs, 0);
	setenv("LAYOUTBENCH_CUDA_GRAPHS", "on", 1);
	assert_int_equal(parse(&o, "", err, sizeof(err)), -1);
	assert_string_equal(err, "LAYOUTBENCH_CUDA_GRAPHS: unknown value 'on' (expected 0 or 1)");
	unsetenv("LAYOUTBENCH_CUDA_GRAPHS");

	/* refusals: cuda in a CPU build (a CUDA build accepts it), a rank count that is not
	 * tp*pp*dp, an impossible layout */
	assert_int_equal(parse(&o, "--device cuda", err, sizeof(err)), 0);
	if (lb_ops_have_cuda()) {
		assert_int_equal(lb_train_check(&o, err, sizeof(err)), 0);
	} else {
		assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "built without the CUDA backend"));
		assert_non_null(strstr(err, "--device cpu"));
	}
	/* cuDNN's attention is the GPU backend's alone: the CPU refuses it, naming the fix */
	assert_int_equal(parse(&o, "--attention cudnn", err, sizeof(err)), 0);
	assert_int_equal(o.layout.attention, LB_ATTN_CUDNN);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "add --device cuda, or use --attention flash"));
	assert_int_equal(parse(&o, "--attention cudnn --device cuda", err, sizeof(err)), 0);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), lb_ops_have_cuda() ? 0 : -1);
	/* a parallel layout on the GPU runs through the GPU communicator (NCCL, or staged for
	 * ranks that share a GPU); only a build without CUDA refuses it */
	assert_int_equal(parse(&o, "--device cuda --tp 2 --gpus-per-node 2 --nproc-per-node 2", err,
			       sizeof(err)),
			 0);
	if (lb_ops_have_cuda()) {
		assert_int_equal(lb_train_check(&o, err, sizeof(err)), 0);
	} else {
		assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "without the CUDA"));
	}
	/* --nproc-per-node N alone makes the node N GPUs wide (not "tp=2 exceeds
	 * gpus_per_node=1") */
	assert_int_equal(parse(&o, "--tp 2 --nproc-per-node 2", err, sizeof(err)), 0);
	assert_int_equal(o.layout.gpus_per_node, 2);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), 0);
	assert_int_equal(parse(&o, "--tp 2 --gpus-per-node 2", err, sizeof(err)), 0);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
	assert_string_equal(err, "--nproc-per-node 1: the layout has tp*pp*dp=2 rank(s); start "
				 "that many (--nproc-per-node 2) or run under srun -n 2");
	assert_int_equal(parse(&o, "--tp 2 --gpus-per-node 2 --nproc-per-node 2", err, sizeof(err)),
			 0);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), 0);
	o.nproc_per_node = 1;
	assert_int_equal(parse(&o, "--heads 3", err, sizeof(err)), 0);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
	assert_int_equal(lb_layout_check(&o.layout, reason, sizeof(reason)), -1);
	assert_string_equal(err, reason); /* the same reason plan gives */
	assert_int_equal(parse(&o, "--nproc-per-node 2", err, sizeof(err)), 0);
	assert_int_equal(lb_train_check(&o, err, sizeof(err)), -1);
}

static void test_parse_bytes(void **state)
{
	uint64_t v;

	assert_int_equal(lb_parse_bytes("1000", &v), 0);
	assert_true(v == 1000);
	assert_int_equal(lb_parse_bytes("3K", &v), 0);
	assert_true(v == 3072);
	assert_int_equal(lb_parse_bytes("2G", &v), 0);
	assert_true(v == 2ULL << 30);
	assert_int_equal(lb_parse_bytes("", &v), -1);
	assert_int_equal(lb_parse_bytes("-1", &v), -1);
	assert_int_equal(lb_parse_bytes("1.5G", &v), -1);
}

static void test_repeated_batch_loss_falls(void **state)
{
	struct lb_train_opts o;
	struct lb_trainer t;
	double first = 0, loss = 0;

	tiny_opts(&o);
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(lb_trainer_step(&t, 0, &loss), 0); /* step 0's batch again */
		if (i == 0)
			first = loss;
	}
	assert_true(loss < first - 1.0);
	assert_true(t.phases.forward_s > 0 && t.phases.backward_s > 0);
	lb_trainer_free(&t);
}

static void test_run_steps_refuses_sends(void **state)
{
	struct lb_train_opts o;
	struct lb_trainer t;
	struct lb_step list[] = {{LB_STEP_FORWARD, 0, -1, -1, 0, 0},
				 {LB_STEP_SEND_ACT, 0, 1, 0, 0, 0}};
	double sum = -1;

	tiny_opts(&o);
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	assert_int_equal(t.model.n_chunks, 1);
	assert_int_equal(t.model.chunks[0].n_slots, 1);
	assert_int_equal(lb_trainer_run_steps(&t, 0, list, 1, &sum), 0);
	assert_true(sum > 0);
	assert_int_equal(lb_trainer_run_steps(&t, 0, list, 2, &sum), LB_E_INVAL);
	assert_string_equal(t.err, "pipeline step 'send_act' needs a pipeline group (pp > 1)");
	lb_trainer_free(&t);
}

/* A fake data-parallel group of two ranks holding the same data: all-reduce doubles. */
static int twice_all_reduce(struct lb_comm *c, const void *in, void *out, size_t count,
			    enum lb_dtype t, enum lb_redop op, void *stream)
{
	float *o = out;

	assert_ptr_equal(in, out);
	assert_int_equal(t, LB_F32);
	assert_int_equal(op, LB_SUM);
	for (size_t i = 0; i < count; i++)
		o[i] *= 2;
	return 0;
}

static void test_dp_group_sums_gradients(void **state)
{
	static const struct lb_comm_ops twice_ops = {.name = "twice",
						     .all_reduce = twice_all_reduce};
	struct lb_comm twice = {.ops = &twice_ops, .rank = 0, .size = 2};
	struct lb_train_opts o;
	struct lb_trainer a, b;
	double la, lb;

	tiny_opts(&o);
	o.clip = 0; /* compare the raw gradients */
	assert_int_equal(lb_trainer_init(&a, &o, lb_ops_cpu(), NULL), 0);
	assert_int_equal(lb_trainer_init(&b, &o, lb_ops_cpu(), NULL), 0);
	/* b reduces its gradients (bucket by bucket) and its loss over a group that doubles */
	b.dp = &twice;
	lb_gradsync_free(&b.gs);
	assert_int_equal(lb_gradsync_init(&b.gs, lb_ops_cpu(), &b.model, &twice, 0, 0, 1000, 1, -1),
			 0);
	assert_true(b.gs.n_layer_b > 1); /* several layer buckets, each reduced in the backward */
	assert_int_equal(lb_trainer_step(&a, 0, &la), 0);
	assert_int_equal(lb_trainer_step(&b, 0, &lb), 0);
	assert_true(fabs(lb - 2 * la) < 1e-5 * la);
	assert_true(fabs(b.grad_norm - 2 * a.grad_norm) < 1e-6 * a.grad_norm);
	lb_trainer_free(&a);
	lb_trainer_free(&b);
}

static void test_synthetic_loss_falls_in_8_steps(void **state)
{
	struct lb_train_opts o;
	struct lb_trainer t;
	double loss[8];

	tiny_opts(&o);
	o.layout.seq_len = 64;
	o.layout.global_batch = 8;
	o.layout.micro_batch = 1;
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	for (int s = 0; s < 8; s++)
		assert_int_equal(lb_trainer_step(&t, s, &loss[s]), 0);
	assert_true(fabs(loss[0] - log(256.0)) < 0.2); /* starts near uniform */
	assert_true(loss[7] < loss[0] - 0.7);
	lb_trainer_free(&t);
}

static void test_same_seed_bitwise(void **state)
{
	struct lb_train_opts o;
	double a[3], b[3], *pa, *pb;
	struct lb_trainer t;
	size_t n;

	tiny_opts(&o);
	o.layout.attention = LB_ATTN_FUSED_SOFTMAX;
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	for (int s = 0; s < 3; s++)
		assert_int_equal(lb_trainer_step(&t, s, &a[s]), 0);
	n = t.model.n_params;
	pa = malloc(n * sizeof(double));
	pb = malloc(n * sizeof(double));
	lb_ops_cpu()->read(pa, t.model.params, n, LB_K_ACT);
	lb_trainer_free(&t);
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	for (int s = 0; s < 3; s++)
		assert_int_equal(lb_trainer_step(&t, s, &b[s]), 0);
	lb_ops_cpu()->read(pb, t.model.params, n, LB_K_ACT);
	lb_trainer_free(&t);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_equal(pa, pb, n * sizeof(double));
	/* another seed is another run */
	o.layout.seed = 2;
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	assert_int_equal(lb_trainer_step(&t, 0, &b[0]), 0);
	lb_trainer_free(&t);
	assert_true(a[0] != b[0]);
	free(pa);
	free(pb);
}

/* The CPU table with its zero, adamw and sum_sq_acc calls counted. */
static struct {
	size_t max_zero_f32; /* the largest f32 zeroing */
	int adamw, sum_sq;
} calls;

static void count_zero(void *p, size_t n, enum lb_kind k)
{
	if (k == LB_K_F32 && n > calls.max_zero_f32)
		calls.max_zero_f32 = n;
	lb_ops_cpu()->zero(p, n, k);
}

static void count_adamw(void *p, void *ms, const void *g, void *m, void *v, size_t n, double lr,
			double b1, double b2, double eps, double wd, int step, double gs)
{
	calls.adamw++;
	lb_ops_cpu()->adamw(p, ms, g, m, v, n, lr, b1, b2, eps, wd, step, gs);
}

static void count_sum_sq(void *acc, const void *x, size_t n)
{
	calls.sum_sq++;
	lb_ops_cpu()->sum_sq_acc(acc, x, n);
}

/* A step zeroes no gradient buffer: each chunk's first backward writes its gradients, so
 * garbage left in them (NaN) changes nothing, untied and tied; and the optimizer issues
 * one AdamW call per run of tensors with one decay (4 per layer, the embedding, the final
 * norm and the head: 19 for the tiny model, not one per tensor, 27) and one norm
 * reduction for the whole buffer of one rank. */
static void test_step_writes_gradients(void **state)
{
	struct lb_ops counted = *lb_ops_cpu();

	counted.zero = count_zero;
	counted.adamw = count_adamw;
	counted.sum_sq_acc = count_sum_sq;
	for (int tied = 0; tied <= 1; tied++) {
		struct lb_train_opts o;
		struct lb_trainer t;
		double clean[3], dirty[3];
		float *g;

		double *acc, *wrote;
		size_t ng;

		tiny_opts(&o);
		if (tied)
			assert_int_equal(lb_model_preset("tiny-tied", &o.layout.model), 0);
		/* the reference gradients of step 0: zeroed, then every backward adds */
		assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
		ng = t.model.n_grads;
		acc = malloc(ng * sizeof(double));
		wrote = malloc(ng * sizeof(double));
		assert_true(acc && wrote);
		lb_llama_zero_grads(&t.model);
		assert_int_equal(lb_trainer_run_steps(&t, 0, t.sched.steps, t.sched.n_steps, NULL),
				 0);
		lb_ops_cpu()->read(acc, t.model.grads, ng, LB_K_F32);
		lb_trainer_free(&t);
		assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
		for (int s = 0; s < 3; s++)
			assert_int_equal(lb_trainer_step(&t, s, &clean[s]), 0);
		lb_trainer_free(&t);

		assert_int_equal(lb_trainer_init(&t, &o, &counted, NULL), 0);
		memset(&calls, 0, sizeof(calls));
		for (int s = 0; s < 3; s++) {
			g = t.model.grads; /* the CPU backend's f32 memory */
			for (size_t i = 0; i < t.model.n_grads; i++)
				g[i] = NAN;
			assert_int_equal(lb_trainer_step(&t, s, &dirty[s]), 0);
			if (s == 0) /* the step's gradients, written over the garbage */
				lb_ops_cpu()->read(wrote, t.model.grads, ng, LB_K_F32);
		}
		assert_memory_equal(acc, wrote, ng * sizeof(double));
		free(acc);
		free(wrote);
		assert_true(calls.max_zero_f32 < t.model.n_grads / 4);
		assert_int_equal(calls.adamw, 3 * (4 * t.model.n_layers + (tied ? 2 : 3)));
		assert_int_equal(calls.sum_sq, 3);
		lb_trainer_free(&t);
		assert_memory_equal(clean, dirty, sizeof(clean));
	}
}

static char *write_tokens(const char *dir, const char *name, int elem, const uint32_t *ids, int n)
{
	static char path[4][512];
	static int k;
	char *p = path[k++ % 4];
	FILE *f;

	snprintf(p, 512, "%s/%s", dir, name);
	f = fopen(p, "wb");
	assert_non_null(f);
	for (int i = 0; i < n; i++) {
		if (elem == 2) {
			uint16_t v = (uint16_t)ids[i];
			fwrite(&v, 2, 1, f);
		} else {
			fwrite(&ids[i], 4, 1, f);
		}
	}
	fclose(f);
	return p;
}

static void test_data_files(void **state)
{
	char dir[] = "/tmp/lbtest-data-XXXXXX", err[512], *p16, *p32, *bad, *odd;
	uint32_t ids[20];
	int32_t tok[8], tgt[8];
	struct lb_data d;
	struct lb_train_opts o;
	struct lb_trainer t;
	double loss;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 20; i++)
		ids[i] = (uint32_t)(i * 7 % 256);
	p16 = write_tokens(dir, "a.u16", 2, ids, 20);
	p32 = write_tokens(dir, "a.u32", 4, ids, 20);
	for (int w = 2; w <= 4; w += 2) {
		assert_int_equal(
		    lb_data_open(&d, w == 2 ? p16 : p32, w, 256, 8, 1, err, sizeof(err)), 0);
		assert_true(d.n_tokens == 20);
		assert_int_equal(lb_data_sequence(&d, 1, tok, tgt, err, sizeof(err)), 0);
		for (int i = 0; i < 8; i++) {
			assert_int_equal(tok[i], (int32_t)ids[8 + i]);
			assert_int_equal(tgt[i], (int32_t)ids[9 + i]);
		}
		/* sequence 2 starts at token 16 and wraps after token 19 */
		assert_int_equal(lb_data_sequence(&d, 2, tok, tgt, err, sizeof(err)), 0);
		assert_int_equal(tok[3], (int32_t)ids[19]);
		assert_int_equal(tok[4], (int32_t)ids[0]);
		assert_int_equal(tgt[7], (int32_t)ids[4]);
		lb_data_close(&d);
	}
	ids[13] = 300; /* >= vocab 256 */
	bad = write_tokens(dir, "bad.u32", 4, ids, 20);
	assert_int_equal(lb_data_open(&d, bad, 4, 256, 8, 1, err, sizeof(err)), 0);
	assert_int_equal(lb_data_sequence(&d, 0, tok, tgt, err, sizeof(err)), 0);
	assert_int_equal(lb_data_sequence(&d, 1, tok, tgt, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "token id 300 at token offset 13 (byte offset 52)"));
	lb_data_close(&d);
	odd = write_tokens(dir, "odd.u16", 2, ids, 3);
	f = fopen(odd, "ab");
	fputc(1, f);
	fclose(f);
	assert_int_equal(lb_data_open(&d, odd, 2, 256, 8, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a whole number"));
	assert_int_equal(lb_data_open(&d, "/nonexistent/x", 2, 256, 8, 1, err, sizeof(err)), -1);

	/* train on each file */
	for (int w = 2; w <= 4; w += 2) {
		tiny_opts(&o);
		o.layout.seq_len = 8;
		snprintf(o.data_path, sizeof(o.data_path), "%s", w == 2 ? p16 : p32);
		o.data_elem = w;
		assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
		assert_int_equal(lb_trainer_step(&t, 0, &loss), 0);
		assert_true(isfinite(loss));
		lb_trainer_free(&t);
	}
	unlink(p16), unlink(p32), unlink(bad), unlink(odd);
	rmdir(dir);
}

static void test_dp_slicing(void **state)
{
	struct lb_layout l1, l2;
	int seen[64] = {0};

	lb_layout_init(&l1);
	l1.global_batch = 16;
	l1.micro_batch = 2;
	l2 = l1;
	l2.dp = 2;
	/* step 3 of dp=2: ranks x micro-batches cover sequences [48, 64) once each */
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < lb_layout_accum_steps(&l2); i++)
			for (int j = 0; j < l2.micro_batch; j++)
				seen[lb_data_seq_index(&l2, 3, r, i) + j - 48]++;
	for (int g = 0; g < 16; g++)
		assert_int_equal(seen[g], 1);
	assert_true(lb_data_seq_index(&l1, 3, 0, 4) == 56);
	assert_true(lb_data_seq_index(&l2, 3, 1, 0) == 56);
}

static void test_mem_limit_is_oom(void **state)
{
	struct lb_train_opts o;
	struct lb_trainer t;

	tiny_opts(&o);
	o.mem_limit = 100000; /* the tiny model's weights alone are 800 kB */
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), LB_E_OOM);
	assert_non_null(strstr(t.err, "out of memory"));
	o.mem_limit = 0;
	assert_int_equal(lb_trainer_init(&t, &o, lb_ops_cpu(), NULL), 0);
	lb_trainer_free(&t);
	lb_ops_cpu()->set_mem_limit(0);
}

static void test_run_log(void **state)
{
	char dir[] = "/tmp/lbtest-log-XXXXXX", sub[600], err[512], line[8192];
	struct lb_trainlog lg;
	struct lb_runinfo info = {0};
	struct lb_phases ph = {0.1, 0.2, 0.03, -1, -1};
	struct lb_layout l;
	FILE *f;
	int n = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	lb_layout_init(&l);
	info.layout = &l;
	info.gpu = "cpu";
	info.peak_tflops = -1;
	info.backend = "cpu";
	info.world_size = 1;
	setenv("LAYOUTBENCH_SWEEP", "we\"ird\\name", 1);
	setenv("SLURM_JOB_ID", "123", 1);
	setenv("SLURM_ARRAY_TASK_ID", "4", 1);
	setenv("SLURM_ARRAY_JOB_ID", "120", 1);
	setenv("LAYOUTBENCH_LABEL", "flash+fused", 1);
	assert_int_equal(lb_trainlog_open(&lg, sub, &info, err, sizeof(err)), 0);
	unsetenv("LAYOUTBENCH_SWEEP");
	unsetenv("SLURM_JOB_ID");
	unsetenv("SLURM_ARRAY_TASK_ID");
	unsetenv("SLURM_ARRAY_JOB_ID");
	unsetenv("LAYOUTBENCH_LABEL");
	lb_trainlog_step(&lg, 0, 1, 0.5, 1024, 5.5, 4096, &ph);
	lb_trainlog_step(&lg, 1, 0, 0.5, 1024, NAN, 4096, NULL);
	lb_trainlog_end(&lg, "oom", "out of \"memory\"", 0, 3);
	lb_trainlog_end(&lg, NULL, "second end is ignored", -1, 0);
	lb_trainlog_close(&lg);
	f = fopen(lg.path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (n == 0) {
			assert_non_null(strstr(line, "{\"type\":\"header\",\"format\":"
						     "\"layoutbench-runlog\",\"version\":1,"));
			assert_non_null(strstr(line, "\"sweep\":\"we\\\"ird\\\\name\""));
			assert_non_null(strstr(line, "\"job_id\":\"120_4\""));
			assert_non_null(strstr(line, "\"label\":\"flash+fused\""));
			assert_non_null(strstr(line, "\"peak_tflops\":null"));
			assert_non_null(strstr(line, "\"backend\":\"cpu\""));
			assert_non_null(strstr(line, "\"gpu\":\"cpu\""));
			assert_non_null(strstr(line, "\"checkpointing\":\"none\""));
			assert_non_null(strstr(line, lg.run_uid));
		} else if (n == 1) {
			assert_non_null(
			    strstr(line, "\"type\":\"step\",\"step\":0,\"warmup\":true"));
			assert_non_null(strstr(line, "\"loss\":5.5"));
			assert_non_null(strstr(line, "\"peak_mem_bytes\":4096"));
			assert_non_null(strstr(line, "\"phases\":{\"forward_s\":0.1,"));
			assert_null(strstr(line, "bubble_s"));
		} else if (n == 2) {
			assert_non_null(strstr(line, "\"step\":1,\"warmup\":false,"));
			assert_non_null(strstr(line, "\"loss\":null,\"peak_mem_bytes\":4096}"));
		} else {
			assert_non_null(strstr(line,
					       "\"type\":\"end\",\"status\":\"failed\","
					       "\"class\":\"oom\",\"message\":\"out of "
					       "\\\"memory\\\"\",\"rank\":0,\"exit_code\":3"));
		}
		n++;
	}
	fclose(f);
	assert_int_equal(n, 4);
	assert_int_equal(lb_class_exit_code("diverged"), 5);
	assert_int_equal(lb_class_exit_code("timeout"), 6);
	assert_int_equal(lb_class_exit_code("nccl_error"), 4);
	assert_int_equal(lb_class_exit_code("error"), 1);
	unlink(lg.path);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/a", dir);
	rmdir(sub);
	rmdir(dir);
}

/* The trainer's line is read by the one parser: its usage is made from the tables (a line
 * for every layout field's flag and the trainer's own), a layout flag without its value
 * says so as the layout's parser does, and the trainer's choices map onto their enums. */
static void test_usage_and_line(void **state)
{
	struct lb_train_opts o;
	const char *u = lb_train_usage();
	char err[512], flag[64];

	(void)state;
	for (int f = 0; f < LB_NFIELDS; f++) {
		char line[80];

		snprintf(line, sizeof(line), "\n  %s ", lb_field_flag(f, flag, sizeof(flag)));
		if (!strstr(u, line))
			fail_msg("the usage has no line for %s", flag);
	}
	assert_non_null(strstr(u, "\n  --grad-overlap 0|1 "));
	assert_non_null(strstr(u, "\n  --pipeline-schedule 1f1b|gpipe|interleaved "));
	assert_int_equal(parse(&o, "--tp", err, sizeof(err)), -1);
	assert_string_equal(err, "--tp: missing value");
	assert_int_equal(parse(&o,
			       "--tp=2 --pipeline-schedule=gpipe --gpu-comm staged "
			       "--bootstrap pmi2 --device cpu",
			       err, sizeof(err)),
			 0);
	assert_int_equal(o.layout.tp, 2);
	assert_int_equal(o.schedule, LB_SCHED_GPIPE);
	assert_int_equal(o.gpu_comm, LB_GPU_COMM_STAGED);
	assert_int_equal(o.bootstrap, LB_BOOT_PMI2);
	assert_int_equal(parse(&o, "stray", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown flag 'stray'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_flags),
	    cmocka_unit_test(test_usage_and_line),
	    cmocka_unit_test(test_parse_bytes),
	    cmocka_unit_test(test_repeated_batch_loss_falls),
	    cmocka_unit_test(test_run_steps_refuses_sends),
	    cmocka_unit_test(test_step_writes_gradients),
	    cmocka_unit_test(test_dp_group_sums_gradients),
	    cmocka_unit_test(test_synthetic_loss_falls_in_8_steps),
	    cmocka_unit_test(test_same_seed_bitwise),
	    cmocka_unit_test(test_data_files),
	    cmocka_unit_test(test_dp_slicing),
	    cmocka_unit_test(test_mem_limit_is_oom),
	    cmocka_unit_test(test_run_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
