/* The token sampler of the gpt-oss engine: penalties, log-probabilities, temperature,
 * top-k, top-p, min-p and one seeded draw per generated token, on the CPU over one
 * row of logits.  It follows vLLM's sampler where llmr's ABI says nothing; each such
 * choice is marked "vLLM" or "choice" below and in sampler.c.
 *
 * One step, in this order:
 *   1. penalties on the raw logits (vLLM's order): the repetition penalty over the
 *      prompt and the generated tokens, then the frequency penalty, then the presence
 *      penalty over the generated tokens only;
 *   2. logits that are NaN become -inf and +inf becomes FLT_MAX (choice: NaN is never
 *      chosen, and several +inf logits share the mass evenly, the limit of the
 *      softmax, instead of making NaN);
 *   3. logprob and top_logprobs: the log-softmax of these penalised logits, BEFORE
 *      temperature and filtering (choice: what the model gives the text after the
 *      penalties, so a reported logprob does not depend on temperature, top-k,
 *      top-p or min-p; vLLM's default reports the raw logits before penalties);
 *   4. greedy (temperature < 1e-5, vLLM's _SAMPLING_EPS, which includes 0): the
 *      argmax, ties to the lowest id; top_k, top_p, min_p and the random stream are
 *      not used;
 *   5. otherwise temperature (logits / temperature), then top_k, then top_p over what
 *      top_k kept (renormalised), then min_p over what top_p kept (relative to the
 *      most likely token, which both keep), then one draw from what is left,
 *      renormalised, with the request's random stream (xoshiro256** seeded through
 *      splitmix64 from `seed`; exactly one 64-bit number per non-greedy step).
 * Ties in the order of tokens (equal logits) go to the lower id everywhere: greedy,
 * top_k, top_p and top_logprobs.
 *
 * When no logit is finite after step 2 (every one -inf or NaN) the step chooses id 0
 * with logprob -inf and no top_logprobs (choice), and still records id 0 for the
 * penalties.  Otherwise the chosen token's logprob is finite.
 *
 * Cost per step with a vocabulary of V: the penalties touch only the distinct tokens
 * seen so far; greedy is one pass over V (the max, by blocks of 256); sampling adds a
 * pass of an inline, vectorisable exp over V, summed in double; top_k takes a bounded
 * heap that skips every block whose max cannot enter it; top_p gathers only the tokens
 * whose weight can matter and finds the nucleus among them with a quickselect weighted
 * by mass; there is never a sort of the vocabulary.  Logprobs add one exp pass (none
 * at temperature 1, where the draw's weights serve), top_logprobs a heap of 20.
 * For V = 201088 at -O3 (SSE2 code, one core of a 2.3 GHz Xeon): about 0.1 ms a step
 * greedy and 0.5 ms with top_p 0.9.
 *
 * A sampler belongs to one request and is not thread-safe; samplers of different
 * requests are independent.  It uses only the C library and libm. */
#ifndef GPT_OSS_SAMPLER_H
#define GPT_OSS_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_SAMPLER_MAX_TOP_LOGPROBS 20

typedef struct gpt_sampler_params {
    float temperature;        /* 0: greedy (argmax, ties to the lowest id); below 1e-5 too (vLLM) */
    float top_p;              /* 1: off; keep the smallest set of most likely tokens whose
                                 probability sums to >= top_p */
    uint32_t top_k;           /* 0: off (as is a top_k >= the vocabulary) */
    float min_p;              /* 0: off; drop tokens whose probability is below min_p * the
                                 top probability */
    float repetition_penalty; /* 1: off; over the prompt and the generated tokens: a seen
                                 token's logit is divided by it when positive, multiplied
                                 when negative (as Hugging Face and vLLM) */
    float presence_penalty;   /* 0: off; over generated tokens: subtract it once from every
                                 token generated at least once; in [-2, 2] (vLLM) */
    float frequency_penalty;  /* 0: off; over generated tokens: subtract it times the
                                 token's count; in [-2, 2] (vLLM) */
    uint64_t seed;            /* the request's random stream: same seed, same logits -> same
                                 choices */
    uint32_t top_logprobs;    /* 0..20 alternatives to report */
    bool logprobs;            /* fill gpt_sample.logprob */
} gpt_sampler_params;

typedef struct gpt_sampler gpt_sampler;

/* vocab: logits per step (1 .. INT32_MAX).  prompt: the prompt ids (for the repetition
 * penalty; ids outside [0, vocab) are ignored; NULL counts as empty).  NULL when out of
 * memory or when a parameter is out of range (temperature < 0, top_p not in (0,1],
 * min_p not in [0,1], repetition_penalty <= 0, presence or frequency penalty not in
 * [-2,2], top_logprobs > 20, any of them not finite, vocab 0 or over INT32_MAX):
 * *why (may be NULL) then points to a static sentence. */
gpt_sampler *gpt_sampler_create(const gpt_sampler_params *p, uint32_t vocab,
                                const int32_t *prompt, uint32_t prompt_len, const char **why);
void gpt_sampler_free(gpt_sampler *s);

typedef struct gpt_sample {
    int32_t id;
    float logprob;     /* log-probability of id under the penalised logits (step 3 above);
                          0 when neither logprobs nor top_logprobs was asked for */
    uint32_t top_count; /* min(top_logprobs, tokens with a finite logprob) */
    int32_t top_ids[GPT_SAMPLER_MAX_TOP_LOGPROBS]; /* most likely first, ties by lower id */
    float top_logprobs[GPT_SAMPLER_MAX_TOP_LOGPROBS];
} gpt_sample;

/* Chooses the next token from logits (vocab floats, which the sampler may overwrite)
 * and records it for the penalties.  Never fails and never allocates. */
void gpt_sampler_sample(gpt_sampler *s, float *logits, gpt_sample *out);

/* For a sampler elsewhere (the GPU's pick) that applies these penalties: whether any is
 * on; the tokens seen so far, each once (the prompt's with count 0 when the repetition
 * penalty is on, and every generated one with how often it was generated) into ids and
 * counts, at most cap of them: returns how many there are; and the record of a token
 * picked elsewhere (what gpt_sampler_sample does for its own). */
bool gpt_sampler_penalizes(const gpt_sampler *s);
uint32_t gpt_sampler_seen(const gpt_sampler *s, int32_t *ids, uint32_t *counts, uint32_t cap);
void gpt_sampler_accept(gpt_sampler *s, int32_t id);

#ifdef __cplusplus
}
#endif

#endif
