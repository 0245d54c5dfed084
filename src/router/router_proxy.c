/* The router's /v1 API: /v1/models (the models ready on at least one node), GET
 * /v1/models/{id} (one of them, as OpenAI answers it) and the
 * OpenAI endpoints proxied to a node.  A request first passes its key's limits
 * (router_limits.c: 429 with Retry-After over one), and is checked (the same
 * parser as the node's, so a bad one never reaches a node), a chat is rendered with
 * the model's chat template (router_render.c), then the request waits for a node:
 * among those with the model ready, the fewest outstanding requests, then the lowest
 * recent TTFT (node_registry.c).  No node ready: 503; all busy: the wait queue (429
 * when it is full, 504 after its timeout), each with Retry-After.  A node that fails
 * before the first byte is replaced by another; one that fails mid-stream ends the
 * stream with an error event and [DONE], never a hang.  A client that leaves cancels
 * the request on the node (the connection to it closes).  While the router stops
 * (llmr_router_drain) a request that has no node yet gets 503 server_shutting_down, and
 * a stream still running at llmr_router_stop ends with that error event and [DONE].
 *
 * Threads: the handler's thread does the check, the rendering and the wait for a node,
 * then starts the try's transfer on the transfer loop (router_upstream.c) and waits for
 * it; a whole answer, an error and a retry are its.  At a stream's first byte the loop
 * takes the request over (see struct proxied), so the stream reaches the client as the
 * node sends it and costs no thread while it runs.
 *
 * POST /v1/responses goes the same way; with `store` (the default) its response is kept
 * (store_responses.c) for the API key that made it: GET and DELETE /v1/responses/{id},
 * and previous_response_id, which the router resolves before a node sees the request
 * (the earlier input and output items put before the new input). */
#define _GNU_SOURCE /* memmem */
#include "router/router_internal.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/curl_handle.h"
#include "openai/openai_api.h"
#include "openai/openai_responses.h"
#include "router/router_upstream.h"

#define COMPONENT "router"
#define MAX_TRIES 3
#define MAX_NODE_RESPONSE (64u << 20)

/* ---- /v1/models ------------------------------------------------------------------------ */

static void v1_models(llmr_router *r, llmr_http_reply *reply)
{
    json_t *all = llmr_store_model_list(r->store), *m;
    size_t i, n = json_array_size(all);
    llmr_oai_model_entry *e = calloc(n + 1, sizeof *e);
    uint64_t now = router_now_ms();
    size_t k = 0;
    json_array_foreach(all, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name || !e)
            continue;
        e[k].id = name;
        e[k].created = json_integer_value(json_object_get(m, "created"));
        e[k].owned_by = "llmr";
        e[k].ready = llmr_node_registry_model_ready(r->nodes, name, now);
        e[k].reason = e[k].ready ? NULL : "no node has it ready yet (GET /v0/models/NAME says why)";
        k++;
    }
    llmr_http_reply_json(reply, 200, llmr_oai_models_list(e, k));
    free(e);
    json_decref(all);
}

/* GET /v1/models/{id}: a registered model ready on a node, as OpenAI answers it; any
 * other id is 404 model_not_found (a registered one not ready yet says so). */
static void v1_model(llmr_router *r, const char *id, llmr_http_reply *reply)
{
    llmr_store_model m = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_store_model_get(r->store, id, &m, &err) != LLMR_OK) {
        router_error(reply, 404, "invalid_request_error", "model_not_found",
                     "The model '%.200s' does not exist (GET /v1/models lists them).", id);
    } else if (!llmr_node_registry_model_ready(r->nodes, m.name, router_now_ms())) {
        router_error(reply, 404, "invalid_request_error", "model_not_found",
                     "The model '%.200s' is registered but no node has it ready yet (GET /v0/models/%.200s "
                     "says why).",
                     id, id);
    } else {
        llmr_oai_model_entry e = {m.name, m.created, "llmr", true, NULL};
        llmr_http_reply_json(reply, 200, llmr_oai_model_json(&e));
    }
    llmr_store_model_free(&m);
    llmr_strbuf_free(&err);
}

/* ---- waiting for a node ------------------------------------------------------------------ */

/* A node for the model into t: 0, or the HTTP status of the error replied (499 when the
 * client of req went away while it waited: it never reaches a node). */
