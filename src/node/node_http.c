/* The node's HTTP API: see node_http.h.  Routing (CORS first: http/http_cors.h), the
 * OpenAI endpoints on the engine host, /v1/models[/ID], /health and /metrics.  A
 * generation is a `gen`: the handler builds it and submits it; the engine host's
 * events fill it (a whole response) or stream it out as Server-Sent Events.  A chat of
 * a harmony model (node_prompt.h) goes through node_harmony.h: reasoning, answer and
 * tool calls apart, as OpenAI's fields.  POST /v1/responses is the same generation as
 * the chat its request amounts to (openai_responses.h): its chat deltas become the
 * Responses output items and typed stream events. */
#include "node/node_http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/secret.h"
#include "http/http_cors.h"
#include "node/node_harmony.h"
#include "node/node_metrics.h"
#include "node/node_prompt.h"
#include "openai/openai_api.h"
#include "openai/openai_responses.h"

#define COMPONENT "http"
#define MAX_PROMPT_TOKENS (1u << 20)

typedef struct gen gen;

struct llmr_node_http {
    llmr_http_server *srv;
    llmr_http_cors *cors;     /* NULL: no CORS */
    pthread_mutex_t lock;     /* active, stopping */
    gen *active;              /* generations under way (cancelled at stop) */
    bool stopping;            /* the requests left are being cancelled */
    bool draining;            /* llmr_node_http_stop has begun: no new generation */
    unsigned shutdown_grace_s;
    llmr_engine_host *host;
    llmr_node_prompts *prompts;
    llmr_node_metrics metrics;
    char *api_key, *node_name;
    bool router_linked;
    char *router_secret;      /* under lock */
    unsigned default_max_tokens; /* for a request without max_tokens */
    int64_t started; /* "created" of the models */
};

/* ---- replies ------------------------------------------------------------------------- */

static void reply_json(llmr_node_http *n, llmr_http_reply *reply, llmr_endpoint ep, unsigned status,
                       json_t *body);

static void reply_error(llmr_node_http *n, llmr_http_reply *reply, llmr_endpoint ep,
                        const llmr_oai_error *e)
{
    llmr_oai_error named = *e;
    if (ep == LLMR_EP_RESPONSES)
        llmr_oai_responses_name_error(&named);
    reply_json(n, reply, ep, named.status, llmr_oai_error_json(&named));
}

