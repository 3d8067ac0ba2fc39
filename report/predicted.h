/*
 * `report --figure predicted`: every ok run of a sweep (or of every sweep) with the step
 * time the machine predicts for its layout beside the one measured; per sweep the scores
 * (mean and worst relative error, Spearman's rank correlation, the measured MFU of the
 * layout predicted best against the best measured); as markdown tables, CSV, or an HTML
 * page with the scatter of predicted against measured (gnuplot). The runs are read as
 * `calibrate` reads them (results/calibrate.h); the predictions are common/predict.h's.
 */
#ifndef LB_REPORT_PREDICTED_H
#define LB_REPORT_PREDICTED_H

#include <stddef.h>

#include <sqlite3.h>

#include "common/util.h"

enum report_pred_format { REPORT_PRED_MD = 0, REPORT_PRED_CSV, REPORT_PRED_HTML };

/*
 * Render the figure into out. sweep NULL: every sweep with ok runs; machine NULL: per
 * sweep the one shipped for its runs' GPU. Returns 0; 1 when the figure was rendered but
 * its plot failed (noted on the page); -1 with err set (no runs; no machine; a database
 * error).
 */
int report_predicted(sqlite3 *db, const char *sweep, const char *machine,
		     enum report_pred_format fmt, struct lb_strbuf *out, char *err, size_t errlen);

#endif
