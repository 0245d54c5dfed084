/* Engine plugin manifests: the manifest.json beside each engine library, which says
 * what the plugin is (id, version), which engine ABI it was built for, what it can
 * run (runtimes, model formats, architectures) and on what (GPU targets).
 *
 * The host reads a manifest before it ever loads the library, so choosing an engine
 * for a model never runs plugin code.  Everything in a manifest comes from outside
 * and is checked field by field; each broken rule gives a sentence that names the
 * field (and the array index) and says what is allowed, with the offending value
 * escaped for display and cut to 64 bytes.  Unknown fields are not an error: a newer
 * manifest may carry more; they come back as warnings.
 *
 * Ownership: a llmr_plugin_manifest owns every string and array in it; free it with
 * llmr_plugin_manifest_free.  GPU target and semantic-version helpers live here too,
 * since the manifest rules are their only definition. */
#ifndef LLMR_ENGINE_HOST_PLUGIN_MANIFEST_H
#define LLMR_ENGINE_HOST_PLUGIN_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

#define LLMR_PLUGIN_MANIFEST_FILE "manifest.json"
#define LLMR_PLUGIN_MANIFEST_MAX_BYTES (64u << 10)
#define LLMR_PLUGIN_ID_MAX 64
#define LLMR_PLUGIN_VERSION_MAX 64
#define LLMR_PLUGIN_RUNTIME_MAX 64
#define LLMR_PLUGIN_ARCHITECTURE_MAX 128
#define LLMR_PLUGIN_DESCRIPTION_MAX 512
#define LLMR_PLUGIN_PRIORITY_MIN (-1000)
#define LLMR_PLUGIN_PRIORITY_MAX 1000
/* Entries of one array (runtimes, formats, architectures, gpu_targets) at most. */
#define LLMR_PLUGIN_LIST_MAX 256

/* ---- GPU targets ------------------------------------------------------------- */

typedef enum llmr_gpu_target_kind {
    LLMR_GPU_TARGET_CPU,      /* "cpu" */
    LLMR_GPU_TARGET_DIRECTML, /* "directml" */
    LLMR_GPU_TARGET_SM,       /* "sm_80": a cubin for compute capability 8.0 */
    LLMR_GPU_TARGET_SM_ARCH,  /* "sm_90a": an arch-specific cubin, exactly 9.0 */
    LLMR_GPU_TARGET_PTX       /* "compute_80": PTX, compiled at load for 8.0 and later */
} llmr_gpu_target_kind;

typedef struct llmr_gpu_target {
    llmr_gpu_target_kind kind;
    int major, minor; /* compute capability; 0 for cpu and directml */
} llmr_gpu_target;

/* Parses "cpu", "directml", "sm_XY", "sm_XYa" or "compute_XY", where X is the major
 * (1 or 2 digits, no leading zero) and Y the minor (one digit): sm_80, sm_90a,
 * sm_100a, sm_120.  False (and *out untouched) for anything else. */
bool llmr_gpu_target_parse(const char *text, llmr_gpu_target *out);
/* Appends the manifest spelling of t ("sm_90a"). */
void llmr_gpu_target_format(const llmr_gpu_target *t, llmr_strbuf *out);
/* How well code for target t runs on a GPU of compute capability cc_major.cc_minor
 * (cc_major < 0: no GPU):
 *   4  sm_XYa on exactly X.Y
 *   3  sm_XY with the same major and Y <= the minor (cubins run on later minors)
 *   2  compute_XY with X.Y <= the capability (PTX, compiled at load)
 *   1  cpu or directml (run anywhere; directml checks its runtime at load)
 *   0  cannot run */
int llmr_gpu_target_score(const llmr_gpu_target *t, int cc_major, int cc_minor);

/* ---- semantic versions ------------------------------------------------------- */

/* True when text is MAJOR.MINOR.PATCH with an optional -prerelease (dot-separated
 * identifiers of [0-9A-Za-z-]; numbers without leading zeros), at most
 * LLMR_PLUGIN_VERSION_MAX bytes.  Build metadata ("+...") is not accepted. */
bool llmr_semver_is_valid(const char *text);
/* Orders two versions by semantic-version precedence: <0, 0 or >0.  Numbers compare
 * as numbers of any length; a prerelease sorts before its release.  A string that
 * is not a valid version sorts before every valid one; two invalid ones compare as
 * bytes, so the order stays total. */
int llmr_semver_compare(const char *a, const char *b);

/* ---- manifests ----------------------------------------------------------------- */

typedef struct llmr_plugin_manifest {
    char *dir;          /* absolute plugin directory; NULL when parsed without one */
    char *library;      /* the library's file name, as in the manifest */
    char *library_path; /* dir + "/" + library; NULL without a dir */
    char *id;
    char *version;
    char *description;  /* "" when the manifest has none */
    unsigned abi_major, abi_minor;
    char **runtimes;
    size_t runtime_count;
    char **formats;
    size_t format_count;
    char **architectures; /* "*" means any */
    size_t architecture_count;
    llmr_gpu_target *gpu_targets;
    size_t gpu_target_count;
    int priority;
    char **warnings;      /* sentences about ignored fields, for status output */
    size_t warning_count;
    /* The identity of the library file, taken when loading from a directory
     * (has_lib_identity); a reload compares it to tell a rebuilt library. */
    bool has_lib_identity;
    uint64_t lib_dev, lib_ino, lib_size;
    int64_t lib_mtime_ns;
} llmr_plugin_manifest;

/* Parses manifest text.  `dir` (may be NULL) is stored as the plugin directory and
 * library_path is built from it; the library file is not looked at.  On success
 * *out is the manifest; on failure *out is NULL and err gets the reasons (every
 * broken rule, "; "-separated).  Status: LLMR_ABI_MISMATCH when abi_version has
 * another major than LLMR_ENGINE_ABI_MAJOR (then nothing else is checked: another
 * major may mean another schema); LLMR_OOM_RAM when memory runs out; LLMR_LOAD_FAILED
 * for everything else wrong (too big, not JSON, a bad field). */
llmr_status llmr_plugin_manifest_parse(const char *text, size_t len, const char *dir,
                                       llmr_plugin_manifest **out, llmr_strbuf *err);
/* Reads plugin_dir/manifest.json, parses it with the directory made absolute, and
 * checks that the library is a regular file there, recording its identity.
 * Status as for parse, plus LLMR_NOT_FOUND when the directory or its manifest.json
 * does not exist (an unreadable or oversized manifest is LLMR_LOAD_FAILED). */
llmr_status llmr_plugin_manifest_load(const char *plugin_dir, llmr_plugin_manifest **out,
                                      llmr_strbuf *err);
void llmr_plugin_manifest_free(llmr_plugin_manifest *m);
/* True when a and b are the same build of a plugin: same id, same version and the
 * same library file (device, inode, size and modification time).  False when either
 * was parsed without its library's identity, since sameness cannot be shown. */
bool llmr_plugin_manifest_same_build(const llmr_plugin_manifest *a,
                                     const llmr_plugin_manifest *b);
/* The manifest as a JSON object for status output (a new reference; NULL when out of
 * memory).  Keys: id, version, abi_version, runtimes, formats, architectures,
 * gpu_targets, library, priority, description, and dir, library_path and warnings
 * when there are any. */
json_t *llmr_plugin_manifest_json(const llmr_plugin_manifest *m);

#endif
