/* Writes loopback model directories (models/loopback_config.h): config.json,
 * model.safetensors with the next_token table, and a byte-level tokenizer.json whose
 * ids 0-255 are the 256 bytes, the next ids pairs of printable ASCII characters, and
 * the last id the special token "<|end|>" (or no tokenizer, for a caller that brings
 * its own), in the next_token mode or the echo_last_user mode.  Tests,
 * `llmr bench ipc` and `llmr model synth --preset loopback` (and gpt-oss-echo, through
 * models/echo_model.h) use it. */
#ifndef LLMR_MODELS_LOOPBACK_MODEL_H
#define LLMR_MODELS_LOOPBACK_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"
#include "models/loopback_config.h"

#define LLMR_LOOPBACK_END_TOKEN "<|end|>"

typedef struct llmr_loopback_model_options {
    uint32_t vocab_size;     /* at least 257 (256 bytes + "<|end|>"); default 512 */
    uint32_t context_length; /* max_position_embeddings; default 4096 */
    uint64_t seed;           /* shapes the table */
    /* echo_last_user mode with these ids (NULL: next_token); its eos_token_id is
     * return_id */
    const llmr_loopback_echo *echo;
    bool no_tokenizer;       /* write no tokenizer.json (the caller brings one) */
    /* config.json says "special_tokens_in_content": true: the node reads special
     * tokens written in request text as special tokens (node/node_prompt.h) */
    bool special_tokens_in_content;
} llmr_loopback_model_options;

void llmr_loopback_model_options_default(llmr_loopback_model_options *o);

/* The table entry the writer puts at `prev`: what the engine emits after `prev`. */
int32_t llmr_loopback_model_next(const llmr_loopback_model_options *o, int32_t prev);

/* Creates `dir` (and parents) and writes the model into it. */
llmr_status llmr_loopback_model_write(const char *dir, const llmr_loopback_model_options *o,
                                      llmr_strbuf *err);

#endif
