/* Request sampling params mapped to a llama.cpp sampler chain, and log-probabilities
 * from the raw logits.  See lc_engine.h; docs/llama-cpp.md lists the mapping.
 *
 * The chain, in llama.cpp's usual order:
 *   penalties (repetition, frequency, presence: over the prompt and the generated
 *     tokens, the whole context, as llama.cpp counts them)
 *   greedy when temperature < 1e-5 (ties to the lowest id), else
 *   temperature, top_k, top_p, min_p, then one seeded draw. */
#include <math.h>
#include <stdlib.h>

#include "lc_engine.h"

static bool valid(const llmr_engine_request_params *p)
{
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature)) {
        lc_set_error("temperature must be a finite number >= 0");
        return false;
    }
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        lc_set_error("top_p must be in (0, 1]");
        return false;
    }
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        lc_set_error("min_p must be in [0, 1]");
        return false;
    }
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty)) {
        lc_set_error("repetition_penalty must be a finite number > 0");
        return false;
    }
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f) ||
        !(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f)) {
        lc_set_error("presence_penalty and frequency_penalty must be in [-2, 2]");
        return false;
    }
    if (p->top_logprobs > LC_MAX_TOP_LOGPROBS) {
        lc_set_error("top_logprobs must be at most %d", LC_MAX_TOP_LOGPROBS);
        return false;
    }
    return true;
}

struct llama_sampler *lc_sampler_new(const llmr_engine_request_params *p, int32_t vocab_size,
                                     uint32_t context)
{
    if (!valid(p))
        return NULL;
    struct llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    struct llama_sampler *chain = llama_sampler_chain_init(cp);
    if (!chain) {
        lc_set_error("out of memory for a sampler");
        return NULL;
    }
    bool penalties = p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
                     p->frequency_penalty != 0.0f;
    if (penalties) {
        struct llama_sampler *pen = llama_sampler_init_penalties(
            vocab_size, (int32_t)context /* the whole context */, p->repetition_penalty, p->frequency_penalty,
            p->presence_penalty);
        /* The prompt counts for the penalties, as llama.cpp's own tools feed it. */
        for (uint32_t i = 0; i < p->prompt_len; i++)
            llama_sampler_accept(pen, p->prompt[i]);
        llama_sampler_chain_add(chain, pen);
    }
    if (p->temperature < 1e-5f) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        return chain;
    }
    llama_sampler_chain_add(chain, llama_sampler_init_temp(p->temperature));
    if (p->top_k > 0 && p->top_k < (uint32_t)vocab_size)
        llama_sampler_chain_add(chain, llama_sampler_init_top_k((int32_t)p->top_k));
    if (p->top_p < 1.0f)
        llama_sampler_chain_add(chain, llama_sampler_init_top_p(p->top_p, 1));
    if (p->min_p > 0.0f)
        llama_sampler_chain_add(chain, llama_sampler_init_min_p(p->min_p, 1));
    /* llama.cpp takes a 32-bit seed and reads 0xFFFFFFFF as "random": fold the 64 bits
     * and keep clear of that one value, so a seed always repeats. */
    uint32_t seed = (uint32_t)(p->seed ^ (p->seed >> 32));
    if (seed == LLAMA_DEFAULT_SEED)
        seed = 0x9E3779B9u;
    llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    return chain;
}

void lc_logprobs(const float *logits, int32_t vocab_size, int32_t id, uint32_t want,
                 float *logprob, int32_t *top_ids, float *top_logprobs, uint32_t *top_count)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < vocab_size; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < vocab_size; i++)
        sum += exp((double)logits[i] - (double)max);
    double lse = (double)max + log(sum);
    *logprob = (float)((double)logits[id] - lse);
    /* the top `want`: insertion into a short sorted list, ties to the lower id */
    uint32_t n = 0;
    for (int32_t i = 0; i < vocab_size && want; i++) {
        float l = logits[i];
        if (n == want && !(l > logits[top_ids[n - 1]]))
            continue;
        uint32_t at = n < want ? n++ : n - 1;
        while (at > 0 && l > logits[top_ids[at - 1]]) {
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_ids[at] = i;
    }
    for (uint32_t k = 0; k < n; k++)
        top_logprobs[k] = (float)((double)logits[top_ids[k]] - lse);
    *top_count = n;
}
