/*
 * Machine descriptions as files: the JSON form of struct lb_machine (common/predict.h),
 * read and written here, and the machines shipped with layoutbench (common/machines/,
 * embedded in the binary like the sweep specs): throughput tables of a GPU (our H200's
 * measured; the A100 and H100 nominal, from data sheets and papers, and said to be so)
 * and calibrations, which name a base machine and add the fitted terms. Also the readers
 * of the measurement tools' output that a table is made from: bench_kernels --csv and
 * bench_colls. Format: docs/prediction.md ("Machine files").
 */
#ifndef LB_MACHINE_H
#define LB_MACHINE_H

#include <stddef.h>
#include <stdio.h>

#include "common/predict.h"

#define LB_MACHINE_FORMAT "layoutbench-machine"
#define LB_MACHINE_DIR	  "common/machines/"

/*
 * Apply the JSON text of a machine file onto m: every key given replaces m's (fit terms
 * one by one, attention kernels and variants by name; the gemm and membound rows as a
 * whole); keys not given keep m's values. So a file read onto lb_machine_init's defaults
 * is the machine, and a calibration read onto its base is the calibrated machine. path
 * names the file in messages. *base gets the "base" key (or "" when none; may be NULL).
 * Returns 0, or -1 with err set ("PATH: fit.gemm_scale: 7 is outside [0.5, 3]").
 */
int lb_machine_apply_text(struct lb_machine *m, const char *text, size_t len, const char *path,
			  char *base, size_t baselen, char *err, size_t errlen);

/*
 * Load a machine by name or path: an existing file; else the shipped one
 * "common/machines/NAME.json" (NAME as "h200", "a100-paper"). A file that names a base
 * is read onto its base, loaded the same way (at most 4 deep). Returns 0, or -1 with err
 * set ("unknown machine 'x' (shipped: a100-nominal, ...; or give a file)").
 */
int lb_machine_load(const char *name_or_path, struct lb_machine *m, char *err, size_t errlen);

/* The names of the shipped machines, NULL-terminated (static). */
const char *const *lb_machine_shipped(void);

/*
 * The shipped machine for a GPU product name ("A100", "NVIDIA H200", ...): a calibration
 * when one is shipped for it (A100: a100-paper, H200: h200), else a nominal table (H100:
 * h100-nominal). Returns the name, or NULL when none is shipped for it.
 */
const char *lb_machine_for_gpu(const char *gpu);

/*
 * Write m as a machine file. With base (the machine m was calibrated from, its name in
 * m->base), a calibration: only what the fit changed (the fitted terms, the attention
 * scales, the variants) and the provenance in calib_json (a JSON object's text, or
 * NULL); without, every table. Returns 0, or -1 on a write error.
 */
int lb_machine_write(FILE *f, const struct lb_machine *m, const struct lb_machine *base,
		     const char *calib_json);

/*
 * Tables from bench_kernels --csv (kernel,shape,time_us,work,unit,achieved,...): gemm.*
 * rows become GEMM rows (op from the name, m n k from the shape), attn.* rows attention
 * rates by sequence (attn.probs.bwd is the backward of naive and fused_softmax), the
 * memory-bound rows rates by bytes; rows whose check is not "ok" are left out and
 * counted in *skipped. Replaces m's rows of those kinds. Returns 0, or -1 with err set
 * ("line 3: 'gemm.qkv.fwd': no m, n, k in shape 'x'").
 */
int lb_machine_from_kernels_csv(struct lb_machine *m, const char *text, size_t len, int *skipped,
				char *err, size_t errlen);

/*
 * The link within a node from bench_colls' output: the all_reduce table's bus bandwidth
 * at its largest size (nvlink_gbps) and its smallest size's time over the 2 (n - 1) ring
 * steps (nvlink_lat_s). Needs 2 or more ranks. Returns 0, or -1 with err set.
 */
int lb_machine_from_colls(struct lb_machine *m, const char *text, size_t len, char *err,
			  size_t errlen);

#endif
