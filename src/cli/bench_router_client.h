/* The load generator of `llmr bench router` (bench_router_client.c): a fixed number
 * of HTTP/1.1 client connections to the router, each sending the same streamed
 * request again and again (keep-alive), spread over a few threads with an epoll loop
 * each.  For every request it records when it started and ended, its outcome (a
 * whole stream, an error event, a cut, a hang, ...), the completion tokens, the
 * client's time to first body byte and the router's X-Llmr-Upstream-Ttfb-Us header.
 *
 * The client's time to first byte runs from just before the request is written to
 * the kernel's receive time (SO_TIMESTAMPNS) of the data that carried the first
 * byte of the body, so how late a client thread wakes up does not count. */
#ifndef LLMR_CLI_BENCH_ROUTER_CLIENT_H
#define LLMR_CLI_BENCH_ROUTER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef enum brc_outcome {
    BRC_OK,          /* 200, the whole stream, [DONE] */
    BRC_ERROR_EVENT, /* 200, an error event, then [DONE] */
    BRC_HTTP_ERROR,  /* an answer with another status */
    BRC_CUT,         /* the connection closed, or the stream ended, without [DONE] */
    BRC_CLOSED,      /* a new connection closed before any byte of an answer */
    BRC_HUNG,        /* no byte for hang_ms */
    BRC_CONNECT,     /* could not connect or send */
    BRC_BAD,         /* an answer that is not HTTP as expected */
    BRC_OUTCOMES
} brc_outcome;

/* Short names for reports: "ok", "error_event", "http_error", "cut", ... */
const char *brc_outcome_name(brc_outcome o);

typedef struct brc_result {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC (llmr_now_ns) */
    int64_t ttfb_us;           /* the client's time to first body byte; -1: none */
    int64_t upstream_us;       /* X-Llmr-Upstream-Ttfb-Us; -1: none */
    uint32_t tokens;           /* the usage's completion_tokens, else content events */
    uint16_t status;           /* HTTP status; 0: none */
    uint8_t outcome;           /* brc_outcome */
} brc_result;

typedef struct brc_options {
    unsigned port;             /* the router on 127.0.0.1 */
    const char *path;          /* "/v1/chat/completions" */
    const char *body;          /* the JSON request, streamed */
    unsigned connections;      /* requests in flight at once */
    unsigned threads;          /* event loops; at most connections */
    unsigned ramp_ms;          /* the first requests start spread over this */
    unsigned hang_ms;          /* a request with no byte this long is hung */
} brc_options;

typedef struct brc_load brc_load;

/* Starts the connections and threads. */
llmr_status brc_start(const brc_options *o, brc_load **out, llmr_strbuf *err);

typedef struct brc_live {
    uint64_t done, errors, in_flight, tokens;
} brc_live;
void brc_live_counts(brc_load *l, brc_live *out);

/* No new requests; those in flight go on to their end (or their hang). */
void brc_stop_issuing(brc_load *l);
/* Ends everything now (SIGINT): requests in flight are dropped, not recorded. */
void brc_abort(brc_load *l);
/* Waits for the threads to end (after brc_stop_issuing or brc_abort). */
void brc_join(brc_load *l);

/* After brc_join: every recorded request (owned by l), whether every first byte had
 * a kernel timestamp, and the first error answer seen ("" when none). */
const brc_result *brc_results(brc_load *l, size_t *n);
bool brc_kernel_timestamps(const brc_load *l);
const char *brc_first_error(const brc_load *l);
void brc_free(brc_load *l);

#endif
