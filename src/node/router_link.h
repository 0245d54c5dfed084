/* The node's link to its router (docs/node-router-protocol.md): registration at start,
 * heartbeats with metrics and sync progress every few seconds, registration again when
 * the router has forgotten the node (it restarted), and the model list: every model the
 * router lists is synced (model_sync.h) and added to the engine host when complete; a
 * model it no longer lists is taken off the host and deleted (its sync stopped), one
 * whose version changed is taken off and synced again, one whose unload count went up
 * is unloaded.  The registration answer's secret becomes the credential the node's
 * HTTP API asks of the router (node_http.h); the router's challenges in heartbeat
 * answers are answered from the synced files in the next heartbeat. */
#ifndef LLMR_NODE_ROUTER_LINK_H
#define LLMR_NODE_ROUTER_LINK_H

#include "common/strbuf.h"
#include "engine_host/engine_host.h"
#include "node/model_hasher.h"
#include "node/node_http.h"

typedef struct llmr_router_link llmr_router_link;

typedef struct llmr_router_link_options {
    const char *router_url;       /* "http://host:port" */
    const char *node_key;         /* the router's node key (Bearer), or NULL */
    const char *node_url;         /* how the router reaches this node's HTTP API */
    const char *node_name;
    const char *data_dir;
    const char *origin_allowlist;
    bool prefer_origin;
    const char *local_dirs;       /* see llmr_sync_options */
    bool allow_cpu;               /* say so to the router when there is no GPU */
    unsigned heartbeat_ms;        /* default 5000 */
    const char *engine_options;   /* load options of the models it adds (a JSON object), or NULL */
    llmr_model_hasher *hasher;    /* each model synced is queued there (model_hasher.h), or NULL */
} llmr_router_link_options;

llmr_status llmr_router_link_start(const llmr_router_link_options *o, llmr_engine_host *host,
                                   llmr_node_http *http, llmr_router_link **out, llmr_strbuf *err);
void llmr_router_link_stop(llmr_router_link *l);

#endif
