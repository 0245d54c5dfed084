/* The HTTP server (see http_server.h): libmicrohttpd's epoll event loop on a few
 * threads (HTTP_IO_THREADS), with handlers on a pool of threads (http_workers.c).
 *
 * A connection costs no thread while it sends its request or waits for its answer:
 * when the request is whole its connection is suspended and a pool thread runs the
 * handler, queues the response it made (libmicrohttpd allows that on a suspended
 * connection) and resumes the connection.  The pool grows with the handlers running,
 * up to max_connections threads (a handler may block, as before with a thread per
 * connection), and shrinks when idle.  A streamed response suspends its connection
 * while its queue is empty (http_stream.c).  A connection that does not send its
 * headers within header_timeout_s, or its body within body_timeout_s of them, is
 * closed by the watch thread (http_watch.c).
 *
 * A request's state lives in a request_ctx made when libmicrohttpd reports the
 * request line (the URI log callback, which sees the raw target and so the raw
 * query) and freed when the request completes.  The body is gathered up to
 * max_body.  A body over it is answered 413 without the handler: at once when the
 * client declared its length and waits for "100 Continue" (so it never sends the
 * body), otherwise after the body was read and dropped, since libmicrohttpd cannot
 * answer in the middle of an upload, and a client still sending when the
 * connection closes under it sees a reset instead of the answer.  Only a whole body
 * reaches the handler, and the response it built is queued when it returns.  A path
 * that encodes a NUL (%00) is answered 400 without the handler: decoded, it would
 * end early and name another resource.
 * Streamed responses live in http_stream.c. */
#include "http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/http_internal.h"

#define COMPONENT "http"
/* A body over max_body is read and dropped while it is at most this much over it;
 * one declared longer is answered at once, one that keeps coming past it has its
 * connection closed without an answer. */
#define DRAIN_LIMIT ((uint64_t)64 << 20)
/* libmicrohttpd's event-loop threads: they only move bytes and run the callbacks
 * that do not block, so a few serve thousands of connections. */
#define HTTP_IO_THREADS 4

struct llmr_http_server {
    struct MHD_Daemon *daemon;
    llmr_http_handler handler;
    void *user;
    size_t max_body;
    unsigned port;
    atomic_bool stopping; /* streams' readers give up when set */
    atomic_uint open_streams; /* streams not freed yet (llmr_http_server_drain) */
    size_t stream_queue_max;
    MHD_socket quiesced;  /* the listening socket after llmr_http_server_quiesce */
    char *service;        /* the access log's name, or NULL */
    http_workers *workers; /* runs the handlers */
    http_watch *watch;    /* deadlines; suspended streams */
    llmr_http_done_fn on_done;
    void *done_user;
};

/* One request, from its request line to its completion. */
typedef struct request_ctx {
    bool started;        /* the access handler saw the headers */
    bool dispatched;     /* the handler runs (or ran) on a pool thread */
    bool too_large;      /* the body passed max_body: dropping the rest */
    bool nul_in_path;    /* the path encodes a NUL (%00): answered 400 */
    uint64_t seen;       /* body bytes received, kept or not */
    char *query;         /* raw, after '?'; "" when none */
    llmr_strbuf body;
    char remote[INET6_ADDRSTRLEN];
    char request_id[LLMR_REQUEST_ID_MAX + 1];
    uint64_t t0_ns;      /* the request line arrived */
    int64_t arrival_unix_ms;
} request_ctx;

typedef struct reply_header {
    char *name;
    char *value;
} reply_header;

struct llmr_http_reply {
    struct MHD_Connection *conn;
    const atomic_bool *stopping;
    llmr_http_server *srv;
    struct MHD_Response *response; /* set by the first reply call */
    unsigned status;
    reply_header *headers;
    size_t n_headers, cap_headers;
    const char *request_id;        /* sent back as x-request-id */
    http_access *access;           /* the request's record (NULL: none kept) */
};

