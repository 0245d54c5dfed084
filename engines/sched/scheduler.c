/* The step scheduler: queues, the plan of a step, preemption (scheduler.h). */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUDGET 8192u
#define DEFAULT_RUNNING 256u
#define DEFAULT_BLOCK 16u

static uint32_t div_up(uint64_t a, uint32_t b)
{
    return (uint32_t)((a + b - 1) / b);
}

static uint32_t min_u32(uint64_t a, uint64_t b)
{
    return (uint32_t)(a < b ? a : b);
}

/* ---- growable arrays ---------------------------------------------------------------- */

static bool grow(void **array, uint32_t *cap, uint32_t want, size_t elem)
{
    if (want <= *cap)
        return true;
    uint32_t n = *cap ? *cap : 16;
    while (n < want)
        n = n > UINT32_MAX / 2 ? want : n * 2;
    void *p = realloc(*array, (size_t)n * elem);
    if (!p)
        return false;
    *array = p;
    *cap = n;
    return true;
}

/* ---- setup ---------------------------------------------------------------------------- */

bool llmr_sched_init(llmr_sched *s, const llmr_sched_params *params, char err[LLMR_SCHED_ERR_MAX])
{
    memset(s, 0, sizeof *s);
    s->p = *params;
    llmr_sched_params *p = &s->p;
    if (!p->token_budget)
        p->token_budget = DEFAULT_BUDGET;
    if (!p->max_running)
        p->max_running = DEFAULT_RUNNING;
    if (!p->block_tokens)
        p->block_tokens = DEFAULT_BLOCK;
    if (!p->max_context || (!p->full_blocks && !p->window)) {
        snprintf(err, LLMR_SCHED_ERR_MAX, "the scheduler needs a context and a KV pool");
        return false;
    }
    if (p->window && !p->window_blocks) {
        snprintf(err, LLMR_SCHED_ERR_MAX, "sliding-window layers need blocks of their own");
        return false;
    }
    if (!llmr_kv_blocks_init(&s->full, p->full_blocks) ||
        !llmr_kv_blocks_init(&s->sliding, p->window ? p->window_blocks : 0)) {
        llmr_sched_free(s);
        snprintf(err, LLMR_SCHED_ERR_MAX, "out of host memory");
        return false;
    }
    /* What one sequence can hold alone: every position in the full pool; in the sliding
     * pool the window and a chunk's positions, or, when the pool is smaller than that,
     * the positions it holds before anything leaves the window. */
    uint64_t cap = p->max_context;
    if (p->full_blocks)
        cap = min_u32(cap, (uint64_t)p->full_blocks * p->block_tokens);
    if (p->window && p->window_blocks < p->window / p->block_tokens + 2)
        cap = min_u32(cap, (uint64_t)p->window_blocks * p->block_tokens);
    s->seq_capacity = (uint32_t)cap;
    return true;
}

static void seq_free(llmr_sched_seq *q)
{
    free(q->tokens);
    free(q->full);
    free(q->ring);
    free(q);
}

void llmr_sched_free(llmr_sched *s)
{
    for (uint32_t i = 0; i < s->n_running; i++)
        seq_free(s->running[i]);
    for (uint32_t i = 0; i < s->n_waiting; i++)
        seq_free(s->waiting[i]);
    free(s->running);
    free(s->waiting);
    llmr_kv_blocks_free(&s->full);
    llmr_kv_blocks_free(&s->sliding);
    memset(s, 0, sizeof *s);
}

uint32_t llmr_sched_capacity(const llmr_sched *s)
{
    return s->seq_capacity;
}

/* ---- sequences ------------------------------------------------------------------------ */

