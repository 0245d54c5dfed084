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
 * a stream still running at llmr_router_stop ends with that error event and [DONE].  Each request runs as a job
 * (router_jobs.c), so a stream reaches the client as the node sends it.
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

/* ---- one try on one node --------------------------------------------------------------- */

typedef struct attempt {
    llmr_router *r;
    llmr_http_reply *reply;     /* the handler's: used only until the job replied */
    router_job *job;
    CURL *curl;
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
    const struct router_caller *caller; /* capture: whose response it is, */
    const json_t *resp_input;   /* the input it was given, */
    bool stored;                /* and whether it is kept already (at its last event, before
                                   the client sees it: a GET right after finds it) */
    size_t scanned;             /* capture: body bytes looked through for the last event */
    size_t last_event;          /* where it starts + 1 (0: not seen yet) */
    const llmr_http_request *req; /* the client's (a whole answer: to see it leave) */
    const char *node_id;        /* the node tried now */
} attempt;

/* What the request log learns of this try (llmr_http_note): the node, the usage,
 * and the time to the node's first byte. */
static llmr_http_note attempt_note(const attempt *a, unsigned status)
{
    llmr_http_note note = {.node = a->node_id, .usage = true, .prompt_tokens = a->prompt_tokens,
                           .completion_tokens = a->completion_tokens,
                           .ttft_ms = a->received ? (double)(a->first_ns - a->t0_ns) / 1e6 : -1,
                           .status = status};
    return note;
}

static bool stream_ended(attempt *a);
static void store_captured(attempt *a);

/* A captured stream before its last event keeps only its last CAPTURE_TAIL bytes (room
 * for the start of that event's line, should it come across two pieces), so a long
 * stream costs the router the size of its last event, not of the whole stream. */
#define CAPTURE_TAIL 64u
static void keep_tail(attempt *a)
{
    memmove(a->body.data, a->body.data + a->body.len - CAPTURE_TAIL, CAPTURE_TAIL);
    a->body.len = CAPTURE_TAIL;
    a->body.data[CAPTURE_TAIL] = '\0';
    a->scanned = CAPTURE_TAIL;
}

/* The usage object in text, if any. */
static void read_usage(attempt *a, const char *text, size_t len)
{
    static const char key[] = "\"usage\":{\"prompt_tokens\":";
    const char *u = memmem(text, len, key, sizeof key - 1);
    unsigned p = 0, c = 0;
    if (u && sscanf(u + sizeof key - 1, "%u,\"completion_tokens\":%u", &p, &c) == 2) {
        a->prompt_tokens = p;
        a->completion_tokens = c;
    }
}

static void client_gone(void *user)
{
    attempt *a = user;
    atomic_store(&a->gone, true);
}

/* The node's part of the time to first byte, for `llmr bench router` (docs/router.md,
 * "Load benchmark"): from the connection to the node being ready to send (curl's
 * pretransfer time, so the connect counts as the router's) to its first body byte. */
static void upstream_ttfb(attempt *a)
{
    curl_off_t pre_us = 0;
    curl_easy_getinfo(a->curl, CURLINFO_PRETRANSFER_TIME_T, &pre_us);
    int64_t us = (int64_t)((a->first_ns - a->t0_ns) / 1000u) - (int64_t)pre_us;
    a->upstream_ttfb_us = us > 0 ? us : 0;
}

static void add_upstream_header(attempt *a)
{
    char v[24];
    snprintf(v, sizeof v, "%lld", (long long)a->upstream_ttfb_us);
    llmr_http_reply_header(a->reply, "X-Llmr-Upstream-Ttfb-Us", v);
}

/* What a Responses stream told so far, for the event that ends it if it is cut: the
 * response's id (from response.created) and the highest sequence_number.  Looks at each
 * piece alone: a number cut between two pieces is missed, and the next event's counts. */
static void note_response_events(attempt *a, const char *data, size_t n)
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
static json_t *response_failed_event(const attempt *a, const llmr_oai_error *e)
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
    attempt *a = user;
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
            router_job_replied(a->job); /* the server sends the stream from now on */
        }
        if (a->capture && a->body.len + n <= MAX_NODE_RESPONSE)
            llmr_strbuf_append(&a->body, data, n);
        else
            a->capture = false; /* too long to keep */
        if (a->capture && !a->stored && stream_ended(a))
            store_captured(a);
        else if (a->capture && !a->last_event && a->body.len > CAPTURE_TAIL * 2)
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
    attempt *a = user;
    /* the client of a whole answer that left: the node's connection closes, which
     * cancels the request there (a stream's client is seen leaving by its writes) */
    if (!a->stream && !atomic_load(&a->gone) && llmr_http_request_client_gone(a->req))
        atomic_store(&a->gone, true);
    return atomic_load(&a->gone) || atomic_load(&a->r->stopping) ? 1 : 0;
}

/* Sends the request to the node, with the node's credential (its secret from its
 * registration), to the address its URL was checked at.  true: answered (the reply or
 * the stream is done); false: the node failed before its first byte (try another). */
