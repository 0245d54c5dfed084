/* One request's record, from its request line to its end (see http_server.h): what
 * the server knows (id, method, path, timing) and what the handler noted (model,
 * tokens, TTFT...).  Finishing it writes the access log line and calls on_done. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/http_internal.h"

enum { S_SERVICE, S_ID, S_METHOD, S_PATH, S_MODEL, S_NODE, S_KEY, S_RESPONSE, S_ERROR, S_TARGET, S_COUNT };

struct http_access {
    char *s[S_COUNT];
    llmr_http_done_fn on_done;
    void *done_user;
    unsigned noted_status;
    bool quiet;
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms;
    uint64_t t0_ns;
    int64_t arrival_unix_ms;
};

static void set(http_access *a, int k, const char *v)
{
    if (!v)
        return;
    char *d = strdup(v);
    if (!d)
        return; /* out of memory: the field stays as it was */
    free(a->s[k]);
    a->s[k] = d;
}

http_access *http_access_new(const char *service, llmr_http_done_fn on_done, void *done_user,
                             const char *request_id, const char *method, const char *path,
                             uint64_t t0_ns, int64_t arrival_unix_ms)
{
    if (!service && !on_done)
        return NULL;
    http_access *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    set(a, S_SERVICE, service);
    set(a, S_ID, request_id);
    set(a, S_METHOD, method);
    set(a, S_PATH, path);
    /* health checks and scrapes come every few seconds */
    a->quiet = method && path && !strcmp(method, "GET") && (!strcmp(path, "/health") || !strcmp(path, "/metrics"));
    a->on_done = on_done;
    a->done_user = done_user;
    a->ttft_ms = -1;
    a->t0_ns = t0_ns;
    a->arrival_unix_ms = arrival_unix_ms;
    return a;
}

void http_access_note(http_access *a, const llmr_http_note *n)
{
    if (!a || !n)
        return;
    set(a, S_MODEL, n->model);
    set(a, S_NODE, n->node);
    set(a, S_KEY, n->key_id);
    set(a, S_RESPONSE, n->response_id);
    set(a, S_ERROR, n->error);
    set(a, S_TARGET, n->target);
    a->quiet = a->quiet || n->quiet;
    if (n->usage) {
        a->prompt_tokens = n->prompt_tokens;
        a->completion_tokens = n->completion_tokens;
        a->ttft_ms = n->ttft_ms;
    }
    if (n->status)
        a->noted_status = n->status;
}

void http_access_finish(http_access *a, unsigned status, bool client_gone)
{
    if (!a)
        return;
    if (a->noted_status)
        status = a->noted_status;
    if (client_gone)
        status = 499;
    double duration_ms = (double)(llmr_now_ns() - a->t0_ns) / 1e6;
    if (a->s[S_SERVICE]) {
        llmr_log_access_entry e = {a->s[S_SERVICE], a->s[S_ID], a->s[S_METHOD], a->s[S_PATH], status,
                                   a->s[S_MODEL], a->s[S_NODE], a->s[S_RESPONSE], a->prompt_tokens,
                                   a->completion_tokens, a->ttft_ms, duration_ms,
                                   a->quiet && status < 400};
        llmr_log_access(&e);
    }
    if (a->on_done) {
        llmr_http_done d = {a->s[S_ID], a->s[S_METHOD], a->s[S_PATH], status, a->s[S_MODEL], a->s[S_NODE],
                            a->s[S_KEY], a->s[S_RESPONSE], a->s[S_ERROR], a->prompt_tokens,
                            a->completion_tokens, a->ttft_ms, duration_ms, a->arrival_unix_ms, a->s[S_TARGET]};
        a->on_done(a->done_user, &d);
    }
    for (int k = 0; k < S_COUNT; k++)
        free(a->s[k]);
    free(a);
}
