/* The router service: see router.h.  Options, the store, --no-auth's Host and Origin
 * checks (http_local.h), CORS (before anything else but those: a browser's preflight
 * carries no key), authentication (a key's scopes and limits), the audit log of admin
 * actions (when their answers are done), the graceful stop, and the split of requests
 * between the dashboard's files (before authentication: they hold no secret;
 * router_dashboard.c), /v0 (router_admin.c) and /v1 (router_proxy.c); and the second,
 * plain loopback listener of `llmr serve`'s node when the public one speaks HTTPS.  The
 * admin key at start is router_bootstrap.c's. */
#include "router/router_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "common/secret.h"
#include "router/node_address.h"
#include "http/http_local.h"

#define COMPONENT "router"

void llmr_router_options_default(llmr_router_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->artifact_allowlist = "openai/*,nvidia/*";
    o->node_offline_ms = 15000;
    o->node_expire_ms = 600000;
    o->heartbeat_s = 5;
    o->node_max_outstanding = 256;
    o->queue_max = 1024;
    o->responses_retention_h = 720;
    o->max_connections = 4096;
    o->queue_timeout_ms = 30000;
    o->max_body = 8u << 20;
    o->shutdown_grace_s = 30;
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

/* Whether an answer is an admin action for the audit log: a change under /v0 (not a
 * node's heartbeat, nor a render, which changes nothing) by a caller who got past the
 * key check (with a key, or with --no-auth: an unauthenticated flood writes nothing). */
static bool audited(const llmr_router *r, const llmr_http_done *d)
{
    if (!d->path || !d->method || strncmp(d->path, "/v0/", 4) != 0 || !strcmp(d->method, "GET") ||
        !strcmp(d->method, "HEAD") || !strcmp(d->method, "OPTIONS") || (!d->key_id && !r->o.no_auth))
        return false;
    size_t n = strlen(d->path);
    return !(n > 10 && !strcmp(d->path + n - 10, "/heartbeat")) && !(n > 7 && !strcmp(d->path + n - 7, "/render"));
}

/* An admin action into the audit log: the store and the log. */
static void audit(llmr_router *r, const llmr_http_done *d)
{
    llmr_store_audit a = {d->arrival_unix_ms, d->key_id, d->method, d->path, d->target, d->status, d->request_id};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_store_audit_add(r->store, &a, &err) != LLMR_OK)
        llmr_log_error("audit", "%s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    llmr_log_info("audit", "%s %s%s%s by %s: %u (request %s)", d->method, d->path, d->target ? " -> " : "",
                  d->target ? d->target : "", d->key_id ? d->key_id : "(no auth)", d->status,
                  d->request_id ? d->request_id : "-");
}

/* A request is done (the HTTP server's record): the audit log, the request log and
 * the metrics. */
static void on_done(void *user, const llmr_http_done *d)
{
    llmr_router *r = user;
    if (audited(r, d))
        audit(r, d);
    if (!logged(d))
        return;
    llmr_store_request row = {d->arrival_unix_ms, d->model, d->node, d->key_id, d->path, d->status,
                              d->prompt_tokens, d->completion_tokens, d->ttft_ms >= 0 ? d->ttft_ms : -1,
                              d->duration_ms, d->error, d->request_id};
    llmr_store_log_request(r->store, &row);
    router_metrics_done(r->metrics, d);
}

/* A request past its listener's own checks: cors is that listener's (NULL: none). */
static void answer(llmr_router *r, const llmr_http_cors *cors, const llmr_http_request *req,
                   llmr_http_reply *reply)
{
    if (llmr_http_cors_handle(cors, req, reply))
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
    router_caller c = {0, NULL, {LLMR_LIMIT_DEFAULT, LLMR_LIMIT_DEFAULT, LLMR_LIMIT_DEFAULT}};
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
        if (llmr_store_key_check_limits(r->store, h + 7, &c.scopes, &c.key_id, &c.limits) != LLMR_OK) {
            router_error(reply, 401, "invalid_request_error", "invalid_api_key",
                         "Incorrect API key provided, or the key was revoked.");
            return;
        }
    }
    if (c.limits.requests_per_minute < 0)
        c.limits.requests_per_minute = r->o.key_requests_per_minute;
    if (c.limits.concurrent_requests < 0)
        c.limits.concurrent_requests = r->o.key_concurrent_requests;
    if (c.limits.tokens_per_minute < 0)
        c.limits.tokens_per_minute = r->o.key_tokens_per_minute;
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

static void handle(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    llmr_router *r = user;
    /* no keys: only local programs, never a web page a browser runs (http_local.h) */
    if (r->o.no_auth && !llmr_http_local_guard(r->cors, r->o.host, r->srv ? llmr_http_server_port(r->srv) : r->o.port,
                                               req, reply))
        return;
    answer(r, r->cors, req, reply);
}