static bool try_node(attempt *a, const llmr_node_target *t, const llmr_http_request *req, long *status_out)
{
    char target[600];
    snprintf(target, sizeof target, "%s%s", t->url, req->path);
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
    if (req->request_id && *req->request_id) { /* the node logs the request under the same id */
        snprintf(rid, sizeof rid, "x-request-id: %s", req->request_id);
        h = curl_slist_append(h, rid);
    }
    curl_easy_setopt(c, CURLOPT_URL, target);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
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
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    *status_out = status;
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    curl_slist_free_all(pin);
    a->curl = NULL;
    bool answered = true;
    if (a->out) { /* the stream is the client's already: end it, with an error event if cut */
        if (rc != CURLE_OK && !atomic_load(&a->gone)) {
            llmr_oai_error e;
            if (atomic_load(&a->r->stopping))
                llmr_oai_error_set(&e, 503, "server_error", "server_shutting_down", NULL,
                                   "The router is shutting down: this answer was cut before its end.");
            else
                llmr_oai_error_set(&e, 502, "server_error", "node_failed", NULL,
                                   "The node serving this request failed mid-stream (%s).", curl_easy_strerror(rc));
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
            *status_out = 502;
        }
        llmr_http_note note = attempt_note(a, *status_out == 502 ? 502 : 0);
        llmr_http_stream_note(a->out, &note);
        llmr_http_stream_end(a->out);
    } else if (atomic_load(&a->gone)) { /* nobody reads it: what the log records */
        router_error(a->reply, 499, "invalid_request_error", "client_closed",
                     "The client closed the connection before the answer was ready.");
        *status_out = 499;
    } else if ((rc != CURLE_OK && !a->received) || status == 0 || status == 502) {
        if (a->too_big) {
            router_error(a->reply, 502, "server_error", "node_failed", "The node's answer was larger than %u MiB.",
                         MAX_NODE_RESPONSE >> 20);
            *status_out = 502;
        } else {
            answered = false; /* before the first byte of an answer: another node may */
        }
    } else if (rc != CURLE_OK && atomic_load(&a->r->stopping)) { /* cut: not a whole answer */
        router_error(a->reply, 503, "server_error", "server_shutting_down",
                     "The router is shutting down: this answer was cut before its end.");
        *status_out = 503;
    } else {
        read_usage(a, llmr_strbuf_cstr(&a->body), a->body.len);
        if (a->received)
            add_upstream_header(a);
        llmr_http_reply_text(a->reply, (unsigned)status, "application/json", llmr_strbuf_cstr(&a->body),
                             a->body.len);
    }
    return answered;
}

/* ---- the OpenAI endpoints ------------------------------------------------------------------ */

#define KIND_RESPONSES 2 /* proxy's kind: beside LLMR_OAI_CHAT and LLMR_OAI_COMPLETION */

/* The response object a node answered with: the body, or a stream's last
 * response.completed / response.incomplete event.  A new reference, or NULL. */
static json_t *answered_response(const attempt *a)
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
static bool stream_ended(attempt *a)
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

static void store_response(llmr_router *r, const router_caller *c, const attempt *a, const json_t *input,
                           uint32_t *prompt_tokens, uint32_t *completion_tokens, bool store);

static void store_captured(attempt *a)
{
    store_response(a->r, a->caller, a, a->resp_input, &a->prompt_tokens, &a->completion_tokens, true);
    a->stored = true;
}

/* Keeps the response a node answered (a whole body or a stream's last event), with the
 * input it was given, for the caller's key. */
