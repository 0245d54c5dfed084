/* The node's HTTP metrics: see node_metrics.h. */
#include "node/node_metrics.h"

#include <stdlib.h>
#include <stddef.h>
#include <string.h>

static const char *const ENDPOINTS[LLMR_EP_COUNT] = {"/v1/chat/completions", "/v1/completions",
                                                     "/v1/models", "/health", "/metrics",
                                                     "/v1/responses", "other"};

#define MAX_MODELS 256  /* models with series of their own */
#define MAX_MODEL_LABEL 200 /* bytes of a model's name in a label */
#define STATUS_SLOTS 16 /* distinct statuses counted per model; more go to the last */

struct node_model_metrics {
    node_model_metrics *next;
    char *name;
    unsigned statuses[STATUS_SLOTS];
    uint64_t requests[STATUS_SLOTS];
    uint64_t prompt_tokens, generation_tokens;
    llmr_histogram ttft, itl, e2e;
};

void llmr_node_metrics_init(llmr_node_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
}

void llmr_node_metrics_destroy(llmr_node_metrics *m)
{
    while (m->models) {
        node_model_metrics *next = m->models->next;
        free(m->models->name);
        free(m->models);
        m->models = next;
    }
    pthread_mutex_destroy(&m->lock);
}

/* The model's entry, made on first use; NULL when out of memory.  With the lock. */
static node_model_metrics *model_entry(llmr_node_metrics *m, const char *model)
{
    if (!model)
        return NULL;
    node_model_metrics **at = &m->models;
    size_t n = 0;
    for (; *at; at = &(*at)->next, n++)
        if (strcmp((*at)->name, model) == 0)
            return *at;
    /* a client may name any model: the series stay bounded, further names and long ones
     * counting under "other" */
    if ((n >= MAX_MODELS || strlen(model) > MAX_MODEL_LABEL) && strcmp(model, "other") != 0)
        return model_entry(m, "other");
    node_model_metrics *e = calloc(1, sizeof *e);
    if (!e || !(e->name = strdup(model))) {
        free(e);
        return NULL;
    }
    *at = e;
    return e;
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

void llmr_node_metrics_tokens(llmr_node_metrics *m, const char *model, uint32_t prompt,
                              uint32_t completion)
{
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += prompt;
    m->completion_tokens += completion;
    node_model_metrics *e = model_entry(m, model);
    if (e) {
        e->prompt_tokens += prompt;
        e->generation_tokens += completion;
    }
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_ttft(llmr_node_metrics *m, const char *model, double seconds)
{
    pthread_mutex_lock(&m->lock);
    node_model_metrics *e = model_entry(m, model);
    if (e)
        llmr_histogram_observe(&e->ttft, seconds);
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_per_token(llmr_node_metrics *m, const char *model, double seconds)
{
    pthread_mutex_lock(&m->lock);
    node_model_metrics *e = model_entry(m, model);
    if (e)
        llmr_histogram_observe(&e->itl, seconds);
    pthread_mutex_unlock(&m->lock);
}

void llmr_node_metrics_done(llmr_node_metrics *m, const char *model, unsigned status,
                            double seconds)
{
    pthread_mutex_lock(&m->lock);
    /* a 404 named a model there is not: no series for a made-up name */
    node_model_metrics *e = status == 404 ? NULL : model_entry(m, model);
    if (e) {
        size_t i = 0;
        while (i < STATUS_SLOTS - 1 && e->statuses[i] && e->statuses[i] != status)
            i++;
        e->statuses[i] = e->statuses[i] ? e->statuses[i] : status;
        e->requests[i]++;
        llmr_histogram_observe(&e->e2e, seconds);
    }
    pthread_mutex_unlock(&m->lock);
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

static void model_label(llmr_strbuf *labels, const node_model_metrics *e)
{
    llmr_strbuf_reset(labels);
    llmr_strbuf_puts(labels, "model=\"");
    llmr_metric_label_value(labels, e->name);
    llmr_strbuf_puts(labels, "\"");
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

    llmr_strbuf labels = LLMR_STRBUF_INIT;
    llmr_metric_header(out, "llmr_requests_total", "counter",
                       "Generation requests answered, by model and HTTP status (499: the client "
                       "went away first).");
    for (const node_model_metrics *e = m->models; e; e = e->next) {
        model_label(&labels, e);
        for (size_t i = 0; i < STATUS_SLOTS && e->statuses[i]; i++)
            llmr_strbuf_printf(out, "llmr_requests_total{%s,status=\"%u\"} %llu\n", llmr_strbuf_cstr(&labels),
                               e->statuses[i], (unsigned long long)e->requests[i]);
    }
    llmr_metric_header(out, "llmr_prompt_tokens_total", "counter", "Prompt tokens processed, by model.");
    for (const node_model_metrics *e = m->models; e; e = e->next) {
        model_label(&labels, e);
        llmr_strbuf_printf(out, "llmr_prompt_tokens_total{%s} %llu\n", llmr_strbuf_cstr(&labels),
                           (unsigned long long)e->prompt_tokens);
    }
    llmr_metric_header(out, "llmr_generation_tokens_total", "counter", "Tokens generated, by model.");
    for (const node_model_metrics *e = m->models; e; e = e->next) {
        model_label(&labels, e);
        llmr_strbuf_printf(out, "llmr_generation_tokens_total{%s} %llu\n", llmr_strbuf_cstr(&labels),
                           (unsigned long long)e->generation_tokens);
    }
    static const struct {
        const char *name, *help;
        size_t offset;
    } hists[] = {
        {"llmr_time_to_first_token_seconds", "Time from a request's arrival to its first token.",
         offsetof(node_model_metrics, ttft)},
        {"llmr_inter_token_latency_seconds", "Time between a request's tokens.",
         offsetof(node_model_metrics, itl)},
        {"llmr_e2e_request_latency_seconds", "Time from a request's arrival to the end of its answer.",
         offsetof(node_model_metrics, e2e)},
    };
    for (size_t h = 0; h < sizeof hists / sizeof hists[0]; h++) {
        llmr_metric_header(out, hists[h].name, "histogram", hists[h].help);
        for (const node_model_metrics *e = m->models; e; e = e->next) {
            model_label(&labels, e);
            llmr_histogram_write(out, hists[h].name, llmr_strbuf_cstr(&labels),
                                 (const llmr_histogram *)(const void *)((const char *)e + hists[h].offset));
        }
    }
    llmr_strbuf_free(&labels);
    pthread_mutex_unlock(&m->lock);
}
