/* The top level of a model directory: which files are there, their sizes, and
 * which are unusable (a symbolic link whose target is gone, as a half-fetched
 * Hugging Face cache leaves behind; a name that is not valid UTF-8).  Links are
 * followed, since Hugging Face snapshots are links into a blob store.
 * Subdirectories (original/, metal/) are not part of a model's main files. */
#ifndef LLMR_STORAGE_DIR_LISTING_H
#define LLMR_STORAGE_DIR_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"

#define LLMR_DIR_MAX_ENTRIES 100000u

typedef enum llmr_dir_entry_kind {
    LLMR_DIR_FILE,        /* a regular file, or a link to one */
    LLMR_DIR_BROKEN_LINK, /* a link whose target does not exist */
    LLMR_DIR_OTHER        /* a directory, a device... */
} llmr_dir_entry_kind;

typedef struct llmr_dir_entry {
    char *name;
    uint64_t size;
    llmr_dir_entry_kind kind;
    bool name_ok; /* passes llmr_file_name_is_safe */
} llmr_dir_entry;

typedef struct llmr_dir_listing {
    llmr_dir_entry *entries; /* sorted by name (bytewise) */
    size_t count;
} llmr_dir_listing;

/* Lists `dir`.  NOT_FOUND / IO / LIMIT_EXCEEDED problems name the directory. */
llmr_status llmr_dir_list(const char *dir, llmr_dir_listing *out, llmr_problems *problems);
void llmr_dir_listing_free(llmr_dir_listing *listing);
/* The entry of that exact name, or NULL. */
const llmr_dir_entry *llmr_dir_find(const llmr_dir_listing *listing, const char *name);

#endif
