/*
 * Plots of report figures through gnuplot: plot_script() writes a gnuplot script that draws
 * a figure as grouped bars (one cluster per group, one colour per series, each bar
 * annotated above with its value and layout, OOM and failures written at the base) as SVG;
 * plot_run() runs gnuplot as a child process (fork + exec, no shell) with the script on its
 * stdin and returns the SVG it printed. The script is pure text; only plot_run touches
 * processes. The gnuplot program is $LB_GNUPLOT, else "gnuplot" from PATH.
 */
#ifndef LB_PLOT_H
#define LB_PLOT_H

#include <stddef.h>

#include "common/util.h"
#include "report/report.h"

/* Append the script for figure f to sb (data inline in $data << EOD blocks, labels
 * sanitised). The y axis is MFU in percent when every measured bar has one
 * (report_figure_all_mfu), else model TFLOP/s per GPU. */
void plot_script(struct lb_strbuf *sb, const struct report_figure *f);

/* The colours series take in order (caller must not free); returns how many. */
size_t plot_palette(const char *const **colours);
/* Series k's colour ("#rrggbb") and fill: pattern 0 is solid (the first pass through the
 * palette), else a gnuplot hatch pattern (each later pass its own). */
void plot_series_style(size_t k, const char **colour, int *pattern);

/* Exit codes of plot_run besides 0. */
#define PLOT_ERR_FAILED	 (-1) /* gnuplot ran and failed, or an I/O error */
#define PLOT_ERR_MISSING (-2) /* gnuplot is not installed (or $LB_GNUPLOT not executable) */

/*
 * Run gnuplot on script and capture its stdout. Returns 0 and sets *svg (caller frees with
 * free()), or PLOT_ERR_* with err set, e.g. "gnuplot not found: install it (apt-get
 * install gnuplot-nox) or set LB_GNUPLOT" or "gnuplot exited with status 1".
 * gnuplot's own diagnostics go to this process's stderr.
 */
int plot_run(const char *script, char **svg, char *err, size_t errlen);

#endif
