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

/* How long a content reader waits for bytes before it looks whether the client or
 * the server has gone; also the longest llmr_http_server_stop waits for a reader. */
#define LLMR_HTTP_STREAM_POLL_MS 100

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
 * calls above share with every stream the server opens after. */
void http_stream_set_server(llmr_http_stream *s, atomic_uint *open_streams, size_t queue_max);

#endif