void llmr_http_server_options_default(llmr_http_server_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 0;
    o->max_body = (size_t)8 << 20;
    o->max_connections = 256;
    o->timeout_s = 120;
    o->header_timeout_s = 10;
    o->body_timeout_s = 60;
}

void llmr_http_limits_apply(const llmr_http_limits *l, llmr_http_server_options *o)
{
    if (!l)
        return;
    if (l->max_connections)
        o->max_connections = l->max_connections;
    if (l->max_connections_per_client)
        o->max_connections_per_client = l->max_connections_per_client;
    if (l->header_timeout_s)
        o->header_timeout_s = l->header_timeout_s;
    if (l->body_timeout_s)
        o->body_timeout_s = l->body_timeout_s;
    if (l->tls_cert_pem && l->tls_key_pem) {
        o->tls_cert_pem = l->tls_cert_pem;
        o->tls_key_pem = l->tls_key_pem;
    }
}

const char *llmr_http_request_header(const llmr_http_request *req, const char *name)
{
    if (!req || !req->conn || !name)
        return NULL;
    return MHD_lookup_connection_value((struct MHD_Connection *)req->conn, MHD_HEADER_KIND,
                                       name);
}

/* ---- replies ----------------------------------------------------------------------- */

void llmr_http_reply_note(llmr_http_reply *r, const llmr_http_note *n)
{
    if (r)
        http_access_note(r->access, n);
}

bool llmr_http_request_client_gone(const llmr_http_request *req)
{
    return req && req->conn && !http_client_connected((struct MHD_Connection *)req->conn);
}

void llmr_http_reply_header(llmr_http_reply *r, const char *name, const char *value)
{
    if (!r || !name || !value)
        return;
    if (r->response) {
        llmr_log_warn(COMPONENT, "header %s added after the reply was made: ignored", name);
        return;
    }
    if (r->n_headers == r->cap_headers) {
        size_t cap = r->cap_headers ? r->cap_headers * 2 : 8;
        reply_header *h = realloc(r->headers, cap * sizeof *h);
        if (!h)
            return;
        r->headers = h;
        r->cap_headers = cap;
    }
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
    r->headers[r->n_headers++] = (reply_header){n, v};
}

/* False (and a warning) when the handler already replied: a reply is made once. */
static bool reply_unused(const llmr_http_reply *r)
{
    if (!r)
        return false;
    if (r->response) {
        llmr_log_warn(COMPONENT, "a second reply to one request: ignored");
        return false;
    }
    return true;
}

/* Puts the handler's headers and the content type (unless a header gave one) on
 * resp and makes it the reply.  False when one did not fit (resp is the caller's). */
static bool reply_take(llmr_http_reply *r, unsigned status, const char *content_type,
                       struct MHD_Response *resp)
{
    for (size_t i = 0; i < r->n_headers; i++) {
        if (MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value) != MHD_YES)
            goto fail;
    }
    if (r->request_id && *r->request_id && !MHD_get_response_header(resp, "x-request-id") &&
        MHD_add_response_header(resp, "x-request-id", r->request_id) != MHD_YES)
        goto fail;
    if (content_type && !MHD_get_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE) &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES)
        goto fail;
    r->response = resp;
    r->status = status;
    return true;
fail:
    llmr_log_warn(COMPONENT, "a response header was refused");
    return false;
}

void llmr_http_reply_text(llmr_http_reply *r, unsigned status, const char *content_type,
                          const char *body, size_t len)
{
    if (!reply_unused(r))
        return;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return; /* out of memory: the server answers 500 */
    if (!reply_take(r, status, content_type ? content_type : "text/plain; charset=utf-8", resp))
        MHD_destroy_response(resp);
}

bool llmr_http_reply_file(llmr_http_reply *r, unsigned status, const char *content_type, int fd,
                          uint64_t offset, uint64_t length)
{
    if (!reply_unused(r))
        return false;
    struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(length, fd, offset);
    if (!resp)
        return false; /* fd is still the caller's */
    if (!reply_take(r, status, content_type ? content_type : "application/octet-stream", resp)) {
        MHD_destroy_response(resp); /* closes fd */
        return true;
    }
    return true;
}

