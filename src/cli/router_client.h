/* The command line's side of a running router's /v0 API (docs/router.md), shared by
 * `llmr pull` and `llmr list`: where the router is and which key to send, one JSON
 * request over libcurl, the messages for a router that does not answer or refuses the
 * key, and a model's per-node states in words.
 *
 * The router is --router URL, else $LLMR_ROUTER, else http://127.0.0.1:PORT with the
 * configured port.  The key is --api-key KEY (or --key), else $LLMR_API_KEY, else
 * $LLMR_ADMIN_KEY, else, for a router on this machine (a loopback address), the admin
 * key in the key file of the configured data directory (DATA_DIR/admin.key, which
 * `llmr serve` and `llmr router` write), else none.  A client borrows its strings from
 * argv and the environment, and keeps the key file's key in itself: nothing to free. */
#ifndef LLMR_CLI_ROUTER_CLIENT_H
#define LLMR_CLI_ROUTER_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"
#include "common/strbuf.h"

typedef struct llmr_router_client {
    const char *cmd;      /* "pull", "list": the prefix of every message */
    const char *flag_url; /* --router, or NULL */
    const char *flag_key; /* --api-key, or NULL */
    char url[512];        /* the base URL, no trailing slash (after finish) */
    const char *key;      /* NULL: no key is sent */
    const char *key_from; /* where the key came from, for messages */
    char file_key[320];   /* the key file's key, when key points here */
    char key_file[512];   /* the key file looked for ("" when none was) */
} llmr_router_client;

void llmr_router_client_init(llmr_router_client *c, const char *cmd);

/* Takes "--router URL" or "--api-key KEY" at argv[*i] (llmr_cli_option's contract:
 * false when argv[*i] is neither; a missing value prints and sets *bad). */
bool llmr_router_client_option(llmr_router_client *c, int argc, char **argv, int *i, bool *bad);

/* Settles the URL and the key from the flags, the environment and the configured
 * port.  False, after printing why, for a URL that is not http:// or https://. */
bool llmr_router_client_finish(llmr_router_client *c, const llmr_config *cfg);

typedef struct llmr_router_answer {
    long status;      /* the HTTP status */
    llmr_strbuf body; /* the body as sent */
    json_t *json;     /* the body parsed, or NULL when it is not JSON */
} llmr_router_answer;

/* METHOD c->url + path with body (NULL: none) as JSON, waiting at most timeout_s for
 * the answer.  True when an HTTP answer came, whatever its status (*a must be freed);
 * false when none did, after printing why (no router answers at the URL: how to start
 * one; the host does not resolve; the router took too long). */
bool llmr_router_request(const llmr_router_client *c, const char *method, const char *path,
                         const json_t *body, long timeout_s, llmr_router_answer *a);
void llmr_router_answer_free(llmr_router_answer *a);

/* Prints why no answer came, as llmr_router_request does: curl_code is libcurl's
 * CURLcode, detail its words. */
void llmr_router_print_unreachable(const llmr_router_client *c, int curl_code, const char *detail,
                                   long timeout_s);

/* The router's error.message, else the start of the body. */
const char *llmr_router_answer_message(const llmr_router_answer *a, char *buf, size_t size);

/* Prints a refusal: for 401 and 403 which key is needed (an admin key when
 * need_admin, else a node or admin key) and where to put it; otherwise the status and
 * the router's message after "what" ("registering the model"). */
void llmr_router_print_refusal(const llmr_router_client *c, const llmr_router_answer *a, const char *what,
                               bool need_admin);

/* ---- a model's states on the nodes (the "nodes" array of GET /v0/models/NAME) ---- */

typedef struct llmr_router_node_counts {
    size_t total;   /* nodes the router knows */
    size_t ready;   /* online and ready */
    size_t dead;    /* failed or not_ready: waiting will not help there */
    size_t offline; /* no heartbeat lately */
} llmr_router_node_counts;

void llmr_router_count_nodes(const json_t *nodes, llmr_router_node_counts *n);

/* One node's state in words into out: "local: ready", "local: syncing, fetching
 * model.safetensors: 3/7 files, 1.2 of 13.0 GB", "gpu2 (offline): failed: REASON".
 * With coarse, the byte counts are left out (what changes at every poll). */
void llmr_router_describe_node(const json_t *node, bool coarse, llmr_strbuf *out);
/* Every node's state, "; "-separated, as llmr_router_describe_node words each. */
void llmr_router_describe_nodes(const json_t *nodes, bool coarse, llmr_strbuf *out);

/* The model's state in a few words: "ready on 1/2 nodes", "no node registered",
 * "not ready: " and each node's state, "; "-separated. */
void llmr_router_describe_model(const json_t *nodes, llmr_strbuf *out);

/* Bytes as "512 B", "1.2 MB", "13.0 GB" (powers of 1000). */
void llmr_router_format_bytes(double bytes, char *buf, size_t size);

#endif