static unsigned acquire(llmr_router *r, const llmr_http_request *req, const char *model,
                        const char *const *tried, size_t n_tried, llmr_node_target *t,
                        llmr_http_reply *reply)
{
    uint64_t start = router_now_ms();
    bool queued = false;
    for (;;) {
        uint64_t now = router_now_ms();
        if (queued && req && llmr_http_request_client_gone(req)) {
            pthread_mutex_lock(&r->queue_lock);
            r->waiting--;
            pthread_mutex_unlock(&r->queue_lock);
            router_error(reply, 499, "invalid_request_error", "client_closed",
                         "The client went away while the request waited for a node: it was not sent.");
            return 499;
        }
        if (atomic_load(&r->draining)) { /* shutting down: no new work for a node */
            if (queued) {
                pthread_mutex_lock(&r->queue_lock);
                r->waiting--;
                pthread_mutex_unlock(&r->queue_lock);
            }
            llmr_http_reply_header(reply, "Retry-After", "5");
            llmr_http_reply_header(reply, "Connection", "close");
            router_error(reply, 503, "server_error", "server_shutting_down",
                         "The router is shutting down: this request was not started. Try again shortly.");
            return 503;
        }
        if (llmr_node_registry_pick(r->nodes, model, now, tried, n_tried, t))
            break;
        if (!llmr_node_registry_model_ready_except(r->nodes, model, now, tried, n_tried) ||
            atomic_load(&r->stopping)) {
            llmr_http_reply_header(reply, "Retry-After", "5");
            router_error(reply, 503, "server_error", "no_node_available",
                         "No node can serve model %s now%s; GET /v0/models/%s shows each node's state.",
                         model, n_tried ? " (the nodes tried failed)" : "", model);
            unsigned st = 503;
            if (queued) {
                pthread_mutex_lock(&r->queue_lock);
                r->waiting--;
                pthread_mutex_unlock(&r->queue_lock);
            }
            return st;
        }
        pthread_mutex_lock(&r->queue_lock);
        if (!queued) {
            if (r->waiting >= r->o.queue_max) {
                pthread_mutex_unlock(&r->queue_lock);
                llmr_http_reply_header(reply, "Retry-After", "1");
                router_error(reply, 429, "rate_limit_error", "queue_full",
                             "Every node serving %s is busy and %u requests wait already; try again "
                             "shortly.",
                             model, r->o.queue_max);
                return 429;
            }
            r->waiting++;
            queued = true;
        }
        if (now - start >= r->o.queue_timeout_ms) {
            r->waiting--;
            pthread_mutex_unlock(&r->queue_lock);
            llmr_http_reply_header(reply, "Retry-After", "2");
            router_error(reply, 504, "timeout_error", "queue_timeout",
                         "No node serving %s became free within %.1f s.", model, r->o.queue_timeout_ms / 1000.0);
            return 504;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L; /* a slot frees, or a node comes up: look again */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->queue_cond, &r->queue_lock, &ts);
        pthread_mutex_unlock(&r->queue_lock);
    }
    if (queued) {
        pthread_mutex_lock(&r->queue_lock);
        r->waiting--;
        pthread_mutex_unlock(&r->queue_lock);
    }
    return 0;
}

static void release(llmr_router *r, const char *id, double ttft_ms)
{
    llmr_node_registry_done(r->nodes, id, ttft_ms);
    pthread_mutex_lock(&r->queue_lock);
    pthread_cond_broadcast(&r->queue_cond);
    pthread_mutex_unlock(&r->queue_lock);
}

/* ---- a request's state, from its check to its end ---------------------------------------- */

/* One proxied request.  Its handler's thread makes it, waits for a node and starts each
 * try's transfer on the transfer loop (router_upstream.c); the loop runs the transfer's
 * callbacks.  While the answer is not the client's yet (a whole answer, an error, or a
 * stream before the node's first byte) the handler's thread waits for the try to end
 * and goes on (the answer, or another node).  At a stream's first byte the stream opens
 * and the loop takes the request over (handed_off): the handler returns, and the loop's
 * done callback ends the request (stream_finish), so a running stream costs no thread.
 * Two holders (the handler, a running transfer) share it: the last one frees it. */
typedef struct proxied {
    llmr_router *r;
    llmr_http_reply *reply;     /* the handler's: used only until handed_off */
    const llmr_http_request *req; /* likewise (to see a client leave while it waits) */
    router_caller own_caller;   /* the caller (key_id copied) */
    const struct router_caller *caller; /* &own_caller */
    char *path, *request_id;    /* copies, for each try */
    char *chained_body, *rendered_body, *body_copy; /* what goes to the node, one of */
    const char *send_body;
    size_t send_len;
    llmr_oai_request q;
    llmr_oai_responses rs;      /* a Responses request: q is its chat request, moved out */
    llmr_store_model m;
    bool prepared;              /* checked, rendered: it may reach a node */
    bool responses_api;         /* POST /v1/responses */
    llmr_node_target t;         /* the node of this try (t.id "" once refused) */
    const char *tried[MAX_TRIES];
    char tried_ids[MAX_TRIES][32];
    size_t n_tried;
    long status;                /* what the request ended with */
    /* this try's transfer */
    CURL *curl;
    struct curl_slist *headers, *pin;
    CURLcode rc;                /* how it ended, */
    long node_status;           /* and the node's status */
    bool stream;                /* the client asked for a stream */
    llmr_http_stream *out;      /* opened at the node's first byte of a 200 stream */
    llmr_strbuf body;           /* a whole answer (or an error answer of a stream) */
    size_t received;
    uint64_t t0_ns, first_ns;
    atomic_bool gone;           /* the client left */
    bool too_big;
    bool responses;             /* a Responses API stream: a cut ends it with response.failed */
    char resp_id[80];           /* ...the id its node gave the response, once seen */
    long long seq;              /* ...the highest sequence_number seen, -1 none */
    uint32_t prompt_tokens, completion_tokens; /* the answer's usage, for the request log
                                                  (a stream's: its usage chunk, or the
                                                  node's closing comment; docs/node.md) */
    int64_t upstream_ttfb_us;   /* the node's time to its first body byte (see on_data) */
    bool capture;               /* a stored response's stream: kept in body too */
    const json_t *resp_input;   /* capture: the input it was given, */
    atomic_bool stored;         /* and whether it is kept already (at its last event, before
                                   the client sees it: a GET right after finds it) */
    bool storing;               /* a thread of its own keeps it (store_later) */
    size_t scanned;             /* capture: body bytes looked through for the last event */
    size_t last_event;          /* where it starts + 1 (0: not seen yet) */
    const char *node_id;        /* the node tried now (t.id) */
    /* between the handler's thread and the loop's */
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* the try ended, or the loop took the request over */
    bool finished, handed_off;
    int refs;
} proxied;

