/* What the router's files share (nothing outside src/router includes this). */
#ifndef LLMR_ROUTER_ROUTER_INTERNAL_H
#define LLMR_ROUTER_ROUTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "http/http_cors.h"
#include "http/http_server.h"
#include "openai/openai_api.h"
#include "router/model_source.h"
#include "router/node_registry.h"
#include "router/router.h"
#include "router/router_upstream.h"
#include "router/store.h"

typedef struct router_templates router_templates;
typedef struct router_metrics router_metrics;
typedef struct router_limits router_limits;

struct llmr_router {
    llmr_router_options o;       /* strings owned */
    llmr_store *store;
    llmr_node_registry *nodes;
    llmr_http_server *srv;
    llmr_http_server *local_srv; /* llmr_router_listen_local's, or NULL */
    char *local_key;             /* the only key local_srv takes (NULL: --no-auth) */
    atomic_uint local_port;      /* local_srv's port, once it is known (0 before) */
    llmr_http_cors *cors;        /* NULL: no CORS */
    pthread_mutex_t queue_lock;  /* the wait queue for a free node */
    pthread_cond_t queue_cond;
    unsigned waiting;
    router_templates *templates; /* compiled chat templates per model (router_render.c) */
    atomic_bool stopping;        /* llmr_router_stop has begun: jobs end soon */
    atomic_bool draining;        /* llmr_router_drain: no new request gets a node */
    router_upstream *upstream;   /* the transfers to the nodes (router_upstream.c) */
    pthread_mutex_t jobs_lock;   /* the jobs running (router_jobs.c) */
    pthread_cond_t jobs_done;
    unsigned jobs;
    pthread_mutex_t events_lock; /* the events streams' waits (router_events.c) */
    pthread_cond_t events_wake;  /* a stream's client left, or the router stops */
    router_metrics *metrics;     /* GET /metrics (router_metrics.c) */
    router_limits *limits;       /* per-key limits (router_limits.c) */
    pthread_mutex_t unloads_lock;
    json_t *unloads;             /* model name -> how many unloads were asked since the
                                    router started (POST /v0/models/NAME/unload): nodes
                                    unload the model when the count they see changes */
};

/* Who is asking: the scopes of the key presented (all, with --no-auth), its id. */
typedef struct router_caller {
    unsigned scopes;
    char *key_id;
    llmr_store_key_limits limits; /* the key's, the router's defaults filled in (0: none) */
} router_caller;

/* Replies with an OpenAI-style error. */
void router_error(llmr_http_reply *reply, unsigned status, const char *type, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Replies 403 unless the caller has the scope. */
bool router_need(const router_caller *c, unsigned scope, llmr_http_reply *reply);
uint64_t router_now_ms(void);
/* The admin key at start (router_bootstrap.c); err says why the start cannot go on. */
llmr_status router_bootstrap_admin(llmr_router *r, llmr_strbuf *err);

/* /v0/... (router_admin.c); false when the path is not one of its routes. */
bool router_admin_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply);
/* /v1/... (router_proxy.c); false when the path is not one of its routes. */
bool router_proxy_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply);

/* ---- proofs that a node holds a model's files (router_proof.c) ---- */
/* Checks the heartbeat's "proofs" of node id and returns the challenges for the models
 * it reports ready unproven (a new array, maybe empty). */
json_t *router_node_proofs(llmr_router *r, const char *id, const json_t *heartbeat);

/* ---- what /v0 lists (router_admin.c), shared by its endpoints and the dashboard's
 * snapshots (router_snapshot.c) ---- */
/* GET /v0/nodes' "nodes". */
json_t *router_nodes_json(llmr_router *r);
/* GET /v0/models' "models"; with_nodes adds to each model the "nodes" array of
 * GET /v0/models/{name} (each node's state for it). */
json_t *router_models_json(llmr_router *r, bool with_nodes);
/* A model's version: 16 hex digits of a hash of its manifest and registration time.
 * A model deleted and registered again under its name has another, so that nodes
 * fetch its files again and never serve the old copy. */
void router_model_version(const json_t *manifest, int64_t created, char out[17]);
/* GET /v0/requests' "requests": the newest limit entries first; NULL when the log
 * cannot be read (the log says why). */
json_t *router_requests_json(llmr_router *r, size_t limit);

/* ---- the dashboard (router_dashboard.c, router_snapshot.c, router_events.c) ---- */
/* GET / (a redirect to /dashboard) and /dashboard[/PATH], the embedded browser app:
 * false when the path is none of these (or "/" with another method).  Needs no key. */
bool router_dashboard_route(const llmr_http_request *req, llmr_http_reply *reply);
/* The dashboard's view of the router now, one JSON object: time_ms, nodes, models
 * (with their nodes), requests (the newest 50), stats (the last 10 s). */
json_t *router_snapshot_json(llmr_router *r);
/* GET /v0/events: a stream of snapshots (admin scope). */
bool router_events_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                         llmr_http_reply *reply);
void router_events_init(llmr_router *r);
/* llmr_router_stop has begun (r->stopping is set): every events stream ends now. */
void router_events_stop(llmr_router *r);
/* After the last job ended. */
void router_events_free(llmr_router *r);
/* Unix milliseconds now (the request log's clock). */
int64_t router_unix_ms(void);

