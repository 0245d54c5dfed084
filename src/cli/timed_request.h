/* One request through an engine loaded in this process (local_engine.h), submitted
 * and waited for to its last event, with the timestamps a benchmark needs: when it was
 * submitted and when its first and last tokens were sampled, all on the clock of token
 * events (CLOCK_MONOTONIC, common/clock.h). */
#ifndef LLMR_CLI_TIMED_REQUEST_H
#define LLMR_CLI_TIMED_REQUEST_H

#include <stdint.h>

#include "cli/local_engine.h"

typedef struct llmr_timed_request {
    uint64_t submit_ns;  /* just before submit() */
    uint64_t first_ns;   /* time_ns of the first event that carried a token; 0: none */
    uint64_t last_ns;    /* time_ns of the last one */
    uint32_t tokens;     /* events that carried a token */
    uint32_t finish;     /* llmr_engine_finish of the last event */
} llmr_timed_request;

/* Runs the request p on e and waits for its last event.  LLMR_OK when it ended by a
 * stop id or by length; otherwise the status (the engine's for a request that failed,
 * CANCELLED for one that was cancelled) with the engine's words in err. */
llmr_status llmr_timed_request_run(llmr_local_engine *e, const llmr_engine_request_params *p,
                                   llmr_timed_request *out, llmr_strbuf *err);

#endif