/* What the request log learns of this try (llmr_http_note): the node, the usage,
 * and the time to the node's first byte. */
static llmr_http_note try_note(const proxied *a, unsigned status)
{
    llmr_http_note note = {.node = a->node_id, .usage = true, .prompt_tokens = a->prompt_tokens,
                           .completion_tokens = a->completion_tokens,
                           .ttft_ms = a->received ? (double)(a->first_ns - a->t0_ns) / 1e6 : -1,
                           .status = status};
    return note;
}

static bool stream_ended(proxied *a);
static void store_captured(proxied *a);
static bool store_later(proxied *a);

/* A captured stream before its last event keeps only its last CAPTURE_TAIL bytes (room
 * for the start of that event's line, should it come across two pieces), so a long
 * stream costs the router the size of its last event, not of the whole stream. */
#define CAPTURE_TAIL 64u
static void keep_tail(proxied *a)
{
    memmove(a->body.data, a->body.data + a->body.len - CAPTURE_TAIL, CAPTURE_TAIL);
    a->body.len = CAPTURE_TAIL;
    a->body.data[CAPTURE_TAIL] = '\0';
    a->scanned = CAPTURE_TAIL;
}

/* The usage object in text, if any. */
static void read_usage(proxied *a, const char *text, size_t len)
{
    static const char key[] = "\"usage\":{\"prompt_tokens\":";
    const char *u = memmem(text, len, key, sizeof key - 1);
    unsigned p = 0, c = 0;
    if (u && sscanf(u + sizeof key - 1, "%u,\"completion_tokens\":%u", &p, &c) == 2) {
        a->prompt_tokens = p;
        a->completion_tokens = c;
    }
}

/* A stream's client left (the server's thread): the loop stops the transfer now. */
static void client_gone(void *user)
{
    proxied *a = user;
    atomic_store(&a->gone, true);
    router_upstream_wake(a->r->upstream);
}

/* The node's part of the time to first byte, for `llmr bench router` (docs/router.md,
 * "Load benchmark"): from the connection to the node being ready to send (curl's
 * pretransfer time, so the connect counts as the router's) to its first body byte. */
static void upstream_ttfb(proxied *a)
{
    curl_off_t pre_us = 0;
    curl_easy_getinfo(a->curl, CURLINFO_PRETRANSFER_TIME_T, &pre_us);
    int64_t us = (int64_t)((a->first_ns - a->t0_ns) / 1000u) - (int64_t)pre_us;
    a->upstream_ttfb_us = us > 0 ? us : 0;
}

static void add_upstream_header(proxied *a)
{
    char v[24];
    snprintf(v, sizeof v, "%lld", (long long)a->upstream_ttfb_us);
    llmr_http_reply_header(a->reply, "X-Llmr-Upstream-Ttfb-Us", v);
}

/* What a Responses stream told so far, for the event that ends it if it is cut: the
 * response's id (from response.created) and the highest sequence_number.  Looks at each
 * piece alone: a number cut between two pieces is missed, and the next event's counts. */
static void note_response_events(proxied *a, const char *data, size_t n)
{
    static const char seq_key[] = "\"sequence_number\":", id_key[] = "\"response\":{\"id\":\"";
    for (const char *p = data, *end = data + n; p < end;) {
        const char *at = memmem(p, (size_t)(end - p), seq_key, sizeof seq_key - 1);
        if (!at)
            break;
        at += sizeof seq_key - 1;
        long long v = 0;
        bool digits = false;
        while (at < end && *at >= '0' && *at <= '9' && v < 1000000000LL) {
            v = v * 10 + (*at++ - '0');
            digits = true;
        }
        if (digits && v > a->seq)
            a->seq = v;
        p = at;
    }
    if (!a->resp_id[0]) {
        const char *at = memmem(data, n, id_key, sizeof id_key - 1);
        if (at) {
            at += sizeof id_key - 1;
            size_t k = 0;
            while (at + k < data + n && k + 1 < sizeof a->resp_id && at[k] != '"' &&
                   ((at[k] >= 'a' && at[k] <= 'z') || (at[k] >= 'A' && at[k] <= 'Z') ||
                    (at[k] >= '0' && at[k] <= '9') || at[k] == '_' || at[k] == '-'))
                k++;
            if (at + k < data + n && at[k] == '"') {
                memcpy(a->resp_id, at, k);
                a->resp_id[k] = 0;
            }
        }
    }
}

