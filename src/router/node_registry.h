/* The router's live view of its nodes: who registered, their heartbeats (models and
 * their states, sync progress, memory, requests in flight), who went offline (no
 * heartbeat for the timeout), who is drained, and the choice of a node for a request:
 * among the online, undrained nodes with the model ready, the fewest requests
 * outstanding from this router, then the lowest recent time to first token.
 *
 * Who a node is (docs/security.md): each registration is made with a key (its
 * owner; NULL without keys, --no-auth) and gets a random id and a random secret, the
 * credential the router presents to that node on every request it sends there.  Only
 * the owner's key sends the node's heartbeats.  A key holds one node: a second
 * registration with it replaces the first when the first is offline or has the same
 * URL, and is refused while the first is online elsewhere.  A key registers at most
 * LLMR_NODE_REGISTRATIONS_PER_MIN times a minute.  A node silent for the expiry
 * (llmr_node_registry_set_expire) is removed.
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

#define LLMR_NODE_REGISTRATIONS_PER_MIN 12u
#define LLMR_NODE_SECRET_HEX 64 /* the per-node secret: 32 random bytes in hex */

/* What a registration made. */
typedef struct llmr_node_added {
    char id[32];                            /* "n-" and 16 random hex digits */
    char secret[LLMR_NODE_SECRET_HEX + 1];  /* the credential the router presents to it */
    char replaced[32];                      /* the id of the entry it replaced, or "" */
} llmr_node_added;

typedef enum llmr_node_add_result {
    LLMR_NODE_ADDED,
    LLMR_NODE_KEY_IN_USE, /* the owner's node is online at another URL */
    LLMR_NODE_URL_IN_USE, /* another owner's node is online at this URL */
    LLMR_NODE_TOO_FAST,   /* the owner registered LLMR_NODE_REGISTRATIONS_PER_MIN times
                             in the last minute */
    LLMR_NODE_FULL,       /* as many nodes as the registry holds, or no randomness */
} llmr_node_add_result;

/* A registration (the body of POST /v0/nodes) by owner (a key id; NULL: no keys, no
 * limits) with pin (curl's "host:port:address" that fixes the address the URL was
 * checked at, or NULL).  LLMR_NODE_ADDED fills out. */
llmr_node_add_result llmr_node_registry_add(llmr_node_registry *r, const json_t *registration, const char *owner,
                                            const char *pin, uint64_t now_ms, llmr_node_added *out);
/* A heartbeat by owner; false when the id is unknown or another owner's (the node
 * must register again; the other owner's node is left as it was). */
bool llmr_node_registry_heartbeat(llmr_node_registry *r, const char *id, const char *owner,
                                  const json_t *body, uint64_t now_ms);
/* ---- proofs: a node routes a model only once it showed it holds the files ----
 * A model a node reports ready is routed there only once proven: the router sends
 * a challenge (a nonce and a byte range of one of the manifest's files) and the node
 * answers the SHA-256 of the nonce and those bytes (docs/node-router-protocol.md).
 * The router checks against its own copy; a model it has no copy of (from the Hub) is
 * proven by llmr_node_registry_prove without a challenge.  Deleting a model forgets
 * its proofs (a new registration under the name is proven again). */
/* Whether the node reports the model ready, unproven, with no challenge outstanding. */
bool llmr_node_registry_needs_challenge(llmr_node_registry *r, const char *id, const char *model);
/* An outstanding challenge the node's heartbeat did not answer (it could not read the
 * bytes, e.g. while it synced another version) is dropped, so that a new one follows:
 * a node is never left unproven for good.  A proof already made stays. */
void llmr_node_registry_drop_challenge(llmr_node_registry *r, const char *id, const char *model);
/* The challenge sent: expected is the hex SHA-256 the node must answer. */
void llmr_node_registry_challenge(llmr_node_registry *r, const char *id, const char *model, const char *nonce,
                                  const char *expected);
/* A node's answer: true when it matches the outstanding challenge (the model is proven
 * there); a wrong one clears the challenge (a new one follows). */
bool llmr_node_registry_answer(llmr_node_registry *r, const char *id, const char *model, const char *nonce,
                               const char *sha256);
/* Proven without a challenge. */
void llmr_node_registry_prove(llmr_node_registry *r, const char *id, const char *model);
/* Every node's proof and challenge for the model are forgotten. */
void llmr_node_registry_forget_model(llmr_node_registry *r, const char *model);

/* Nodes silent this long are removed by llmr_node_registry_expire (0: never). */
void llmr_node_registry_set_expire(llmr_node_registry *r, uint64_t expire_after_ms);
/* Removes the nodes silent for the expiry; their ids into ids (at most max, each 32
 * bytes), the count returned (those past max are removed all the same). */
size_t llmr_node_registry_expire(llmr_node_registry *r, uint64_t now_ms, char (*ids)[32], size_t max);
bool llmr_node_registry_remove(llmr_node_registry *r, const char *id);
bool llmr_node_registry_drain(llmr_node_registry *r, const char *id, bool drained);

/* [{"id","name","url","online","drained","last_seen_ms_ago","in_flight",
 *   "outstanding","ttft_ms","models":[...as the node reported...], "info":{...}}] */
json_t *llmr_node_registry_list(llmr_node_registry *r, uint64_t now_ms);
/* Per node, the model's state there: [{"node","state","reason","sync"}], and "proven"
 * (whether it passed its challenge, see below) where the state is "ready". */
json_t *llmr_node_registry_model_states(llmr_node_registry *r, const char *model, uint64_t now_ms);
/* Whether some online node has the model ready (busy or not); _except leaves out the
 * ids in exclude. */
bool llmr_node_registry_model_ready(llmr_node_registry *r, const char *model, uint64_t now_ms);
bool llmr_node_registry_model_ready_except(llmr_node_registry *r, const char *model, uint64_t now_ms,
                                           const char *const *exclude, size_t n_exclude);

/* Requests a node may have outstanding from this router (0: no limit, the default). */
void llmr_node_registry_set_max_outstanding(llmr_node_registry *r, unsigned max);

/* What the router needs to send a request to a node. */
typedef struct llmr_node_target {
    char id[32];
    char url[512];
    char secret[LLMR_NODE_SECRET_HEX + 1];
    char pin[320];  /* curl's "host:port:address" ("" when the URL's host is an address) */
} llmr_node_target;

/* Picks a node for model, skipping the ids in `exclude` (tried already) and nodes at
 * their limit, and a node marked unreachable (below) while another could take the
 * request now or later; copies what reaching it takes into t, counts one request
 * outstanding on it.
 * false when none can serve now (llmr_node_registry_model_ready_except tells whether
 * one could later). */
bool llmr_node_registry_pick(llmr_node_registry *r, const char *model, uint64_t now_ms,
                             const char *const *exclude, size_t n_exclude, llmr_node_target *t);
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
