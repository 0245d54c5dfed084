/* The router's GET /metrics (Prometheus text; docs/router.md, "Metrics"): what its
 * answers to the OpenAI endpoints were (by model, node and status), their latency
 * (time to the first byte of the node's answer and the whole request) and tokens per
 * model, the wait queue, and each node's state as the router sees it.  Fed by the
 * HTTP server's record of each request when it is done (router.c). */
#include "router/router_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/histogram.h"

/* One (model, node, status) count. */
typedef struct status_count {
    struct status_count *next;
    char *node;
    unsigned status;
    uint64_t n;
} status_count;

typedef struct model_series {
    struct model_series *next;
    char *model;
    status_count *counts;
    uint64_t prompt_tokens, generation_tokens;
    llmr_histogram ttft, e2e;
} model_series;

struct router_metrics {
    pthread_mutex_t lock;
    model_series *models;
};

router_metrics *router_metrics_new(void)
{
    router_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void router_metrics_free(router_metrics *m)
{
    if (!m)
        return;
    while (m->models) {
        model_series *s = m->models;
        m->models = s->next;
        while (s->counts) {
            status_count *c = s->counts;
            s->counts = c->next;
            free(c->node);
            free(c);
        }
        free(s->model);
        free(s);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Models get series of their own up to this many (a client may name any model);
 * the answers for further names, and names longer than MAX_MODEL_LABEL bytes, count
 * under model="other". */
#define MAX_MODEL_SERIES 256
#define MAX_MODEL_LABEL 200

static model_series *series(router_metrics *m, const char *model)
{
    model_series **at = &m->models;
    size_t n = 0;
    for (; *at; at = &(*at)->next, n++)
        if (!strcmp((*at)->model, model))
            return *at;
    if ((n >= MAX_MODEL_SERIES || strlen(model) > MAX_MODEL_LABEL) && strcmp(model, "other") != 0)
        return series(m, "other");
    model_series *s = calloc(1, sizeof *s);
    if (!s || !(s->model = strdup(model))) {
        free(s);
        return NULL;
    }
    *at = s;
    return s;
}

static status_count *count_of(model_series *s, const char *node, unsigned status)
{
    status_count **at = &s->counts;
    for (; *at; at = &(*at)->next)
        if ((*at)->status == status && !strcmp((*at)->node, node))
            return *at;
    status_count *c = calloc(1, sizeof *c);
    if (!c || !(c->node = strdup(node))) {
        free(c);
        return NULL;
    }
    c->status = status;
    *at = c;
    return c;
}

void router_metrics_done(router_metrics *m, const llmr_http_done *d)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    /* an answer that named no model (a body that did not parse, a missing key), or one
     * that named a model there is not (404): no series of its own for a made-up name */
    model_series *s = series(m, d->model && d->status != 404 ? d->model : "");
    status_count *c = s ? count_of(s, d->node ? d->node : "", d->status) : NULL;
    if (c)
        c->n++;
    if (s) {
        s->prompt_tokens += d->prompt_tokens;
        s->generation_tokens += d->completion_tokens;
        if (d->ttft_ms >= 0)
            llmr_histogram_observe(&s->ttft, d->ttft_ms / 1e3);
        llmr_histogram_observe(&s->e2e, d->duration_ms / 1e3);
    }
    pthread_mutex_unlock(&m->lock);
}

static void label(llmr_strbuf *out, const char *name, const char *value, bool first)
{
    llmr_strbuf_printf(out, "%s%s=\"", first ? "" : ",", name);
    llmr_metric_label_value(out, value);
    llmr_strbuf_putc(out, '"');
}

static void write_requests(router_metrics *m, llmr_strbuf *out)
{
    llmr_strbuf l = LLMR_STRBUF_INIT;
    llmr_metric_header(out, "llmr_router_requests_total", "counter",
                       "Answers to the OpenAI endpoints, by model, node (\"\": none answered) and HTTP "
                       "status (499: the client went away first).");
    for (const model_series *s = m->models; s; s = s->next)
        for (const status_count *c = s->counts; c; c = c->next) {
            llmr_strbuf_reset(&l);
            label(&l, "model", s->model, true);
            label(&l, "node", c->node, false);
            llmr_strbuf_printf(out, "llmr_router_requests_total{%s,status=\"%u\"} %llu\n", llmr_strbuf_cstr(&l),
                               c->status, (unsigned long long)c->n);
        }
    static const char *const tokens[2][2] = {
        {"llmr_router_prompt_tokens_total", "Prompt tokens of the answered requests, by model."},
        {"llmr_router_generation_tokens_total", "Tokens generated for the answered requests, by model."}};
    for (int k = 0; k < 2; k++) {
        llmr_metric_header(out, tokens[k][0], "counter", tokens[k][1]);
        for (const model_series *s = m->models; s; s = s->next) {
            llmr_strbuf_reset(&l);
            label(&l, "model", s->model, true);
            llmr_strbuf_printf(out, "%s{%s} %llu\n", tokens[k][0], llmr_strbuf_cstr(&l),
                               (unsigned long long)(k ? s->generation_tokens : s->prompt_tokens));
        }
    }
    static const char *const hists[2][2] = {
        {"llmr_router_time_to_first_token_seconds",
         "From sending a request to a node to the first byte of its answer, by model."},
        {"llmr_router_e2e_request_latency_seconds",
         "From a request's arrival to the end of its answer (queue and retries included), by model."}};
    for (int k = 0; k < 2; k++) {
        llmr_metric_header(out, hists[k][0], "histogram", hists[k][1]);
        for (const model_series *s = m->models; s; s = s->next) {
            llmr_strbuf_reset(&l);
            label(&l, "model", s->model, true);
            llmr_histogram_write(out, hists[k][0], llmr_strbuf_cstr(&l), k ? &s->e2e : &s->ttft);
        }
    }
    llmr_strbuf_free(&l);
}

static void write_nodes(llmr_router *r, llmr_strbuf *out)
{
    json_t *nodes = router_nodes_json(r), *n;
    size_t i;
    static const char *const gauges[3][2] = {
        {"llmr_router_node_up", "1 while the node sends heartbeats and is not drained."},
        {"llmr_router_node_outstanding_requests", "Requests the router has sent the node and not yet seen end."},
        {"llmr_router_node_ttft_seconds", "The node's recent time to first byte, as the router balances on it."}};
    llmr_strbuf l = LLMR_STRBUF_INIT;
    for (int k = 0; k < 3; k++) {
        llmr_metric_header(out, gauges[k][0], "gauge", gauges[k][1]);
        json_array_foreach(nodes, i, n)
        {
            const char *id = json_string_value(json_object_get(n, "id"));
            const char *name = json_string_value(json_object_get(n, "name"));
            llmr_strbuf_reset(&l);
            label(&l, "node", id ? id : "", true);
            label(&l, "name", name ? name : "", false);
            double v = k == 0   ? (json_is_true(json_object_get(n, "online")) &&
                                 !json_is_true(json_object_get(n, "drained")))
                       : k == 1 ? json_number_value(json_object_get(n, "outstanding"))
                                : json_number_value(json_object_get(n, "ttft_ms")) / 1e3;
            llmr_strbuf_printf(out, "%s{%s} %.6g\n", gauges[k][0], llmr_strbuf_cstr(&l), v);
        }
    }
    llmr_strbuf_free(&l);
    json_decref(nodes);
}

void router_metrics_write(llmr_router *r, llmr_strbuf *out)
{
    router_metrics *m = r->metrics;
    if (m) {
        pthread_mutex_lock(&m->lock);
        write_requests(m, out);
        pthread_mutex_unlock(&m->lock);
    }
    pthread_mutex_lock(&r->queue_lock);
    unsigned waiting = r->waiting;
    pthread_mutex_unlock(&r->queue_lock);
    pthread_mutex_lock(&r->jobs_lock);
    unsigned jobs = r->jobs;
    pthread_mutex_unlock(&r->jobs_lock);
    llmr_metric_header(out, "llmr_router_num_requests_waiting", "gauge",
                       "Requests waiting in the router's queue for a free node.");
    llmr_strbuf_printf(out, "llmr_router_num_requests_waiting %u\n", waiting);
    llmr_metric_header(out, "llmr_router_num_requests_running", "gauge",
                       "Requests the router is handling now (waiting, sent to a node, or streaming).");
    llmr_strbuf_printf(out, "llmr_router_num_requests_running %u\n", jobs);
    write_nodes(r, out);
    llmr_metric_header(out, "llmr_router_request_log_dropped_total", "counter",
                       "Request log entries dropped because too many waited for the disk.");
    llmr_strbuf_printf(out, "llmr_router_request_log_dropped_total %llu\n",
                       (unsigned long long)llmr_store_log_dropped(r->store));
}
