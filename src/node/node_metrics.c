/* The node's HTTP metrics: see node_metrics.h. */
#include "node/node_metrics.h"

#include <string.h>

/* Seconds: from 1 ms to 30 s, for both the first token and the gaps between tokens. */
static const double BOUNDS[LLMR_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,    1,     2.5,  5,     10,  30};
static const char *const ENDPOINTS[LLMR_EP_COUNT] = {"/v1/chat/completions", "/v1/completions",
                                                     "/v1/models", "/health", "/metrics",
                                                     "/v1/responses", "other"};

void llmr_node_metrics_init(llmr_node_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
}

void llmr_node_metrics_destroy(llmr_node_metrics *m)
{
    pthread_mutex_destroy(&m->lock);
}

void llmr_node_metrics_request(llmr_node_metrics *m, llmr_endpoint ep, unsigned status)
{
    unsigned cls = status / 100;
    if (cls < 1 || cls > LLMR_STATUS_CLASSES || ep >= LLMR_EP_COUNT)
        return;
    pthread_mutex_lock(&m->lock);
    m->requests[ep][cls - 1]++;
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_tokens(llmr_node_metrics *m, uint32_t prompt, uint32_t completion)
{
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += prompt;
    m->completion_tokens += completion;
    pthread_mutex_unlock(&m->lock);
}

static void observe(llmr_node_metrics *m, llmr_histogram *h, double v)
{
    pthread_mutex_lock(&m->lock);
    size_t b = 0;
    while (b < LLMR_HIST_BUCKETS && v > BOUNDS[b])
        b++;
    h->counts[b]++;
    h->count++;
    h->sum += v;
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_ttft(llmr_node_metrics *m, double seconds)
{
    observe(m, &m->ttft, seconds);
}

void llmr_node_metrics_per_token(llmr_node_metrics *m, double seconds)
{
    observe(m, &m->per_token, seconds);
}

void llmr_node_metrics_in_flight(llmr_node_metrics *m, int delta)
{
    pthread_mutex_lock(&m->lock);
    m->in_flight = (unsigned)((int)m->in_flight + delta);
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_cancelled(llmr_node_metrics *m)
{
    pthread_mutex_lock(&m->lock);
    m->cancelled++;
    pthread_mutex_unlock(&m->lock);
}

unsigned llmr_node_metrics_get_in_flight(llmr_node_metrics *m)
{
    pthread_mutex_lock(&m->lock);
    unsigned n = m->in_flight;
    pthread_mutex_unlock(&m->lock);
    return n;
}

static void write_histogram(llmr_strbuf *out, const char *name, const char *help, const llmr_histogram *h)
{
    llmr_strbuf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t b = 0; b < LLMR_HIST_BUCKETS; b++) {
        cum += h->counts[b];
        llmr_strbuf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, BOUNDS[b], (unsigned long long)cum);
    }
    cum += h->counts[LLMR_HIST_BUCKETS];
    llmr_strbuf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                       (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->count);
}

void llmr_node_metrics_write(llmr_node_metrics *m, llmr_strbuf *out)
{
    pthread_mutex_lock(&m->lock);
    llmr_strbuf_puts(out, "# HELP llmr_http_requests_total HTTP requests answered, by endpoint "
                          "and status class.\n# TYPE llmr_http_requests_total counter\n");
    for (int e = 0; e < LLMR_EP_COUNT; e++)
        for (int c = 0; c < LLMR_STATUS_CLASSES; c++)
            if (m->requests[e][c])
                llmr_strbuf_printf(out, "llmr_http_requests_total{endpoint=\"%s\",status=\"%dxx\"} %llu\n",
                                   ENDPOINTS[e], c + 1, (unsigned long long)m->requests[e][c]);
    llmr_strbuf_printf(out,
                       "# HELP llmr_http_prompt_tokens_total Prompt tokens of completed requests.\n"
                       "# TYPE llmr_http_prompt_tokens_total counter\nllmr_http_prompt_tokens_total %llu\n"
                       "# HELP llmr_http_completion_tokens_total Tokens generated for HTTP requests.\n"
                       "# TYPE llmr_http_completion_tokens_total counter\nllmr_http_completion_tokens_total %llu\n"
                       "# HELP llmr_http_cancelled_total Requests whose client went away first.\n"
                       "# TYPE llmr_http_cancelled_total counter\nllmr_http_cancelled_total %llu\n"
                       "# HELP llmr_http_in_flight Requests being generated now.\n"
                       "# TYPE llmr_http_in_flight gauge\nllmr_http_in_flight %u\n",
                       (unsigned long long)m->prompt_tokens, (unsigned long long)m->completion_tokens,
                       (unsigned long long)m->cancelled, m->in_flight);
    write_histogram(out, "llmr_http_ttft_seconds", "Time from a request's arrival to its first token.",
                    &m->ttft);
    write_histogram(out, "llmr_http_token_interval_seconds", "Time between a request's tokens.",
                    &m->per_token);
    pthread_mutex_unlock(&m->lock);
}
