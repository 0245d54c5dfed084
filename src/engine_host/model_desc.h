/* The model an engine receives (llmr_engine_model_desc in llmr/engine.h), built in
 * the worker from the model's files: ModelStorage opens and checks them (mapping the
 * safetensors shards), and the descriptor points into what it holds.  DirectML
 * models, which ModelStorage does not read, get a descriptor of their files only. */
#ifndef LLMR_ENGINE_HOST_MODEL_DESC_H
#define LLMR_ENGINE_HOST_MODEL_DESC_H

#include "common/strbuf.h"
#include "llmr/engine.h"
#include "storage/model_storage.h"

typedef struct llmr_model_desc_owner {
    llmr_engine_model_desc desc;
    llmr_model *model;       /* NULL for DirectML */
    char *name, *dir, *format, *runtime, *architecture, *primary_file;
    char *config_json, *checked_config_json;
    const char **files;
    uint64_t *file_sizes;
    llmr_engine_tensor *tensors;
} llmr_model_desc_owner;

/* Opens the model in `dir` as `format` ("safetensors", "gguf", "directml"; gguf_file
 * picks one .gguf or NULL) and fills *out.  On failure err lists the problems
 * (MODEL_CORRUPT, NOT_FOUND, UNSUPPORTED, ...) and *out needs no freeing. */
llmr_status llmr_model_desc_open(const char *name, const char *dir, const char *format,
                                 const char *gguf_file, llmr_model_desc_owner *out,
                                 llmr_strbuf *err);
void llmr_model_desc_close(llmr_model_desc_owner *o);

/* The names DirectML runtimes give their model files. */
extern const char *const llmr_directml_model_files[];

#endif