/* The response.failed event that ends a cut Responses stream. */
static json_t *response_failed_event(const proxied *a, const llmr_oai_error *e)
{
    json_t *err = llmr_oai_error_json(e); /* {"error": {message, type, param, code}} */
    json_t *inner = json_object_get(err, "error");
    json_t *ev = json_pack("{s:s, s:I, s:{s:s, s:s, s:s, s:I, s:{s:O, s:O}, s:[]}}", "type", "response.failed",
                           "sequence_number", (json_int_t)(a->seq + 1), "response", "id",
                           a->resp_id[0] ? a->resp_id : "resp_unknown", "object", "response", "status",
                           "failed", "created_at", (json_int_t)time(NULL), "error", "code",
                           json_object_get(inner, "code"), "message", json_object_get(inner, "message"),
                           "output");
    json_decref(err);
    return ev;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
    proxied *a = user;
    size_t n = size * nmemb;
    if (!a->received) {
        a->first_ns = llmr_now_ns();
        upstream_ttfb(a);
    }
    a->received += n;
    long status = 0;
    curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &status);
    if (a->stream && status == 200) {
        if (!a->out) {
            add_upstream_header(a);
            a->out = llmr_http_reply_stream(a->reply, 200, "text/event-stream", client_gone, a);
            if (a->out) { /* the server sends the stream from now on: the loop ends it */
                pthread_mutex_lock(&a->lock);
                a->handed_off = true;
                pthread_cond_broadcast(&a->cond);
                pthread_mutex_unlock(&a->lock);
            }
        }
        if (a->capture && a->body.len + n <= MAX_NODE_RESPONSE)
            llmr_strbuf_append(&a->body, data, n);
        else
            a->capture = false; /* too long to keep */
        if (a->capture && !atomic_load(&a->stored) && !a->storing && stream_ended(a)) {
            if (store_later(a))
                return CURL_WRITEFUNC_PAUSE; /* this piece comes again once it is kept */
            store_captured(a);
        } else if (a->capture && !a->last_event && a->body.len > CAPTURE_TAIL * 2)
            keep_tail(a); /* only the last event is kept: what came before it goes */
        if (!a->out || atomic_load(&a->gone) || !llmr_http_stream_write(a->out, data, n))
            return 0; /* the client has gone: drop the node's connection (it cancels) */
        read_usage(a, data, n);
        if (a->responses)
            note_response_events(a, data, n);
        return n;
    }
    if (a->body.len + n > MAX_NODE_RESPONSE) {
        a->too_big = true;
        return 0;
    }
    llmr_strbuf_append(&a->body, data, n);
    return n;
}

static int on_progress(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    proxied *a = user;
    return atomic_load(&a->gone) || atomic_load(&a->r->stopping) ? 1 : 0;
}

/* The loop asks (router_upstream.h): true stops the transfer, which closes the node's
 * connection and so cancels the request there.  Before the answer is the client's, its
 * handler waits, so its connection may be looked at (a stream's client is seen leaving
 * by client_gone afterwards). */
static bool on_cancel(void *user)
{
    proxied *a = user;
    if (!a->out && !atomic_load(&a->gone) && llmr_http_request_client_gone(a->req))
        atomic_store(&a->gone, true);
    return atomic_load(&a->gone) || atomic_load(&a->r->stopping);
}

static void proxied_unref(proxied *a);
static void stream_finish(proxied *a);

/* The loop's: the try's transfer ended.  Before the hand-over the handler's thread goes
 * on (try_end); after it the loop ends the request here. */
static void on_done(void *user, CURL *easy, CURLcode rc)
{
    proxied *a = user;
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(easy);
    curl_slist_free_all(a->headers);
    curl_slist_free_all(a->pin);
    a->headers = a->pin = NULL;
    a->curl = NULL;
    a->rc = rc;
    a->node_status = status;
    pthread_mutex_lock(&a->lock);
    bool ours = a->handed_off;
    a->finished = true;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
    if (ours) {
        llmr_log_set_request_id(a->request_id);
        stream_finish(a);
        llmr_log_set_request_id(NULL);
    }
    proxied_unref(a);
}

/* Starts a try: the request to the node, with the node's credential (its secret from
 * its registration), to the address its URL was checked at, on the transfer loop.
 * false: it could not start (the node counts as failed before its first byte). */
static bool try_start(proxied *a)
{
    const llmr_node_target *t = &a->t;
    char target[600];
    snprintf(target, sizeof target, "%s%s", t->url, a->path);
    CURL *c = llmr_curl_new();
    if (!c)
        return false;
    a->curl = c;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    char auth[LLMR_NODE_SECRET_HEX + 32];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", t->secret);
    h = curl_slist_append(h, auth);
    memset(auth, 0, sizeof auth);
    struct curl_slist *pin = t->pin[0] ? curl_slist_append(NULL, t->pin) : NULL;
    if (pin)
        curl_easy_setopt(c, CURLOPT_RESOLVE, pin);
    /* a node answers; it never sends the router elsewhere */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    char rid[LLMR_REQUEST_ID_MAX + 32];
    if (*a->request_id) { /* the node logs the request under the same id */
        snprintf(rid, sizeof rid, "x-request-id: %s", a->request_id);
        h = curl_slist_append(h, rid);
    }
    a->headers = h;
    a->pin = pin;
    curl_easy_setopt(c, CURLOPT_URL, target);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, a->send_body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)a->send_len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, a);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    a->t0_ns = llmr_now_ns();
    pthread_mutex_lock(&a->lock);
    a->finished = false;
    a->refs++; /* the transfer's */
    pthread_mutex_unlock(&a->lock);
    if (router_upstream_add(a->r->upstream, c, on_done, on_cancel, a))
        return true;
    pthread_mutex_lock(&a->lock);
    a->refs--;
    pthread_mutex_unlock(&a->lock);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    curl_slist_free_all(pin);
    a->headers = a->pin = NULL;
    a->curl = NULL;
    return false;
}

/* The handler's thread: waits until the try ended (false) or the loop took the request
 * over at a stream's first byte (true: the handler returns, a is not used after). */
static bool try_wait(proxied *a)
{
    pthread_mutex_lock(&a->lock);
    while (!a->finished && !a->handed_off)
        pthread_cond_wait(&a->cond, &a->lock);
    bool off = a->handed_off;
    pthread_mutex_unlock(&a->lock);
    return off;
}

/* The handler's thread, after a try that ended before the answer was the client's:
 * true when answered (a whole answer, or an error, replied); false when the node failed
 * before its first byte (try another). */
