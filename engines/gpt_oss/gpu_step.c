/* A step of the GPU path's step loop (step_loop.c): the scheduler's items become
 * gpt_cuda items (tokens, positions, block tables, how each is sampled) and run through
 * the model in one forward pass.  A request whose sampling the GPU's pick does
 * (temperature, top_k, top_p, min_p, the penalties over the tokens its CPU sampler has
 * seen, the logprob and top_logprobs) is picked there; its row of logits comes to the
 * host for the CPU sampler (sampler.h) only with the load option "host_sampler", or in a
 * step whose seen tokens would pass GPT_CUDA_PEN_CAP; a logits() request gets the rows
 * of its prompt.  See
 * gpt_engine.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_engine.h"

static bool room(gpt_gpu_items *buf, uint32_t n)
{
    if (n <= buf->cap)
        return true;
    gpt_cuda_item *grown = realloc(buf->items, n * sizeof *grown);
    if (!grown)
        return false;
    buf->items = grown;
    buf->cap = n;
    return true;
}

/* Room for n seen tokens in r's penalty buffers. */
static bool pen_room(request *r, uint32_t n)
{
    if (n <= r->pen_cap)
        return true;
    uint32_t cap = n < 1024 ? 1024 : n + n / 2;
    int32_t *ids = realloc(r->pen_ids, (size_t)cap * sizeof *ids);
    if (ids)
        r->pen_ids = ids;
    uint32_t *counts = ids ? realloc(r->pen_counts, (size_t)cap * sizeof *counts) : NULL;
    if (!counts)
        return false;
    r->pen_counts = counts;
    r->pen_cap = cap;
    return true;
}

/* Item i of the step as the GPU takes it; pen_used: the penalty entries of the step's
 * items so far. */
static void describe_item(const llmr_sched_item *si, gpt_cuda_item *it, uint32_t vocab,
                          uint32_t *pen_used)
{
    const llmr_sched_seq *q = si->seq;
    request *r = q->user;
    memset(it, 0, sizeof *it);
    it->tokens = q->tokens + si->start;
    it->start = si->start;
    it->count = si->count;
    it->full = q->full;
    it->n_full = q->n_full;
    it->ring = q->ring;
    it->n_ring = q->n_ring;
    it->picked = -1;
    if (r->logits_out) { /* the rows of the prompt from logits_first on */
        uint32_t end = si->start + si->count;
        if (end > r->logits_first) {
            uint32_t from = r->logits_first > si->start ? r->logits_first : si->start;
            it->logits = r->logits_out + (size_t)(from - r->logits_first) * vocab;
            it->logits_from = from - si->start;
        }
        return;
    }
    if (!si->sample)
        return;
    uint32_t seen = r->gpu_pick ? gpt_sampler_seen(r->sampler, NULL, NULL, 0) : 0;
    if (r->gpu_pick && seen > GPT_CUDA_PEN_CAP - *pen_used) /* or no room: the CPU's */
        seen = UINT32_MAX;
    else if (seen && pen_room(r, seen))
        *pen_used += gpt_sampler_seen(r->sampler, r->pen_ids, r->pen_counts, seen);
    else if (seen)
        seen = UINT32_MAX;
    if (r->gpu_pick && seen != UINT32_MAX) {
        it->pick = true;
        it->pen_ids = r->pen_ids;
        it->pen_counts = r->pen_counts;
        it->n_pen = seen;
        it->repetition = r->repetition;
        it->presence = r->presence;
        it->frequency = r->frequency;
        it->top_logprobs = r->top_logprobs;
        it->temperature = r->temperature;
        it->seed = r->seed;
        it->draw = q->len - q->prompt_len; /* the same after a preemption */
        it->top_k = r->top_k;
        it->top_p = r->top_p;
        it->min_p = r->min_p;
    } else {
        it->logits = r->row;
        it->logits_from = si->count - 1;
    }
}

llmr_status gpt_gpu_step_run(llmr_engine_model *e, gpt_gpu_items *buf, const llmr_sched_step *step,
                             int32_t *picked, char err[GPT_ERR_MAX])
{
    if (!room(buf, step->n_items)) {
        snprintf(err, GPT_ERR_MAX, "out of memory for the step");
        return LLMR_OOM_RAM;
    }
    uint32_t pen_used = 0;
    for (uint32_t i = 0; i < step->n_items; i++)
        describe_item(&step->items[i], &buf->items[i], e->m.cfg.vocab, &pen_used);
    llmr_status st = gpt_cuda_step(e->gpu, buf->items, step->n_items, err);
    if (st != LLMR_OK)
        return st;
    for (uint32_t i = 0; i < step->n_items; i++) {
        const llmr_sched_item *si = &step->items[i];
        request *r = si->seq->user;
        picked[i] = -1;
        if (!si->sample || r->logits_out)
            continue;
        memset(&r->last, 0, sizeof r->last);
        if (buf->items[i].pick) {
            const gpt_cuda_item *it = &buf->items[i];
            r->last.id = it->picked;
            r->last.logprob = r->want_logprob || r->top_logprobs ? it->logprob : 0.0f;
            r->last.top_count = it->top_count;
            memcpy(r->last.top_ids, it->top_ids, it->top_count * sizeof *it->top_ids);
            memcpy(r->last.top_logprobs, it->top_logprobs_out, it->top_count * sizeof *it->top_logprobs_out);
            gpt_sampler_accept(r->sampler, r->last.id); /* for its penalties */
        } else {
            gpt_sampler_sample(r->sampler, r->row, &r->last);
        }
        picked[i] = r->last.id;
    }
    return LLMR_OK;
}

void gpt_gpu_items_free(gpt_gpu_items *buf)
{
    free(buf->items);
    memset(buf, 0, sizeof *buf);
}
