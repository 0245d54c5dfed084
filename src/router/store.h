/* The router's store: SQLite in WAL mode at DATA_DIR/router.db, for what must survive
 * a restart or a crash mid-write: registered models (with their manifest), nodes,
 * API keys (only their hashes) and the request log.  The schema is versioned; opening
 * an older database migrates it in one transaction; a newer one is refused.
 *
 * One connection behind a mutex: every function may be called from any thread. */
#ifndef LLMR_ROUTER_STORE_H
#define LLMR_ROUTER_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_store llmr_store;

/* Opens (creating) the database at path.  err says what failed (a file that is not a
 * database, a schema newer than this build, ...). */
llmr_status llmr_store_open(const char *path, llmr_store **out, llmr_strbuf *err);
void llmr_store_close(llmr_store *s);
int llmr_store_schema_version(llmr_store *s);

/* ---- models ---- */
typedef struct llmr_store_model {
    char *name;
    char *source_kind;    /* "hf" or "local" */
    char *source;         /* the repo id ("org/name") or the directory */
    char *revision;       /* hf: the commit or branch; NULL for local */
    char *format;         /* "safetensors" or "gguf" */
    char *filename;       /* gguf: the chosen file; NULL */
    char *chat_template;  /* given at registration (overrides the model's), or NULL */
    json_t *manifest;     /* docs/node-router-protocol.md (owned) */
    int64_t created;      /* unix seconds */
    json_t *chat_format;  /* the chat format the router renders with
                             (llmr_chat_format_to_json), or NULL: the node renders */
} llmr_store_model;

/* Inserts.  A name already registered: INVALID_ARGUMENT with *exists = true, and the
 * first registration untouched. */
llmr_status llmr_store_model_insert(llmr_store *s, const llmr_store_model *m, bool *exists,
                                    llmr_strbuf *err);
/* NOT_FOUND when there is no such model. */
llmr_status llmr_store_model_get(llmr_store *s, const char *name, llmr_store_model *out,
                                 llmr_strbuf *err);
/* Every model, oldest first: a JSON array of objects with the fields above (manifest
 * included) except chat_format, of which only "chat_template_origin" (or null). */
json_t *llmr_store_model_list(llmr_store *s);
/* NOT_FOUND when there is no such model. */
llmr_status llmr_store_model_delete(llmr_store *s, const char *name, llmr_strbuf *err);
void llmr_store_model_free(llmr_store_model *m);

/* ---- nodes (what the router knows of them; the live state is in memory) ---- */
llmr_status llmr_store_node_upsert(llmr_store *s, const char *id, const char *name, const char *url,
                                   const json_t *info, int64_t last_seen, llmr_strbuf *err);
/* [{"id","name","url","info","last_seen","drained"}] */
json_t *llmr_store_node_list(llmr_store *s);
llmr_status llmr_store_node_set_drained(llmr_store *s, const char *id, bool drained, llmr_strbuf *err);
llmr_status llmr_store_node_delete(llmr_store *s, const char *id, llmr_strbuf *err);

/* ---- API keys ---- */
enum {
    LLMR_SCOPE_INFERENCE = 1, /* /v1 */
    LLMR_SCOPE_NODE = 2,      /* a node: /v0/nodes, manifests, files */
    LLMR_SCOPE_ADMIN = 4      /* everything: registration, keys, nodes */
};
/* "inference,node" -> bits; false for an unknown scope name. */
bool llmr_scopes_parse(const char *text, unsigned *scopes);
/* The same; when it returns false the name that is not a scope ("" for an empty one)
 * goes to bad (NULL: nowhere). */
bool llmr_scopes_parse_report(const char *text, unsigned *scopes, llmr_strbuf *bad);
/* bits -> "inference,node" into out. */
void llmr_scopes_format(unsigned scopes, llmr_strbuf *out);

/* Creates a key: *secret gets the key itself ("llmr-" + 40 random characters), shown
 * once and never stored (the store keeps a salted SHA-256); *id the key's id.  Both
 * malloc'd.  A given secret (the bootstrap admin key from the environment) may be
 * passed in `given` (NULL: make one). */
llmr_status llmr_store_key_create(llmr_store *s, const char *name, unsigned scopes, const char *given,
                                  char **id, char **secret, llmr_strbuf *err);
/* The scopes of a key; NOT_FOUND for an unknown or revoked one (in constant time with
 * respect to the secret's content). *id may be NULL. */
llmr_status llmr_store_key_check(llmr_store *s, const char *secret, unsigned *scopes, char **id);
llmr_status llmr_store_key_revoke(llmr_store *s, const char *id, llmr_strbuf *err);
/* A key's limits (the router enforces them: router_limits.c): a count, 0 for no limit,
 * or LLMR_LIMIT_DEFAULT for the router's default.  In an update, LLMR_LIMIT_KEEP leaves
 * one as it is. */
#define LLMR_LIMIT_DEFAULT (-1)
#define LLMR_LIMIT_KEEP (-2)
#define LLMR_LIMIT_MAX 1000000000 /* the largest count taken */
typedef struct llmr_store_key_limits {
    int64_t requests_per_minute, concurrent_requests, tokens_per_minute;
} llmr_store_key_limits;
/* llmr_store_key_check, and the key's limits into *limits (NULL: not wanted). */
llmr_status llmr_store_key_check_limits(llmr_store *s, const char *secret, unsigned *scopes, char **id,
                                        llmr_store_key_limits *limits);