static bool try_end(proxied *a)
{
    CURLcode rc = a->rc;
    long status = a->node_status;
    a->status = status;
    if (atomic_load(&a->gone)) { /* nobody reads it: what the log records */
        router_error(a->reply, 499, "invalid_request_error", "client_closed",
                     "The client closed the connection before the answer was ready.");
        a->status = 499;
    } else if ((rc != CURLE_OK && !a->received) || status == 0 || status == 502) {
        if (!a->too_big)
            return false; /* before the first byte of an answer: another node may */
        router_error(a->reply, 502, "server_error", "node_failed", "The node's answer was larger than %u MiB.",
                     MAX_NODE_RESPONSE >> 20);
        a->status = 502;
    } else if (rc != CURLE_OK && atomic_load(&a->r->stopping)) { /* cut: not a whole answer */
        router_error(a->reply, 503, "server_error", "server_shutting_down",
                     "The router is shutting down: this answer was cut before its end.");
        a->status = 503;
    } else {
        read_usage(a, llmr_strbuf_cstr(&a->body), a->body.len);
        if (a->received)
            add_upstream_header(a);
        llmr_http_reply_text(a->reply, (unsigned)status, "application/json", llmr_strbuf_cstr(&a->body),
                             a->body.len);
    }
    return true;
}

static void proxy_end(proxied *a);

/* The loop's thread, at the end of a stream the client has: with an error event when
 * the node's answer was cut (the Responses API's response.failed), then the request
 * log's note, the node's slot back, and the request's end. */
static void stream_finish(proxied *a)
{
    a->status = a->node_status;
    if (a->rc != CURLE_OK && !atomic_load(&a->gone)) {
        llmr_oai_error e;
        if (atomic_load(&a->r->stopping))
            llmr_oai_error_set(&e, 503, "server_error", "server_shutting_down", NULL,
                               "The router is shutting down: this answer was cut before its end.");
        else
            llmr_oai_error_set(&e, 502, "server_error", "node_failed", NULL,
                               "The node serving this request failed mid-stream (%s).", curl_easy_strerror(a->rc));
        json_t *j = a->responses ? response_failed_event(a, &e) : llmr_oai_error_json(&e);
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        if (a->responses) { /* the Responses API's last event; it has no [DONE] */
            char *text = json_dumps(j, JSON_COMPACT);
            llmr_strbuf_printf(&sb, "event: response.failed\ndata: %s\n\n", text ? text : "{}");
            free(text);
        } else {
            llmr_oai_sse_data(&sb, j);
            llmr_oai_sse_done(&sb);
        }
        llmr_http_stream_write(a->out, sb.data, sb.len);
        llmr_strbuf_free(&sb);
        json_decref(j);
        a->status = 502;
    }
    llmr_http_note note = try_note(a, a->status == 502 ? 502 : 0);
    llmr_http_stream_note(a->out, &note);
    llmr_http_stream_end(a->out);
    release(a->r, a->t.id, a->received ? (double)(a->first_ns - a->t0_ns) / 1e6 : -1);
    proxy_end(a);
}

/* ---- the OpenAI endpoints ------------------------------------------------------------------ */

#define KIND_RESPONSES 2 /* proxy's kind: beside LLMR_OAI_CHAT and LLMR_OAI_COMPLETION */

/* The response object a node answered with: the body, or a stream's last
 * response.completed / response.incomplete event.  A new reference, or NULL. */
static json_t *answered_response(const proxied *a)
{
    const char *text = llmr_strbuf_cstr(&a->body);
    if (!a->stream)
        return json_loads(text, JSON_ALLOW_NUL, NULL);
    const char *keys[] = {"event: response.completed\ndata: ", "event: response.incomplete\ndata: "};
    for (size_t k = 0; k < 2; k++) {
        const char *at = strstr(text, keys[k]);
        if (!at)
            continue;
        at += strlen(keys[k]);
        const char *end = strchr(at, '\n');
        json_t *e = json_loadb(at, end ? (size_t)(end - at) : strlen(at), JSON_ALLOW_NUL, NULL);
        json_t *resp = json_incref(json_object_get(e, "response"));
        json_decref(e);
        return resp;
    }
    return NULL;
}

/* Whether the captured stream holds its last event whole (response.completed or
 * response.incomplete, its data line ended).  Looks only at what came since the last
 * call (and a key's length before it, for a key across two pieces). */
static bool stream_ended(proxied *a)
{
    const char *text = llmr_strbuf_cstr(&a->body);
    const char *keys[] = {"event: response.completed\ndata: ", "event: response.incomplete\ndata: "};
    size_t from = a->scanned > 40 ? a->scanned - 40 : 0;
    for (size_t k = 0; k < 2 && !a->last_event; k++) {
        const char *at = strstr(text + from, keys[k]);
        if (at)
            a->last_event = (size_t)(at - text) + 1;
    }
    /* its end: looked for in what is new (and the byte before it) */
    size_t end_from = a->scanned > 0 ? a->scanned - 1 : 0;
    if (a->last_event && end_from < a->last_event - 1)
        end_from = a->last_event - 1;
    a->scanned = a->body.len;
    return a->last_event && strstr(text + end_from, "\n\n") != NULL;
}

static void store_response(llmr_router *r, const router_caller *c, const proxied *a, const json_t *input,
                           uint32_t *prompt_tokens, uint32_t *completion_tokens, bool store);

static void store_captured(proxied *a)
{
    store_response(a->r, a->caller, a, a->resp_input, &a->prompt_tokens, &a->completion_tokens, true);
    atomic_store(&a->stored, true);
}

