/* Latency histograms in Prometheus text: see histogram.h. */
#include "common/histogram.h"

/* Seconds: from 1 ms (a token's gap) to a minute (a long answer's whole time). */
static const double BOUNDS[LLMR_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                 0.5,   1,      2.5,   5,    10,    30,   60};

void llmr_histogram_observe(llmr_histogram *h, double seconds)
{
    size_t b = 0;
    while (b < LLMR_HIST_BUCKETS && seconds > BOUNDS[b])
        b++;
    h->counts[b]++;
    h->count++;
    h->sum += seconds;
}

void llmr_histogram_write(llmr_strbuf *out, const char *name, const char *labels,
                          const llmr_histogram *h)
{
    bool has = labels && *labels;
    const char *sep = has ? "," : "";
    uint64_t cum = 0;
    for (size_t b = 0; b <= LLMR_HIST_BUCKETS; b++) {
        cum += h->counts[b];
        if (b < LLMR_HIST_BUCKETS)
            llmr_strbuf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, has ? labels : "", sep,
                               BOUNDS[b], (unsigned long long)cum);
        else
            llmr_strbuf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, has ? labels : "", sep,
                               (unsigned long long)cum);
    }
    if (has)
        llmr_strbuf_printf(out, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, h->sum, name,
                           labels, (unsigned long long)h->count);
    else
        llmr_strbuf_printf(out, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
                           (unsigned long long)h->count);
}

void llmr_metric_header(llmr_strbuf *out, const char *name, const char *type, const char *help)
{
    llmr_strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void llmr_metric_label_value(llmr_strbuf *out, const char *value)
{
    for (const char *s = value ? value : ""; *s; s++) {
        if (*s == '"' || *s == '\\')
            llmr_strbuf_putc(out, '\\');
        if (*s == '\n')
            llmr_strbuf_puts(out, "\\n");
        else
            llmr_strbuf_putc(out, *s);
    }
}