void llmr_http_reply_json(llmr_http_reply *r, unsigned status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text)
        llmr_http_reply_text(r, status, "application/json", text, strlen(text));
    free(text);
}

void llmr_http_reply_error(llmr_http_reply *r, unsigned status, const char *type,
                           const char *param, const char *code, const char *message)
{
    json_t *body = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message",
                             message ? message : "", "type", type ? type : "server_error",
                             "param", param, "code", code);
    llmr_http_reply_json(r, status, body);
}

llmr_http_stream *llmr_http_reply_stream(llmr_http_reply *r, unsigned status,
                                         const char *content_type,
                                         llmr_http_close_fn on_close, void *user)
{
    if (!reply_unused(r))
        return NULL;
    if (!content_type)
        content_type = "application/octet-stream";
    llmr_http_stream *s;
    struct MHD_Response *resp = llmr_http_stream_open(r->conn, r->stopping, on_close, user, &s);
    if (!resp)
        return NULL;
    if (r->srv)
        http_stream_set_server(s, &r->srv->open_streams, r->srv->stream_queue_max, r->srv->watch);
    if (r->access) { /* the stream's end finishes the record */
        http_stream_take_access(s, r->access, status);
        r->access = NULL;
    }
    /* Event streams must reach the client as they are written: no caches, and no
     * buffering in a proxy (nginx reads X-Accel-Buffering). */
    bool sse = strncmp(content_type, "text/event-stream", 17) == 0;
    if ((sse && (MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") !=
                     MHD_YES ||
                 MHD_add_response_header(resp, "X-Accel-Buffering", "no") != MHD_YES)) ||
        !reply_take(r, status, content_type, resp)) {
        /* Ended first, so that releasing the response does not run on_close: the
         * handler learns of the failure from the NULL. */
        llmr_http_stream_end(s);
        MHD_destroy_response(resp);
        return NULL;
    }
    return s;
}

static void reply_clear(llmr_http_reply *r)
{
    http_access_finish(r->access, 500, false); /* not sent: a reply that failed */
    r->access = NULL;
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
}

/* ---- requests ---------------------------------------------------------------------- */

/* Queues r's response (a server error when there is none) and lets go of it. */
static enum MHD_Result send_reply(struct MHD_Connection *conn, llmr_http_reply *r)
{
    if (!r->response)
        return MHD_NO; /* not even the error could be made: close the connection */
    /* a whole answer is recorded now, before its client can see it (a request log
     * read right after the answer has its entry); a client gone already: 499 */
    http_access_finish(r->access, r->status, r->access && !http_client_connected(conn));
    r->access = NULL;
    enum MHD_Result ret = MHD_queue_response(conn, r->status, r->response);
    if (ret != MHD_YES)
        llmr_log_warn(COMPONENT, "could not queue a %u response", r->status);
    /* The connection holds its own reference; a stream's response that was not
     * queued is released here, which runs its on_close. */
    MHD_destroy_response(r->response);
    r->response = NULL;
    return ret;
}

/* A response made by the server itself, without the handler: an error object. */
static http_access *access_new(llmr_http_server *srv, const request_ctx *rq,
                               struct MHD_Connection *conn, const char *url, const char *method)
{
    (void)conn;
    return http_access_new(srv->service, srv->on_done, srv->done_user, rq->request_id, method, url,
                           rq->t0_ns, rq->arrival_unix_ms);
}

static enum MHD_Result send_error(llmr_http_server *srv, request_ctx *rq, struct MHD_Connection *conn,
                                  const char *url, const char *method, unsigned status,
                                  const char *type, const char *code, const char *message)
{
    llmr_http_reply r = {.conn = conn, .stopping = &srv->stopping, .srv = srv, .request_id = rq->request_id,
                         .access = access_new(srv, rq, conn, url, method)};
    llmr_http_reply_error(&r, status, type, NULL, code, message);
    enum MHD_Result ret = send_reply(conn, &r);
    reply_clear(&r);
    return ret;
}

