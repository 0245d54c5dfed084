/* The node's HTTP API (OpenAI-compatible): POST /v1/chat/completions and
 * /v1/completions (plain and streamed), GET /v1/models and /v1/models/{id}, /health and
 * /metrics, with CORS for the origins given (http/http_cors.h), on the
 * engine host.  Chat requests are rendered with the model's chat template and
 * tokenized with its tokenizer.json here; a request from the router may instead carry
 * the final prompt (see docs/node.md).  Keys: the node's own (api_key) and, for a node
 * that serves a router, the secret that router gave it, each compared in constant
 * time (docs/security.md). */
#ifndef LLMR_NODE_NODE_HTTP_H
#define LLMR_NODE_NODE_HTTP_H

#include "common/strbuf.h"
#include "engine_host/engine_host.h"
#include "http/http_server.h"

typedef struct llmr_node_http llmr_node_http;

typedef struct llmr_node_http_options {
    const char *host;
    unsigned port;
    size_t max_body;          /* bytes; default LLMR_NODE_MAX_BODY */
    const char *api_key;      /* when set, requests need "Authorization: Bearer KEY" */
    bool router_linked;       /* the node serves a router: /v1 needs the credential the
                                 router gave at registration (llmr_node_http_set_router_secret)
                                 or api_key, even when api_key is NULL */
    const char *node_name;    /* owned_by in /v1/models */
    const char *cors_origins; /* origins browsers may call from (http/http_cors.h); NULL: none */
    unsigned default_max_tokens; /* a request without max_tokens (or with null) generates at
                                    most this many; 0: LLMR_NODE_DEFAULT_MAX_TOKENS */
    unsigned shutdown_grace_s;   /* llmr_node_http_stop lets running requests finish this
                                    long, then ends them (a stream with an error event);
                                    0: at once */
    llmr_http_limits limits;     /* connections (0 fields: the defaults below) */
} llmr_node_http_options;
/* A request with neither max_tokens nor max_completion_tokens (or with null) is not
 * "to the end of the context": it gets this many at most, unless the node says
 * otherwise (llmr node --default-max-tokens). */
#define LLMR_NODE_DEFAULT_MAX_TOKENS 8192u
/* The body a node takes: a router's (8 MiB at most from its client) arrives with the
 * chat rendered beside its messages (LLMR_OAI_RENDERED_PROMPT) and the request text's
 * ranges, so up to about twice that and more; room for it all. */
#define LLMR_NODE_MAX_BODY ((size_t)32 << 20)

llmr_status llmr_node_http_start(const llmr_node_http_options *o, llmr_engine_host *host,
                                 llmr_node_http **out, llmr_strbuf *err);
unsigned llmr_node_http_port(const llmr_node_http *n);
/* The credential the router presents (from its registration answer; NULL: none yet,
 * so only api_key opens /v1). */
void llmr_node_http_set_router_secret(llmr_node_http *n, const char *secret);
/* The model was removed or its files changed: its tokenizer and template are read
 * again on its next request. */
void llmr_node_http_forget_model(llmr_node_http *n, const char *name);
/* In-flight requests (for heartbeats). */
unsigned llmr_node_http_in_flight(const llmr_node_http *n);
/* The HTTP layer's Prometheus text (requests, tokens, TTFT and per-token latency
 * histograms, in flight), appended to out. */
void llmr_node_http_metrics(llmr_node_http *n, llmr_strbuf *out);
void llmr_node_http_stop(llmr_node_http *n);

#endif