static void proxied_unref(proxied *a);

static void *store_main(void *arg)
{
    proxied *a = arg;
    llmr_router *r = a->r;
    llmr_log_set_request_id(a->request_id);
    store_captured(a);
    llmr_log_set_request_id(NULL);
    router_upstream_resume(r->upstream, a);
    proxied_unref(a);
    router_jobs_end(r); /* r is not used after */
    return NULL;
}

/* A stored response's stream at its last event (on the loop's thread): the store writes
 * to disk, which the loop must not wait for, so a thread of its own keeps the response
 * while the transfer pauses; then the loop resumes it and the last event reaches the
 * client.  The thread counts as a job (the store stays open for it).  false: no thread
 * (the caller keeps it itself). */
static bool store_later(proxied *a)
{
    pthread_mutex_lock(&a->lock);
    a->refs++;
    pthread_mutex_unlock(&a->lock);
    router_jobs_begin(a->r);
    a->storing = true;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, store_main, a);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return true;
    a->storing = false;
    router_jobs_end(a->r);
    proxied_unref(a); /* not the last: the transfer holds it */
    return false;
}

/* Keeps the response a node answered (a whole body or a stream's last event), with the
 * input it was given, for the caller's key. */
static void store_response(llmr_router *r, const router_caller *c, const proxied *a, const json_t *input,
                           uint32_t *prompt_tokens, uint32_t *completion_tokens, bool store)
{
    json_t *resp = answered_response(a);
    json_t *usage = json_object_get(resp, "usage");
    if (usage) {
        *prompt_tokens = (uint32_t)json_integer_value(json_object_get(usage, "input_tokens"));
        *completion_tokens = (uint32_t)json_integer_value(json_object_get(usage, "output_tokens"));
    }
    const char *id = json_string_value(json_object_get(resp, "id"));
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (store && id && llmr_store_response_put(r->store, id, c->key_id, router_unix_ms(), input, resp, &err) != LLMR_OK)
        llmr_log_warn(COMPONENT, "response %s is not stored: %s", id, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    json_decref(resp);
}

/* A Responses request read, with previous_response_id resolved from the store: *rs the
 * request to send, *body its body when it is not the client's (malloc'd).  false when
 * the reply (an error) is sent. */
static bool read_responses(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                           llmr_oai_responses *rs, char **body, llmr_http_reply *reply)
{
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    *body = NULL;
    if (!llmr_oai_responses_parse(req->body, req->body_len, true, rs, &e)) {
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        return false;
    }
    if (!rs->previous_response_id)
        return true;
    json_t *input = NULL, *resp = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_response_get(r->store, rs->previous_response_id, c->key_id, &input, &resp, &err);
    if (st == LLMR_OK)
        *body = llmr_oai_responses_chain(rs, input, json_object_get(resp, "output"));
    json_decref(input);
    json_decref(resp);
    if (st == LLMR_NOT_FOUND)
        llmr_oai_error_set(&e, 404, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                           "Previous response with id '%.64s' not found.", rs->previous_response_id);
    else if (st != LLMR_OK)
        llmr_oai_error_set(&e, 500, "server_error", NULL, "previous_response_id", "%s", llmr_strbuf_cstr(&err));
    else if (!*body)
        llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    else if (strlen(*body) > LLMR_STORE_RESPONSE_MAX)
        llmr_oai_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", "previous_response_id",
                           "The conversation with response '%.64s' is %zu bytes of JSON; at most %u are taken. "
                           "Start a new conversation, or send a shorter input.",
                           rs->previous_response_id, strlen(*body), LLMR_STORE_RESPONSE_MAX);
    llmr_strbuf_free(&err);
    llmr_oai_responses_free(rs);
    if (e.status) {
        free(*body);
        *body = NULL;
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        return false;
    }
    if (!llmr_oai_responses_parse(*body, strlen(*body), false, rs, &e)) { /* the items stored were checked */
        free(*body);
        *body = NULL;
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        return false;
    }
    return true;
}

/* GET and DELETE /v1/responses/{id}. */
static void stored_response(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                            llmr_http_reply *reply)
{
    const char *id = req->path + strlen("/v1/responses/");
    json_t *input = NULL, *resp = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st;
    if (!strcmp(req->method, "GET"))
        st = llmr_store_response_get(r->store, id, c->key_id, &input, &resp, &err);
    else
        st = llmr_store_response_delete(r->store, id, c->key_id, &err);
    if (st == LLMR_NOT_FOUND)
        router_error(reply, 404, "invalid_request_error", "not_found", "No response with id '%.64s' found.", id);
    else if (st != LLMR_OK)
        router_error(reply, 500, "server_error", NULL, "%s", llmr_strbuf_cstr(&err));
    else if (resp)
        llmr_http_reply_json(reply, 200, json_incref(resp));
    else
        llmr_http_reply_json(reply, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1));
    json_decref(input);
    json_decref(resp);
    llmr_strbuf_free(&err);
}

/* The key's limits (router_limits.c): true when the request may go on, else false
 * after a 429 with Retry-After. */
