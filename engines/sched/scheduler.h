/* The step scheduler of an engine that serves many sequences at once (continuous
 * batching, DESIGN.md §3b): plain C, no GPU, one per loaded model, driven by the
 * model's step loop on one thread (not thread-safe: the loop owns it).
 *
 * A sequence is a list of tokens (the prompt, then what was generated) and a count of
 * them whose keys and values are in the KV cache (`computed`).  Every step the loop asks
 * for a plan (llmr_sched_plan): within a token budget, one token for every running
 * sequence that decodes, then chunks of prompts still being read (running ones first,
 * then waiting ones, first come first served), so a long prompt is read over several
 * steps and never holds the decoders back.  The loop runs the plan's tokens in one
 * forward pass, samples a token for each item whose last row ends its sequence's known
 * tokens, and hands them back (llmr_sched_commit); then it ends the sequences that
 * stop (llmr_sched_finish).
 *
 * KV memory is two pools of fixed-size blocks (kv_blocks.h): one for the layers that
 * attend to every earlier position (a block table that grows with the sequence), one for
 * sliding-window layers (a table whose blocks are given back once the window has moved
 * past them).  A sequence is admitted when the blocks of its first chunk are free; when
 * the blocks run out for a running sequence, the sequence admitted last is preempted:
 * its blocks go back and it waits at the head of the queue to be read again from its
 * first token (recompute), keeping what it generated.  A sequence never needs more
 * than the pools hold for it alone (its length is capped there), so preemption always
 * lets the oldest sequence go on.  Finished sequences give their blocks back at once. */
#ifndef LLMR_SCHEDULER_H
#define LLMR_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_blocks.h"
#include "llmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMR_SCHED_NO_BLOCK UINT32_MAX
#define LLMR_SCHED_ERR_MAX 256

typedef struct llmr_sched_params {
    uint32_t token_budget;  /* tokens in one step at most (0: 8192) */
    uint32_t max_running;   /* sequences in one step at most (0: 256) */
    uint32_t block_tokens;  /* positions in one block (0: 16) */
    uint32_t full_blocks;   /* blocks of the full-attention pool (0: no such layers) */
    uint32_t window;        /* positions a sliding-window layer attends to (0: none) */
    uint32_t window_blocks; /* blocks of the sliding pool (used when window > 0) */
    uint32_t max_context;   /* positions of one sequence at most */
} llmr_sched_params;

typedef enum llmr_sched_state {
    LLMR_SCHED_WAITING,
    LLMR_SCHED_RUNNING,
} llmr_sched_state;

typedef struct llmr_sched_seq {
    uint64_t id;
    void *user;              /* the engine's request */
    llmr_sched_state state;
    int32_t *tokens;         /* prompt, then generated: tokens[0..len) */
    uint32_t len, prompt_len;
    uint32_t max_len;        /* len stops here: prompt + max_tokens, capped by the context
                                and by what the pools hold for one sequence */
    uint32_t computed;       /* tokens[0..computed) are in the KV cache */
    uint32_t *full;          /* full pool: block of positions [i*B, (i+1)*B) is full[i] */
    uint32_t n_full;
    uint32_t *ring;          /* sliding pool, same indexing; LLMR_SCHED_NO_BLOCK once given back */
    uint32_t n_ring, ring_first; /* ring[ring_first..n_ring) are held */
    uint32_t preemptions;    /* times it was preempted */
    uint32_t planned_step;   /* internal: the step that last planned it */
    uint32_t token_cap, table_cap; /* internal: room in tokens and in each block table */
} llmr_sched_seq;

typedef struct llmr_sched_item {
    llmr_sched_seq *seq;
    uint32_t start;          /* its tokens[start..start+count) run at positions start.. */
    uint32_t count;
    bool sample;             /* its last row gives the sequence's next token */
} llmr_sched_item;

typedef struct llmr_sched_step {
    llmr_sched_item *items;  /* decodes first, then prompt chunks */
    uint32_t n_items, n_tokens, n_decode;
    uint32_t n_preempted;    /* sequences this plan preempted */
    uint32_t cap;            /* internal */
} llmr_sched_step;

typedef struct llmr_sched {
    llmr_sched_params p;
    llmr_kv_blocks full, sliding;
    uint32_t seq_capacity;   /* positions one sequence can hold when alone */
    llmr_sched_seq **running; /* in order of admission */
    uint32_t n_running;
    llmr_sched_seq **waiting; /* in order of service */
    uint32_t n_waiting, cap;  /* cap: room in both arrays */
    uint32_t step_no;
    uint64_t preemptions;    /* in all */
} llmr_sched;

/* False (err says why) when a parameter is out of range or out of host memory. */
bool llmr_sched_init(llmr_sched *s, const llmr_sched_params *p, char err[LLMR_SCHED_ERR_MAX]);
/* Frees every sequence still there, and the pools. */
void llmr_sched_free(llmr_sched *s);

/* Positions one sequence can hold when alone (what model_info reports as capacity). */
uint32_t llmr_sched_capacity(const llmr_sched *s);

/* A new waiting sequence of prompt[0..prompt_len) (copied) that may grow by max_tokens
 * (0: to the end of what it can hold).  UNSUPPORTED for an empty prompt or one that
 * leaves no room to generate in the context; OOM_VRAM when the prompt alone does not fit
 * in the KV pools (err says how many tokens fit); OOM_RAM out of host memory. */
llmr_status llmr_sched_add(llmr_sched *s, uint64_t id, void *user, const int32_t *prompt,
                           uint32_t prompt_len, uint32_t max_tokens, llmr_sched_seq **out,
                           char err[LLMR_SCHED_ERR_MAX]);

/* The next step into `step` (its arrays reused from the last call).  False when out of
 * host memory.  An empty step (n_items 0) means nothing can run. */
bool llmr_sched_plan(llmr_sched *s, llmr_sched_step *step);
/* After the step ran: every item's tokens are computed, and each item with `sample`
 * appends picked[i] (i: the item's index) to its sequence. */
void llmr_sched_commit(llmr_sched *s, const llmr_sched_step *step, const int32_t *picked);
/* Whether the sequence has reached max_len (the engine finishes it with LENGTH). */
static inline bool llmr_sched_at_length(const llmr_sched_seq *q)
{
    return q->len >= q->max_len;
}
/* Removes the sequence (waiting or running), gives its blocks back, frees it. */
void llmr_sched_finish(llmr_sched *s, llmr_sched_seq *q);
void llmr_sched_step_free(llmr_sched_step *step);

static inline uint32_t llmr_sched_blocks_used(const llmr_sched *s)
{
    return llmr_kv_blocks_used(&s->full) + llmr_kv_blocks_used(&s->sliding);
}

#ifdef __cplusplus
}
#endif

#endif