llmr_status llmr_sched_add(llmr_sched *s, uint64_t id, void *user, const int32_t *prompt,
                           uint32_t prompt_len, uint32_t max_tokens, llmr_sched_seq **out,
                           char err[LLMR_SCHED_ERR_MAX])
{
    *out = NULL;
    if (!prompt_len) {
        snprintf(err, LLMR_SCHED_ERR_MAX, "the prompt is empty");
        return LLMR_UNSUPPORTED;
    }
    if (prompt_len >= s->p.max_context) {
        snprintf(err, LLMR_SCHED_ERR_MAX,
                 "the prompt has %u tokens and the context holds %u: no room to generate",
                 prompt_len, s->p.max_context);
        return LLMR_UNSUPPORTED;
    }
    if (prompt_len >= s->seq_capacity) {
        snprintf(err, LLMR_SCHED_ERR_MAX,
                 "the prompt has %u tokens; the KV cache holds at most %u tokens of one "
                 "request (with nothing else running)",
                 prompt_len, s->seq_capacity ? s->seq_capacity - 1 : 0);
        return LLMR_OOM_VRAM;
    }
    llmr_sched_seq *q = calloc(1, sizeof *q);
    if (!q || !grow((void **)&q->tokens, &q->token_cap, prompt_len + 1, sizeof *q->tokens) ||
        !grow((void **)&s->running, &s->cap, s->n_running + s->n_waiting + 1, sizeof *s->running)) {
        if (q)
            seq_free(q);
        snprintf(err, LLMR_SCHED_ERR_MAX, "out of host memory");
        return LLMR_OOM_RAM;
    }
    /* waiting shares running's capacity: both hold at most every sequence */
    llmr_sched_seq **w = realloc(s->waiting, (size_t)s->cap * sizeof *w);
    if (!w) {
        seq_free(q);
        snprintf(err, LLMR_SCHED_ERR_MAX, "out of host memory");
        return LLMR_OOM_RAM;
    }
    s->waiting = w;
    memcpy(q->tokens, prompt, prompt_len * sizeof *prompt);
    q->id = id;
    q->user = user;
    q->state = LLMR_SCHED_WAITING;
    q->len = q->prompt_len = prompt_len;
    uint64_t max_len = (uint64_t)prompt_len + (max_tokens ? max_tokens : UINT32_MAX);
    q->max_len = min_u32(max_len, s->seq_capacity);
    q->planned_step = UINT32_MAX;
    s->waiting[s->n_waiting++] = q;
    *out = q;
    return LLMR_OK;
}

/* Room in q's block tables for positions up to `end`. */
static bool reserve(llmr_sched *s, llmr_sched_seq *q, uint32_t end)
{
    uint32_t blocks = div_up(end, s->p.block_tokens), cap = q->table_cap;
    if (s->p.full_blocks && !grow((void **)&q->full, &cap, blocks, sizeof *q->full))
        return false;
    cap = q->table_cap;
    if (s->p.window && !grow((void **)&q->ring, &cap, blocks, sizeof *q->ring))
        return false;
    if (blocks > q->table_cap)
        q->table_cap = cap;
    return true;
}

/* Gives back the sliding blocks no query from position `from` on will read: those
 * whose last position lies more than a window before it. */
static void leave_window(llmr_sched *s, llmr_sched_seq *q, uint32_t from)
{
    if (!s->p.window)
        return;
    uint32_t B = s->p.block_tokens;
    while (q->ring_first < q->n_ring && (uint64_t)(q->ring_first + 1) * B + s->p.window <= from) {
        llmr_kv_blocks_give(&s->sliding, q->ring[q->ring_first]);
        q->ring[q->ring_first++] = LLMR_SCHED_NO_BLOCK;
    }
}

/* Positions q can reach (from its computed tokens) with the blocks free now. */
static uint32_t reachable(const llmr_sched *s, const llmr_sched_seq *q)
{
    uint32_t B = s->p.block_tokens;
    uint64_t end = UINT64_MAX;
    if (s->p.full_blocks)
        end = (uint64_t)(q->n_full + s->full.free) * B;
    if (s->p.window) {
        uint64_t e = (uint64_t)(q->n_ring + s->sliding.free) * B;
        end = e < end ? e : end;
    }
    return min_u32(end, q->max_len);
}

/* Blocks for q's positions up to `end` (false: not enough free, nothing taken). */
static bool take_blocks(llmr_sched *s, llmr_sched_seq *q, uint32_t end)
{
    uint32_t blocks = div_up(end, s->p.block_tokens);
    uint32_t need_full = s->p.full_blocks && blocks > q->n_full ? blocks - q->n_full : 0;
    uint32_t need_ring = s->p.window && blocks > q->n_ring ? blocks - q->n_ring : 0;
    if (need_full > s->full.free || need_ring > s->sliding.free || !reserve(s, q, end))
        return false;
    llmr_kv_blocks_take(&s->full, need_full, q->full + q->n_full);
    q->n_full += need_full;
    llmr_kv_blocks_take(&s->sliding, need_ring, q->ring + q->n_ring);
    q->n_ring += need_ring;
    return true;
}

static void give_all_blocks(llmr_sched *s, llmr_sched_seq *q)
{
    for (uint32_t i = 0; i < q->n_full; i++)
        llmr_kv_blocks_give(&s->full, q->full[i]);
    for (uint32_t i = q->ring_first; i < q->n_ring; i++)
        llmr_kv_blocks_give(&s->sliding, q->ring[i]);
    q->n_full = q->n_ring = q->ring_first = 0;
}

static void remove_at(llmr_sched_seq **array, uint32_t *n, uint32_t i)
{
    memmove(array + i, array + i + 1, (size_t)(*n - i - 1) * sizeof *array);
    (*n)--;
}

/* q (running) goes back to the head of the queue, its cache given back. */
static void preempt(llmr_sched *s, uint32_t index)
{
    llmr_sched_seq *q = s->running[index];
    remove_at(s->running, &s->n_running, index);
    give_all_blocks(s, q);
    q->computed = 0;
    q->state = LLMR_SCHED_WAITING;
    q->preemptions++;
    s->preemptions++;
    memmove(s->waiting + 1, s->waiting, (size_t)s->n_waiting * sizeof *s->waiting);
    s->waiting[0] = q;
    s->n_waiting++;
}

