/*
 * Unit tests of the paper-CSV parser (results/paper_csv.c): a small inline file, each
 * malformed input with its error text, the file-name facts, the kernel map, the row ->
 * layout mapping, and every shipped CSV in the paper data folder parsing cleanly into
 * valid layouts (skipped when the folder is absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/layout.h"
#include "results/paper_csv.h"
#include "tests/unit/paper_data.h"

static const char *const header =
    "Trial ID,World Size,Average Step Time,Average Step Time * World size,Average TFlops "
    "Megatron,Average TFlops Aleph Alpha,Average MFU,activation_checkpointing_type,kernel,"
    "micro_batch_size,model_parallel_size,pipe_parallel_size";

static int parse(const char *text, struct paper_row **rows, size_t *n, char *err, size_t elen)
{
	char title[128];

	return paper_csv_parse(text, strlen(text), rows, n, title, sizeof(title), err, elen);
}

static void test_parse_small(void **state)
{
	char text[4096], title[128], err[256];
	struct paper_row *rows;
	size_t n;

	snprintf(text, sizeof(text),
		 "my_sheet,,,,,,,,,,,\r\n%s\r\n"
		 "132173,64,OOM Error,OOM Error,OOM Error,OOM Error,OOM Error,disabled,"
		 "flash_attention2 + RMS kernel,8,2,2\r\n"
		 "\r\n"
		 "132180,64,40.5,2592,150,160,0.6966049821464876,every_layer,torch,1,4,2\r\n",
		 header);
	assert_int_equal(
	    paper_csv_parse(text, strlen(text), &rows, &n, title, sizeof(title), err, sizeof(err)),
	    0);
	assert_string_equal(title, "my_sheet");
	assert_int_equal(n, 2);
	assert_int_equal(rows[0].line, 3);
	assert_true(rows[0].trial_id == 132173);
	assert_int_equal(rows[0].world_size, 64);
	assert_int_equal(rows[0].failed, 1);
	assert_string_equal(rows[0].failure, "OOM Error");
	assert_string_equal(rows[0].kernel, "flash_attention2 + RMS kernel");
	assert_int_equal(rows[0].micro_batch, 8);
	assert_int_equal(rows[0].sequence_parallel, -1);
	assert_int_equal(rows[1].line, 5);
	assert_int_equal(rows[1].failed, 0);
	assert_string_equal(rows[1].failure, "");
	assert_true(rows[1].step_time_s == 40.5);
	assert_true(rows[1].mfu > 0.6966 && rows[1].mfu < 0.6967);
	assert_string_equal(rows[1].checkpointing, "every_layer");
	assert_int_equal(rows[1].tp, 4);
	assert_int_equal(rows[1].pp, 2);
	free(rows);
}

/* Columns are found by name: reorder them, quote one, add the SP column. */
static void test_columns_by_name(void **state)
{
	const char *text =
	    "t\n"
	    "kernel,pipe_parallel_size,sequence_parallel,model_parallel_size,micro_batch_size,"
	    "activation_checkpointing_type,Average MFU,Average Step Time,World Size,Trial ID\n"
	    "\"flash_attention2 + RMS kernel\",4,1,2,1,disabled,0.5,12.25,32,7\n";
	char err[256];
	struct paper_row *rows;
	size_t n;

	assert_int_equal(parse(text, &rows, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].kernel, "flash_attention2 + RMS kernel");
	assert_int_equal(rows[0].pp, 4);
	assert_int_equal(rows[0].tp, 2);
	assert_int_equal(rows[0].sequence_parallel, 1);
	assert_int_equal(rows[0].world_size, 32);
	assert_true(rows[0].step_time_s == 12.25);
	free(rows);
}

static void expect_error(const char *body, const char *want)
{
	char text[4096], err[256];
	struct paper_row *rows = (struct paper_row *)1;
	size_t n = 99;

	snprintf(text, sizeof(text), "title\n%s\n%s", header, body);
	assert_int_equal(parse(text, &rows, &n, err, sizeof(err)), -1);
	assert_null(rows);
	assert_int_equal(n, 0);
	if (strcmp(err, want))
		fail_msg("want '%s', got '%s'", want, err);
}

