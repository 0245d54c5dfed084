/* Model sync: makes DATA_DIR/models/NAME hold exactly what a router's manifest names,
 * verified (size, and the SHA-256 where the manifest gives it, else the sampled digest of
 * a large local file: common/file_sample.h).  A model from a local directory that the
 * node may use in place (local_dirs) has its files hard-linked from there instead of
 * fetched (model_in_place.h).
 *
 * The manifest (docs/node-router-protocol.md):
 *   {"name": NAME, "format": "safetensors"|"gguf",
 *    "source": {"kind": "local", "dir": "/abs/dir"} (or hf, repo, revision),
 *    "files": [{"path": "config.json", "size": 1234, "sha256": HEX or absent,
 *               "sample_sha256": HEX (large local files, instead of sha256),
 *               "required": true, "url": "/v0/models/NAME/files/config.json",
 *               "origin_url": "https://huggingface.co/ORG/REPO/resolve/REV/config.json"
 *               or absent}, ...]}
 *
 * Each file comes from the router's url (relative to the router), or from its
 * origin_url when the origin's host is on the allowlist and prefer_origin is set (the
 * router is the fallback).  Bytes go to DATA_DIR/models/.partial/NAME/PATH.part, resumed
 * with a Range request after a cut, are checked, then renamed into place (atomic).  A
 * file already in place with the right size (and digest) is kept.  Before any byte, the
 * free disk space must hold what is missing.  An optional file that fails is logged and
 * skipped; a required one fails the sync with its path named.  Paths that would leave
 * the model directory (.., absolute, empty parts) are refused. */
#ifndef LLMR_NODE_MODEL_SYNC_H
#define LLMR_NODE_MODEL_SYNC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* The record of a model's last complete sync, in its directory: the manifest, with the
 * sampled digest of each file past 64 MiB that the manifest gave none (model_check.h). */
#define LLMR_SYNC_MARKER_NAME ".llmr-manifest.json"

typedef struct llmr_sync_progress {
    const char *model;
    const char *state;        /* "checking", "fetching", "verifying", "ready", "failed" */
    const char *file;         /* the file being fetched, or NULL */
    uint64_t bytes_done, bytes_total;   /* over the whole model */
    uint32_t files_done, files_total;
} llmr_sync_progress;

/* Called as the sync goes (often: throttle on your side); false aborts (CANCELLED). */
typedef bool (*llmr_sync_progress_fn)(void *user, const llmr_sync_progress *p);

typedef struct llmr_sync_options {
    const char *data_dir;
    const char *router_url;        /* "http://127.0.0.1:8080": base of relative urls */
    const char *auth_header;       /* sent to the router ("Authorization: Bearer KEY") */
    const char *origin_allowlist;  /* comma-separated hosts ("huggingface.co,hf.co"); "" none */
    bool prefer_origin;            /* fetch origin_url first when allowed */
    const char *local_dirs;        /* comma-separated directories whose files a manifest of
                                      a local source may have used in place (hard-linked,
                                      model_in_place.h); NULL or "" none */
    unsigned retries;              /* per file, see llmr_fetch; default 3 */
    unsigned stall_timeout_s;      /* default 30 */
    llmr_sync_progress_fn progress;
    void *user;
} llmr_sync_options;

void llmr_sync_options_default(llmr_sync_options *o);

/* Syncs the model of this manifest.  LLMR_OK: every required file is in place and
 * verified (*skipped, when not NULL, gets a JSON array of the optional files that
 * failed: [{"path", "error"}], owned by the caller).  Else: MODEL_CORRUPT (a digest or
 * size that does not match), NOT_FOUND (a required file the server does not have), IO
 * (network, disk), LIMIT_EXCEEDED (not enough disk space), INVALID_ARGUMENT (a bad
 * manifest), CANCELLED; err names the file and what went wrong. */
llmr_status llmr_model_sync(const llmr_sync_options *o, const json_t *manifest, json_t **skipped,
                            llmr_strbuf *err);

/* Deletes what this node holds of a model: DATA_DIR/models/NAME and its partial
 * downloads (DATA_DIR/models/.partial/NAME).  The name must be a safe file name
 * (llmr_file_name_is_safe); true when nothing of it is left. */
bool llmr_sync_remove_model(const char *data_dir, const char *name);

/* Whether DATA_DIR/models/NAME holds the marker of a complete sync: it came from a
 * router (a directory put there by hand has none). */
bool llmr_sync_has_marker(const char *data_dir, const char *name);

/* The "version" in the manifest of the model's last complete sync (its marker), or
 * NULL (none, or no marker); the caller frees it. */
char *llmr_sync_local_version(const char *data_dir, const char *name);

/* Why a manifest's file path may not be used (it must name a file inside the model
 * directory: relative, no "." or ".." part, valid UTF-8, ...), or NULL when it is fine. */
const char *llmr_sync_path_problem(const char *p);

/* Checks a manifest's shape and paths without fetching (INVALID_ARGUMENT + err). */
llmr_status llmr_manifest_check(const json_t *manifest, llmr_strbuf *err);

/* True when url is http:// or https:// and its host is on the comma-separated
 * allowlist: the same host, or a subdomain of an entry ("hf.co" allows "cdn.hf.co",
 * not "evilhf.co").  Case does not matter; an empty or NULL list allows nothing. */
bool llmr_sync_origin_allowed(const char *url, const char *allowlist);

#endif
