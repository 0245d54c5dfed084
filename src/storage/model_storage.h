/* ModelStorage: opens a model directory, decides its format, checks every file the
 * model needs, and builds the ModelDescriptor (format, runtime, architecture,
 * primary file, files with sizes, total bytes, the config fields engines need).
 *
 * All problems are collected in one pass, each naming its file: missing
 * config.json/tokenizer.json, shards the index names that are absent, several
 * .safetensors without an index, a shard whose header lies, a tensor the config
 * needs that the files lack or hold with the wrong dtype or shape, an unknown dtype,
 * a directory that holds both formats when none was stated.  Only headers are read.
 *
 * A model whose files are sound but that no engine runs opens successfully with
 * runtime LLMR_RUNTIME_NONE and `unsupported_reason` set: it is listed as not ready,
 * never dropped.  Nothing private is read or written: the descriptor comes from the
 * files themselves. */
#ifndef LLMR_STORAGE_MODEL_STORAGE_H
#define LLMR_STORAGE_MODEL_STORAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strmap.h"
#include "models/gpt_oss_config.h"
#include "models/loopback_config.h"
#include "models/nemotron_h_config.h"
#include "models/runtime.h"
#include "storage/gguf.h"
#include "storage/safetensors.h"

#define LLMR_CONFIG_JSON_MAX_BYTES (16u << 20)

typedef enum llmr_model_format {
    LLMR_FORMAT_AUTO, /* decide from the files; both formats present is an error */
    LLMR_FORMAT_SAFETENSORS,
    LLMR_FORMAT_GGUF
} llmr_model_format;

/* "safetensors" / "gguf"; false for anything else ("auto" is not a registered format). */
bool llmr_model_format_parse(const char *text, llmr_model_format *out);
const char *llmr_model_format_name(llmr_model_format format);

typedef struct llmr_model_options {
    llmr_model_format format; /* what was registered; AUTO to decide */
    const char *gguf_file;    /* which .gguf when the directory holds several; NULL */
    bool map_weights;         /* mmap the safetensors shards (the load path) */
} llmr_model_options;

void llmr_model_options_default(llmr_model_options *options);

typedef struct llmr_model_file {
    char *name;       /* relative to the model directory */
    uint64_t size;
    const char *role; /* "config", "tokenizer", "index", "weights", ... (static) */
} llmr_model_file;

typedef struct llmr_model_tensor {
    const llmr_st_tensor *info; /* owned by shards[shard].header */
    size_t shard;
} llmr_model_tensor;

typedef struct llmr_model {
    /* The descriptor. */
    char *dir;
    llmr_model_format format;
    llmr_runtime runtime;
    char *unsupported_reason; /* why no engine runs it (runtime NONE) */
    char *model_type;         /* config.json model_type, or the GGUF architecture */
    char *architecture;       /* config.json architectures[0], or the GGUF architecture */
    char *primary_file;       /* the index, the single shard, or the (first) .gguf */
    llmr_model_file *files;
    size_t file_count;
    uint64_t total_bytes;
    json_t *engine_config;    /* the checked fields the engine uses */
    json_t *notes;            /* array of strings: facts an operator should know */
    json_t *warnings;         /* array of strings: oddities that do not stop loading */

    /* safetensors */
    json_t *config;           /* config.json as read */
    llmr_st_file *shards;
    size_t shard_count;
    llmr_model_tensor *tensors;
    size_t tensor_count;
    llmr_strmap *tensor_by_name;
    bool mapped;
    llmr_gpt_oss_config gpt_oss;       /* valid when runtime is GPT_OSS */
    llmr_nemotron_h_config nemotron_h; /* valid when runtime is NEMOTRON_H */
    llmr_loopback_config loopback;     /* valid when runtime is LOOPBACK */

    /* gguf: the selected file, or every part of a split model, first part first */
    llmr_gguf_file *gguf;
    size_t gguf_count;
} llmr_model;

/* Opens and checks the model in `dir`.  On success *out is the model (close it with
 * llmr_model_close) and problems is unchanged.  On failure *out is NULL, and every
 * problem found is in `problems`; the return value is the first one's code. */
llmr_status llmr_model_open(const char *dir, const llmr_model_options *options, llmr_model **out,
                            llmr_problems *problems);
void llmr_model_close(llmr_model *model);

/* A safetensors tensor by name, or NULL. */
const llmr_model_tensor *llmr_model_tensor_find(const llmr_model *model, const char *name);
/* Its bytes in the mapping; NULL unless the model was opened with map_weights. */
const uint8_t *llmr_model_tensor_data(const llmr_model *model, const llmr_model_tensor *tensor);

/* The descriptor as JSON (what `llmr inspect` prints). */
json_t *llmr_model_descriptor_json(const llmr_model *model);

#endif
