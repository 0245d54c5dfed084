/* The HTTP server of the node and of the router: an event loop (a few threads serve
 * every connection, so an idle or slow one costs no thread) with the handlers on a
 * pool of threads, so a handler may block and a streamed response (Server-Sent
 * Events) is written from whatever thread produces it.  A client that is too slow to
 * send its headers (header_timeout_s) or its body (body_timeout_s) is disconnected.
 *
 * A request reaches the handler whole: method, path, query, headers and the body (at
 * most max_body bytes; a larger one is answered 413 before the handler sees it).  The
 * handler answers through its llmr_http_reply, exactly once:
 *
 *   - llmr_http_reply_json / llmr_http_reply_text / llmr_http_reply_error: a whole
 *     response, sent when the handler returns;
 *   - llmr_http_reply_stream: a streamed response.  The handler gets an
 *     llmr_http_stream that it (or another thread) writes with llmr_http_stream_write
 *     and ends with llmr_http_stream_end; the handler may return before the stream
 *     ends.  When the client goes away first, on_close runs (once, on the server's
 *     thread) and later writes return false; the stream must still be ended.
 *
 * The reply functions are called from the handler, before it returns.  A second
 * reply to one request is ignored (with a warning).  llmr_http_server_stop waits for
 * handlers that are running to return.  A stream's queue is bounded
 * (options.stream_queue_max): a client that reads too slowly is cut.
 *
 * Every request has an id (req->request_id): the client's x-request-id header when it
 * is a valid one (llmr_request_id_valid), else a new one.  The id is the calling
 * thread's log request id while the handler runs, and every answer carries it back
 * as the x-request-id header.
 *
 * When a request is done (a whole answer made, or a stream ended) the server writes
 * an access log line (options.service names it; NULL: none) and calls
 * options.on_done with what it knows: method, path, status, duration, and what the
 * handler noted (llmr_http_reply_note, llmr_http_stream_note: model, tokens, TTFT...).
 * A client that went away before its answer is recorded with status 499.
 *
 * Errors the server answers itself (400 for a path that encodes a NUL, 413, a handler
 * that did not reply: 500) carry an OpenAI-style body: {"error": {"message", "type",
 * "param", "code"}}. */
#ifndef LLMR_HTTP_HTTP_SERVER_H
#define LLMR_HTTP_HTTP_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_http_server llmr_http_server;
typedef struct llmr_http_reply llmr_http_reply;
typedef struct llmr_http_stream llmr_http_stream;

typedef struct llmr_http_request {
    const char *method;   /* "GET", "POST", ... */
    const char *path;     /* decoded, without the query: "/v1/models" */
    const char *query;    /* the raw query after '?', or "" */
    const char *body;     /* NUL-terminated for convenience; may hold NUL bytes */
    size_t body_len;
    const char *remote;   /* the peer's address, "127.0.0.1" */
    void *conn;           /* the server's connection (for llmr_http_request_header) */
    const char *request_id; /* the client's x-request-id, or a new id (see above) */
} llmr_http_request;

/* A request header by name (case-insensitive), or NULL. */
const char *llmr_http_request_header(const llmr_http_request *req, const char *name);

/* True once the client of this request has gone away (closed its connection or
 * reset it), while its handler has not answered yet: a long answer may stop. */
bool llmr_http_request_client_gone(const llmr_http_request *req);

/* What the server records of a request when it is done (the access log line, and
 * on_done for a request log). */
typedef struct llmr_http_done {
    const char *request_id, *method, *path;
    unsigned status;           /* 499: the client went away before its answer ended */
    const char *model, *node, *key_id, *response_id, *error; /* NULL when not noted */
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms;            /* < 0: no first token */
    double duration_ms;        /* from the request line to the answer made or the
                                  stream ended */
    int64_t arrival_unix_ms;
    const char *target;        /* what an admin action made (llmr_http_note), or NULL */
} llmr_http_done;
typedef void (*llmr_http_done_fn)(void *user, const llmr_http_done *d);

/* What a handler adds to that record: NULL strings and a 0 status leave a field as
 * it was; usage sets the token counts and ttft_ms. */
typedef struct llmr_http_note {
    const char *model, *node, *key_id, *response_id, *error;
    bool usage;
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms;
    unsigned status;           /* what to record instead of the status sent (a stream
                                  that ended in an error: its 200 went out first) */
    bool quiet;                /* routine (a heartbeat): its access line, unless an
                                  error, at debug level, as for GET /health and /metrics */
    const char *target;        /* what an admin action made or changed, for the router's
                                  audit log: a new key's id, a registered model's name */
} llmr_http_note;

typedef void (*llmr_http_handler)(void *user, const llmr_http_request *req, llmr_http_reply *reply);

