/* The router's live view of its nodes: who registered, their heartbeats (models and
 * their states, sync progress, memory, requests in flight), who went offline (no
 * heartbeat for the timeout), who is drained, and the choice of a node for a request:
 * among the online, undrained nodes with the model ready, the fewest requests
 * outstanding from this router, then the lowest recent time to first token.
 *
 * Thread-safe.  Nodes are kept by id; the store keeps them across restarts, but a
 * node must register again after a router restart (its heartbeat then gets 404). */
#ifndef LLMR_ROUTER_NODE_REGISTRY_H
#define LLMR_ROUTER_NODE_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"

typedef struct llmr_node_registry llmr_node_registry;

llmr_node_registry *llmr_node_registry_new(uint64_t offline_after_ms);
void llmr_node_registry_free(llmr_node_registry *r);

/* A registration (the body of POST /v0/nodes): a new id into id_out (size >= 32). */
void llmr_node_registry_add(llmr_node_registry *r, const json_t *registration, uint64_t now_ms,
                            char *id_out, size_t id_size);
/* A heartbeat; false when the id is unknown (the node must register again). */
bool llmr_node_registry_heartbeat(llmr_node_registry *r, const char *id, const json_t *body,
                                  uint64_t now_ms);
bool llmr_node_registry_remove(llmr_node_registry *r, const char *id);
bool llmr_node_registry_drain(llmr_node_registry *r, const char *id, bool drained);

/* [{"id","name","url","online","drained","last_seen_ms_ago","in_flight",
 *   "outstanding","ttft_ms","models":[...as the node reported...], "info":{...}}] */
json_t *llmr_node_registry_list(llmr_node_registry *r, uint64_t now_ms);
/* Per node, the model's state there: [{"node","state","reason","sync"}]. */
json_t *llmr_node_registry_model_states(llmr_node_registry *r, const char *model, uint64_t now_ms);
/* Whether some online node has the model ready (busy or not); _except leaves out the
 * ids in exclude. */
bool llmr_node_registry_model_ready(llmr_node_registry *r, const char *model, uint64_t now_ms);
bool llmr_node_registry_model_ready_except(llmr_node_registry *r, const char *model, uint64_t now_ms,
                                           const char *const *exclude, size_t n_exclude);

/* Requests a node may have outstanding from this router (0: no limit, the default). */
void llmr_node_registry_set_max_outstanding(llmr_node_registry *r, unsigned max);

/* Picks a node for model, skipping the ids in `exclude` (tried already) and nodes at
 * their limit, and a node marked unreachable (below) while another could take the
 * request now or later; copies its id and URL, counts one request outstanding on it.
 * false when none can serve now (llmr_node_registry_model_ready_except tells whether
 * one could later). */
bool llmr_node_registry_pick(llmr_node_registry *r, const char *model, uint64_t now_ms,
                             const char *const *exclude, size_t n_exclude, char *id, size_t id_size,
                             char *url, size_t url_size);
/* The end of a request picked above; ttft_ms < 0 when there was no first token. */
void llmr_node_registry_done(llmr_node_registry *r, const char *id, double ttft_ms);

/* The router could not reach the node (it failed before its first byte): for
 * LLMR_NODE_UNREACHABLE_MS, pick chooses it only when it is the only node with the
 * model ready, so that new requests do not each try a dead node first (nor wait for a
 * busy good one by trying it) until its heartbeats time out.  After that, one request
 * tries it again. */
#define LLMR_NODE_UNREACHABLE_MS 2000u
void llmr_node_registry_mark_unreachable(llmr_node_registry *r, const char *id, uint64_t now_ms);

#endif
