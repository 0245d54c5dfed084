/* Typed reads of config.json fields, each failure a problem that names the field,
 * what was expected and what was found ("config.json: num_attention_heads must be a
 * whole number from 1 to 4096, got \"64\"").  Architecture modules use it to parse
 * their config with every bad field reported in one pass. */
#ifndef LLMR_MODELS_CONFIG_READER_H
#define LLMR_MODELS_CONFIG_READER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/problems.h"

typedef struct llmr_config_reader {
    const json_t *root;
    const char *file;     /* "config.json" */
    const char *context;  /* who needs it: "gpt_oss" */
    llmr_problems *problems;
    bool ok;              /* false once any read failed */
} llmr_config_reader;

void llmr_config_reader_init(llmr_config_reader *r, const json_t *root, const char *file,
                             const char *context, llmr_problems *problems);

/* A whole number in [min, max].  Absent or null: *out = def when !required, else a
 * problem.  Returns whether *out holds a valid value. */
bool llmr_config_u64(llmr_config_reader *r, const char *key, uint64_t min, uint64_t max,
                     bool required, uint64_t def, uint64_t *out);
/* A finite number in [min, max]. */
bool llmr_config_f64(llmr_config_reader *r, const char *key, double min, double max,
                     bool required, double def, double *out);
bool llmr_config_bool(llmr_config_reader *r, const char *key, bool required, bool def,
                      bool *out);
/* A string; NULL when absent (a problem only when required) or of another type. */
const char *llmr_config_string(llmr_config_reader *r, const char *key, bool required);

/* Reads from a nested object: `key` is looked up in `parent` and named
 * "parent_name.key" in problems. */
bool llmr_config_u64_in(llmr_config_reader *r, const json_t *parent, const char *parent_name,
                        const char *key, uint64_t min, uint64_t max, bool required,
                        uint64_t def, uint64_t *out);
bool llmr_config_f64_in(llmr_config_reader *r, const json_t *parent, const char *parent_name,
                        const char *key, double min, double max, bool required, double def,
                        double *out);

/* Adds a problem about `key` with the reader's file, and marks the reader failed. */
void llmr_config_fail(llmr_config_reader *r, llmr_status code, const char *key,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