typedef struct llmr_http_server_options {
    const char *host;        /* address to bind, "127.0.0.1"; "0.0.0.0" for all */
    unsigned port;           /* 0: any free port (see llmr_http_server_port) */
    size_t max_body;         /* bytes; default 8 MiB */
    unsigned max_connections; /* default 256 */
    unsigned timeout_s;      /* an idle connection is closed after this; default 120 */
    unsigned header_timeout_s; /* a connection that has not sent a request's headers
                                  this long after it opened (kept alive: after its last
                                  answer plus timeout_s) is closed; default 10; 0: none */
    unsigned body_timeout_s; /* likewise for the body, from the headers; default 60;
                                0: none */
    unsigned max_connections_per_client; /* connections at once from one IP address;
                                            0 (default): no limit but max_connections */
    llmr_http_handler handler;
    void *user;
    const char *service;     /* the access log's name for this server ("router",
                                "node"); NULL: no access log */
    llmr_http_done_fn on_done; /* NULL: none; runs on any thread */
    void *done_user;
    size_t stream_queue_max; /* bytes a stream may hold unread by a slow client; past it
                                the client is cut (a log line says so) and writes fail;
                                0: 16 MiB */
    const char *tls_cert_pem; /* with tls_key_pem (both PEM text): HTTPS only, through
                                 libmicrohttpd's GnuTLS; NULL: plain HTTP */
    const char *tls_key_pem;
} llmr_http_server_options;

void llmr_http_server_options_default(llmr_http_server_options *o);

/* What a command line sets of a server's connections (llmr node and llmr router:
 * --max-connections, --max-connections-per-client, --header-timeout, --body-timeout);
 * a 0 field keeps the server's own value. */
typedef struct llmr_http_limits {
    unsigned max_connections, max_connections_per_client, header_timeout_s, body_timeout_s;
    const char *tls_cert_pem, *tls_key_pem; /* and its TLS (llmr_cli_tls_read), or NULL */
} llmr_http_limits;
/* Puts l's non-zero fields in o (l NULL: nothing). */
void llmr_http_limits_apply(const llmr_http_limits *l, llmr_http_server_options *o);

/* Binds and starts serving.  err says why it could not (address in use, ...). */
llmr_status llmr_http_server_start(const llmr_http_server_options *o, llmr_http_server **out,
                                   llmr_strbuf *err);
/* The port it listens on (the chosen one when options asked for 0). */
unsigned llmr_http_server_port(const llmr_http_server *s);
/* Stops accepting new connections (a client trying gets refused); the open ones go on. */
void llmr_http_server_quiesce(llmr_http_server *s);
/* Waits until every stream opened has ended and been sent (or its client left), or
 * until the CLOCK_MONOTONIC millisecond deadline_ms: true when none is left. */
bool llmr_http_server_drain(llmr_http_server *s, uint64_t deadline_ms);
/* Stops accepting, closes connections (open streams see on_close), frees. */
void llmr_http_server_stop(llmr_http_server *s);

/* Notes what the request log should know of this request (see llmr_http_note): any
 * time until the handler returns (a job replying for it: until it replied); a stream
 * takes what was noted before it opened. */
void llmr_http_reply_note(llmr_http_reply *r, const llmr_http_note *n);
/* The same for a stream, until llmr_http_stream_end. */
void llmr_http_stream_note(llmr_http_stream *s, const llmr_http_note *n);

/* Adds a response header (before the reply functions below). */
void llmr_http_reply_header(llmr_http_reply *r, const char *name, const char *value);
/* A JSON body (Content-Type: application/json); takes the reference to body. */
void llmr_http_reply_json(llmr_http_reply *r, unsigned status, json_t *body);
/* A body of the given type (copied). */
void llmr_http_reply_text(llmr_http_reply *r, unsigned status, const char *content_type,
                          const char *body, size_t len);
/* length bytes of the open file fd from offset, sent by the server without copying
 * (Range answers set their status and Content-Range header first).  true: the server
 * took fd and closes it; false: it did not (out of memory, or already replied). */
bool llmr_http_reply_file(llmr_http_reply *r, unsigned status, const char *content_type, int fd,
                          uint64_t offset, uint64_t length);
/* An OpenAI-style error object: {"error": {"message": message, "type": type,
 * "param": param (or null), "code": code (or null)}}. */
void llmr_http_reply_error(llmr_http_reply *r, unsigned status, const char *type,
                           const char *param, const char *code, const char *message);

typedef void (*llmr_http_close_fn)(void *user);
/* Starts a streamed response with this status and content type ("text/event-stream"
 * adds Cache-Control: no-cache and X-Accel-Buffering: no).  on_close(user) runs when
 * the client goes away before the stream ends: at most once, never after
 * llmr_http_stream_end was called, on a server thread (during llmr_http_server_stop
 * possibly on the thread that stops).  A client that hangs up is noticed within about
 * 100 ms even while nothing is written.  NULL when out of memory or when the handler
 * already replied; on_close never runs then. */
llmr_http_stream *llmr_http_reply_stream(llmr_http_reply *r, unsigned status,
                                         const char *content_type,
                                         llmr_http_close_fn on_close, void *user);
/* Queues bytes to send (copied); false once the client has gone (or the server
 * stops).  Any thread; never blocks on the client: the queue grows while the client
 * is slower than the writer, up to options.stream_queue_max bytes unread; a write past
 * that cuts the client (its connection closes, a warning is logged) and returns false. */
bool llmr_http_stream_write(llmr_http_stream *s, const char *data, size_t len);
/* Ends the stream after what was queued; s is not used after.  Any thread, once.
 * When on_close is running on another thread it waits for it to return (so user
 * stays valid while on_close uses it): on_close must not wait for the thread that
 * ends the stream.  on_close itself may call it. */
void llmr_http_stream_end(llmr_http_stream *s);

#endif
