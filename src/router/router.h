/* The router: the public OpenAI API in front of the nodes, model registration and
 * manifests, node registration and heartbeats, API keys, the dashboard
 * (docs/router.md).
 *
 *   router.c         the service: options, the store, routing and authentication
 *   router_bootstrap.c  the admin key at start: the key file, LLMR_ADMIN_KEY
 *   router_admin.c   /v0: models (register, list, show, delete, manifest, files), nodes
 *                    (register, heartbeat, list, drain, remove), keys (and their limits),
 *                    the request log and the audit log
 *   router_proxy.c   /v1: the OpenAI endpoints proxied to a node (balancing, the wait
 *                    queue, retry before the first byte, streams) and /v1/models[/ID]
 *   router_upstream.c  the transfer loop: every transfer to a node on one thread (a
 *                    libcurl multi handle), connections to the nodes reused
 *   router_jobs.c    the running work (for the stop), and the event streams' threads
 *   router_proof.c   challenges to nodes: a model is routed only where proven held
 *   node_address.c   a node's URL checked against where its registration came from
 *   router_limits.c  per-key limits: requests per minute, at once, tokens per minute
 *   router_render.c  chat templates: chosen at registration, rendered per request
 *   router_dashboard.c  the dashboard: the browser app's files, embedded at build time
 *   router_snapshot.c   the dashboard's view of nodes, models, requests and stats
 *   router_events.c     /v0/events: that view, streamed (Server-Sent Events) */
#ifndef LLMR_ROUTER_ROUTER_H
#define LLMR_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/strbuf.h"
#include "http/http_server.h"
#include "llmr/status.h"

typedef struct llmr_router llmr_router;

typedef struct llmr_router_options {
    const char *host;              /* "127.0.0.1" */
    unsigned port;                 /* 0: any free port */
    const char *data_dir;          /* the store is DATA_DIR/router.db */
    bool no_auth;                  /* no keys checked: only on a loopback address */
    const char *admin_key;         /* the bootstrap admin key (LLMR_ADMIN_KEY), or NULL */
    const char *cors_origins;      /* origins browsers may call from, comma-separated, or
                                      "*" (http/http_cors.h); NULL: no CORS */
    const char *artifact_allowlist; /* the publishers of optional GPU artifacts (org patterns) */
    const char *hf_endpoint, *hf_token; /* NULL: the environment's */
    unsigned node_offline_ms;      /* no heartbeat this long: offline; default 15000 */
    unsigned node_expire_ms;       /* no heartbeat this long: removed; default 600000
                                      (0: never) */
    const char *node_url_allow;    /* networks a node's URL may be in besides the
                                      registration's own address (node_address.h);
                                      NULL: none */
    unsigned heartbeat_s;          /* what nodes are told; default 5 */
    unsigned node_max_outstanding; /* requests per node at once; default 256 */
    unsigned queue_max;            /* requests waiting for a node; default 1024 */
    unsigned queue_timeout_ms;     /* default 30000 */
    size_t max_body;               /* default 8 MiB */
    unsigned max_connections;      /* client connections at once; default 4096 */
    /* the limits of a key that has none of its own (docs/router.md, "Limits"); 0: none */
    unsigned key_requests_per_minute, key_concurrent_requests, key_tokens_per_minute;
    unsigned shutdown_grace_s;     /* llmr_router_shutdown: how long running requests may
                                      go on; default 30 */
    unsigned responses_retention_h; /* stored responses older than this go; default 720
                                       (30 days) */
    llmr_http_limits http_limits;  /* clients' connections (its max_connections, when
                                      set, wins over the one above); 0 fields: defaults */
} llmr_router_options;

void llmr_router_options_default(llmr_router_options *o);

/* Opens the store, settles the admin key (router_bootstrap.c: made on first start,
 * printed on stderr and kept in the key file; LLMR_ADMIN_KEY's when set, replacing an
 * earlier one), and serves. */
llmr_status llmr_router_start(const llmr_router_options *o, llmr_router **out, llmr_strbuf *err);
unsigned llmr_router_port(const llmr_router *r);
/* A graceful stop, first step (SIGTERM): no new connections are accepted, a request
 * that has no node yet (new, or waiting in the queue) is answered 503
 * server_shutting_down, and the dashboard's event streams end; running requests go
 * on.  Then wait with llmr_router_idle, and llmr_router_stop. */
void llmr_router_drain(llmr_router *r);
/* Whether no request runs any more; waits for that up to timeout_ms. */
bool llmr_router_idle(llmr_router *r, unsigned timeout_ms);
/* Stops: the requests still running end (a stream with an error event,
 * server_shutting_down, then [DONE]; a whole answer with 503), then the server. */
void llmr_router_stop(llmr_router *r);

/* For `llmr serve`, which runs a node beside the router in one process. */
/* A second listener for that node, plain HTTP on 127.0.0.1 at a free port (*port),
 * for a router whose own one speaks HTTPS (a certificate for the public name does not
 * cover 127.0.0.1).  It answers only requests with key (the node's; NULL with
 * --no-auth: then the loopback guards of http_local.h alone), 403 to any other but
 * GET /health; no CORS.  Once, after llmr_router_start; llmr_router_drain and
 * llmr_router_stop close it with the other. */
llmr_status llmr_router_listen_local(llmr_router *r, const char *key, unsigned *port, llmr_strbuf *err);
/* Registers the model in dir (an absolute path) as POST /v0/models would. */
llmr_status llmr_router_register_local(llmr_router *r, const char *dir, const char *format, const char *name,
                                       llmr_strbuf *err);
size_t llmr_router_model_count(llmr_router *r);
/* A key with these scopes (LLMR_SCOPE_*): *id and *secret malloc'd. */
llmr_status llmr_router_create_key(llmr_router *r, const char *name, unsigned scopes, char **id, char **secret,
                                   llmr_strbuf *err);
void llmr_router_revoke_key(llmr_router *r, const char *id);
/* The keys, as GET /v0/keys lists them (no secrets); a new reference. */
json_t *llmr_router_list_keys(llmr_router *r);

/* ---- the key file: DATA_DIR/admin.key, mode 0600, the admin key and a newline ---- */
#define LLMR_ROUTER_KEY_FILE "admin.key"
/* DATA_DIR/admin.key, malloc'd (NULL when out of memory or data_dir is NULL). */
char *llmr_router_key_file_path(const char *data_dir);
/* The key in data_dir's key file, malloc'd: OK, NOT_FOUND (no file: err untouched), or
 * another status with err (unreadable, not one key on one line). */
llmr_status llmr_router_read_key_file(const char *data_dir, char **key, llmr_strbuf *err);

#endif