static void test_malformed(void **state)
{
	char err[256];
	struct paper_row *rows;
	size_t n;

	expect_error("1,64,OOM Error,x,x,x,x,disabled,torch,1,2\n",
		     "line 3: short row, no 'pipe_parallel_size' (column 12)");
	expect_error("1,64,OOM Error,x,x,x,x,disabled,torch,x,2,1\n",
		     "line 3: 'micro_batch_size': expected an integer in [1, 1048576], got 'x'");
	expect_error("1,64,fast,x,x,x,0.5,disabled,torch,1,2,1\n",
		     "line 3: 'Average Step Time': expected seconds or a failure (OOM Error, "
		     "Kernel not available, Other Error), got 'fast'");
	expect_error("1,64,10.5,x,x,x,55,disabled,torch,1,2,1\n",
		     "line 3: 'Average MFU': expected a fraction in [0, 1], got '55'");
	expect_error("1,64,10.5,x,x,x,0.5,sometimes,torch,1,2,1\n",
		     "line 3: 'activation_checkpointing_type': expected disabled or every_layer, "
		     "got 'sometimes'");
	expect_error("1,0,10.5,x,x,x,0.5,disabled,torch,1,2,1\n",
		     "line 3: 'World Size': expected an integer in [1, 16777216], got '0'");
	expect_error("abc,64,10.5,x,x,x,0.5,disabled,torch,1,2,1\n",
		     "line 3: 'Trial ID': expected an integer in [0, 2147483647], got 'abc'");
	expect_error("1,64,10.5,x,x,x,0.5,disabled,\"torch,1,2,1\n",
		     "line 3: unterminated quote in field 9");
	/* wrong header */
	assert_int_equal(parse("t\nTrial ID,World Size,Step\n1,2,3\n", &rows, &n, err, sizeof(err)),
			 -1);
	assert_string_equal(err, "line 2: missing column 'Average Step Time' in the header");
	/* no header at all, empty input, empty title */
	assert_int_equal(parse("title only\n", &rows, &n, err, sizeof(err)), -1);
	assert_string_equal(err, "line 2: no header line (expected the title, then the header)");
	assert_int_equal(parse("", &rows, &n, err, sizeof(err)), -1);
	assert_int_equal(parse(",,,\nx\n", &rows, &n, err, sizeof(err)), -1);
	assert_string_equal(err, "line 1: empty title");
	/* a header and no rows is fine */
	{
		char text[1024];

		snprintf(text, sizeof(text), "t\n%s\n", header);
		assert_int_equal(parse(text, &rows, &n, err, sizeof(err)), 0);
		assert_int_equal(n, 0);
		free(rows);
	}
	/* a NUL inside the text is an error, not a silent truncation */
	{
		char text[1024];
		size_t len;

		len = (size_t)snprintf(text, sizeof(text),
				       "t\n%s\n1,64,10.5,x,x,x,0.5,disabled,torch,1,2,1\n", header);
		text[len - 5] = '\0';
		assert_int_equal(paper_csv_parse(text, len, &rows, &n, NULL, 0, err, sizeof(err)),
				 -1);
		assert_string_equal(err, "line 3: NUL byte in field 10");
	}
}

static void test_file_info(void **state)
{
	char model[32];
	int seq, gb;

	assert_int_equal(paper_file_info("llama_13B_bfloat16_64_GPUs_all_runs.csv", model,
					 sizeof(model), &seq, &gb),
			 0);
	assert_string_equal(model, "llama-13b");
	assert_int_equal(seq, 2048);
	assert_int_equal(gb, 2048);
	assert_int_equal(paper_file_info("../x/llama_30B_8k_seq_length_bfloat16_128_GPUs_all_"
					 "runs.csv",
					 model, sizeof(model), &seq, &gb),
			 0);
	assert_string_equal(model, "llama-30b");
	assert_int_equal(seq, 8192);
	assert_int_equal(gb, 512);
	assert_int_equal(paper_file_info("gpt_13B.csv", model, sizeof(model), &seq, &gb), -1);
	assert_int_equal(paper_file_info("llama_B.csv", model, sizeof(model), &seq, &gb), -1);
	assert_int_equal(paper_file_info("llama_13X.csv", model, sizeof(model), &seq, &gb), -1);
}