/* JSON as the OpenAI API writes it (floats in their shortest form); takes body. */
static void reply_json(llmr_node_http *n, llmr_http_reply *reply, llmr_endpoint ep, unsigned status,
                       json_t *body)
{
    llmr_node_metrics_request(&n->metrics, ep, status);
    char *text = body ? llmr_oai_dumps(body) : NULL;
    json_decref(body);
    if (!text) {
        llmr_http_reply_error(reply, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    llmr_http_reply_text(reply, status, "application/json", text, strlen(text));
    free(text);
}

/* The HTTP answer to an engine host status. */
static void error_from_status(llmr_oai_error *e, llmr_status st, const char *message)
{
    unsigned http = 500;
    const char *type = "server_error", *code = NULL;
    switch (st) {
    case LLMR_INVALID_ARGUMENT:
        http = 400, type = "invalid_request_error", code = "invalid_value";
        break;
    case LLMR_NOT_FOUND:
        http = 404, type = "invalid_request_error", code = "model_not_found";
        break;
    case LLMR_LIMIT_EXCEEDED:
        http = 429, type = "rate_limit_error", code = "limit_exceeded";
        break;
    case LLMR_TIMEOUT:
        http = 504, code = "timeout";
        break;
    case LLMR_OOM_VRAM:
    case LLMR_OOM_RAM:
    case LLMR_LOAD_FAILED:
    case LLMR_UNSUPPORTED:
    case LLMR_MODEL_CORRUPT:
        http = 503, code = "model_not_ready";
        break;
    default:
        break;
    }
    llmr_oai_error_set(e, http, type, code, NULL, "%s (%s)", message && *message ? message : llmr_status_message(st),
                       llmr_status_name(st));
}

/* ---- models -------------------------------------------------------------------------- */

/* The engine host's entry of a model (a new reference), or NULL. */
static json_t *find_model(llmr_node_http *n, const char *name)
{
    json_t *status = llmr_engine_host_status(n->host), *found = NULL, *m;
    size_t i;
    json_array_foreach(json_object_get(status, "models"), i, m)
    {
        const char *mn = json_string_value(json_object_get(m, "name"));
        if (mn && strcmp(mn, name) == 0) {
            found = json_incref(m);
            break;
        }
    }
    json_decref(status);
    return found;
}

/* Ready to serve: verified and loaded, or loadable (an engine is chosen and the last
 * load did not fail). */
static bool model_ready(const json_t *m)
{
    const char *state = json_string_value(json_object_get(m, "state"));
    return state && (!strcmp(state, "ready") || !strcmp(state, "idle") || !strcmp(state, "loading"));
}

static void handle_models(llmr_node_http *n, llmr_http_reply *reply)
{
    json_t *status = llmr_engine_host_status(n->host), *m;
    json_t *models = json_object_get(status, "models");
    size_t count = json_array_size(models), i;
    llmr_oai_model_entry *e = calloc(count + 1, sizeof *e);
    json_array_foreach(models, i, m)
    {
        e[i].id = json_string_value(json_object_get(m, "name"));
        e[i].created = n->started;
        e[i].owned_by = n->node_name;
        e[i].ready = model_ready(m);
        e[i].reason = json_string_value(json_object_get(m, "reason"));
        if (!e[i].ready && !e[i].reason)
            e[i].reason = json_string_value(json_object_get(m, "state"));
    }
    reply_json(n, reply, LLMR_EP_MODELS, 200, llmr_oai_models_list(e, count));
    free(e);
    json_decref(status);
}

/* GET /v1/models/{id}: a model ready here, as OpenAI answers it; else 404
 * model_not_found (one this node has but cannot serve now says why). */
static void handle_model(llmr_node_http *n, const char *id, llmr_http_reply *reply)
{
    json_t *m = find_model(n, id);
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    if (!m) {
        llmr_oai_error_set(&e, 404, "invalid_request_error", "model_not_found", NULL,
                           "The model '%.200s' does not exist on this node (GET /v1/models lists them).", id);
        reply_error(n, reply, LLMR_EP_MODELS, &e);
    } else if (!model_ready(m)) {
        const char *why = json_string_value(json_object_get(m, "reason"));
        if (!why)
            why = json_string_value(json_object_get(m, "state"));
        llmr_oai_error_set(&e, 404, "invalid_request_error", "model_not_found", NULL,
                           "The model '%.200s' is on this node but not ready: %.300s.", id, why ? why : "unknown");
        reply_error(n, reply, LLMR_EP_MODELS, &e);
    } else {
        llmr_oai_model_entry entry = {json_string_value(json_object_get(m, "name")), n->started, n->node_name, true,
                                      NULL};
        reply_json(n, reply, LLMR_EP_MODELS, 200, llmr_oai_model_json(&entry));
    }
    json_decref(m);
}

static void handle_health(llmr_node_http *n, llmr_http_reply *reply)
{
    json_t *status = llmr_engine_host_status(n->host), *m;
    size_t i, ready = 0;
    json_array_foreach(json_object_get(status, "models"), i, m) ready += model_ready(m);
    json_t *body = json_pack("{s:s, s:I, s:I, s:i}", "status", "ok", "models",
                             (json_int_t)json_array_size(json_object_get(status, "models")), "ready",
                             (json_int_t)ready, "in_flight",
                             (int)llmr_node_metrics_get_in_flight(&n->metrics));
    json_decref(status);
    reply_json(n, reply, LLMR_EP_HEALTH, 200, body);
}

static void handle_metrics(llmr_node_http *n, llmr_http_reply *reply)
{
    llmr_strbuf out = LLMR_STRBUF_INIT;
    llmr_node_http_metrics(n, &out);
    llmr_engine_host_metrics(n->host, &out);
    llmr_node_metrics_request(&n->metrics, LLMR_EP_METRICS, 200);
    llmr_http_reply_text(reply, 200, "text/plain; version=0.0.4", llmr_strbuf_cstr(&out), out.len);
    llmr_strbuf_free(&out);
}

/* ---- generations --------------------------------------------------------------------- */

struct gen {
    gen *prev, *next;         /* in n->active while the engine has it */
    bool engine_done;         /* the last event came (under n->lock) */
    llmr_node_http *n;
    const llmr_node_prompt *prompt;
    llmr_oai_kind kind;
    llmr_endpoint ep;
    bool stream, include_usage, logprobs;
    uint32_t top_logprobs;
    char id[48];
    char *model;
    int64_t created;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;                 /* the engine's side until its last event; the stream's
                                 until on_close; the handler's while it waits */
    bool done;                /* the last event came */
    bool gone;                /* the client went away */
    bool have_id;
    uint64_t request_id;
    llmr_http_stream *out;
    bool stream_released;     /* the stream's reference is given back (on_close ran, or
                                 the stream ended before the client left) */
    bool sent_first;
    llmr_strbuf text;         /* the whole text (non-streamed) */
    llmr_node_harmony *harmony; /* a harmony model's chat, or NULL */
    bool harmony_ended;       /* the answer ended before the engine did: cancelled, which
                                 is a stop (engine thread only) */
    llmr_oai_resp_out *resp;  /* a Responses API request's answer, or NULL */
    uint32_t reasoning_tokens; /* resp: the tokens that gave reasoning text */
    json_t *lp_pending;       /* harmony stream: logprobs of tokens not sent yet */
    json_t *lp;               /* chat: the logprobs content array; completions: unused */
    json_t *lp_tokens;        /* completions: [llmr_oai_token_logprob as JSON] kept for the end */
    size_t text_offset;
    uint32_t finish;
    llmr_status status;
    char *message;
    uint32_t prompt_tokens, completion_tokens;
    uint64_t t0_ns, last_ns, first_ns;
};

/* What the access log and the metrics learn of a generation at its end. */
static llmr_http_note gen_note(const gen *g)
{
    llmr_http_note note = {.response_id = g->id, .usage = true, .prompt_tokens = g->prompt_tokens,
                           .completion_tokens = g->completion_tokens,
                           .ttft_ms = g->first_ns ? (double)(g->first_ns - g->t0_ns) / 1e6 : -1};
    return note;
}

/* The engine is done with g: out of the active list, and never put in it after. */
static void active_remove(gen *g)
{
    llmr_node_http *n = g->n;
    pthread_mutex_lock(&n->lock);
    g->engine_done = true;
    if (g->prev)
        g->prev->next = g->next;
    else if (n->active == g)
        n->active = g->next;
    if (g->next)
        g->next->prev = g->prev;
    g->prev = g->next = NULL;
    pthread_mutex_unlock(&n->lock);
}

static void gen_unref(gen *g)
{
    pthread_mutex_lock(&g->lock);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (!last)
        return;
    llmr_strbuf_free(&g->text);
    llmr_node_harmony_free(g->harmony);
    llmr_oai_resp_out_free(g->resp);
    json_decref(g->lp_pending);
    json_decref(g->lp);
    json_decref(g->lp_tokens);
    free(g->message);
    free(g->model);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

static const char *finish_reason(uint32_t finish)
{
    return finish == LLMR_ENGINE_FINISH_LENGTH ? "length" : "stop";
}

/* The event's token with its alternatives, for the logprobs fields. */
static json_t *event_logprob(gen *g, const llmr_gen_event *ev)
{
    uint32_t k = ev->top_count < g->top_logprobs ? ev->top_count : g->top_logprobs;
    llmr_strbuf texts[LLMR_OAI_MAX_TOP_LOGPROBS];
    const char *tt[LLMR_OAI_MAX_TOP_LOGPROBS];
    size_t tl[LLMR_OAI_MAX_TOP_LOGPROBS];
    float tp[LLMR_OAI_MAX_TOP_LOGPROBS];
    for (uint32_t i = 0; i < k; i++) {
        llmr_strbuf_init(&texts[i]);
        llmr_node_prompt_token_text(g->prompt, ev->top_ids[i], &texts[i]);
        tt[i] = llmr_strbuf_cstr(&texts[i]);
        tl[i] = texts[i].len;
        tp[i] = ev->top_logprobs[i];
    }
    llmr_strbuf self = LLMR_STRBUF_INIT;
    llmr_node_prompt_token_text(g->prompt, ev->id, &self);
    llmr_oai_token_logprob t = {llmr_strbuf_cstr(&self), self.len, ev->logprob, k, tt, tl, tp};
    json_t *o = g->kind == LLMR_OAI_CHAT ? llmr_oai_chat_logprob(&t)
                                          : llmr_oai_completion_logprobs(&t, 1, g->text_offset);
    llmr_strbuf_free(&self);
    for (uint32_t i = 0; i < k; i++)
        llmr_strbuf_free(&texts[i]);
    return o;
}

/* Writes sb to the client's stream unless it has gone (then marks it gone); frees sb. */
static void stream_send(gen *g, llmr_strbuf *sb)
{
    pthread_mutex_lock(&g->lock);
    bool gone = g->gone;
    pthread_mutex_unlock(&g->lock);
    if (!gone && !llmr_http_stream_write(g->out, sb->data, sb->len)) {
        pthread_mutex_lock(&g->lock);
        g->gone = true;
        pthread_mutex_unlock(&g->lock);
    }
    llmr_strbuf_free(sb);
}

static void send_chunk(gen *g, json_t *chunk)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_oai_sse_data(&sb, chunk);
    json_decref(chunk);
    stream_send(g, &sb);
}

static void stream_token(gen *g, const llmr_gen_event *ev, json_t *lp)
{
    if (g->kind == LLMR_OAI_CHAT) {
        if (!g->sent_first) {
            send_chunk(g, llmr_oai_chat_chunk(g->id, g->model, g->created, true, "", 0, NULL, NULL,
                                              g->include_usage));
            g->sent_first = true;
        }
        json_t *content = NULL;
        if (lp) {
            content = json_array();
            json_array_append_new(content, lp);
        }
        send_chunk(g, llmr_oai_chat_chunk(g->id, g->model, g->created, false, ev->text ? ev->text : "",
                                          ev->text_len, NULL, content, g->include_usage));
    } else {
        send_chunk(g, llmr_oai_completion_chunk(g->id, g->model, g->created, ev->text ? ev->text : "",
                                                ev->text_len, NULL, lp, g->include_usage));
    }
}

/* A harmony stream's deltas, one chunk each: the first names the role; each carries
 * the logprobs of the tokens since the last chunk. */
static void send_deltas(gen *g, json_t *deltas)
{
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d)
    {
        json_t *delta = json_incref(d);
        if (!g->sent_first) { /* the role first, as OpenAI orders it */
            json_decref(delta);
            delta = json_pack("{s:s}", "role", "assistant");
            if (delta)
                json_object_update(delta, d);
            g->sent_first = true;
        }
        json_t *lp = NULL;
        if (json_array_size(g->lp_pending)) {
            lp = g->lp_pending;
            g->lp_pending = json_array();
        }
        send_chunk(g, llmr_oai_chat_delta_chunk(g->id, g->model, g->created, delta, NULL, lp,
                                                g->include_usage));
    }
}

/* A Responses stream's events, each as "event: TYPE" and its data. */
static void send_events(gen *g, json_t *events)
{
    if (!json_array_size(events))
        return;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) llmr_oai_sse_event(&sb, e);
    stream_send(g, &sb);
}

