/* What the router's files share (nothing outside src/router includes this). */
#ifndef LLMR_ROUTER_ROUTER_INTERNAL_H
#define LLMR_ROUTER_ROUTER_INTERNAL_H

#include <pthread.h>

#include "http/http_server.h"
#include "router/node_registry.h"
#include "router/router.h"
#include "router/store.h"

struct llmr_router {
    llmr_router_options o;       /* strings owned */
    llmr_store *store;
    llmr_node_registry *nodes;
    llmr_http_server *srv;
    pthread_mutex_t queue_lock;  /* the wait queue for a free node */
    pthread_cond_t queue_cond;
    unsigned waiting;
};

/* Who is asking: the scopes of the key presented (all, with --no-auth), its id. */
typedef struct router_caller {
    unsigned scopes;
    char *key_id;
} router_caller;

/* Replies with an OpenAI-style error. */
void router_error(llmr_http_reply *reply, unsigned status, const char *type, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Replies 403 unless the caller has the scope. */
bool router_need(const router_caller *c, unsigned scope, llmr_http_reply *reply);
uint64_t router_now_ms(void);

/* /v0/... (router_admin.c); false when the path is not one of its routes. */
bool router_admin_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply);
/* /v1/... (router_proxy.c); false when the path is not one of its routes. */
bool router_proxy_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply);

#endif
