/* What the two halves of the HTTP server share: http_server.c (the daemon, requests,
 * whole replies) opens a streamed response through http_stream.c (the stream's
 * queue, the content reader libmicrohttpd pulls from, and its lifetime). */
#ifndef LLMR_HTTP_HTTP_INTERNAL_H
#define LLMR_HTTP_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "http/http_server.h"

/* How long a content reader waits for bytes before it looks whether the client or
 * the server has gone; also the longest llmr_http_server_stop waits for a reader. */
#define LLMR_HTTP_STREAM_POLL_MS 100

/* Makes a stream and the response that reads from it, for conn.  The stream has two
 * owners: the producer (until llmr_http_stream_end) and the response (until
 * libmicrohttpd frees it, which also happens when the response is destroyed without
 * ever being queued).  stopping is the server's flag; it outlives the response.
 * NULL when out of memory (nothing was made then). */
struct MHD_Response *llmr_http_stream_open(struct MHD_Connection *conn,
                                           const atomic_bool *stopping,
                                           llmr_http_close_fn on_close, void *user,
                                           llmr_http_stream **out);

#endif