/* ---- the router's running work (router_jobs.c): proxied requests, from their
 * handler's start to their end (on the transfer loop for a stream), and the dashboard's
 * event streams, each on a thread of its own ---- */
typedef struct router_job router_job;
typedef void (*router_job_fn)(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                              llmr_http_reply *reply, router_job *job, int arg);
void router_jobs_init(llmr_router *r);
/* Runs fn(r, c, req, reply, job, arg) on a new thread with copies of c and req, and
 * returns once it has called router_job_replied or returned.  Replies 503 itself when
 * no thread can be started. */
void router_job_run(llmr_router *r, const router_caller *c, const llmr_http_request *req, llmr_http_reply *reply,
                    router_job_fn fn, int arg);
/* The job has replied (a whole answer, or a stream opened): the server's handler
 * returns, and the job does not touch the reply again.  NULL: nothing. */
void router_job_replied(router_job *job);
/* A proxied request begins (on its handler's thread) and ends (wherever it ends): it
 * counts as a job meanwhile. */
void router_jobs_begin(llmr_router *r);
void router_jobs_end(llmr_router *r);
/* Waits until no job runs or until the router_now_ms deadline: true when none runs. */
bool router_jobs_idle(llmr_router *r, uint64_t deadline_ms);
/* Waits until no job runs (for llmr_router_stop, after the server stopped). */
void router_jobs_wait(llmr_router *r);

/* ---- per-key limits (router_limits.c) ---- */
typedef enum router_limit_refusal {
    ROUTER_LIMIT_OK,
    ROUTER_LIMIT_CONCURRENT, /* as many requests running as the key may */
    ROUTER_LIMIT_RPM,        /* the minute's requests */
    ROUTER_LIMIT_TPM         /* the minute's tokens */
} router_limit_refusal;
router_limits *router_limits_new(void);
void router_limits_free(router_limits *l);
/* A request of key (NULL: none) under lim: admitted (OK; router_limits_done when it
 * ends), or refused with the seconds to wait and the limit reached. */
router_limit_refusal router_limits_admit(router_limits *l, const char *key, const llmr_store_key_limits *lim,
                                         uint64_t now_ms, unsigned *retry_s, int64_t *limit);
/* An admitted request ended, having used tokens (prompt and completion). */
void router_limits_done(router_limits *l, const char *key, uint64_t tokens, uint64_t now_ms);

/* ---- GET /metrics (router_metrics.c) ---- */
router_metrics *router_metrics_new(void);
void router_metrics_free(router_metrics *m);
/* An answer to one of the OpenAI endpoints is done. */
void router_metrics_done(router_metrics *m, const llmr_http_done *d);
/* The whole text of GET /metrics. */
void router_metrics_write(llmr_router *r, llmr_strbuf *out);

/* ---- chat templates (router_render.c) ---- */
router_templates *router_templates_new(void);
void router_templates_free(router_templates *t);
/* At registration: the model's chat format as JSON into *out (NULL: its node renders,
 * a gguf without a template given), or the HTTP status of the refusal with msg (400 a
 * file that is not what it should be, 502 the source could not be read). */
unsigned router_chat_format_read(const llmr_source_options *so, const llmr_source *src, const char *format,
                                 const char *override, json_t **out, llmr_strbuf *msg);
/* Whether the router renders the model's chats: it has a chat format that lists the
 * tokenizer's special tokens (so request text can be kept text), or a template given
 * at registration (which its node does not have).  Otherwise its node renders. */
bool router_chat_renders(const llmr_store_model *m);
/* Renders a chat request with the model's chat format (m->chat_format not NULL), the
 * request's special-token text kept text: spans gets its ranges of out
 * (template/chat_text.h); false with e (400 the template's error, 500 an unusable
 * stored format). */
bool router_render_chat(llmr_router *r, const llmr_store_model *m, const llmr_oai_request *q, llmr_strbuf *out,
                        llmr_text_spans *spans, llmr_oai_error *e);
/* The request's body with the rendered prompt added (LLMR_OAI_RENDERED_PROMPT) and its
 * request-text ranges (LLMR_OAI_RENDERED_TEXT, when there are any), malloc'd. */
bool router_render_body(const llmr_http_request *req, const char *prompt, size_t prompt_len,
                        const llmr_text_spans *spans, char **body, size_t *body_len);
/* A chat body that goes to a node unrendered but carries a client's own
 * LLMR_OAI_RENDERED_PROMPT, without it and LLMR_OAI_RENDERED_TEXT (only the router
 * renders): *body malloc'd when they had to be taken out, else NULL (the body goes as
 * it is); false when out of memory. */
bool router_unrendered_body(const llmr_http_request *req, char **body, size_t *body_len);
/* POST /v0/models/{name}/render: {"prompt", "template_origin", "text_spans"} for a chat
 * request body. */
void router_render_endpoint(llmr_router *r, const llmr_store_model *m, const llmr_http_request *req,
                            llmr_http_reply *reply);

#endif