/* A token's chat deltas into the Responses answer (and its stream). */
static void resp_deltas(gen *g, json_t *deltas, bool token)
{
    json_t *events = g->stream ? json_array() : NULL, *d;
    size_t i;
    bool reasoning = false;
    json_array_foreach(deltas, i, d)
    {
        reasoning = reasoning || json_object_get(d, "reasoning_content");
        llmr_oai_resp_out_delta(g->resp, d, events);
    }
    g->reasoning_tokens += token && reasoning;
    if (g->stream)
        send_events(g, events);
    json_decref(events);
}

/* A token of a model that does not write harmony, for a Responses answer. */
static void resp_text_token(gen *g, const llmr_gen_event *ev)
{
    json_t *events = g->stream ? json_array() : NULL;
    llmr_oai_resp_out_text(g->resp, ev->text ? ev->text : "", ev->text_len, events);
    if (g->stream)
        send_events(g, events);
    json_decref(events);
}

/* A harmony model's token: through the parser into the answer, and streamed. */
static void harmony_token(gen *g, const llmr_gen_event *ev, json_t *lp)
{
    if (g->resp) {
        json_t *deltas = json_array();
        llmr_node_harmony_feed(g->harmony, ev->id, ev->text, ev->text_len, deltas);
        json_decref(lp);
        resp_deltas(g, deltas, ev->id >= 0);
        json_decref(deltas);
        return;
    }
    json_t *deltas = g->stream ? json_array() : NULL;
    llmr_node_harmony_feed(g->harmony, ev->id, ev->text, ev->text_len, deltas);
    if (lp)
        json_array_append_new(g->stream ? g->lp_pending : g->lp, lp);
    if (g->stream)
        send_deltas(g, deltas);
    json_decref(deltas);
}

static const char *harmony_finish_reason(const gen *g)
{
    return llmr_oai_answer_finish_reason(llmr_node_harmony_answer(g->harmony),
                                         g->finish == LLMR_ENGINE_FINISH_LENGTH);
}

/* The end of a Responses stream: response.completed (or .incomplete, or .failed). */
static void resp_stream_end(gen *g)
{
    json_t *events = json_array();
    if (g->status == LLMR_OK) {
        llmr_oai_resp_usage u = {g->prompt_tokens, g->completion_tokens, g->reasoning_tokens};
        llmr_oai_resp_out_finish(g->resp, g->finish == LLMR_ENGINE_FINISH_LENGTH, &u, events);
    } else if (g->status != LLMR_CANCELLED) {
        llmr_oai_error e;
        error_from_status(&e, g->status, g->message);
        llmr_oai_resp_out_fail(g->resp, e.code, e.message, events);
    }
    send_events(g, events);
    json_decref(events);
}

