/* Shared between the parts of ModelStorage (model_storage.c, model_safetensors.c,
 * model_gguf.c); not for use elsewhere. */
#ifndef LLMR_STORAGE_MODEL_INTERNAL_H
#define LLMR_STORAGE_MODEL_INTERNAL_H

#include "storage/dir_listing.h"
#include "storage/model_storage.h"

/* Records a file of the model in the descriptor.  False when out of memory. */
bool llmr_model_add_file(llmr_model *m, const char *name, uint64_t size, const char *role);

/* The listing's entry for `name` when it is a usable regular file; otherwise adds a
 * problem that says what is wrong with it and why the model needs it, and returns
 * NULL.  if_missing: the problem's code when the file is absent or a dangling link
 * (NOT_FOUND for a file the layout asks for; MODEL_CORRUPT for a shard the index
 * names, whose absence leaves the snapshot incomplete). */
const llmr_dir_entry *llmr_model_need_file(const llmr_dir_listing *listing, const char *name,
                                           llmr_status if_missing,
                                           const char *why_needed, llmr_problems *problems);

/* Reports a weight file whose name cannot be used (invalid UTF-8, control
 * characters), escaped for display. */
void llmr_model_bad_name(const char *name, llmr_problems *problems);

/* Appends a printf-formatted string to a JSON array of strings. */
void llmr_json_append_text(json_t *array, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The two format paths.  Each adds problems; the caller decides success. */
void llmr_model_open_safetensors(llmr_model *m, const llmr_dir_listing *listing,
                                 const llmr_model_options *options, llmr_problems *problems);
void llmr_model_open_gguf(llmr_model *m, const llmr_dir_listing *listing,
                          const llmr_model_options *options, llmr_problems *problems);

#endif
