/*
 * libFuzzer target: arbitrary bytes as a sweep spec through the whole planner
 * (sweep_plan_text: JSON parsing, spec checks, where expressions, expansion, validity
 * rules, memory estimate, duplicate merging). It must never crash, hang or leak. The
 * point limit is lowered so that a short spec with a huge grid stays fast.
 */
// fuzz-sources: sweeps/expr.c sweeps/spec.c sweeps/sweep.c common/*.c results/paper_csv.c @embed
// fuzz-libs: -lcjson -lm -lpthread
// fuzz-seeds: sweeps/specs/*.json
// fuzz-dict: tests/fuzz/spec.dict
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sweeps/sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sweep_opts opts = {20000, 1};
	struct sweep_plan p;
	char err[1024];
	size_t i, ok = 0, oom = 0, inv = 0;

	if (size > (1u << 16))
		return 0;
	if (sweep_plan_text_opts("fuzz.json", (const char *)data, size, &opts, &p, err,
				 sizeof(err))) {
		if (!err[0] || p.entries || p.n_entries)
			__builtin_trap(); /* a failure must say why and leave nothing behind */
		return 0;
	}
	for (i = 0; i < p.n_entries; i++) {
		const struct plan_entry *e = &p.entries[i];

		if (e->status == PLAN_OK)
			ok++;
		else if (e->status == PLAN_OOM)
			oom++;
		else
			inv++;
		if (e->status != PLAN_OK && !e->reason[0])
			__builtin_trap(); /* every rejected layout carries its reason */
		if (strlen(e->id) != LB_ID_LEN)
			__builtin_trap();
	}
	if (ok != p.n_ok || oom != p.n_oom || inv != p.n_invalid)
		__builtin_trap();
	sweep_plan_free(&p);
	return 0;
}