/* The listener of the node beside the router (llmr_router_listen_local): its key only. */
static void handle_local(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    llmr_router *r = user;
    if (r->o.no_auth && !llmr_http_local_guard(NULL, "127.0.0.1", atomic_load(&r->local_port), req, reply))
        return;
    const char *h = llmr_http_request_header(req, "Authorization");
    if (r->local_key && strcmp(req->path, "/health") != 0 &&
        !(h && strncmp(h, "Bearer ", 7) == 0 && llmr_secret_equal(h + 7, r->local_key))) {
        router_error(reply, 403, "invalid_request_error", "local_node_only",
                     "This address is the router's own node's. Use the router's public address.");
        return;
    }
    answer(r, NULL, req, reply);
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

/* The data directory: made 0700 when it does not exist (the store and the key file
 * are the router's alone). */
static llmr_status private_data_dir(const char *dir, llmr_strbuf *err)
{
    struct stat st;
    bool existed = dir && stat(dir, &st) == 0;
    llmr_status s = llmr_mkdir_p(dir, err);
    if (s == LLMR_OK && !existed && chmod(dir, 0700) != 0) {
        llmr_strbuf_printf(err, "cannot make %s private (mode 0700): %s", dir, strerror(errno));
        return LLMR_IO;
    }
    return s;
}

/* The data directory and the store are the router's alone (keys' hashes, the request
 * and audit logs): a directory made now gets mode 0700 (an existing one open to others
 * is left, with a warning), and router.db is made 0600, or put back to 0600.  SQLite
 * makes its -wal and -shm files with the database's mode. */
static llmr_status private_files(const char *dir, bool dir_existed, const char *db, llmr_strbuf *err)
{
    struct stat st;
    if (!dir_existed && chmod(dir, 0700) != 0)
        llmr_log_warn(COMPONENT, "cannot make %s private (mode 0700): %s", dir, strerror(errno));
    else if (dir_existed && stat(dir, &st) == 0 && (st.st_mode & 077))
        llmr_log_warn(COMPONENT, "the data directory %s is open to other users (mode %03o); chmod 700 it",
                      dir, (unsigned)(st.st_mode & 0777));
    int fd = open(db, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        llmr_strbuf_printf(err, "cannot open %s: %s", db, strerror(errno));
        return LLMR_IO;
    }
    if (fstat(fd, &st) == 0 && (st.st_mode & 077)) {
        if (fchmod(fd, 0600) == 0)
            llmr_log_info(COMPONENT, "%s was open to other users (mode %03o): now 0600", db,
                          (unsigned)(st.st_mode & 0777));
        else
            llmr_log_warn(COMPONENT, "cannot make %s private (mode 0600): %s", db, strerror(errno));
    }
    close(fd);
    static const char *const side[] = {"-wal", "-shm"}; /* an older pair may be open */
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s", db, side[i]);
        if (chmod(path, 0600) != 0 && errno != ENOENT)
            llmr_log_warn(COMPONENT, "cannot make %s private (mode 0600): %s", path, strerror(errno));
    }
    return LLMR_OK;
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
    free((char *)o->node_url_allow);
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
    r->o.node_url_allow = dup_or_null(o->node_url_allow && *o->node_url_allow ? o->node_url_allow : NULL);
    router_jobs_init(r);
    router_events_init(r);
    pthread_mutex_init(&r->queue_lock, NULL);
    pthread_cond_init(&r->queue_cond, NULL);
    pthread_mutex_init(&r->unloads_lock, NULL);
    r->unloads = json_object();
    llmr_status st = llmr_http_cors_new(r->o.cors_origins, &r->cors, err);
    if (st == LLMR_OK && !llmr_node_allow_valid(r->o.node_url_allow, err))
        st = LLMR_INVALID_ARGUMENT;
    struct stat dir_st;
    bool dir_existed = r->o.data_dir && stat(r->o.data_dir, &dir_st) == 0;
    if (st == LLMR_OK)
        st = private_data_dir(r->o.data_dir, err);
    char *db = st == LLMR_OK ? llmr_path_join(r->o.data_dir, "router.db") : NULL;
    if (st == LLMR_OK && !db)
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK)
        st = private_files(r->o.data_dir, dir_existed, db, err);
    if (st == LLMR_OK)
        st = llmr_store_open(db, &r->store, err);
    free(db);
    if (st == LLMR_OK && r->o.responses_retention_h) {
        llmr_store_response_bounds bounds = llmr_store_response_default_bounds();
        bounds.max_age_ms = (int64_t)r->o.responses_retention_h * 3600 * 1000;
        llmr_store_set_response_bounds(r->store, &bounds);
    }
    if (st == LLMR_OK)
        st = router_bootstrap_admin(r, err);
    if (st == LLMR_OK && !(r->nodes = llmr_node_registry_new(r->o.node_offline_ms)))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK)
        llmr_node_registry_set_expire(r->nodes, r->o.node_expire_ms);
    if (st == LLMR_OK) /* more wait in the queue (it was never passed on: no bound) */
        llmr_node_registry_set_max_outstanding(r->nodes, r->o.node_max_outstanding);
    if (st == LLMR_OK && !(r->templates = router_templates_new()))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && !(r->metrics = router_metrics_new()))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && !(r->limits = router_limits_new()))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && !(r->upstream = router_upstream_new())) {
        llmr_strbuf_puts(err, "cannot start the transfer loop to the nodes");
        st = LLMR_OOM_RAM;
    }
    if (st == LLMR_OK) {
        llmr_http_server_options so;
        llmr_http_server_options_default(&so);
        so.host = r->o.host;
        so.port = r->o.port;
        so.max_body = r->o.max_body;
        so.max_connections = r->o.max_connections;
        llmr_http_limits_apply(&r->o.http_limits, &so);
        raise_fd_limit(so.max_connections);
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

llmr_status llmr_router_listen_local(llmr_router *r, const char *key, unsigned *port, llmr_strbuf *err)
{
    *port = 0;
    if (r->local_srv) {
        llmr_strbuf_puts(err, "the router listens for its local node already");
        return LLMR_INVALID_ARGUMENT;
    }
    if (!r->o.no_auth && !key) {
        llmr_strbuf_puts(err, "the local node's listener needs the node's key");
        return LLMR_INVALID_ARGUMENT;
    }
    if (key && !(r->local_key = strdup(key))) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_http_server_options so;
    llmr_http_server_options_default(&so); /* plain HTTP: the public listener's TLS is not for it */
    so.host = "127.0.0.1";
    so.port = 0;
    so.max_body = r->o.max_body;
    so.handler = handle_local;
    so.user = r;
    so.service = "router";
    so.on_done = on_done;
    so.done_user = r;
    llmr_status st = llmr_http_server_start(&so, &r->local_srv, err);
    if (st != LLMR_OK)
        return st;
    *port = llmr_http_server_port(r->local_srv);
    atomic_store(&r->local_port, *port);
    return LLMR_OK;
}

void llmr_router_drain(llmr_router *r)
{
    if (atomic_exchange(&r->draining, true))
        return;
    llmr_http_server_quiesce(r->srv);
    if (r->local_srv)
        llmr_http_server_quiesce(r->local_srv);
    pthread_mutex_lock(&r->queue_lock); /* requests waiting for a node give up */
    pthread_cond_broadcast(&r->queue_cond);
    pthread_mutex_unlock(&r->queue_lock);
    router_events_stop(r); /* the dashboard's event streams end */
}

bool llmr_router_idle(llmr_router *r, unsigned timeout_ms)
{
    return router_jobs_idle(r, router_now_ms() + timeout_ms);
}

void llmr_router_stop(llmr_router *r)
{
    if (!r)
        return;
    atomic_store(&r->draining, true);
    atomic_store(&r->stopping, true); /* requests waiting for a node give up */
    pthread_mutex_lock(&r->queue_lock);
    pthread_cond_broadcast(&r->queue_cond);
    pthread_mutex_unlock(&r->queue_lock);
    router_upstream_wake(r->upstream); /* the transfers running stop */
    router_events_stop(r); /* the dashboard's event streams end */
    if (r->srv) {
        /* the jobs still running stop their nodes' transfers and end their streams with
         * an error event; what they wrote reaches the clients before the server stops */
        router_jobs_idle(r, router_now_ms() + 5000);
        llmr_http_server_drain(r->srv, llmr_now_ms() + 2000);
        llmr_http_server_stop(r->srv); /* streams close: their jobs drop their nodes */
    }
    if (r->local_srv)
        llmr_http_server_stop(r->local_srv);
    free(r->local_key);
    router_jobs_wait(r);
    router_upstream_free(r->upstream); /* none runs: every request has ended */
    router_events_free(r);
    llmr_node_registry_free(r->nodes);
    router_templates_free(r->templates);
    llmr_store_close(r->store);
    llmr_http_cors_free(r->cors);
    router_metrics_free(r->metrics);
    router_limits_free(r->limits);
    pthread_mutex_destroy(&r->queue_lock);
    pthread_cond_destroy(&r->queue_cond);
    pthread_mutex_destroy(&r->unloads_lock);
    json_decref(r->unloads);
    free_options(&r->o);
    free(r);
}