static enum MHD_Result send_too_large(llmr_http_server *srv, request_ctx *rq,
                                      struct MHD_Connection *conn, const char *url,
                                      const char *method)
{
    char message[128];
    snprintf(message, sizeof message,
             "the request body is larger than the limit of %zu bytes", srv->max_body);
    return send_error(srv, rq, conn, url, method, 413, "invalid_request_error", "request_too_large",
                      message);
}

/* The body's declared length (Content-Length); UINT64_MAX when there is none. */
static uint64_t declared_length(struct MHD_Connection *conn)
{
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl)
        return UINT64_MAX;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (end == cl || *end != '\0')
        return UINT64_MAX; /* libmicrohttpd itself refuses a malformed length */
    return errno == ERANGE ? UINT64_MAX - 1 : (uint64_t)n;
}

/* The client waits for "100 Continue" before it sends the body. */
static bool expects_continue(struct MHD_Connection *conn)
{
    const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return e && strcasecmp(e, "100-continue") == 0;
}

/* A body of this many bytes is too long even to be read and dropped. */
static bool past_drain_limit(const llmr_http_server *srv, uint64_t len)
{
    return len > srv->max_body && len - srv->max_body > DRAIN_LIMIT;
}

/* Keeps a piece of the body, or drops it once the body is over max_body. */
static void take_body(llmr_http_server *srv, request_ctx *rq, const char *data, size_t n)
{
    rq->seen += n;
    if (!rq->too_large && n > srv->max_body - rq->body.len) {
        rq->too_large = true;
        llmr_strbuf_free(&rq->body);
    }
    if (!rq->too_large)
        llmr_strbuf_append(&rq->body, data, n);
}

/* A handler's run on a pool thread: what it answers, and for which connection. */
typedef struct handler_job {
    llmr_http_server *srv;
    struct MHD_Connection *conn;
    llmr_http_request req;
    const char *method, *url;
    uint64_t t0_ns;
    int64_t arrival_unix_ms;
} handler_job;

/* On a pool thread: the handler answers; the response is queued on the suspended
 * connection, which then resumes.  Nothing of the request is used after that (the
 * connection may complete and free it at once). */
static void run_handler(void *arg)
{
    handler_job *j = arg;
    llmr_http_server *srv = j->srv;
    llmr_http_reply r = {.conn = j->conn, .stopping = &srv->stopping, .srv = srv,
                         .request_id = j->req.request_id,
                         .access = http_access_new(srv->service, srv->on_done, srv->done_user,
                                                   j->req.request_id, j->method, j->url,
                                                   j->t0_ns, j->arrival_unix_ms)};
    llmr_log_set_request_id(j->req.request_id);
    srv->handler(srv->user, &j->req, &r);
    llmr_log_set_request_id(NULL);
    if (!r.response) {
        llmr_log_warn(COMPONENT, "%s %s: the handler did not reply", j->method, j->url);
        llmr_http_reply_error(&r, 500, "server_error", NULL, "internal_error",
                              "the server did not answer the request");
    }
    struct MHD_Connection *conn = j->conn;
    /* nothing queued: once resumed, the access handler sees the request dispatched
     * and closes the connection */
    if (send_reply(conn, &r) != MHD_YES)
        llmr_log_warn(COMPONENT, "%s %s: no answer could be queued", j->method, j->url);
    reply_clear(&r);
    free(j);
    MHD_resume_connection(conn);
}

/* The whole request is in: a pool thread runs the handler while the connection is
 * suspended. */
