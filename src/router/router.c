/* The router service: see router.h.  Options, the store, CORS (before anything else:
 * a browser's preflight carries no key), authentication, and the split of requests
 * between the dashboard's files (before authentication: they hold no secret;
 * router_dashboard.c), /v0 (router_admin.c) and /v1 (router_proxy.c).  The admin key
 * at start is router_bootstrap.c's. */
#include "router/router_internal.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/fs_util.h"
#include "common/log.h"

#define COMPONENT "router"

void llmr_router_options_default(llmr_router_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->artifact_allowlist = "openai/*,nvidia/*";
    o->node_offline_ms = 15000;
    o->heartbeat_s = 5;
    o->node_max_outstanding = 256;
    o->queue_max = 1024;
    o->max_connections = 4096;
    o->queue_timeout_ms = 30000;
    o->max_body = 8u << 20;
}

uint64_t router_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t router_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void router_error(llmr_http_reply *reply, unsigned status, const char *type, const char *code,
                  const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    llmr_http_reply_error(reply, status, type, NULL, code, msg);
}

bool router_need(const router_caller *c, unsigned scope, llmr_http_reply *reply)
{
    if ((c->scopes & scope) || (c->scopes & LLMR_SCOPE_ADMIN))
        return true;
    llmr_strbuf s = LLMR_STRBUF_INIT;
    llmr_scopes_format(scope, &s);
    router_error(reply, 403, "permission_error", "insufficient_scope",
                 "This key lacks the \"%s\" scope that this endpoint needs.", llmr_strbuf_cstr(&s));
    llmr_strbuf_free(&s);
    return false;
}

/* Whether host is a loopback address (--no-auth is allowed only there). */
static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

/* GET /metrics: Prometheus text, open like /health (router_metrics.c). */
static void metrics(llmr_router *r, const llmr_http_request *req, llmr_http_reply *reply)
{
    if (strcmp(req->method, "GET") != 0) {
        llmr_http_reply_header(reply, "Allow", "GET");
        router_error(reply, 405, "invalid_request_error", "method_not_allowed", "/metrics takes GET, not %s.",
                     req->method);
        return;
    }
    llmr_strbuf out = LLMR_STRBUF_INIT;
    router_metrics_write(r, &out);
    llmr_http_reply_text(reply, 200, "text/plain; version=0.0.4", llmr_strbuf_cstr(&out), out.len);
    llmr_strbuf_free(&out);
}

/* Whether an answer goes into the request log: every POST to /v1 (the OpenAI
 * endpoints), whatever its status, and every other /v1 answer that is an error. */
static bool logged(const llmr_http_done *d)
{
    return d->path && strncmp(d->path, "/v1/", 4) == 0 &&
           ((d->method && strcmp(d->method, "POST") == 0) || d->status >= 400);
}

/* A request is done (the HTTP server's record): the request log and the metrics. */
static void on_done(void *user, const llmr_http_done *d)
{
    llmr_router *r = user;
    if (!logged(d))
        return;
    llmr_store_request row = {d->arrival_unix_ms, d->model, d->node, d->key_id, d->path, d->status,
                              d->prompt_tokens, d->completion_tokens, d->ttft_ms >= 0 ? d->ttft_ms : -1,
                              d->duration_ms, d->error, d->request_id};
    llmr_store_log_request(r->store, &row);
    router_metrics_done(r->metrics, d);
}