static void stream_end(gen *g)
{
    pthread_mutex_lock(&g->n->lock);
    bool stopped = g->n->stopping; /* cancelled by the node's stop, not by its client */
    pthread_mutex_unlock(&g->n->lock);
    static const char CUT[] = "This node is shutting down: the answer was cut before its end.";
    bool cut = g->status == LLMR_CANCELLED && stopped && !g->gone;
    if (cut && g->resp) {
        json_t *events = json_array();
        llmr_oai_resp_out_fail(g->resp, "server_shutting_down", CUT, events);
        send_events(g, events);
        json_decref(events);
    } else if (cut) { /* an error event, never a bare [DONE] that looks like a success */
        llmr_oai_error e;
        llmr_oai_error_set(&e, 503, "server_error", "server_shutting_down", NULL, "%s", CUT);
        send_chunk(g, llmr_oai_error_json(&e));
    } else if (g->resp) {
        resp_stream_end(g);
    } else if (g->status != LLMR_OK && g->status != LLMR_CANCELLED) {
        llmr_oai_error e;
        error_from_status(&e, g->status, g->message);
        send_chunk(g, llmr_oai_error_json(&e));
    } else if (g->status == LLMR_OK) {
        if (g->harmony) {
            if (!g->sent_first)
                send_chunk(g, llmr_oai_chat_chunk(g->id, g->model, g->created, true, "", 0, NULL, NULL,
                                                  g->include_usage));
            json_t *lp = json_array_size(g->lp_pending) ? json_incref(g->lp_pending) : NULL;
            send_chunk(g, llmr_oai_chat_delta_chunk(g->id, g->model, g->created, NULL, harmony_finish_reason(g),
                                                    lp, g->include_usage));
        } else if (g->kind == LLMR_OAI_CHAT) {
            if (!g->sent_first)
                send_chunk(g, llmr_oai_chat_chunk(g->id, g->model, g->created, true, "", 0, NULL, NULL,
                                                  g->include_usage));
            send_chunk(g, llmr_oai_chat_chunk(g->id, g->model, g->created, false, NULL, 0,
                                              finish_reason(g->finish), NULL, g->include_usage));
        } else {
            send_chunk(g, llmr_oai_completion_chunk(g->id, g->model, g->created, "", 0,
                                                    finish_reason(g->finish), NULL, g->include_usage));
        }
        if (g->include_usage) {
            llmr_oai_usage u = {g->prompt_tokens, g->completion_tokens};
            send_chunk(g, llmr_oai_usage_chunk(g->kind, g->id, g->model, g->created, &u));
        }
    }
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (g->status == LLMR_OK && !g->include_usage)
        /* The usage for whoever relays the stream (the router's request log), as an SSE
         * comment, which clients ignore: {"usage":{...}} as in the usage chunk. */
        llmr_strbuf_printf(&sb, ": {\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u}}\n\n",
                           g->prompt_tokens, g->completion_tokens);
    if (!g->resp) /* a Responses stream ends with its last event */
        llmr_oai_sse_done(&sb);
    llmr_http_stream_write(g->out, sb.data, sb.len); /* false when the client has gone */
    llmr_strbuf_free(&sb);
    llmr_http_note note = gen_note(g);
    llmr_http_stream_note(g->out, &note);
    /* After this on_close does not run any more (one that was running has finished):
     * the stream's reference is ours to give back unless on_close took it. */
    llmr_http_stream_end(g->out);
    pthread_mutex_lock(&g->lock);
    bool release = !g->stream_released;
    g->stream_released = true;
    pthread_mutex_unlock(&g->lock);
    if (release)
        gen_unref(g);
}

static void on_event(void *user, const llmr_gen_event *ev)
{
    gen *g = user;
    uint64_t now = llmr_now_ns();
    pthread_mutex_lock(&g->lock);
    bool gone = g->gone, cancel = gone && g->have_id && !ev->finish;
    pthread_mutex_unlock(&g->lock);
    if (ev->id >= 0) {
        if (!g->last_ns)
            llmr_node_metrics_ttft(&g->n->metrics, g->model, (double)(now - g->t0_ns) / 1e9);
        else
            llmr_node_metrics_per_token(&g->n->metrics, g->model, (double)(now - g->last_ns) / 1e9);
        if (!g->first_ns)
            g->first_ns = now;
        g->last_ns = now;
        json_t *lp = g->logprobs ? event_logprob(g, ev) : NULL;
        if (g->harmony) {
            harmony_token(g, ev, lp);
        } else if (g->resp) {
            json_decref(lp);
            resp_text_token(g, ev);
        } else if (g->stream) {
            stream_token(g, ev, lp);
        } else {
            llmr_strbuf_append(&g->text, ev->text ? ev->text : "", ev->text_len);
            if (lp)
                json_array_append_new(g->kind == LLMR_OAI_CHAT ? g->lp : g->lp_tokens, lp);
        }
        g->text_offset += llmr_oai_text_chars(ev->text ? ev->text : "", ev->text_len);
    } else if (ev->text_len) { /* text the detokenizer held back, flushed at the end */
        if (g->harmony)
            harmony_token(g, ev, NULL);
        else if (g->resp)
            resp_text_token(g, ev);
        else if (g->stream)
            stream_token(g, ev, NULL);
        else
            llmr_strbuf_append(&g->text, ev->text, ev->text_len);
    }
    if (!cancel && !ev->finish && g->harmony && !g->harmony_ended &&
        llmr_node_harmony_done(g->harmony)) {
        /* <|return|> or <|call|> written as text (the special tokens end the generation
         * themselves): nothing after it is part of the answer */
        pthread_mutex_lock(&g->lock);
        g->harmony_ended = cancel = g->have_id;
        pthread_mutex_unlock(&g->lock);
    }
    if (cancel)
        llmr_engine_host_cancel(g->n->host, g->request_id);
    if (!ev->finish)
        return;
    g->finish = ev->finish;
    g->status = ev->status;
    if (g->harmony_ended && ev->status == LLMR_CANCELLED && !gone) {
        g->finish = LLMR_ENGINE_FINISH_STOP;
        g->status = LLMR_OK;
    }
    if (g->harmony) {
        json_t *deltas = g->stream || g->resp ? json_array() : NULL;
        llmr_node_harmony_finish(g->harmony, deltas);
        if (g->resp)
            resp_deltas(g, deltas, false);
        else if (g->stream && g->status == LLMR_OK)
            send_deltas(g, deltas);
        json_decref(deltas);
    }
    g->message = ev->message ? strdup(ev->message) : NULL;
    g->prompt_tokens = ev->prompt_tokens;
    g->completion_tokens = ev->completion_tokens;
    llmr_node_metrics_tokens(&g->n->metrics, g->model, ev->prompt_tokens, ev->completion_tokens);
    llmr_node_metrics_in_flight(&g->n->metrics, -1);
    if (g->status == LLMR_CANCELLED)
        llmr_node_metrics_cancelled(&g->n->metrics);
    active_remove(g);
    if (g->stream)
        stream_end(g);
    pthread_mutex_lock(&g->lock);
    g->done = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    gen_unref(g);
}

