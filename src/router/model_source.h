/* Where a registered model comes from, and what a node needs of it: a Hugging Face
 * repository (the Hub API through libcurl) or a local directory, checked the way
 * registration promises (each failure names the files: a directory's by their path in
 * the directory, never by a path elsewhere on this machine), and the manifest the
 * router hands to nodes (docs/node-router-protocol.md).
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
    char *sample_sha256; /* local files larger than LLMR_SOURCE_HASH_MAX: their sampled
                            digest (common/file_sample.h) instead of the sha256 */
    char *origin_url;  /* hf: the resolve URL; local: NULL */
    char git_oid[41];  /* hf: the git blob id the Hub lists (the name a small file has in
                          a Hugging Face cache), or "" */
} llmr_source_file;

/* Local files up to this size get a sha256 at registration; larger ones (weights) a
 * sampled digest, so that registering a directory of any size reads a few MiB. */
#define LLMR_SOURCE_HASH_MAX (64u << 20)

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
    bool hash_local;           /* digest local files (default true): see
                                  LLMR_SOURCE_HASH_MAX */
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
 * comma-separated ORG/STAR patterns, by default the openai and nvidia orgs), e.g. metal/model.bin.
 * Each file has path, size, sha256 when known, required, url
 * ("/v0/models/NAME/files/PATH") and origin_url for hf. */
json_t *llmr_source_manifest(const llmr_source *s, const char *name, const char *format,
                             const char *filename, const char *artifact_allowlist);

/* ---- more of the same ---------------------------------------------------------------
 *
 * Details of the functions above:
 *  - resolve (hf) follows the Hub's paging (Link: <...>; rel="next") and, for the
 *    small files a manifest may take that are not in LFS (config.json, the index, ...;
 *    under 10 MB), fetches them to know their sha256, so that every entry of a manifest
 *    can be verified.  Files whose path no manifest could carry (control characters,
 *    '\', "..", invalid UTF-8) are left out of the listing.  A local directory is
 *    walked recursively; dot-files and dot-directories are skipped, symbolic links to
 *    files inside the directory are followed, and a link that leaves it is refused
 *    (INVALID_ARGUMENT naming it), except the links of a Hugging Face cache snapshot
 *    (.../snapshots/REV) into its own blob store; a link to nothing is refused too.
 *  - check: on success *files is set to NULL.  The weights are the top-level
 *    .safetensors / .gguf files (that is where nodes load them from); a .gguf named
 *    with filename that is part 1 of a split model ("x-00001-of-00003.gguf") brings
 *    its other parts, and a directory whose only .gguf files are one split set needs no
 *    filename.  filename is refused for safetensors.  Reading the index can also fail
 *    with NOT_FOUND or IO (the Hub's answer).
 *  - manifest: NULL when the format is unknown, name is not one plain file name, or
 *    the source fails llmr_source_check (the reason is logged); otherwise entries
 *    sorted by path.  For hf the index's shard list comes from what llmr_source_check
 *    read (kept by digest), else it is fetched again with the default options (HF_TOKEN
 *    from the environment).  Artifacts are taken for safetensors only; a renamed one
 *    ("metal/model.bin" -> "model.metal.bin") has "source_path", its path in the
 *    repository.  The manifest's "source" says where it came from ({"kind": "hf",
 *    "repo", "revision"} or {"kind": "local"}). */

#define LLMR_SOURCE_DEFAULT_ARTIFACTS "openai/*,nvidia/*"

/* The listed file of that exact path, or NULL (a binary search: resolve leaves the
 * files sorted by path, bytewise). */
const llmr_source_file *llmr_source_find(const llmr_source *s, const char *path);

/* Reads one listed file of the source into memory (the directory's file, or the
 * Hub's resolve URL with the token): *data is malloc'd and NUL-terminated (not counted
 * in *len).  NOT_FOUND for a path the listing lacks; LIMIT_EXCEEDED past max_bytes;
 * IO, or the Hub's refusal as in llmr_source_resolve.  A directory's file that cannot
 * be read gives only what is wrong ("cannot open: ..."): the caller names the file by
 * path, and the file's real path goes to the log, never into err. */
llmr_status llmr_source_read(const llmr_source_options *o, const llmr_source *s, const char *path,
                             size_t max_bytes, char **data, size_t *len, llmr_strbuf *err);

/* True when a manifest may take this path for some format: the top-level metadata
 * files (config.json, tokenizer.json, tokenizer_config.json, generation_config.json,
 * special_tokens_map.json, chat_template.jinja, chat_template.json,
 * model.safetensors.index.json), a top-level .safetensors or .gguf, or a file directly
 * under metal/ (an official artifact). */
bool llmr_source_is_model_file(const char *path);

/* True when repo ("org/name") matches the comma-separated allowlist, whose entries are
 * "org/name", "org/" followed by '*' (any repo of org), "org" alone (the same), or '*'
 * alone (any repo); case does not matter.  NULL means the default
 * LLMR_SOURCE_DEFAULT_ARTIFACTS; "" allows nothing. */
bool llmr_source_artifact_allowed(const char *repo, const char *allowlist);

#endif
