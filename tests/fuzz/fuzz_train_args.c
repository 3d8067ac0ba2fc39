/*
 * libFuzzer target: arbitrary bytes as layoutbench-train's command line (arguments split
 * at newlines), parsed by lb_train_parse_args and checked by lb_train_check; also the
 * byte-count parser of --mem-limit on the whole input. Every input must parse or fail
 * with a message; never crash, overflow or leak.
 */
// clang-format off
// fuzz-sources: harness/train.c harness/train_args.c harness/train_step.c harness/model.c
// fuzz-sources: harness/ops_cpu.c harness/registry.c harness/optim.c harness/data.c harness/trainlog.c
// fuzz-sources: harness/pipe.c harness/comm/*.c
// fuzz-sources: harness/launch.c harness/gradsync.c harness/pipestream.c
// fuzz-sources: common/layout.c common/preset.c common/cmdline.c common/model.c common/pipeline.c
// fuzz-sources: common/util.c common/version.c
// fuzz-libs: -lm -ldl
// fuzz-seeds: tests/fuzz/seeds/train_args/*
// clang-format on
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lb_train_opts o;
	char *buf, *argv[65], err[1024];
	int argc = 0, rc;
	uint64_t bytes;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	lb_parse_bytes(buf, &bytes);
	argv[argc++] = "layoutbench-train";
	for (char *p = buf, *nl; p && argc < 64; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (!strcmp(p, "--help") || !strcmp(p, "-h"))
			continue; /* prints the usage: covered by the tests */
		argv[argc++] = p;
	}
	argv[argc] = NULL;
	lb_train_opts_init(&o);
	err[0] = '\0';
	rc = lb_train_parse_args(&o, argc, argv, err, sizeof(err));
	if (rc < 0 && !err[0])
		abort(); /* a refusal must say why */
	if (rc == 0 && lb_train_check(&o, err, sizeof(err)) && !err[0])
		abort();
	free(buf);
	return 0;
}