static bool admit(llmr_router *r, const router_caller *c, llmr_http_reply *reply)
{
    unsigned retry_s = 1;
    int64_t limit = 0;
    router_limit_refusal why = router_limits_admit(r->limits, c->key_id, &c->limits, router_now_ms(), &retry_s, &limit);
    if (why == ROUTER_LIMIT_OK)
        return true;
    char v[16];
    snprintf(v, sizeof v, "%u", retry_s);
    llmr_http_reply_header(reply, "Retry-After", v);
    const char *what = why == ROUTER_LIMIT_CONCURRENT ? "concurrent requests"
                       : why == ROUTER_LIMIT_RPM      ? "requests per minute (RPM)"
                                                      : "tokens per minute (TPM)";
    router_error(reply, 429, why == ROUTER_LIMIT_TPM ? "tokens" : "requests", "rate_limit_exceeded",
                 "Rate limit reached for this API key on %s: limit %lld. Please try again in %us.", what,
                 (long long)limit, retry_s);
    return false;
}

static char *copy_text(const char *text, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        if (n)
            memcpy(d, text, n);
        d[n] = 0;
    }
    return d;
}

/* A request's state, held by its handler (NULL when out of memory). */
static proxied *proxied_new(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                            llmr_http_reply *reply, bool responses_api)
{
    proxied *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->r = r;
    a->reply = reply;
    a->req = req;
    a->own_caller = (router_caller){c->scopes, c->key_id ? strdup(c->key_id) : NULL, c->limits};
    a->caller = &a->own_caller;
    a->path = copy_text(req->path, strlen(req->path));
    a->request_id = copy_text(req->request_id ? req->request_id : "", req->request_id ? strlen(req->request_id) : 0);
    a->responses_api = responses_api;
    a->seq = -1;
    a->node_id = a->t.id;
    a->refs = 1;
    llmr_strbuf_init(&a->body);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    if (!a->path || !a->request_id || (c->key_id && !a->own_caller.key_id)) {
        proxied_unref(a);
        return NULL;
    }
    return a;
}

static void proxied_unref(proxied *a)
{
    pthread_mutex_lock(&a->lock);
    bool last = --a->refs == 0;
    pthread_mutex_unlock(&a->lock);
    if (!last)
        return;
    llmr_strbuf_free(&a->body);
    memset(a->t.secret, 0, sizeof a->t.secret);
    free(a->chained_body);
    free(a->rendered_body);
    free(a->body_copy);
    free(a->path);
    free(a->request_id);
    free(a->own_caller.key_id);
    llmr_store_model_free(&a->m);
    llmr_oai_request_free(&a->q);
    llmr_oai_responses_free(&a->rs);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cond);
    free(a);
}

/* The request checked, its model looked up, a chat rendered: what goes to the node
 * (send_body).  false when the reply (an error) is sent. */
static bool prepare(proxied *a, const llmr_http_request *req, llmr_oai_kind kind)
{
    llmr_router *r = a->r;
    llmr_http_reply *reply = a->reply;
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    if (a->responses_api) {
        if (!read_responses(r, a->caller, req, &a->rs, &a->chained_body, reply))
            return false;
        a->q = a->rs.chat;
        memset(&a->rs.chat, 0, sizeof a->rs.chat);
    } else if (!llmr_oai_parse(kind, req->body, req->body_len, &a->q, &e)) {
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        return false;
    }
    llmr_oai_request *q = &a->q;
    llmr_http_reply_note(reply, &(llmr_http_note){.model = q->model});
    llmr_http_request fwd = *req; /* what goes to the node */
    if (a->chained_body) {
        fwd.body = a->chained_body;
        fwd.body_len = strlen(a->chained_body);
    }
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_model_get(r->store, q->model, &a->m, &err);
    llmr_strbuf_free(&err);
    if (st != LLMR_OK) {
        router_error(reply, 404, "invalid_request_error", "model_not_found",
                     "The model '%s' does not exist (GET /v1/models lists them).", q->model);
        return false;
    }
    /* a chat goes to the node rendered, with the model's chat format (router_render.c) */
    if (kind == LLMR_OAI_CHAT && router_chat_renders(&a->m)) {
        llmr_strbuf prompt = LLMR_STRBUF_INIT;
        llmr_text_spans spans = LLMR_TEXT_SPANS_INIT;
        bool ok = router_render_chat(r, &a->m, q, &prompt, &spans, &e);
        if (ok && !router_render_body(&fwd, llmr_strbuf_cstr(&prompt), prompt.len, &spans, &a->rendered_body,
                                      &fwd.body_len)) {
            ok = false;
            llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory rendering the prompt");
        }
        llmr_strbuf_free(&prompt);
        llmr_text_spans_free(&spans);
        if (!ok) {
            if (a->responses_api)
                llmr_oai_responses_name_error(&e);
            llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
            return false;
        }
        fwd.body = a->rendered_body;
    } else if (kind == LLMR_OAI_CHAT && q->prompt &&
               !router_unrendered_body(&fwd, &a->rendered_body, &fwd.body_len)) {
        router_error(reply, 500, "server_error", NULL, "out of memory");
        return false;
    } else if (a->rendered_body) {
        fwd.body = a->rendered_body;
    }
    if (fwd.body == req->body) { /* the client's: a copy, which outlives the handler */
        a->body_copy = copy_text(req->body ? req->body : "", req->body ? req->body_len : 0);
        if (!a->body_copy) {
            router_error(reply, 500, "server_error", NULL, "out of memory");
            return false;
        }
        fwd.body = a->body_copy;
    }
    a->send_body = fwd.body;
    a->send_len = fwd.body_len;
    a->stream = q->stream;
    a->capture = a->responses_api && a->rs.store;
    a->responses = a->responses_api && q->stream;
    a->resp_input = a->rs.input;
    a->prepared = true;
    return true;
}

/* The end of a request (on its handler's thread, or the loop's for a stream it took
 * over): a Responses answer stored, the request log's note of a whole answer, the key's
 * limits told its usage, and the router's count of running requests. */
