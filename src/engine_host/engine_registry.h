/* The EngineRegistry: the engine plugins installed on this node, known by their
 * manifests, and the choice of the best one for a model.
 *
 * Plugins are found by scanning plugin directories: every direct subdirectory that
 * holds a manifest.json is one plugin.  Nothing is loaded here; the registry only
 * reads manifests, so a broken plugin costs a problem line, never the node.
 *
 * A query says what the model is (format, runtime, architecture) and which GPU it
 * would run on; select() returns the best fitting plugin, or says in one sentence
 * why none fits, naming each installed plugin's reason.
 *
 * Ownership: the registry owns the manifests added to it; the pointers it hands out
 * stay valid until llmr_engine_registry_free.  Adding and scanning are not
 * thread-safe; a registry that is no longer changed may be read from any thread. */
#ifndef LLMR_ENGINE_HOST_ENGINE_REGISTRY_H
#define LLMR_ENGINE_HOST_ENGINE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/problems.h"
#include "common/strbuf.h"
#include "engine_host/plugin_manifest.h"
#include "llmr/status.h"

/* Entries of one plugin directory looked at, at most (a larger one is a problem and
 * only the first ones, in name order, are considered). */
#define LLMR_ENGINE_REGISTRY_MAX_ENTRIES 4096u
/* Plugins that select() names one by one in why_not; the rest are counted. */
#define LLMR_ENGINE_REGISTRY_WHY_MAX 8

typedef struct llmr_engine_registry llmr_engine_registry;

/* NULL when out of memory. */
llmr_engine_registry *llmr_engine_registry_create(void);
void llmr_engine_registry_free(llmr_engine_registry *r);

/* Scans each of dirs in order; within a directory, subdirectories go in name order
 * and those without a manifest.json (and hidden ones, ".x") are not plugins.  A bad
 * plugin is recorded in problems (file: its manifest path, escaped for display; the
 * load status; the reasons) and skipped.  A directory of dirs that cannot be read is
 * a problem (NOT_FOUND when it does not exist).  An id seen twice keeps the first
 * plugin and records the second as a LOAD_FAILED problem naming both directories.
 * Returns the number of plugins added. */
size_t llmr_engine_registry_scan(llmr_engine_registry *r, const char *const *dirs,
                                 size_t dir_count, llmr_problems *problems);
/* Adds a manifest; on success the registry owns it.  LLMR_LOAD_FAILED (and m stays
 * the caller's) when a plugin of that id is already there; LLMR_OOM_RAM. */
llmr_status llmr_engine_registry_add(llmr_engine_registry *r, llmr_plugin_manifest *m,
                                     llmr_strbuf *err);
/* Plugins in the order they were added. */
size_t llmr_engine_registry_count(const llmr_engine_registry *r);
/* The i-th plugin, NULL when i is out of range. */
const llmr_plugin_manifest *llmr_engine_registry_get(const llmr_engine_registry *r, size_t i);
/* The plugin of that id, or NULL. */
const llmr_plugin_manifest *llmr_engine_registry_find(const llmr_engine_registry *r,
                                                      const char *id);

typedef struct llmr_engine_query {
    const char *format;       /* "safetensors", "gguf", "directml"; NULL: not checked */
    const char *runtime;      /* NULL: the model has none, so nothing matches */
    const char *architecture; /* NULL: not checked */
    int cc_major, cc_minor;   /* the GPU the model would run on; cc_major < 0: no GPU */
} llmr_engine_query;

/* The best plugin for the query.  A candidate reads the format, runs the runtime,
 * lists the architecture (or "*"), and has a GPU target of score > 0 on the query's
 * GPU (llmr_gpu_target_score).  Candidates rank by their best target score (a GPU
 * target that runs on the GPU, 2..4, beats cpu/directml, 1), then priority, then
 * version (semantic precedence), the higher first, then id ascending.
 * *gpu_score (may be NULL) receives the chosen plugin's best score, 0 when none.
 * When none fits: NULL, and one sentence is appended to why_not (may be NULL) naming
 * what was asked and, per installed plugin, why it does not fit (at most
 * LLMR_ENGINE_REGISTRY_WHY_MAX named, then "and N more"), or that no plugins are
 * installed. */
const llmr_plugin_manifest *llmr_engine_registry_select(const llmr_engine_registry *r,
                                                        const llmr_engine_query *q,
                                                        int *gpu_score, llmr_strbuf *why_not);

#endif
