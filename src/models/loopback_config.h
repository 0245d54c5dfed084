/* The loopback model (model_type "llmr_loopback"): a model whose "weights" are one
 * table, next_token[vocab_size] (I32), and whose engine emits next_token[previous]
 * for every step.  It exercises the whole serving path (storage, engine plugins,
 * workers, streaming, stop conditions) with exact, checkable outputs and no GPU.
 * Tests, `llmr bench ipc` and demos use it; it is not a language model.
 *
 * config.json may choose another mode in its "llmr_loopback" object:
 *   {"mode": "next_token"}  the table, as above (the default)
 *   {"mode": "echo_last_user", "user_header": [ids], "end_id": N, "return_id": N,
 *    "turn_end_ids": [ids]}
 *       the answer is the text of the prompt's last user message, token for token:
 *       the ids after the last occurrence of user_header (the tokens that open a
 *       user message's text, e.g. <|start|>user<|message|>) up to the prompt's last
 *       end_id, then return_id unless those ids already end in one of turn_end_ids;
 *       then the request stops.  Chat tests drive any output through the stack
 *       with it (`llmr model synth --preset gpt-oss-echo`). */
#ifndef LLMR_MODELS_LOOPBACK_CONFIG_H
#define LLMR_MODELS_LOOPBACK_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "models/tensor_spec.h"

#define LLMR_LOOPBACK_MODEL_TYPE "llmr_loopback"
#define LLMR_LOOPBACK_ARCHITECTURE "LlmrLoopbackForCausalLM"
#define LLMR_LOOPBACK_TABLE "next_token"
#define LLMR_LOOPBACK_MAX_IDS 8 /* ids of user_header, of turn_end_ids */

typedef enum llmr_loopback_mode {
    LLMR_LOOPBACK_NEXT_TOKEN = 0,
    LLMR_LOOPBACK_ECHO_LAST_USER,
} llmr_loopback_mode;

/* The echo mode's token ids (see above). */
typedef struct llmr_loopback_echo {
    uint32_t user_header[LLMR_LOOPBACK_MAX_IDS];
    size_t user_header_len;
    uint32_t end_id, return_id;
    uint32_t turn_end_ids[LLMR_LOOPBACK_MAX_IDS];
    size_t turn_end_len;
} llmr_loopback_echo;

typedef struct llmr_loopback_config {
    uint64_t vocab_size;
    uint64_t max_position_embeddings; /* the context length */
    llmr_loopback_mode mode;
    llmr_loopback_echo echo;          /* mode ECHO_LAST_USER */
} llmr_loopback_config;

/* Reads vocab_size (1 to 2^31-1), max_position_embeddings (default 4096) and the
 * llmr_loopback object (optional; an unknown mode, a missing or out-of-vocabulary id
 * are problems naming the field); bad fields are problems of `file`. */
llmr_status llmr_loopback_config_parse(const json_t *root, const char *file,
                                       llmr_loopback_config *out, llmr_problems *problems);
/* The checked config the engine reads, a flat object: vocab_size,
 * max_position_embeddings, and in echo mode "mode": "echo_last_user",
 * echo_user_header, echo_end_id, echo_return_id, echo_turn_end_ids. */
json_t *llmr_loopback_config_to_json(const llmr_loopback_config *c);
void llmr_loopback_expected_tensors(const llmr_loopback_config *c, llmr_tensor_specs *specs);

#endif
