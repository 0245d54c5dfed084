/* What the two halves of the HTTP server share: http_server.c (the daemon, requests,
 * whole replies) opens a streamed response through http_stream.c (the stream's
 * queue, the content reader libmicrohttpd pulls from, and its lifetime). */
#ifndef LLMR_HTTP_HTTP_INTERNAL_H
#define LLMR_HTTP_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http_server.h"

/* How often the watch thread looks at connections' deadlines and at suspended
 * streams' clients (a hang-up is noticed within this). */
#define HTTP_WATCH_TICK_MS 100

/* ---- handler threads (http_workers.c) ---- */
typedef struct http_workers http_workers;
typedef void (*http_job_fn)(void *arg);
/* A pool of at most max_threads threads, none started yet; NULL when out of memory. */
http_workers *http_workers_new(unsigned max_threads);
/* Runs fn(arg) on a pool thread; false when it cannot (out of memory, stopping). */
bool http_workers_submit(http_workers *w, http_job_fn fn, void *arg);
/* Threads alive now. */
unsigned http_workers_threads(http_workers *w);
/* Takes no more jobs (submit fails), runs what is queued, waits for every thread to
 * exit. */
void http_workers_drain(http_workers *w);
/* Drains, frees.  NULL: nothing. */
void http_workers_free(http_workers *w);

/* ---- deadlines and suspended streams (http_watch.c) ---- */
typedef struct http_watch http_watch;
typedef struct http_conn http_conn;
typedef enum http_phase {
    HTTP_PHASE_BODY, /* the headers are in: the body's deadline runs */
    HTTP_PHASE_NONE, /* the request is whole: no deadline while it is answered */
    HTTP_PHASE_NEXT, /* answered: the next request's headers (after the idle time) */
} http_phase;
/* Starts the watch thread; a 0 timeout is no deadline.  NULL when it cannot. */
http_watch *http_watch_new(unsigned header_timeout_s, unsigned body_timeout_s,
                           unsigned idle_timeout_s);
void http_watch_free(http_watch *w);
/* A connection accepted on fd: its headers' deadline runs.  NULL when out of memory
 * (the connection then has no deadline). */
http_conn *http_watch_conn_open(http_watch *w, int fd);
/* Before its socket closes. */
void http_watch_conn_close(http_watch *w, http_conn *c);
void http_watch_conn_phase(http_watch *w, http_conn *c, http_phase phase);
/* Connections shut down for a deadline so far. */
uint64_t http_watch_closed(http_watch *w);
/* Streams the thread checks (http_stream_check) until removed. */
bool http_watch_stream_add(http_watch *w, llmr_http_stream *s);
void http_watch_stream_remove(http_watch *w, llmr_http_stream *s);
/* Checks every stream now (llmr_http_server_stop, once stopping is set). */
void http_watch_check_streams(http_watch *w);
/* A suspended stream whose client hung up, or whose server stops, is resumed to end
 * with an error. */
void http_stream_check(llmr_http_stream *s);

/* One request's record for the access log and on_done (see http_server.h). */
typedef struct http_access http_access;
/* NULL when out of memory (the request then goes unrecorded). */
http_access *http_access_new(const char *service, llmr_http_done_fn on_done, void *done_user,
                             const char *request_id, const char *method, const char *path,
                             uint64_t t0_ns, int64_t arrival_unix_ms);
void http_access_note(http_access *a, const llmr_http_note *n);
/* Records the request as answered with status (a noted status wins, except that
 * client_gone makes it 499) and frees a.  NULL: nothing. */
void http_access_finish(http_access *a, unsigned status, bool client_gone);

/* Whether the client's socket is still open (bytes it sent count as open). */
bool http_client_connected(struct MHD_Connection *conn);

/* Gives a stream opened by llmr_http_stream_open the record of its request and the
 * status it was sent with: llmr_http_stream_end finishes the record. */
void http_stream_take_access(llmr_http_stream *s, http_access *a, unsigned status);

/* Makes a stream and the response that reads from it, for conn.  The stream has two
 * owners: the producer (until llmr_http_stream_end) and the response (until
 * libmicrohttpd frees it, which also happens when the response is destroyed without
 * ever being queued).  stopping is the server's flag; it outlives the response.
 * NULL when out of memory (nothing was made then). */
struct MHD_Response *llmr_http_stream_open(struct MHD_Connection *conn,
                                           const atomic_bool *stopping,
                                           llmr_http_close_fn on_close, void *user,
                                           llmr_http_stream **out);
/* The server's count of streams not yet freed (llmr_http_server_drain waits for it)
 * and the most bytes a stream queues for its client (0: the default): what the two
 * calls above share with every stream the server opens after.  watch (NULL: none)
 * checks the stream's client while its connection is suspended. */
void http_stream_set_server(llmr_http_stream *s, atomic_uint *open_streams, size_t queue_max,
                            http_watch *watch);

#endif