static void handle(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    llmr_router *r = user;
    if (llmr_http_cors_handle(r->cors, req, reply))
        return; /* a browser's preflight: answered before any key is asked for */
    if (strcmp(req->path, "/health") == 0) {
        llmr_http_reply_json(reply, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    if (strcmp(req->path, "/metrics") == 0) {
        metrics(r, req, reply);
        return;
    }
    if (router_dashboard_route(req, reply))
        return;
    router_caller c = {0, NULL};
    if (r->o.no_auth) {
        c.scopes = LLMR_SCOPE_INFERENCE | LLMR_SCOPE_NODE | LLMR_SCOPE_ADMIN;
    } else {
        const char *h = llmr_http_request_header(req, "Authorization");
        if (!h || strncmp(h, "Bearer ", 7) != 0) {
            router_error(reply, 401, "invalid_request_error", "missing_api_key",
                         "No API key: send \"Authorization: Bearer KEY\" (keys come from an admin: "
                         "POST /v0/keys).");
            return;
        }
        if (llmr_store_key_check(r->store, h + 7, &c.scopes, &c.key_id) != LLMR_OK) {
            router_error(reply, 401, "invalid_request_error", "invalid_api_key",
                         "Incorrect API key provided, or the key was revoked.");
            return;
        }
    }
    llmr_http_reply_note(reply, &(llmr_http_note){.key_id = c.key_id});
    bool routed = strncmp(req->path, "/v0/", 4) == 0 ? router_admin_route(r, &c, req, reply)
                  : strncmp(req->path, "/v1/", 4) == 0 ? router_proxy_route(r, &c, req, reply)
                                                       : false;
    if (!routed)
        router_error(reply, 404, "invalid_request_error", "unknown_url",
                     "Unknown request URL: %s %s. The router serves /v1 (the OpenAI API), /v0 "
                     "(models, nodes, keys), /dashboard and /health.",
                     req->method, req->path);
    free(c.key_id);
}

/* Each client connection, and each request's connection to its node, takes a file
 * descriptor: the soft limit goes up to what max_connections needs, as far as the hard
 * limit allows. */
static void raise_fd_limit(unsigned max_connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_connections * 2 + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
        llmr_log_warn(COMPONENT, "open files are limited to %llu (was %llu): fewer than the %u connections "
                                 "allowed need; raise the hard limit (ulimit -Hn)",
                      (unsigned long long)rl.rlim_cur, (unsigned long long)old, max_connections);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void free_options(llmr_router_options *o)
{
    free((char *)o->host);
    free((char *)o->data_dir);
    free((char *)o->admin_key);
    free((char *)o->artifact_allowlist);
    free((char *)o->hf_endpoint);
    free((char *)o->hf_token);
    free((char *)o->cors_origins);
}

llmr_status llmr_router_start(const llmr_router_options *o, llmr_router **out, llmr_strbuf *err)
{
    *out = NULL;
    if (o->no_auth && !is_loopback(o->host)) {
        llmr_strbuf_printf(err, "--no-auth is allowed only on a loopback address, not %s: anyone "
                                "who reaches the port could use and change the router",
                           o->host);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_router *r = calloc(1, sizeof *r);
    if (!r) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    r->o = *o;
    r->o.host = dup_or_null(o->host);
    r->o.data_dir = dup_or_null(o->data_dir);
    r->o.admin_key = dup_or_null(o->admin_key && *o->admin_key ? o->admin_key : NULL);
    r->o.artifact_allowlist = dup_or_null(o->artifact_allowlist);
    r->o.hf_endpoint = dup_or_null(o->hf_endpoint);
    r->o.hf_token = dup_or_null(o->hf_token);
    r->o.cors_origins = dup_or_null(o->cors_origins);
    router_jobs_init(r);
    router_events_init(r);
    pthread_mutex_init(&r->queue_lock, NULL);
    pthread_cond_init(&r->queue_cond, NULL);
    pthread_mutex_init(&r->unloads_lock, NULL);
    r->unloads = json_object();
    llmr_status st = llmr_http_cors_new(r->o.cors_origins, &r->cors, err);
    if (st == LLMR_OK)
        st = llmr_mkdir_p(r->o.data_dir, err);
    char *db = st == LLMR_OK ? llmr_path_join(r->o.data_dir, "router.db") : NULL;
    if (st == LLMR_OK && !db)
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK)
        st = llmr_store_open(db, &r->store, err);
    free(db);
    if (st == LLMR_OK)
        st = router_bootstrap_admin(r, err);
    if (st == LLMR_OK && !(r->nodes = llmr_node_registry_new(r->o.node_offline_ms)))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && !(r->templates = router_templates_new()))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && !(r->metrics = router_metrics_new()))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK) {
        llmr_http_server_options so;
        llmr_http_server_options_default(&so);
        so.host = r->o.host;
        so.port = r->o.port;
        so.max_body = r->o.max_body;
        so.max_connections = r->o.max_connections;
        raise_fd_limit(r->o.max_connections);
        so.handler = handle;
        so.user = r;
        so.service = "router";
        so.on_done = on_done;
        so.done_user = r;
        st = llmr_http_server_start(&so, &r->srv, err);
    }
    if (st != LLMR_OK) {
        llmr_router_stop(r);
        return st;
    }
    *out = r;
    return LLMR_OK;
}

unsigned llmr_router_port(const llmr_router *r)
{
    return llmr_http_server_port(r->srv);
}

void llmr_router_stop(llmr_router *r)
{
    if (!r)
        return;
    atomic_store(&r->stopping, true); /* requests waiting for a node give up */
    pthread_mutex_lock(&r->queue_lock);
    pthread_cond_broadcast(&r->queue_cond);
    pthread_mutex_unlock(&r->queue_lock);
    router_events_stop(r); /* the dashboard's event streams end */
    if (r->srv)
        llmr_http_server_stop(r->srv); /* streams close: their jobs drop their nodes */
    router_jobs_wait(r);
    router_events_free(r);
    llmr_node_registry_free(r->nodes);
    router_templates_free(r->templates);
    llmr_store_close(r->store);
    llmr_http_cors_free(r->cors);
    router_metrics_free(r->metrics);
    pthread_mutex_destroy(&r->queue_lock);
    pthread_cond_destroy(&r->queue_cond);
    pthread_mutex_destroy(&r->unloads_lock);
    json_decref(r->unloads);
    free_options(&r->o);
    free(r);
}
