/* Latency histograms in Prometheus text: fixed bounds in seconds (1 ms to 60 s), and
 * the lines of one series (_bucket with le, _sum, _count) with its labels.  Not
 * thread-safe: the owner locks. */
#ifndef LLMR_COMMON_HISTOGRAM_H
#define LLMR_COMMON_HISTOGRAM_H

#include <stdint.h>

#include "common/strbuf.h"

#define LLMR_HIST_BUCKETS 15

typedef struct llmr_histogram {
    uint64_t counts[LLMR_HIST_BUCKETS + 1]; /* the last: above every bound (+Inf) */
    uint64_t count;
    double sum;
} llmr_histogram;

void llmr_histogram_observe(llmr_histogram *h, double seconds);
/* The series' lines: name_bucket{labels,le="..."}..., name_sum{labels}, name_count{labels}.
 * labels: `model="x"` (already escaped), or NULL / "" for none. */
void llmr_histogram_write(llmr_strbuf *out, const char *name, const char *labels,
                          const llmr_histogram *h);
/* The # HELP and # TYPE lines of a metric family. */
void llmr_metric_header(llmr_strbuf *out, const char *name, const char *type, const char *help);
/* value as a Prometheus label value: backslash, quote and newline escaped. */
void llmr_metric_label_value(llmr_strbuf *out, const char *value);

#endif
