/* Which engine runs a model: decided from the registered format and, for
 * safetensors, from config.json's model_type / architectures.  Never from a private
 * metadata file. */
#ifndef LLMR_MODELS_RUNTIME_H
#define LLMR_MODELS_RUNTIME_H

#include <jansson.h>

#include "common/strbuf.h"

typedef enum llmr_runtime {
    LLMR_RUNTIME_NONE,       /* no engine runs it; the descriptor says why */
    LLMR_RUNTIME_GPT_OSS,    /* gpt-oss engine (CUDA, CPU reference) */
    LLMR_RUNTIME_NEMOTRON_H, /* nemotron engine: load and validate, no generation yet */
    LLMR_RUNTIME_LLAMA_CPP,  /* llama.cpp, for GGUF */
    LLMR_RUNTIME_LOOPBACK    /* the loopback test model (models/loopback_config.h) */
} llmr_runtime;

/* "gpt_oss", "nemotron_h", "llama_cpp", "loopback"; NULL for NONE. */
const char *llmr_runtime_name(llmr_runtime runtime);

/* What llmr cannot do yet with models of a runtime, as a sentence for an operator
 * ("Nemotron-H ... does not generate text ..."), or NULL when nothing is missing.  Said
 * wherever such a model is described or asked to generate. */
const char *llmr_runtime_limitation(const char *runtime_name);

/* The runtime for a safetensors model's config.json.  model_type wins over
 * architectures; both absent or of the wrong type is LLMR_RUNTIME_NONE with the
 * reason in `why`, as is an architecture no engine implements. */
llmr_runtime llmr_runtime_for_config(const json_t *config, llmr_strbuf *why);

#endif
