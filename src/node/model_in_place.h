/* Files of a model registered from a local directory, used where they are instead of
 * copied through the router: when the node runs on the machine that holds the
 * directory (under `llmr serve`, or a node given --local-dirs), model_sync.c asks here
 * for each file of the manifest before it fetches anything.
 *
 * A file is used in place when its real path (links resolved, as a Hugging Face cache
 * snapshot's are) lies under one of the operator's allowed roots, it is a regular file
 * of the manifest's size, and its digest matches: the sampled digest
 * (common/file_sample.h) for a large file, the SHA-256 for a small one.  It then becomes
 * a hard link in the node's store: no byte copied, and `llmr rm` removes the link, never
 * the user's file.  Where a hard link cannot be made (another filesystem, a file of
 * another user), the file is fetched as any other. */
#ifndef LLMR_NODE_MODEL_IN_PLACE_H
#define LLMR_NODE_MODEL_IN_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* Whether path (resolved) is one of the comma-separated roots or inside one (whole path
 * components: "/data" does not hold "/database").  NULL or "" roots allow nothing. */
bool llmr_in_place_allowed(const char *path, const char *roots);

typedef struct llmr_in_place_file {
    const char *source;   /* the file in the registered directory */
    uint64_t size;
    const char *sha256;   /* lowercase hex, or NULL */
    const char *sample;   /* the sampled digest, or NULL (one of the two is needed) */
} llmr_in_place_file;

/* Checks f and links it at dest (through tmp, a free name on dest's filesystem, then an
 * atomic rename).  LLMR_OK: done.  Else why says what did not hold, and nothing was
 * changed at dest: NOT_FOUND (no such file, or outside the roots), MODEL_CORRUPT (size or
 * digest differ), IO (cannot read or link it). */
llmr_status llmr_in_place_link(const llmr_in_place_file *f, const char *roots, const char *tmp,
                               const char *dest, llmr_strbuf *why);

#endif
