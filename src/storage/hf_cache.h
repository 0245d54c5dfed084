/* The Hugging Face Hub cache of this machine, read only: where a file of a model
 * repository may already be, so that a node links it instead of downloading it again
 * (node/model_sync.c).  Nothing here checks the bytes: the caller verifies them against
 * the manifest's sha256.
 *
 * The layout (the Hub's "Hub Local Cache" documentation, huggingface.co/docs/hub/
 * local-cache, written by huggingface_hub and the libraries built on it):
 *   HUB/models--ORG--NAME/refs/REVISION           the commit a branch or tag named
 *   HUB/models--ORG--NAME/snapshots/COMMIT/PATH   a link to ../../blobs/ETAG
 *   HUB/models--ORG--NAME/blobs/ETAG              the bytes: ETAG is the SHA-256 of a
 *                                                 file stored with LFS, the git blob
 *                                                 SHA-1 of any other
 * HUB is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
#ifndef LLMR_STORAGE_HF_CACHE_H
#define LLMR_STORAGE_HF_CACHE_H

/* HUB as the environment sets it (the directory need not exist), or NULL without a home
 * directory.  The caller frees it. */
char *llmr_hf_cache_dir(void);

/* The path where HUB may hold PATH of the model repository REPO ("org/name") at REVISION
 * (a branch, tag or commit): blobs/SHA256 when sha256 is given and that blob exists, else
 * the snapshot's file for the commit refs/REVISION names (or REVISION itself when it is a
 * 40-digit commit).  NULL when neither exists.  The caller frees it. */
char *llmr_hf_cache_find(const char *hub, const char *repo, const char *revision, const char *path,
                         const char *sha256);

#endif