static enum MHD_Result answer(llmr_http_server *srv, request_ctx *rq,
                              struct MHD_Connection *conn, const char *url, const char *method)
{
    if (llmr_strbuf_failed(&rq->body))
        return send_error(srv, rq, conn, url, method, 500, "server_error", "internal_error",
                          "out of memory reading the request body");
    handler_job *j = calloc(1, sizeof *j);
    if (!j)
        return send_error(srv, rq, conn, url, method, 503, "server_error", "overloaded",
                          "out of memory starting the request");
    j->srv = srv;
    j->conn = conn;
    j->method = method;
    j->url = url;
    j->t0_ns = rq->t0_ns;
    j->arrival_unix_ms = rq->arrival_unix_ms;
    j->req = (llmr_http_request){
        .method = method,
        .path = url,
        .query = rq->query,
        .body = llmr_strbuf_cstr(&rq->body),
        .body_len = rq->body.len,
        .remote = rq->remote,
        .conn = conn,
        .request_id = rq->request_id,
    };
    rq->dispatched = true;
    MHD_suspend_connection(conn);
    if (!http_workers_submit(srv->workers, run_handler, j)) {
        MHD_resume_connection(conn);
        free(j);
        rq->dispatched = false;
        return send_error(srv, rq, conn, url, method, 503, "server_error", "overloaded",
                          "no thread could run the request");
    }
    return MHD_YES;
}

/* The watch's record of conn (NULL: none). */
static http_conn *conn_record(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* libmicrohttpd's access handler: called when the headers are in, for each piece of
 * the body, and once more when the body is complete. */
static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_size, void **con_cls)
{
    llmr_http_server *srv = cls;
    request_ctx *rq = *con_cls;
    (void)version;
    if (!rq)
        return MHD_NO; /* its context could not be allocated */
    if (rq->dispatched)
        return MHD_NO; /* its handler's answer could not be queued: close */
    if (!rq->started) {
        rq->started = true;
        http_watch_conn_phase(srv->watch, conn_record(conn), HTTP_PHASE_BODY);
        const char *given = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-request-id");
        if (llmr_request_id_valid(given))
            snprintf(rq->request_id, sizeof rq->request_id, "%s", given);
        else
            llmr_request_id_new(rq->request_id, sizeof rq->request_id);
        /* the decoded path would end at the NUL and name another resource */
        if (rq->nul_in_path)
            return send_error(srv, rq, conn, url, method, 400, "invalid_request_error",
                              "invalid_path", "the request path holds an encoded NUL (%00)");
        uint64_t len = declared_length(conn);
        if (len != UINT64_MAX && len > srv->max_body) {
            if (expects_continue(conn) || past_drain_limit(srv, len))
                return send_too_large(srv, rq, conn, url, method);
            rq->too_large = true; /* read it, drop it, then answer */
        }
        return MHD_YES;
    }
    if (*upload_size) {
        take_body(srv, rq, upload_data, *upload_size);
        *upload_size = 0;
        return past_drain_limit(srv, rq->seen) ? MHD_NO : MHD_YES;
    }
    http_watch_conn_phase(srv->watch, conn_record(conn), HTTP_PHASE_NONE);
    if (rq->too_large)
        return send_too_large(srv, rq, conn, url, method);
    return answer(srv, rq, conn, url, method);
}

/* The request line arrived: uri is the raw target, query included. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    request_ctx *rq = calloc(1, sizeof *rq);
    if (!rq)
        return NULL;
    const char *q = uri ? strchr(uri, '?') : NULL;
    for (const char *p = uri; p && *p && p != q; p++)
        if (p[0] == '%' && p[1] == '0' && p[2] == '0')
            rq->nul_in_path = true;
    rq->query = strdup(q ? q + 1 : "");
    if (!rq->query) {
        free(rq);
        return NULL;
    }
    llmr_strbuf_init(&rq->body);
    rq->t0_ns = llmr_now_ns();
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    rq->arrival_unix_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = info ? info->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                  rq->remote, sizeof rq->remote);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  rq->remote, sizeof rq->remote);
    return rq;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    llmr_http_server *srv = cls;
    (void)toe;
    http_watch_conn_phase(srv->watch, conn_record(conn), HTTP_PHASE_NEXT);
    request_ctx *rq = *con_cls;
    if (!rq)
        return;
    llmr_strbuf_free(&rq->body);
    free(rq->query);
    free(rq);
    *con_cls = NULL;
}

/* A connection was accepted or closed: the watch's record of it. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    llmr_http_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? http_watch_conn_open(srv->watch, ci->connect_fd) : NULL;
    }
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_watch_conn_close(srv->watch, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's own messages (a client that sent garbage, a full connection table):
 * for debugging only, since a misbehaving client is not the server's problem. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (llmr_log_get_level() > LLMR_LOG_DEBUG)
        return;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_vprintf(&sb, fmt, ap);
    while (sb.len && (sb.data[sb.len - 1] == '\n' || sb.data[sb.len - 1] == '\r'))
        sb.data[--sb.len] = '\0';
    llmr_log_debug(COMPONENT, "%s", llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
}

/* ---- the server -------------------------------------------------------------------- */