static void store_response(llmr_router *r, const router_caller *c, const attempt *a, const json_t *input,
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

static void proxy_limited(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                          llmr_http_reply *reply, router_job *job, int kind_arg, uint64_t *tokens);

/* One request (a job: router_jobs.c) under its key's limits. */
static void proxy(llmr_router *r, const router_caller *c, const llmr_http_request *req, llmr_http_reply *reply,
                  router_job *job, int kind_arg)
{
    if (!admit(r, c, reply))
        return;
    uint64_t tokens = 0;
    proxy_limited(r, c, req, reply, job, kind_arg, &tokens);
    router_limits_done(r->limits, c->key_id, tokens, router_now_ms());
}

/* One request, from its check to its log entry; *tokens gets its usage. */
static void proxy_limited(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                          llmr_http_reply *reply, router_job *job, int kind_arg, uint64_t *tokens)
{
    bool responses = kind_arg == KIND_RESPONSES;
    llmr_oai_kind kind = responses ? LLMR_OAI_CHAT : (llmr_oai_kind)kind_arg;
    llmr_oai_request q;
    llmr_oai_responses rs; /* responses: q is its chat request, moved out */
    memset(&rs, 0, sizeof rs);
    char *chained_body = NULL;
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    if (responses) {
        if (!read_responses(r, c, req, &rs, &chained_body, reply))
            return;
        q = rs.chat;
        memset(&rs.chat, 0, sizeof rs.chat);
    } else if (!llmr_oai_parse(kind, req->body, req->body_len, &q, &e)) {
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        return;
    }
    llmr_http_reply_note(reply, &(llmr_http_note){.model = q.model});
    llmr_store_model m = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_node_target t;
    memset(&t, 0, sizeof t);
    char *id = t.id;
    const char *tried[MAX_TRIES];
    char tried_ids[MAX_TRIES][32];
    size_t n_tried = 0;
    long status = 0;
    double ttft_ms = -1;
    uint32_t prompt_tokens = 0, completion_tokens = 0;
    llmr_http_request fwd = *req; /* what goes to the node */
    if (chained_body) {
        fwd.body = chained_body;
        fwd.body_len = strlen(chained_body);
    }
    char *rendered_body = NULL;
    if (llmr_store_model_get(r->store, q.model, &m, &err) != LLMR_OK) {
        router_error(reply, 404, "invalid_request_error", "model_not_found",
                     "The model '%s' does not exist (GET /v1/models lists them).", q.model);
        status = 404;
        goto done;
    }
    /* a chat goes to the node rendered, with the model's chat format (router_render.c) */
    if (kind == LLMR_OAI_CHAT && router_chat_renders(&m)) {
        llmr_strbuf prompt = LLMR_STRBUF_INIT;
        llmr_text_spans spans = LLMR_TEXT_SPANS_INIT;
        bool ok = router_render_chat(r, &m, &q, &prompt, &spans, &e);
        if (ok && !router_render_body(&fwd, llmr_strbuf_cstr(&prompt), prompt.len, &spans, &rendered_body,
                                      &fwd.body_len)) {
            ok = false;
            llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory rendering the prompt");
        }
        llmr_strbuf_free(&prompt);
        llmr_text_spans_free(&spans);
        if (!ok) {
            llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
            status = e.status;
            goto done;
        }
        fwd.body = rendered_body;
    } else if (kind == LLMR_OAI_CHAT && q.prompt && !router_unrendered_body(&fwd, &rendered_body, &fwd.body_len)) {
        router_error(reply, 500, "server_error", NULL, "out of memory");
        status = 500;
        goto done;
    } else if (rendered_body) {
        fwd.body = rendered_body;
    }
    attempt a;
    memset(&a, 0, sizeof a);
    a.r = r;
    a.reply = reply;
    a.job = job;
    a.stream = q.stream;
    a.capture = responses && rs.store;
    a.responses = responses && q.stream;
    a.seq = -1;
    a.caller = c;
    a.resp_input = rs.input;
    a.req = req;
    a.node_id = id;
    llmr_strbuf_init(&a.body);
    for (;;) {
        unsigned refused = acquire(r, req, q.model, tried, n_tried, &t, reply);
        if (refused) {
            status = refused;
            id[0] = 0;
            break;
        }
        bool answered = try_node(&a, &t, &fwd, &status);
        ttft_ms = a.received ? (double)(a.first_ns - a.t0_ns) / 1e6 : -1;
        release(r, id, ttft_ms);
        if (answered)
            break;
        llmr_log_warn(COMPONENT, "node %s failed before answering a %s request; trying another", id, q.model);
        llmr_node_registry_mark_unreachable(r->nodes, id, router_now_ms());
        snprintf(tried_ids[n_tried], sizeof tried_ids[n_tried], "%s", id);
        tried[n_tried] = tried_ids[n_tried];
        n_tried++;
        llmr_strbuf_reset(&a.body);
        a.received = 0;
        a.capture = responses && rs.store;
        if (n_tried == MAX_TRIES) {
            router_error(reply, 502, "server_error", "node_failed",
                         "%zu nodes failed to answer this request; try again.", n_tried);
            status = 502;
            break;
        }
    }
    prompt_tokens = a.prompt_tokens;
    completion_tokens = a.completion_tokens;
    if (responses && status == 200 && !a.stored && (a.capture || !a.stream))
        store_response(r, c, &a, rs.input, &prompt_tokens, &completion_tokens, rs.store);
    *tokens = (uint64_t)prompt_tokens + completion_tokens;
    if (!a.out) { /* a whole answer (a stream's record was noted at its end) */
        a.prompt_tokens = prompt_tokens;
        a.completion_tokens = completion_tokens;
        llmr_http_note note = attempt_note(&a, 0);
        if (!id[0])
            note.node = NULL;
        llmr_http_reply_note(reply, &note);
    }
    llmr_strbuf_free(&a.body);
    memset(t.secret, 0, sizeof t.secret);
done:
    free(rendered_body);
    llmr_store_model_free(&m);
    llmr_strbuf_free(&err);
    llmr_oai_request_free(&q);
    llmr_oai_responses_free(&rs);
    free(chained_body);
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
        router_job_run(r, c, req, reply, proxy,
                       i == 1 ? LLMR_OAI_CHAT : i == 2 ? LLMR_OAI_COMPLETION : KIND_RESPONSES);
    return true;
}
