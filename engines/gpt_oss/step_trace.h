/* A development trace of the step loop (step_loop.c): with the environment variable
 * LLMR_STEP_TRACE naming a file when a model loads, every step appends one line
 *
 *     start_us items decode_items tokens waiting running step_us
 *
 * (start: microseconds since the loop started; decode items: items of one token that
 * sample, i.e. decoding sequences; tokens: the step's tokens in all; waiting and running:
 * the scheduler's queues after the plan; step: the forward pass, picks and events).
 * tests/gpu/step_trace_summary.py sums a trace up: where a serve run's time went.  The
 * variable is the operator's (read from the engine's environment), never a request's. */
#ifndef GPT_STEP_TRACE_H
#define GPT_STEP_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "llmr/engine.h"
#include "scheduler.h"

typedef struct gpt_step_trace {
    FILE *out; /* NULL: tracing is off */
    const llmr_host_api *host; /* its clock */
    uint64_t origin_ns, step_ns;
    uint32_t items, decode_items, tokens, waiting, running; /* the step begun */
} gpt_step_trace;

/* Opens the trace when LLMR_STEP_TRACE is set, timed by the host's clock; a file that
 * cannot be opened is said on stderr once and tracing stays off. */
void gpt_step_trace_open(gpt_step_trace *t, const llmr_host_api *host);
/* The start of step `step` of scheduler s (its plan made, not yet run); nothing when
 * tracing is off. */
void gpt_step_trace_begin(gpt_step_trace *t, const llmr_sched *s, const llmr_sched_step *step);
/* Writes the step's line. */
void gpt_step_trace_end(gpt_step_trace *t);
void gpt_step_trace_close(gpt_step_trace *t);

#endif