static void proxy_end(proxied *a)
{
    llmr_router *r = a->r;
    uint64_t tokens = 0;
    if (a->prepared) {
        uint32_t prompt_tokens = a->prompt_tokens, completion_tokens = a->completion_tokens;
        if (a->responses_api && a->status == 200 && !atomic_load(&a->stored) && !a->storing &&
            (a->capture || !a->stream))
            store_response(r, a->caller, a, a->rs.input, &prompt_tokens, &completion_tokens, a->rs.store);
        tokens = (uint64_t)prompt_tokens + completion_tokens;
        if (!a->out) { /* a whole answer (a stream's record was noted at its end) */
            a->prompt_tokens = prompt_tokens;
            a->completion_tokens = completion_tokens;
            llmr_http_note note = try_note(a, 0);
            if (!a->t.id[0])
                note.node = NULL;
            llmr_http_reply_note(a->reply, &note);
        }
    }
    router_limits_done(r->limits, a->caller->key_id, tokens, router_now_ms());
    router_jobs_end(r); /* r is not used after: llmr_router_stop may go on */
}

/* One request, on its handler's thread, under its key's limits: its check, then its
 * tries (a node from the wait queue, the transfer on the loop) until one answers or the
 * loop takes a stream over. */
static void proxy(llmr_router *r, const router_caller *c, const llmr_http_request *req, llmr_http_reply *reply,
                  int kind_arg)
{
    if (!admit(r, c, reply))
        return;
    router_jobs_begin(r);
    bool responses = kind_arg == KIND_RESPONSES;
    proxied *a = proxied_new(r, c, req, reply, responses);
    if (!a) {
        router_error(reply, 503, "server_error", "out_of_memory", "The router is out of memory; try again.");
        router_limits_done(r->limits, c->key_id, 0, router_now_ms());
        router_jobs_end(r);
        return;
    }
    if (!prepare(a, req, responses ? LLMR_OAI_CHAT : (llmr_oai_kind)kind_arg)) {
        proxy_end(a);
        proxied_unref(a);
        return;
    }
    for (;;) {
        unsigned refused = acquire(r, req, a->q.model, a->tried, a->n_tried, &a->t, reply);
        if (refused) {
            a->status = refused;
            a->t.id[0] = 0;
            break;
        }
        a->received = 0;
        a->too_big = false;
        bool started = try_start(a);
        if (started && try_wait(a)) { /* a stream the loop ends */
            proxied_unref(a);
            return;
        }
        bool answered = started && try_end(a);
        release(r, a->t.id, a->received ? (double)(a->first_ns - a->t0_ns) / 1e6 : -1);
        if (answered)
            break;
        llmr_log_warn(COMPONENT, "node %s failed before answering a %s request; trying another", a->t.id,
                      a->q.model);
        llmr_node_registry_mark_unreachable(r->nodes, a->t.id, router_now_ms());
        snprintf(a->tried_ids[a->n_tried], sizeof a->tried_ids[a->n_tried], "%s", a->t.id);
        a->tried[a->n_tried] = a->tried_ids[a->n_tried];
        a->n_tried++;
        llmr_strbuf_reset(&a->body);
        a->capture = responses && a->rs.store;
        if (a->n_tried == MAX_TRIES) {
            router_error(reply, 502, "server_error", "node_failed",
                         "%zu nodes failed to answer this request; try again.", a->n_tried);
            a->status = 502;
            break;
        }
    }
    proxy_end(a);
    proxied_unref(a);
}

bool router_proxy_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply)
{
    static const struct {
        const char *path, *method;
    } routes[] = {{"/v1/models", "GET"}, {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},
                  {"/v1/responses", "POST"}};
    if (!strncmp(req->path, "/v1/responses/", 14) && req->path[14]) {
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "DELETE") != 0) {
            llmr_http_reply_header(reply, "Allow", "GET, DELETE");
            router_error(reply, 405, "invalid_request_error", "method_not_allowed", "%s takes GET or DELETE, not %s.",
                         req->path, req->method);
        } else if (router_need(c, LLMR_SCOPE_INFERENCE, reply)) {
            stored_response(r, c, req, reply);
        }
        return true;
    }
    if (!strncmp(req->path, "/v1/models/", 11) && req->path[11]) { /* the id may hold '/' */
        if (strcmp(req->method, "GET") != 0) {
            llmr_http_reply_header(reply, "Allow", "GET");
            router_error(reply, 405, "invalid_request_error", "method_not_allowed", "%s takes GET, not %s.",
                         req->path, req->method);
        } else if (router_need(c, LLMR_SCOPE_INFERENCE, reply)) {
            v1_model(r, req->path + 11, reply);
        }
        return true;
    }
    size_t i = 0, count = sizeof routes / sizeof routes[0];
    while (i < count && strcmp(routes[i].path, req->path) != 0)
        i++;
    if (i == count)
        return false;
    if (strcmp(req->method, routes[i].method) != 0) {
        llmr_http_reply_header(reply, "Allow", routes[i].method);
        router_error(reply, 405, "invalid_request_error", "method_not_allowed", "%s takes %s, not %s.", req->path,
                     routes[i].method, req->method);
        return true;
    }
    if (!router_need(c, LLMR_SCOPE_INFERENCE, reply))
        return true;
    if (i == 0)
        v1_models(r, reply);
    else
        proxy(r, c, req, reply, i == 1 ? LLMR_OAI_CHAT : i == 2 ? LLMR_OAI_COMPLETION : KIND_RESPONSES);
    return true;
}
