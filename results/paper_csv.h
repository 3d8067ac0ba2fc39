/*
 * Parser of the paper's published measurements (Hagemann et al. 2023; the CSV files in
 * ../shared/paper-data, format in that folder's README): line 1 the sheet's title, line
 * 2 the header, then one row per run. Columns are found by header name, not position;
 * the sequence_parallel column exists only in the *_sequence_parallelism files. Pure
 * functions: text in, rows out; the importer (results/) and the calibration tests of the
 * memory model (tests/unit/test_paper_*.c) both read the files through it.
 */
#ifndef LB_PAPER_CSV_H
#define LB_PAPER_CSV_H

#include <stddef.h>

#include "common/layout.h"

#define PAPER_FAILURE_MAX 32
#define PAPER_CKPT_MAX	  16
#define PAPER_KERNEL_MAX  48

struct paper_row {
	int line;			 /* 1-based line number in the file */
	long trial_id;			 /* the authors' run id */
	int world_size;			 /* GPUs */
	int failed;			 /* 1: no measurement; failure says why */
	char failure[PAPER_FAILURE_MAX]; /* "OOM Error", "Kernel not available", "Other Error";
					    "" when measured */
	double step_time_s;		 /* mean seconds per optimizer step; 0 when failed */
	double mfu; /* "Average MFU": fraction of 312 TFLOP/s per GPU; 0 when failed */
	char checkpointing[PAPER_CKPT_MAX]; /* "disabled" or "every_layer" */
	char kernel[PAPER_KERNEL_MAX];	    /* verbatim, e.g. "flash_attention2 + RMS kernel" */
	int micro_batch;		    /* sequences per micro-batch */
	int tp;				    /* model_parallel_size */
	int pp;				    /* pipe_parallel_size */
	int sequence_parallel;		    /* 0/1; -1 when the file has no such column */
};

/*
 * Parse a whole file (text of len bytes; CRLF or LF; no NUL needed). On success returns
 * 0, sets *rows (caller frees with free(); NULL when there are no rows) and *n, and
 * copies the title (line 1's first field) into title (may be NULL). On failure returns
 * -1, leaves *rows NULL and *n 0, and writes a reason naming the line and the fault into
 * err, e.g. "line 7: 'micro_batch_size': expected an integer, got 'x'" or
 * "line 2: missing column 'World Size'". Blank lines are skipped.
 */
int paper_csv_parse(const char *text, size_t len, struct paper_row **rows, size_t *n, char *title,
		    size_t titlelen, char *err, size_t errlen);

/*
 * Facts carried by the file name (a basename such as
 * "llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.csv"): the model preset
 * ("llama_13B" -> "llama-13b"), the sequence length (8192 when the name says "8k", else
 * 2048) and the global batch in sequences (512 at 8k, else 2048: about 4.2M tokens).
 * Returns 0, or -1 when no "llama_<N>B" model is named.
 */
int paper_file_info(const char *basename, char *model, size_t mlen, int *seq_len,
		    int *global_batch);

/*
 * The full layout of one row: the model preset with vocabulary 128000 and an untied head
 * (what the MFU column implies), seq_len and global_batch (from paper_file_info), 8 GPUs
 * per node, nodes = world / 8 (1 when world < 8), dp = world / (tp * pp), ZeRO-1 (the
 * runs shard the optimizer state; see docs/memory-model.md), checkpointing
 * every_layer -> full, the kernel mapped by lb_kernel_name_map (unknown -> flash + fused),
 * sequence parallelism only when the row says 1 and tp > 1 (a no-op at tp = 1), steps
 * 10 with warmup 1 (the paper timed the last 9 of 10 steps). pp need not divide the
 * layers: the paper's 30B runs split 60 layers over 8 and 16 stages, which
 * lb_layout_check rejects for our trainer (60 rows). Returns 0, or -1 when the model is
 * not a preset or the kernel is unknown (out is still filled as far as possible).
 */
int paper_row_layout(const struct paper_row *r, const char *model, int seq_len, int global_batch,
		     struct lb_layout *out);

#endif