/* The client of a streamed response went away before the stream ended.  The cancel
 * may deliver the request's last event on this thread (it then ends the stream here,
 * which the HTTP server allows). */
static void on_close(void *user)
{
    gen *g = user;
    pthread_mutex_lock(&g->lock);
    bool cancel = !g->done && g->have_id;
    g->gone = true;
    bool release = !g->stream_released;
    g->stream_released = true;
    uint64_t id = g->request_id;
    pthread_mutex_unlock(&g->lock);
    if (cancel)
        llmr_engine_host_cancel(g->n->host, id);
    if (release)
        gen_unref(g);
}

/* The combined completions logprobs object from the per-token objects. */
static json_t *merge_completion_logprobs(const json_t *per_token)
{
    json_t *o = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
                          "text_offset");
    size_t i;
    json_t *t;
    json_array_foreach(per_token, i, t)
    {
        const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
        for (size_t k = 0; k < 4; k++) {
            json_t *a = json_object_get(t, keys[k]);
            if (json_array_size(a))
                json_array_append(json_object_get(o, keys[k]), json_array_get(a, 0));
        }
    }
    return o;
}

static void finish_whole(gen *g, llmr_http_reply *reply)
{
    llmr_node_http *n = g->n;
    llmr_http_note note = gen_note(g);
    llmr_http_reply_note(reply, &note);
    if (g->gone) { /* nobody reads this: it is what the log and the metrics record */
        llmr_oai_error e;
        llmr_oai_error_set(&e, 499, "invalid_request_error", "client_closed", NULL,
                           "The client closed the connection before the answer was ready.");
        reply_error(n, reply, g->ep, &e);
        return;
    }
    if (g->status != LLMR_OK) {
        llmr_oai_error e;
        error_from_status(&e, g->status, g->message);
        reply_error(n, reply, g->ep, &e);
        return;
    }
    llmr_oai_usage u = {g->prompt_tokens, g->completion_tokens};
    json_t *body;
    if (g->resp) {
        llmr_oai_resp_usage ru = {g->prompt_tokens, g->completion_tokens, g->reasoning_tokens};
        llmr_oai_resp_out_finish(g->resp, g->finish == LLMR_ENGINE_FINISH_LENGTH, &ru, NULL);
        body = llmr_oai_resp_out_failed(g->resp) ? NULL : llmr_oai_resp_out_response(g->resp);
    } else if (g->harmony) {
        const llmr_oai_answer *a = llmr_node_harmony_answer(g->harmony);
        json_t *message = llmr_oai_answer_failed(a) ? NULL : llmr_oai_answer_message(a);
        body = message ? llmr_oai_chat_response_message(g->id, g->model, g->created, message,
                                                        harmony_finish_reason(g), &u,
                                                        g->logprobs ? json_incref(g->lp) : NULL)
                       : NULL;
    } else if (g->kind == LLMR_OAI_CHAT)
        body = llmr_oai_chat_response(g->id, g->model, g->created, llmr_strbuf_cstr(&g->text), g->text.len,
                                      finish_reason(g->finish), &u, g->logprobs ? json_incref(g->lp) : NULL);
    else
        body = llmr_oai_completion_response(g->id, g->model, g->created, llmr_strbuf_cstr(&g->text),
                                            g->text.len, finish_reason(g->finish), &u,
                                            g->logprobs ? merge_completion_logprobs(g->lp_tokens) : NULL);
    reply_json(n, reply, g->ep, 200, body);
}

/* Waits (with g->lock) for the last event of a whole answer, looking every
 * CLIENT_POLL_MS whether its client is still there: one that left cancels the request
 * (the engine stops at its next step) and the answer is recorded as 499. */
#define CLIENT_POLL_MS 50
static void wait_whole(gen *g, const llmr_http_request *req, bool cancelled)
{
    while (!g->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += CLIENT_POLL_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g->cond, &g->lock, &until);
        if (g->done || cancelled || g->gone || !llmr_http_request_client_gone(req))
            continue;
        g->gone = true;
        cancelled = true;
        uint64_t id = g->request_id;
        pthread_mutex_unlock(&g->lock);
        llmr_log_info(COMPONENT, "the client of %s went away: cancelling it", g->id);
        llmr_engine_host_cancel(g->n->host, id);
        pthread_mutex_lock(&g->lock);
    }
}

/* The prompt's token ids: rendered chat, a text prompt, or the ids given.  A chat's
 * request text is tokenized as text (its ranges from the render, or from the router
 * that rendered it); a completions prompt is the caller's own, special tokens and all
 * (docs/tokenizer.md). */
static bool prompt_ids(const llmr_oai_request *r, const llmr_node_prompt *p, llmr_ids *ids,
                       llmr_oai_error *e)
{
    llmr_strbuf text = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_text_spans plain = LLMR_TEXT_SPANS_INIT;
    const llmr_text_spans *spans = NULL;
    bool ok = false;
    if (r->kind == LLMR_OAI_CHAT && r->prompt) { /* rendered by the router */
        llmr_strbuf_append(&text, r->prompt, r->prompt_len);
        spans = &r->prompt_text;
    } else if (r->kind == LLMR_OAI_CHAT) {
        spans = &plain;
        json_t *messages, *tools;
        if (!llmr_oai_template_input(r, llmr_node_prompt_harmony_template(p), &messages, &tools, e))
            goto done;
        bool rendered = llmr_node_prompt_render(p, messages, tools, r->template_kwargs, &text, &plain, &err);
        json_decref(messages);
        json_decref(tools);
        if (!rendered) {
            llmr_oai_error_set(e, 400, "invalid_request_error", "template_error", "messages", "%s",
                               llmr_strbuf_cstr(&err));
            goto done;
        }
    } else if (r->prompt) {
        llmr_strbuf_append(&text, r->prompt, r->prompt_len);
    } else {
        uint32_t vocab = llmr_tokenizer_vocab_size(llmr_node_prompt_tokenizer(p));
        for (size_t i = 0; i < r->prompt_id_count; i++) {
            if ((uint32_t)r->prompt_ids[i] >= vocab) {
                llmr_oai_error_set(e, 400, "invalid_request_error", "invalid_value", "prompt",
                                   "prompt[%zu] is token id %d, but the model's vocabulary has %u tokens",
                                   i, r->prompt_ids[i], vocab);
                goto done;
            }
            llmr_ids_push(ids, (uint32_t)r->prompt_ids[i]);
        }
    }
    if (r->kind == LLMR_OAI_CHAT || r->prompt) {
        llmr_status st = llmr_node_prompt_encode(p, llmr_strbuf_cstr(&text), text.len, spans, ids, &err);
        if (st != LLMR_OK) {
            llmr_oai_error_set(e, 400, "invalid_request_error", "invalid_value",
                               r->kind == LLMR_OAI_CHAT ? "messages" : "prompt", "the prompt cannot be tokenized: %s",
                               llmr_strbuf_cstr(&err));
            goto done;
        }
    }
    if (ids->count == 0) {
        llmr_oai_error_set(e, 400, "invalid_request_error", "invalid_value", "prompt",
                           "the prompt is empty: give at least one token");
        goto done;
    }
    if (ids->count > MAX_PROMPT_TOKENS) {
        llmr_oai_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "prompt",
                           "the prompt has %zu tokens; at most %u are taken", ids->count, MAX_PROMPT_TOKENS);
        goto done;
    }
    ok = true;