/* Changes a live key's limits (LLMR_LIMIT_KEEP: that one stays); NOT_FOUND for an
 * unknown or revoked key. */
llmr_status llmr_store_key_set_limits(llmr_store *s, const char *id, const llmr_store_key_limits *l,
                                      llmr_strbuf *err);
/* [{"id","name","scopes","created","revoked","last_used","limits"}] (no secrets);
 * "limits" has requests_per_minute, concurrent_requests and tokens_per_minute, each a
 * count or null (the router's default). */
json_t *llmr_store_key_list(llmr_store *s);
/* Whether a key with the admin scope exists (revoked ones do not count). */
bool llmr_store_has_admin_key(llmr_store *s);

/* ---- the audit log of admin actions (store_audit.c) ---- */
typedef struct llmr_store_audit {
    int64_t time_ms;              /* Unix milliseconds */
    const char *key_id;           /* who: NULL without keys (--no-auth) */
    const char *method, *path;    /* what */
    const char *target;           /* what it made or changed when the path does not say
                                     (a new key's id, a registered model's name); NULL */
    unsigned status;              /* the answer's HTTP status */
    const char *request_id;
} llmr_store_audit;
#define LLMR_STORE_AUDIT_KEEP_ROWS 100000 /* the newest this many are kept */
llmr_status llmr_store_audit_add(llmr_store *s, const llmr_store_audit *a, llmr_strbuf *err);
/* The newest limit entries first: [{"time_ms","key_id","method","path","target",
 * "status","request_id"}]; NULL when the table cannot be read (the log says why). */
json_t *llmr_store_audit_list(llmr_store *s, size_t limit);

/* ---- request log ---- */
typedef struct llmr_store_request {
    int64_t time_ms;           /* unix milliseconds at arrival */
    const char *model, *node, *key_id, *endpoint;
    unsigned status;           /* the HTTP status */
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms, duration_ms;
    const char *error;         /* NULL */
    const char *request_id;    /* the x-request-id of its answer, or NULL */
} llmr_store_request;

/* Appends one entry (buffered: written by a background thread within a second; the
 * store's close flushes). */
void llmr_store_log_request(llmr_store *s, const llmr_store_request *r);
/* The newest entries first, at most limit. */
json_t *llmr_store_recent_requests(llmr_store *s, size_t limit);
/* Writes the entries logged so far now, and returns once they are in the database. */
void llmr_store_log_flush(llmr_store *s);
/* Entries dropped since open because too many waited for the disk (10000 wait at
 * most; the oldest goes first). */
uint64_t llmr_store_log_dropped(llmr_store *s);

/* What the request log says of the requests that arrived at since_ms (unix
 * milliseconds) or later, entries logged before the call included (store_stats.c). */
typedef struct llmr_store_request_stats {
    uint64_t requests;                        /* entries */
    uint64_t completion_tokens;               /* their sum */
    uint64_t errors;                          /* entries with a status >= 400 */
    double ttft_ms_p50, ttft_ms_p90;          /* over the entries with a first token; NAN
                                                 when none has one */
    double duration_ms_p50, duration_ms_p90;  /* NAN when there is no entry */
} llmr_store_request_stats;
/* false when the log cannot be read (the log says why); *out is zeroed then. */
bool llmr_store_request_stats_since(llmr_store *s, int64_t since_ms, llmr_store_request_stats *out);

/* ---- the Responses API's stored responses (store_responses.c) ----------------------- */

#define LLMR_STORE_RESPONSE_MAX (8u << 20)  /* bytes of input and response JSON, each */

/* What the stored responses may hold; the oldest beyond any bound go as new ones come,
 * so one key's responses push out only its own until the table as a whole is full. */
typedef struct llmr_store_response_bounds {
    uint32_t keep;          /* responses in all (default 10,000) */
    uint32_t keep_per_key;  /* responses of one key (default 1,000) */
    uint64_t bytes;         /* bytes of input and response JSON in all (default 2 GiB) */
    uint64_t bytes_per_key; /* of one key (default 256 MiB) */
    int64_t max_age_ms;     /* older than this, gone (default 30 days, as OpenAI keeps them) */
} llmr_store_response_bounds;
llmr_store_response_bounds llmr_store_response_default_bounds(void);
/* Replaces the bounds (the defaults at open); applied at the next put. */
void llmr_store_set_response_bounds(llmr_store *s, const llmr_store_response_bounds *b);

/* Keeps a response (its id, the input items it was given, the response object) for the
 * API key key_id ("" without auth), created at created_ms (the clock the age bound
 * counts by); then trims the table to its bounds.  INVALID_ARGUMENT when a text is over
 * LLMR_STORE_RESPONSE_MAX, or when a response of that id is stored already (never
 * replaced: it may be another key's). */
llmr_status llmr_store_response_put(llmr_store *s, const char *id, const char *key_id, int64_t created_ms,
                                    const json_t *input, const json_t *response, llmr_strbuf *err);
/* The response of that key: *input and *response (new references).  NOT_FOUND when
 * there is none, or it is another key's. */
llmr_status llmr_store_response_get(llmr_store *s, const char *id, const char *key_id, json_t **input,
                                    json_t **response, llmr_strbuf *err);
/* NOT_FOUND as get. */
llmr_status llmr_store_response_delete(llmr_store *s, const char *id, const char *key_id, llmr_strbuf *err);

#endif
