/* The check of a synced model's files before each load: that they are still what the
 * sync verified.  The record is the sync's marker (DATA_DIR/models/NAME/
 * .llmr-manifest.json, model_sync.h): each file's size, and its sampled digest
 * (common/file_sample.h) where the marker has one (every file past 64 MiB: the router's
 * for a local directory, the node's own, taken after the full SHA-256 matched, for a
 * download), else its SHA-256 (the small files, hashed whole).  So a load reads about
 * 1 MiB of each weight file, and a file changed on disk since (replaced, cut short,
 * rewritten where a piece lies) fails the load by name instead of loading quietly. */
#ifndef LLMR_NODE_MODEL_CHECK_H
#define LLMR_NODE_MODEL_CHECK_H

#include "common/strbuf.h"
#include "llmr/status.h"

/* LLMR_OK: every file the marker lists is as recorded, or there is no marker (a
 * directory put there by hand: nothing to check against).  MODEL_CORRUPT: why names the
 * first file that is not, and what to do. */
llmr_status llmr_model_files_check(const char *model_dir, llmr_strbuf *why);

#endif
