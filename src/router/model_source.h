/* Where a registered model comes from, and what a node needs of it: a Hugging Face
 * repository (the Hub API through libcurl) or a local directory, checked the way
 * registration promises (each failure names the files), and the manifest the router
 * hands to nodes (docs/node-router-protocol.md).
 *
 * Hugging Face: GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true lists
 * the files (path, size, and the sha256 of LFS files); files come from
 * {endpoint}/{repo}/resolve/{revision}/{path}.  The endpoint is HF_ENDPOINT (default
 * https://huggingface.co) and the token HF_TOKEN, both overridable in the options. */
#ifndef LLMR_ROUTER_MODEL_SOURCE_H
#define LLMR_ROUTER_MODEL_SOURCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_source_file {
    char *path;        /* relative, '/'-separated */
    uint64_t size;
    char *sha256;      /* hex, or NULL when unknown */
    char *origin_url;  /* hf: the resolve URL; local: NULL */
} llmr_source_file;

typedef struct llmr_source {
    char *kind;        /* "hf" or "local" */
    char *repo;        /* hf: "org/name" */
    char *revision;    /* hf: as given (default "main") */
    char *dir;         /* local: the absolute directory */
    llmr_source_file *files;
    size_t count;
} llmr_source;

typedef struct llmr_source_options {
    const char *hf_endpoint;   /* NULL: HF_ENDPOINT, else https://huggingface.co */
    const char *hf_token;      /* NULL: HF_TOKEN, else none */
    bool hash_local;           /* compute the sha256 of local files (default true) */
    unsigned timeout_s;        /* per Hub request; default 30 */
} llmr_source_options;

void llmr_source_options_default(llmr_source_options *o);

/* Lists the files of a source: "org/name", "org/name@revision", a Hub URL
 * ("https://huggingface.co/org/name[/tree/REV]"), or an absolute local directory.
 * NOT_FOUND (no such repo or directory, the Hub's 401/404 said plainly), IO (network),
 * INVALID_ARGUMENT (something that is neither). */
llmr_status llmr_source_resolve(const llmr_source_options *o, const char *source, llmr_source *out,
                                llmr_strbuf *err);
void llmr_source_free(llmr_source *s);

/* Checks the source for a registration of this format: safetensors needs config.json
 * and tokenizer.json; several .safetensors without model.safetensors.index.json is
 * ambiguous; the index must name only files that exist (read from the Hub or the
 * directory); gguf with several .gguf needs filename (which must exist).  On failure
 * INVALID_ARGUMENT with err a sentence naming every file at fault, and *files (when not
 * NULL) a JSON array of those file names. */
llmr_status llmr_source_check(const llmr_source_options *o, const llmr_source *s, const char *format,
                              const char *filename, json_t **files, llmr_strbuf *err);

/* The manifest for nodes: the files the format needs (required), and, optional, the
 * official GPU-optimized artifacts of an allow-listed publisher (artifact_allowlist:
 * comma-separated "org/*" patterns; default "openai/*,nvidia/*"), e.g. metal/model.bin.
 * Each file has path, size, sha256 when known, required, url
 * ("/v0/models/NAME/files/PATH") and origin_url for hf. */
json_t *llmr_source_manifest(const llmr_source *s, const char *name, const char *format,
                             const char *filename, const char *artifact_allowlist);

#endif