void llmr_sched_finish(llmr_sched *s, llmr_sched_seq *q)
{
    for (uint32_t i = 0; i < s->n_running; i++)
        if (s->running[i] == q) {
            remove_at(s->running, &s->n_running, i);
            break;
        }
    for (uint32_t i = 0; i < s->n_waiting; i++)
        if (s->waiting[i] == q) {
            remove_at(s->waiting, &s->n_waiting, i);
            break;
        }
    give_all_blocks(s, q);
    seq_free(q);
}

/* ---- a step --------------------------------------------------------------------------- */

static bool add_item(llmr_sched *s, llmr_sched_step *step, llmr_sched_seq *q, uint32_t count)
{
    bool sample = q->computed + count == q->len;
    /* room for the token the sample appends, so that commit cannot fail */
    if (!grow((void **)&step->items, &step->cap, step->n_items + 1, sizeof *step->items) ||
        (sample && !grow((void **)&q->tokens, &q->token_cap, q->len + 1, sizeof *q->tokens)))
        return false;
    llmr_sched_item *it = &step->items[step->n_items++];
    it->seq = q;
    it->start = q->computed;
    it->count = count;
    it->sample = sample;
    step->n_tokens += count;
    q->planned_step = s->step_no;
    return true;
}

bool llmr_sched_plan(llmr_sched *s, llmr_sched_step *step)
{
    step->n_items = step->n_tokens = step->n_decode = step->n_preempted = 0;
    s->step_no++;
    uint32_t budget = s->p.token_budget;

    /* 1. One token for each running sequence that decodes, oldest first; when the blocks
     *    run out, the youngest running sequence not in this step yet is preempted. */
    for (uint32_t i = 0; i < s->n_running && budget && step->n_items < s->p.max_running;) {
        llmr_sched_seq *q = s->running[i];
        if (q->len - q->computed != 1) {
            i++;
            continue;
        }
        leave_window(s, q, q->computed);
        bool preempted_self = false;
        while (!take_blocks(s, q, q->computed + 1)) {
            uint32_t victim = s->n_running;
            while (victim > 0 && s->running[victim - 1]->planned_step == s->step_no)
                victim--;
            if (victim == 0) /* every other sequence is in this step already */
                return true;
            victim--;
            preempt(s, victim);
            step->n_preempted++;
            if (victim == i) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self)
            continue; /* running[i] is now the next sequence */
        if (!add_item(s, step, q, 1))
            return false;
        step->n_decode++;
        budget--;
        i++;
    }

    /* 2. The next chunk of each running sequence still reading its prompt: as much as
     *    the budget and the free blocks allow, no preemption. */
    for (uint32_t i = 0; i < s->n_running && budget && step->n_items < s->p.max_running; i++) {
        llmr_sched_seq *q = s->running[i];
        if (q->planned_step == s->step_no || q->len - q->computed < 2)
            continue;
        leave_window(s, q, q->computed);
        uint32_t end = min_u32((uint64_t)q->computed + budget, q->len);
        end = min_u32(end, reachable(s, q));
        if (end <= q->computed || !take_blocks(s, q, end))
            continue;
        if (!add_item(s, step, q, end - q->computed))
            return false;
        budget -= end - q->computed;
    }

    /* 3. Waiting sequences, first come first served, while their first chunk has blocks
     *    (a sequence that cannot start keeps the ones behind it waiting too). */
    while (s->n_waiting && budget && step->n_items < s->p.max_running &&
           s->n_running < s->p.max_running) {
        llmr_sched_seq *q = s->waiting[0];
        uint32_t end = min_u32((uint64_t)q->computed + budget, q->len);
        end = min_u32(end, reachable(s, q));
        if (end <= q->computed || !take_blocks(s, q, end))
            break;
        remove_at(s->waiting, &s->n_waiting, 0);
        q->state = LLMR_SCHED_RUNNING;
        s->running[s->n_running++] = q;
        if (!add_item(s, step, q, end - q->computed))
            return false;
        budget -= end - q->computed;
    }
    return true;
}

void llmr_sched_commit(llmr_sched *s, const llmr_sched_step *step, const int32_t *picked)
{
    for (uint32_t i = 0; i < step->n_items; i++) {
        const llmr_sched_item *it = &step->items[i];
        llmr_sched_seq *q = it->seq;
        q->computed = it->start + it->count;
        if (it->sample && q->len < q->max_len)
            q->tokens[q->len++] = picked[i];
        leave_window(s, q, q->computed);
    }
}

void llmr_sched_step_free(llmr_sched_step *step)
{
    free(step->items);
    memset(step, 0, sizeof *step);
}