done:
    llmr_strbuf_free(&text);
    llmr_strbuf_free(&err);
    llmr_text_spans_free(&plain);
    return ok;
}

/* chat completions, completions, or responses (ep says which). */
static void handle_generate(llmr_node_http *n, llmr_endpoint ep, const llmr_http_request *req,
                            llmr_http_reply *reply)
{
    llmr_oai_kind kind = ep == LLMR_EP_COMPLETIONS ? LLMR_OAI_COMPLETION : LLMR_OAI_CHAT;
    llmr_oai_request r;
    llmr_oai_responses rs; /* responses: r is its chat request, moved out */
    memset(&rs, 0, sizeof rs);
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    bool parsed = ep == LLMR_EP_RESPONSES
                      ? llmr_oai_responses_parse(req->body, req->body_len, false, &rs, &e)
                      : llmr_oai_parse(kind, req->body, req->body_len, &r, &e);
    if (!parsed) {
        reply_error(n, reply, ep, &e);
        return;
    }
    pthread_mutex_lock(&n->lock);
    bool draining = n->draining;
    pthread_mutex_unlock(&n->lock);
    if (draining) {
        llmr_oai_error_set(&e, 503, "server_error", "server_shutting_down", NULL,
                           "This node is shutting down: the request was not started. Try again shortly.");
        llmr_http_reply_header(reply, "Retry-After", "5");
        reply_error(n, reply, ep, &e);
        if (ep == LLMR_EP_RESPONSES)
            llmr_oai_responses_free(&rs);
        else
            llmr_oai_request_free(&r);
        return;
    }
    if (ep == LLMR_EP_RESPONSES) {
        r = rs.chat;
        memset(&rs.chat, 0, sizeof rs.chat);
    }
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    gen *g = NULL;
    llmr_http_reply_note(reply, &(llmr_http_note){.model = r.model});
    json_t *m = find_model(n, r.model);
    if (!m) {
        llmr_oai_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                           "The model '%s' does not exist on this node (GET /v1/models lists them).", r.model);
        goto fail;
    }
    if (!model_ready(m) && json_string_value(json_object_get(m, "reason"))) {
        llmr_oai_error_set(&e, 503, "server_error", "model_not_ready", "model", "The model '%s' is not ready: %s",
                           r.model, json_string_value(json_object_get(m, "reason")));
        goto fail;
    }
    llmr_status st;
    const llmr_node_prompt *p =
        llmr_node_prompts_get(n->prompts, r.model, json_string_value(json_object_get(m, "dir")), &st, &err);
    if (!p) {
        llmr_oai_error_set(&e, 503, "server_error", "model_not_ready", "model", "%s", llmr_strbuf_cstr(&err));
        goto fail;
    }
    if (!prompt_ids(&r, p, &ids, &e))
        goto fail;

    g = calloc(1, sizeof *g);
    if (!g || !(g->model = strdup(r.model))) {
        llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        free(g);
        g = NULL;
        goto fail;
    }
    g->n = n;
    g->prompt = p;
    g->kind = kind;
    g->ep = ep;
    g->stream = r.stream;
    g->include_usage = r.include_usage;
    g->logprobs = r.logprobs;
    g->top_logprobs = r.top_logprobs > LLMR_OAI_MAX_TOP_LOGPROBS ? LLMR_OAI_MAX_TOP_LOGPROBS : r.top_logprobs;
    g->created = (int64_t)time(NULL);
    g->t0_ns = llmr_now_ns();
    llmr_oai_new_id(ep == LLMR_EP_RESPONSES ? "resp_" : kind == LLMR_OAI_CHAT ? "chatcmpl-" : "cmpl-",
                    g->id, sizeof g->id);
    llmr_strbuf_init(&g->text);
    if (ep == LLMR_EP_RESPONSES && !(g->resp = llmr_oai_resp_out_new(g->id, g->model, g->created, rs.request))) {
        llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        free(g->model);
        free(g);
        g = NULL;
        goto fail;
    }
    llmr_harmony_ids hids;
    if (kind == LLMR_OAI_CHAT && llmr_node_prompt_harmony(p, &hids)) {
        llmr_oai_answer_options ao = {r.include_reasoning,
                                      r.tools && r.tool_choice != LLMR_OAI_TOOL_NONE,
                                      r.parallel_tool_calls};
        g->lp_pending = json_array();
        if (!(g->harmony = llmr_node_harmony_new(&hids, &ao))) {
            llmr_oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            json_decref(g->lp_pending);
            llmr_oai_resp_out_free(g->resp);
            free(g->model);
            free(g);
            g = NULL;
            goto fail;
        }
    }
    g->lp = json_array();
    g->lp_tokens = json_array();
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->refs = 1; /* the handler's */

    llmr_gen_request gr;
    memset(&gr, 0, sizeof gr);
    gr.model = r.model;
    gr.params = llmr_engine_request_default_params();
    gr.params.prompt = (const int32_t *)ids.data;
    gr.params.prompt_len = (uint32_t)ids.count;
    gr.params.max_tokens = r.max_tokens_set ? r.max_tokens : n->default_max_tokens; /* never "to the end" */
    gr.params.temperature = (float)r.temperature;
    gr.params.top_p = (float)r.top_p;
    gr.params.top_k = r.top_k;
    gr.params.min_p = (float)r.min_p;
    gr.params.repetition_penalty = (float)r.repetition_penalty;
    gr.params.presence_penalty = (float)r.presence_penalty;
    gr.params.frequency_penalty = (float)r.frequency_penalty;
    gr.params.seed = r.seed_set ? r.seed : (uint64_t)g->t0_ns;
    gr.params.logprobs = r.logprobs;
    gr.params.top_logprobs = g->top_logprobs;
    gr.stop_strings = (const char *const *)r.stop;
    gr.stop_lens = r.stop_len;
    gr.stop_count = (uint32_t)r.stop_count;
    gr.skip_special = true;

    if (g->stream) {
        g->refs = 3; /* the handler's, the engine's, the stream's */
        g->out = llmr_http_reply_stream(reply, 200, "text/event-stream", on_close, g);
        llmr_node_metrics_request(&n->metrics, ep, 200);
        if (g->resp) {
            json_t *events = json_array();
            llmr_oai_resp_out_start(g->resp, events);
            send_events(g, events);
            json_decref(events);
        }
    } else {
        g->refs = 2; /* the handler's, the engine's */
    }
    llmr_node_metrics_in_flight(&n->metrics, 1);
    uint64_t id = 0;
    st = llmr_engine_host_submit(n->host, &gr, on_event, g, &id, &err);
    if (st != LLMR_OK) { /* no event comes */
        llmr_node_metrics_in_flight(&n->metrics, -1);
        error_from_status(&e, st, llmr_strbuf_cstr(&err));
        if (g->stream) {
            g->status = st;
            free(g->message);
            g->message = strdup(llmr_strbuf_cstr(&err));
            stream_end(g); /* the error as an event, then [DONE] */
        } else {
            reply_error(n, reply, ep, &e);
        }
        gen_unref(g); /* the engine's */
        gen_unref(g); /* the handler's */
        goto out;
    }
    pthread_mutex_lock(&n->lock);
    bool stopping = n->stopping;
    pthread_mutex_lock(&g->lock);
    g->request_id = id;
    g->have_id = true;
    if (!g->engine_done) { /* the engine still has it */
        g->next = n->active;
        if (n->active)
            n->active->prev = g;
        n->active = g;
    }
    bool cancel = (g->gone || stopping) && !g->done;
    pthread_mutex_unlock(&n->lock);
    if (cancel) { /* before any wait: a whole answer then ends at the engine's next step */
        pthread_mutex_unlock(&g->lock);
        llmr_engine_host_cancel(n->host, id);
        pthread_mutex_lock(&g->lock);
    }
    if (!g->stream)
        wait_whole(g, req, cancel);
    pthread_mutex_unlock(&g->lock);
    if (!g->stream)
        finish_whole(g, reply);
    gen_unref(g);
    goto out;
