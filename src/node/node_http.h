/* The node's HTTP API (OpenAI-compatible): POST /v1/chat/completions and
 * /v1/completions (plain and streamed), GET /v1/models and /v1/models/{id}, /health and
 * /metrics, with CORS for the origins given (http/http_cors.h), on the
 * engine host.  Chat requests are rendered with the model's chat template and
 * tokenized with its tokenizer.json here; a request from the router may instead carry
 * the final prompt (see docs/node.md). */
#ifndef LLMR_NODE_NODE_HTTP_H
#define LLMR_NODE_NODE_HTTP_H

#include "common/strbuf.h"
#include "engine_host/engine_host.h"
#include "http/http_server.h"

typedef struct llmr_node_http llmr_node_http;

typedef struct llmr_node_http_options {
    const char *host;
    unsigned port;
    size_t max_body;          /* bytes; default 8 MiB */
    const char *api_key;      /* when set, requests need "Authorization: Bearer KEY" */
    const char *node_name;    /* owned_by in /v1/models */
    const char *cors_origins; /* origins browsers may call from (http/http_cors.h); NULL: none */
} llmr_node_http_options;

llmr_status llmr_node_http_start(const llmr_node_http_options *o, llmr_engine_host *host,
                                 llmr_node_http **out, llmr_strbuf *err);
unsigned llmr_node_http_port(const llmr_node_http *n);
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
