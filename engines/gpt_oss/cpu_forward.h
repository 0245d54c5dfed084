/* The gpt-oss forward pass on the CPU, in fp32: token embedding, then per layer
 * RMSNorm, attention (q/k/v with biases, RoPE/YaRN, grouped KV heads, causal with a
 * 128-token window on sliding layers, a learned sink per head) and its output
 * projection, residual, RMSNorm, the router's top-k and the MXFP4 experts with the
 * clamped SwiGLU, residual; then the final norm and lm_head.
 *
 * A gpt_state is one request's KV cache: full layers keep every position (growing by
 * doubling), sliding layers a ring of the window plus one prefill chunk.  Prompts run in chunks of
 * GPT_CHUNK tokens. */
#ifndef GPT_OSS_CPU_FORWARD_H
#define GPT_OSS_CPU_FORWARD_H

#include "model.h"

#define GPT_CHUNK 128u

typedef struct gpt_kv_layer {
    float *k, *v;  /* [kv_heads][cap][head_dim] */
    uint32_t cap;  /* positions held */
    bool ring;     /* slot = position % cap (sliding layers) */
} gpt_kv_layer;

typedef struct gpt_state {
    const gpt_model *m;
    gpt_kv_layer *kv;
    uint32_t pos;        /* tokens in the cache */
    uint32_t max_tokens; /* positions the cache can take */
    const llmr_host_api *host; /* where the cache's memory comes from; NULL: malloc */
    uint64_t bytes;      /* held by the cache */
} gpt_state;

/* A cache for up to max_tokens positions, with room for `initial` at first (full
 * layers grow as tokens come).  OOM_RAM when the memory is not there. */
llmr_status gpt_state_init(gpt_state *s, const gpt_model *m, uint32_t max_tokens,
                           uint32_t initial, const llmr_host_api *host);
void gpt_state_free(gpt_state *s);

/* Runs ids[0..n) at positions s->pos.. and extends the cache.  logits (may be NULL)
 * receives the logits of the last n_logits of them (n_logits <= n), one row of vocab
 * floats each.  OOM_RAM for the cache or scratch; UNSUPPORTED past max_tokens or for an
 * id outside the vocabulary. */
llmr_status gpt_forward(gpt_state *s, const int32_t *ids, uint32_t n, float *logits,
                        uint32_t n_logits);

#endif