fail:
    reply_error(n, reply, ep, &e);
out:
    json_decref(m);
    free(ids.data);
    llmr_strbuf_free(&err);
    llmr_oai_request_free(&r);
    llmr_oai_responses_free(&rs);
}

/* ---- routing ------------------------------------------------------------------------- */

static bool authorized(llmr_node_http *n, const llmr_http_request *req)
{
    if (!n->api_key && !n->router_linked)
        return true;
    const char *h = llmr_http_request_header(req, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0)
        return false;
    bool ok = llmr_secret_equal(h + 7, n->api_key);
    pthread_mutex_lock(&n->lock);
    ok |= llmr_secret_equal(h + 7, n->router_secret);
    pthread_mutex_unlock(&n->lock);
    return ok;
}

void llmr_node_http_set_router_secret(llmr_node_http *n, const char *secret)
{
    char *copy = secret ? strdup(secret) : NULL;
    pthread_mutex_lock(&n->lock);
    if (n->router_secret) {
        memset(n->router_secret, 0, strlen(n->router_secret));
        free(n->router_secret);
    }
    n->router_secret = copy;
    pthread_mutex_unlock(&n->lock);
}

static const char *unauthorized_text(const llmr_node_http *n)
{
    if (n->router_linked)
        return "This node serves a router: send requests to the router (the node answers only the "
               "router's credential, or this node's own key with \"Authorization: Bearer KEY\").";
    return "Missing or wrong API key: send \"Authorization: Bearer KEY\" with this node's key.";
}

static void handle(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    llmr_node_http *n = user;
    static const struct {
        const char *path, *method;
        llmr_endpoint ep;
        bool open; /* no key needed */
    } routes[] = {{"/v1/chat/completions", "POST", LLMR_EP_CHAT, false},
                  {"/v1/completions", "POST", LLMR_EP_COMPLETIONS, false},
                  {"/v1/responses", "POST", LLMR_EP_RESPONSES, false},
                  {"/v1/models", "GET", LLMR_EP_MODELS, false},
                  {"/health", "GET", LLMR_EP_HEALTH, true},
                  {"/metrics", "GET", LLMR_EP_METRICS, true}};
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    if (llmr_http_cors_handle(n->cors, req, reply))
        return; /* a browser's preflight: answered before any key is asked for */
    if (!strncmp(req->path, "/v1/models/", 11) && req->path[11]) { /* the id may hold '/' */
        if (strcmp(req->method, "GET") != 0) {
            llmr_http_reply_header(reply, "Allow", "GET");
            llmr_oai_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                               "%s takes GET, not %s.", req->path, req->method);
            reply_error(n, reply, LLMR_EP_MODELS, &e);
        } else if (!authorized(n, req)) {
            llmr_oai_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL, "%s",
                               unauthorized_text(n));
            reply_error(n, reply, LLMR_EP_MODELS, &e);
        } else {
            handle_model(n, req->path + 11, reply);
        }
        return;
    }
    size_t i = 0, count = sizeof routes / sizeof routes[0];
    while (i < count && strcmp(routes[i].path, req->path) != 0)
        i++;
    if (i == count) {
        llmr_oai_error_set(&e, 404, "invalid_request_error", "unknown_url", NULL,
                           "Unknown request URL: %s %s. This node serves /v1/chat/completions, "
                           "/v1/completions, /v1/responses, /v1/models[/ID], /health and /metrics.",
                           req->method, req->path);
        reply_error(n, reply, LLMR_EP_OTHER, &e);
        return;
    }
    if (strcmp(req->method, routes[i].method) != 0) {
        llmr_http_reply_header(reply, "Allow", routes[i].method);
        llmr_oai_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                           "%s takes %s, not %s.", req->path, routes[i].method, req->method);
        reply_error(n, reply, routes[i].ep, &e);
        return;
    }
    if (!routes[i].open && !authorized(n, req)) {
        llmr_oai_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL, "%s", unauthorized_text(n));
        reply_error(n, reply, routes[i].ep, &e);
        return;
    }
    switch (routes[i].ep) {
    case LLMR_EP_CHAT:
    case LLMR_EP_COMPLETIONS:
    case LLMR_EP_RESPONSES: handle_generate(n, routes[i].ep, req, reply); break;
    case LLMR_EP_MODELS: handle_models(n, reply); break;
    case LLMR_EP_HEALTH: handle_health(n, reply); break;
    default: handle_metrics(n, reply); break;
    }
}

