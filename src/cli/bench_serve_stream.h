/* One streamed completion request of `llmr bench serve` (bench_serve_stream.c): POSTs a
 * /v1/completions request with stream: true over libcurl, reads its server-sent events
 * as they arrive and records when each token chunk came, the usage of the last chunk,
 * and whether the stream ended well ([DONE], no error event). */
#ifndef LLMR_CLI_BENCH_SERVE_STREAM_H
#define LLMR_CLI_BENCH_SERVE_STREAM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct bss_result {
    uint64_t start_ns, first_ns, end_ns; /* CLOCK_MONOTONIC; first_ns 0: no token came */
    uint64_t *gaps_ns;                   /* between consecutive token chunks (malloc'd) */
    uint32_t n_gaps;
    uint32_t chunks;                     /* chunks that carried text */
    uint32_t prompt_tokens, completion_tokens; /* the usage (0: none sent) */
    long status;                         /* HTTP status; 0: no answer */
    bool ok;                             /* 200, [DONE], no error event */
    char error[160];                     /* why not, when not ok */
} bss_result;

/* Sends `body` (JSON) to url (".../v1/completions") with `key` as a bearer token (NULL:
 * none) and waits for the whole stream, at most timeout_s seconds.  Fills *r (free its
 * gaps with bss_result_free). */
void bss_run(const char *url, const char *key, const char *body, unsigned timeout_s, bss_result *r);
void bss_result_free(bss_result *r);

#endif
