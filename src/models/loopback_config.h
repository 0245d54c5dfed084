/* The loopback model (model_type "llmr_loopback"): a model whose "weights" are one
 * table, next_token[vocab_size] (I32), and whose engine emits next_token[previous]
 * for every step.  It exercises the whole serving path (storage, engine plugins,
 * workers, streaming, stop conditions) with exact, checkable outputs and no GPU.
 * Tests, `llmr bench ipc` and demos use it; it is not a language model. */
#ifndef LLMR_MODELS_LOOPBACK_CONFIG_H
#define LLMR_MODELS_LOOPBACK_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "common/problems.h"
#include "models/tensor_spec.h"

#define LLMR_LOOPBACK_MODEL_TYPE "llmr_loopback"
#define LLMR_LOOPBACK_ARCHITECTURE "LlmrLoopbackForCausalLM"
#define LLMR_LOOPBACK_TABLE "next_token"

typedef struct llmr_loopback_config {
    uint64_t vocab_size;
    uint64_t max_position_embeddings; /* the context length */
} llmr_loopback_config;

/* Reads vocab_size (1 to 2^31-1) and max_position_embeddings (default 4096); bad
 * fields are problems of `file`. */
llmr_status llmr_loopback_config_parse(const json_t *root, const char *file,
                                       llmr_loopback_config *out, llmr_problems *problems);
json_t *llmr_loopback_config_to_json(const llmr_loopback_config *c);
void llmr_loopback_expected_tensors(const llmr_loopback_config *c, llmr_tensor_specs *specs);

#endif