/* ---- lifetime ------------------------------------------------------------------------ */

/* A request is done: the per-model metrics of the generations. */
static void on_done(void *user, const llmr_http_done *d)
{
    llmr_node_http *n = user;
    if (d->model)
        llmr_node_metrics_done(&n->metrics, d->model, d->status, d->duration_ms / 1e3);
}

llmr_status llmr_node_http_start(const llmr_node_http_options *o, llmr_engine_host *host,
                                 llmr_node_http **out, llmr_strbuf *err)
{
    *out = NULL;
    llmr_node_http *n = calloc(1, sizeof *n);
    if (!n || !(n->prompts = llmr_node_prompts_new()) ||
        (o->api_key && *o->api_key && !(n->api_key = strdup(o->api_key))) ||
        !(n->node_name = strdup(o->node_name && *o->node_name ? o->node_name : "llmr"))) {
        if (n) {
            llmr_node_prompts_free(n->prompts);
            free(n->api_key);
            free(n);
        }
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = llmr_http_cors_new(o->cors_origins, &n->cors, err);
    if (st != LLMR_OK) {
        llmr_node_prompts_free(n->prompts);
        free(n->api_key);
        free(n->node_name);
        free(n);
        return st;
    }
    n->host = host;
    n->router_linked = o->router_linked;
    n->started = (int64_t)time(NULL);
    pthread_mutex_init(&n->lock, NULL);
    llmr_node_metrics_init(&n->metrics);
    llmr_http_server_options so;
    llmr_http_server_options_default(&so);
    so.host = o->host;
    so.port = o->port;
    so.max_body = o->max_body ? o->max_body : LLMR_NODE_MAX_BODY;
    n->default_max_tokens = o->default_max_tokens ? o->default_max_tokens : LLMR_NODE_DEFAULT_MAX_TOKENS;
    n->shutdown_grace_s = o->shutdown_grace_s;
    /* a router sends up to 256 requests at once (its node_max_outstanding), each on a
     * connection of its own; room for that, several routers and direct clients */
    so.max_connections = 1024;
    llmr_http_limits_apply(&o->limits, &so);
    so.handler = handle;
    so.user = n;
    so.service = "node";
    so.on_done = on_done;
    so.done_user = n;
    st = llmr_http_server_start(&so, &n->srv, err);
    if (st != LLMR_OK) {
        llmr_http_cors_free(n->cors);
        llmr_node_metrics_destroy(&n->metrics);
        pthread_mutex_destroy(&n->lock);
        llmr_node_prompts_free(n->prompts);
        free(n->api_key);
        free(n->node_name);
        free(n);
        return st;
    }
    *out = n;
    return LLMR_OK;
}

unsigned llmr_node_http_port(const llmr_node_http *n)
{
    return llmr_http_server_port(n->srv);
}

void llmr_node_http_forget_model(llmr_node_http *n, const char *name)
{
    if (n)
        llmr_node_prompts_forget(n->prompts, name);
}

unsigned llmr_node_http_in_flight(const llmr_node_http *n)
{
    return llmr_node_metrics_get_in_flight((llmr_node_metrics *)&n->metrics);
}

void llmr_node_http_metrics(llmr_node_http *n, llmr_strbuf *out)
{
    llmr_node_metrics_write(&n->metrics, out);
}

void llmr_node_http_stop(llmr_node_http *n)
{
    if (!n)
        return;
    /* End what is under way first: the server waits for its handlers, and a handler
     * waits for its generation. */
    /* Gracefully first: no new connection nor generation, and the running ones have
     * shutdown_grace_s to finish (docs/node.md, "Stopping"). */
    llmr_http_server_quiesce(n->srv);
    pthread_mutex_lock(&n->lock);
    n->draining = true;
    uint64_t deadline = llmr_now_ms() + (uint64_t)n->shutdown_grace_s * 1000u;
    while (n->active && llmr_now_ms() < deadline) {
        pthread_mutex_unlock(&n->lock);
        llmr_sleep_ms(50);
        pthread_mutex_lock(&n->lock);
    }
    if (n->active)
        llmr_log_warn(COMPONENT, "requests still running after %u s: they end now with an error",
                      n->shutdown_grace_s);
    n->stopping = true;
    size_t count = 0;
    for (gen *g = n->active; g; g = g->next)
        count++;
    uint64_t *ids = calloc(count + 1, sizeof *ids);
    count = 0;
    for (gen *g = n->active; g && ids; g = g->next)
        ids[count++] = g->request_id;
    pthread_mutex_unlock(&n->lock);
    for (size_t i = 0; i < count; i++)
        llmr_engine_host_cancel(n->host, ids[i]);
    free(ids);
    /* the cancelled streams end with their error event: sent before the server stops */
    uint64_t until = llmr_now_ms() + 5000;
    pthread_mutex_lock(&n->lock);
    while (n->active && llmr_now_ms() < until) {
        pthread_mutex_unlock(&n->lock);
        llmr_sleep_ms(20);
        pthread_mutex_lock(&n->lock);
    }
    pthread_mutex_unlock(&n->lock);
    llmr_http_server_drain(n->srv, llmr_now_ms() + 2000);
    llmr_http_server_stop(n->srv);
    llmr_http_cors_free(n->cors);
    llmr_node_metrics_destroy(&n->metrics);
    llmr_node_prompts_free(n->prompts);
    pthread_mutex_destroy(&n->lock);
    free(n->api_key);
    free(n->router_secret);
    free(n->node_name);
    free(n);
}