static void test_row_layout(void **state)
{
	struct paper_row r;
	struct lb_layout l;
	char reason[256];

	memset(&r, 0, sizeof(r));
	r.world_size = 64;
	r.micro_batch = 2;
	r.tp = 2;
	r.pp = 4;
	r.sequence_parallel = 1;
	snprintf(r.checkpointing, sizeof(r.checkpointing), "every_layer");
	snprintf(r.kernel, sizeof(r.kernel), "flash_attention2 + RMS kernel");
	assert_int_equal(paper_row_layout(&r, "llama-30b", 8192, 512, &l), 0);
	assert_int_equal(l.model.vocab, 128000);
	assert_int_equal(l.model.tied, 0);
	assert_int_equal(l.model.hidden, 6656);
	assert_int_equal(l.seq_len, 8192);
	assert_int_equal(l.global_batch, 512);
	assert_int_equal(l.dp, 8);
	assert_int_equal(l.gpus_per_node, 8);
	assert_int_equal(l.nodes, 8);
	assert_int_equal(l.zero_stage, 1);
	assert_int_equal(l.sequence_parallel, 1);
	assert_int_equal(l.checkpointing, LB_CKPT_FULL);
	assert_int_equal(l.attention, LB_ATTN_FLASH);
	assert_int_equal(l.norm, LB_NORM_FUSED);
	assert_int_equal(lb_layout_check(&l, reason, sizeof(reason)), 0);
	/* SP at tp=1 is a no-op: the layout says 0 */
	r.tp = 1;
	assert_int_equal(paper_row_layout(&r, "llama-30b", 8192, 512, &l), 0);
	assert_int_equal(l.sequence_parallel, 0);
	assert_int_equal(l.dp, 16);
	/* unknown kernel or model */
	snprintf(r.kernel, sizeof(r.kernel), "xformers");
	assert_int_equal(paper_row_layout(&r, "llama-30b", 8192, 512, &l), -1);
	/* the paper ran no cuDNN attention: our name is no paper kernel, and the row falls
	 * back to flash, never to cudnn */
	snprintf(r.kernel, sizeof(r.kernel), "cudnn");
	assert_int_equal(paper_row_layout(&r, "llama-30b", 8192, 512, &l), -1);
	assert_int_equal(l.attention, LB_ATTN_FLASH);
	snprintf(r.kernel, sizeof(r.kernel), "torch");
	assert_int_equal(paper_row_layout(&r, "llama-31b", 8192, 512, &l), -1);
}

/* Every shipped CSV parses, and every row maps to a valid layout. */
static void test_shipped_files(void **state)
{
	static const struct {
		const char *file;
		size_t rows;
	} want[] = {
	    {"llama_13B_bfloat16_32_GPUs_sequence_parallelism.csv", 32},
	    {"llama_13B_bfloat16_64_GPUs_all_runs.csv", 141},
	    {"llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.csv", 189},
	    {"llama_13B_bfloat16_8k_seq_length_64_GPUs_sequence_parallelism.csv", 60},
	    {"llama_30B_8k_seq_length_bfloat16_128_GPUs_all_runs.csv", 108},
	    {"llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism.csv", 36},
	    {"llama_30B_bfloat16_256_GPUs_all_runs.csv", 185},
	    {"llama_30B_bfloat16_64_GPUs_sequence_parallelism.csv", 52},
	};
	const char *dir = paper_data_dir();
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t i, k, nfiles = 0, uneven = 0;

	if (!d) {
		print_message("paper data folder '%s' is absent\n", dir);
		skip();
	}
	while ((de = readdir(d))) {
		char path[4096], err[256], title[128], model[32], reason[256];
		struct paper_row *rows;
		size_t n, len = 0, nl = strlen(de->d_name);
		int seq, gb, sp_col;
		char *text;

		if (nl < 5 || strcmp(de->d_name + nl - 4, ".csv"))
			continue;
		nfiles++;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		text = read_file(path, &len);
		assert_non_null(text);
		if (paper_csv_parse(text, len, &rows, &n, title, sizeof(title), err, sizeof(err)))
			fail_msg("%s: %s", de->d_name, err);
		assert_true(title[0] != '\0');
		assert_int_equal(paper_file_info(de->d_name, model, sizeof(model), &seq, &gb), 0);
		for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			if (!strcmp(want[i].file, de->d_name))
				assert_int_equal(n, want[i].rows);
		sp_col = strstr(de->d_name, "sequence_parallelism") != NULL;
		for (k = 0; k < n; k++) {
			struct lb_layout l;

			assert_int_equal(rows[k].sequence_parallel >= 0, sp_col);
			if (paper_row_layout(&rows[k], model, seq, gb, &l))
				fail_msg("%s line %d: kernel '%s'", de->d_name, rows[k].line,
					 rows[k].kernel);
			/* every row is a valid layout, the 60 that split 30B's 60 layers
			 * unevenly over 8 or 16 stages included (lb_stage_layers) */
			if (lb_layout_check(&l, reason, sizeof(reason)))
				fail_msg("%s line %d: %s", de->d_name, rows[k].line, reason);
			if (l.model.n_layers % l.pp)
				uneven++;
			assert_int_equal(lb_layout_world(&l), rows[k].world_size);
		}
		free(rows);
		free(text);
	}
	closedir(d);
	assert_int_equal(nfiles, 8);
	assert_int_equal(uneven, 60);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_small), cmocka_unit_test(test_columns_by_name),
	    cmocka_unit_test(test_malformed),	cmocka_unit_test(test_file_info),
	    cmocka_unit_test(test_row_layout),	cmocka_unit_test(test_shipped_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
