/* The llama.cpp engine's logits(): a sequence's logits without sampling, on a context
 * of its own made for the call (so it runs beside requests and takes none of their
 * contexts).  See lc_engine.h; `llmr logits DIR` uses it. */
#include <string.h>

#include "lc_engine.h"

llmr_status lc_logits(llmr_engine_model *m, const int32_t *ids, uint32_t n, uint32_t first,
                      float *out)
{
    if (!ids || n == 0 || first >= n || n > m->context) {
        lc_set_error("logits of %u tokens from position %u: this model holds 1 to %u tokens",
                     n, first, m->context);
        return LLMR_UNSUPPORTED;
    }
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab_size) {
            lc_set_error("token %u is %d, outside the vocabulary of %d", i, ids[i], m->vocab_size);
            return LLMR_UNSUPPORTED;
        }
    struct llama_context_params cp = lc_context_params(m, n < 16 ? 16 : n, n);
    lc_llama_error_clear();
    struct llama_context *ctx = llama_init_from_model(m->model, cp);
    if (!ctx) {
        lc_set_error("cannot create a context of %u tokens: %s", n, lc_llama_error());
        return m->gpu >= 0 ? LLMR_OOM_VRAM : LLMR_OOM_RAM;
    }
    struct llama_batch b = llama_batch_init((int32_t)n, 0, 1);
    for (uint32_t i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = (llama_pos)i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i >= first;
    }
    b.n_tokens = (int32_t)n;
    llmr_status st = LLMR_OK;
    int32_t rc = llama_decode(ctx, b);
    if (rc != 0) {
        lc_set_error("llama_decode failed (%d): %s", rc, lc_llama_error());
        st = LLMR_INTERNAL;
    }
    for (uint32_t i = first; st == LLMR_OK && i < n; i++) {
        const float *row = llama_get_logits_ith(ctx, (int32_t)i);
        if (!row) {
            lc_set_error("llama.cpp has no logits for position %u", i);
            st = LLMR_INTERNAL;
            break;
        }
        memcpy(out + (size_t)(i - first) * (size_t)m->vocab_size, row,
               (size_t)m->vocab_size * sizeof *row);
    }
    llama_batch_free(b);
    llama_free(ctx);
    return st;
}
