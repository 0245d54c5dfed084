/* The full SHA-256 of synced models' large files, in the background: the check before
 * each load (model_check.h) reads only pieces of a file past 64 MiB, so one thread
 * hashes such files whole after each sync and at the node's start, and a model whose
 * file no longer matches is failed loudly (logged as an error, unloaded, and its sync's
 * record marked so that every later load is refused by name until it is pulled again).
 *
 * The reference is the manifest's sha256 (a download, or a file the node took from the
 * Hugging Face cache); a file used in place from a local directory has only the router's
 * sampled digest, so its first full hash is recorded in the sync's record
 * ("node_sha256") and the later ones compare with it: a change made after that is seen,
 * one made between registration and the link, between two sampled pieces, is not. */
#ifndef LLMR_NODE_MODEL_HASHER_H
#define LLMR_NODE_MODEL_HASHER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_model_hasher llmr_model_hasher;

/* Called on the hasher's thread when a model's file does not match. */
typedef void (*llmr_hasher_fail_fn)(void *user, const char *name, const char *why);

/* One check of a model directory (the thread's work; tests call it).  LLMR_OK (also when
 * there is no record, or stop was set); MODEL_CORRUPT with why, the record then marked. */
llmr_status llmr_model_hash_check(const char *model_dir, atomic_bool *stop, llmr_strbuf *why);

/* Starts the thread; NULL when it cannot start (the checks then do not run). */
llmr_model_hasher *llmr_model_hasher_start(llmr_hasher_fail_fn on_fail, void *user);
/* Queues a model's directory (again: once is enough while it waits). */
void llmr_model_hasher_add(llmr_model_hasher *hz, const char *name, const char *model_dir);
/* Stops the thread (a hash in progress ends at its next 64 MiB) and frees. */
void llmr_model_hasher_stop(llmr_model_hasher *hz);

#endif