/* Why binding host:port fails, found by trying it (libmicrohttpd does not say):
 * errno of the failed bind, or 0 when a bind works now. */
static int bind_errno(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM, 0);
    if (fd < 0)
        return errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int e = bind(fd, sa, len) == 0 ? 0 : errno;
    close(fd);
    return e;
}

/* host as a socket address with port set (numeric addresses and names alike). */
static bool resolve(const char *host, unsigned port, struct sockaddr_storage *out,
                    socklen_t *len, llmr_strbuf *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        llmr_strbuf_printf(err, "cannot listen on %s: %s", host,
                           rc ? gai_strerror(rc) : "no address");
        return false;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)(void *)out)->sin_port = htons((uint16_t)port);
    else if (out->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)out)->sin6_port = htons((uint16_t)port);
    else {
        llmr_strbuf_printf(err, "cannot listen on %s: not an IP address", host);
        return false;
    }
    return true;
}

/* Raises this process's limit of open files (its soft limit, up to the hard one) so that
 * max_conn connections fit, each with a descriptor to spare for its upstream; says so
 * when the hard limit is lower. */
static void room_for_connections(unsigned max_conn)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_conn * 2 + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
        llmr_log_warn("http", "open files are limited to %llu (hard limit %llu): fewer than %u connections "
                              "may fit; raise the limit (ulimit -n) or lower --max-connections",
                      (unsigned long long)(rl.rlim_cur > was ? rl.rlim_cur : was),
                      (unsigned long long)rl.rlim_max, max_conn);
}

llmr_status llmr_http_server_start(const llmr_http_server_options *o, llmr_http_server **out,
                                   llmr_strbuf *err)
{
    *out = NULL;
    if (!o || !o->handler) {
        llmr_strbuf_puts(err, "the HTTP server needs a handler");
        return LLMR_INVALID_ARGUMENT;
    }
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    if (o->port > 65535) {
        llmr_strbuf_printf(err, "cannot listen on %s:%u: not a TCP port", host, o->port);
        return LLMR_INVALID_ARGUMENT;
    }
    struct sockaddr_storage addr;
    socklen_t addr_len;
    if (!resolve(host, o->port, &addr, &addr_len, err))
        return LLMR_INVALID_ARGUMENT;

    llmr_http_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        llmr_strbuf_puts(err, "out of memory starting the HTTP server");
        return LLMR_OOM_RAM;
    }
    srv->handler = o->handler;
    srv->user = o->user;
    srv->max_body = o->max_body ? o->max_body : (size_t)8 << 20;
    srv->on_done = o->on_done;
    srv->done_user = o->done_user;
    if (o->service && !(srv->service = strdup(o->service))) {
        free(srv);
        llmr_strbuf_puts(err, "out of memory starting the HTTP server");
        return LLMR_OOM_RAM;
    }
    atomic_init(&srv->stopping, false);
    atomic_init(&srv->open_streams, 0);
    srv->stream_queue_max = o->stream_queue_max;
    srv->quiesced = MHD_INVALID_SOCKET;
    unsigned max_conn = o->max_connections ? o->max_connections : 256;
    room_for_connections(max_conn);
    srv->workers = http_workers_new(max_conn);
    srv->watch = http_watch_new(o->header_timeout_s, o->body_timeout_s,
                                o->timeout_s ? o->timeout_s : 120);
    if (!srv->workers || !srv->watch) {
        http_workers_free(srv->workers);
        http_watch_free(srv->watch);
        free(srv->service);
        free(srv);
        llmr_strbuf_puts(err, "out of memory starting the HTTP server");
        return LLMR_OOM_RAM;
    }
    /* epoll: no limit on descriptors (select stops at FD_SETSIZE); ITC: resumed
     * connections and llmr_http_server_quiesce are seen at once */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_DUAL_STACK; /* "::" takes IPv4 clients too */
    bool tls = o->tls_cert_pem && o->tls_key_pem;
    struct MHD_OptionItem tls_items[] = {
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)o->tls_key_pem},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)o->tls_cert_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    if (tls)
        flags |= MHD_USE_TLS;
    srv->daemon = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_access, srv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, max_conn < HTTP_IO_THREADS ? max_conn : HTTP_IO_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_connections_per_client,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, (void *)srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(o->timeout_s ? o->timeout_s : 120),
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, (void *)srv,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)srv,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, (void *)srv,
        MHD_OPTION_ARRAY, tls_items,
        MHD_OPTION_END);
    if (!srv->daemon) {
        int e = bind_errno((const struct sockaddr *)&addr, addr_len);
        if (tls && !e) {
            llmr_strbuf_printf(err, "the TLS setup failed: the certificate and key must be PEM, "
                                    "the key that of the certificate (tls_cert, tls_key)");
            http_workers_free(srv->workers);
            http_watch_free(srv->watch);
            free(srv->service);
            free(srv);
            return LLMR_INVALID_ARGUMENT;
        }
        const char *fmt = addr.ss_family == AF_INET6 ? "cannot listen on [%s]:%u: %s"
                                                    : "cannot listen on %s:%u: %s";
        llmr_strbuf_printf(err, fmt, host, o->port,
                           e ? strerror(e) : "the HTTP server could not start");
        http_workers_free(srv->workers);
        http_watch_free(srv->watch);
        free(srv->service);
        free(srv);
        return e ? LLMR_IO : LLMR_INTERNAL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info && info->port ? info->port : o->port;
    *out = srv;
    return LLMR_OK;
}

unsigned llmr_http_server_port(const llmr_http_server *s)
{
    return s ? s->port : 0;
}

void llmr_http_server_quiesce(llmr_http_server *s)
{
    if (!s || s->quiesced != MHD_INVALID_SOCKET)
        return;
    s->quiesced = MHD_quiesce_daemon(s->daemon);
    if (s->quiesced != MHD_INVALID_SOCKET) {
        /* new connections are refused, not left waiting: shut down first, which a
         * listening socket's poll in the daemon's thread sees at once (a close alone
         * would leave it listening until that poll returns) */
        shutdown(s->quiesced, SHUT_RDWR);
        close(s->quiesced);
    }
    else
        llmr_log_warn(COMPONENT, "the server could not stop accepting connections early");
}

bool llmr_http_server_drain(llmr_http_server *s, uint64_t deadline_ms)
{
    for (;;) {
        if (atomic_load(&s->open_streams) == 0)
            return true;
        if (llmr_now_ms() >= deadline_ms)
            return false;
        struct timespec nap = {0, 20 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

void llmr_http_server_stop(llmr_http_server *s)
{
    if (!s)
        return;
    /* Handlers running finish and queue their answers (new requests get a 503); then
     * streams waiting for bytes are resumed to end with an error, so that no
     * connection is suspended when libmicrohttpd stops: their connections close and
     * their streams see on_close before this returns. */
    atomic_store(&s->stopping, true);
    http_workers_drain(s->workers);
    http_watch_check_streams(s->watch);
    MHD_stop_daemon(s->daemon);
    http_watch_free(s->watch);
    http_workers_free(s->workers);
    free(s->service);
    free(s);
}
