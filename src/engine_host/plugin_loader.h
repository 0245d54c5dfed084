/* Opening an engine plugin inside an engine worker: dlopen, the negotiation entry
 * point, and the checks on the table it returns (ABI major, size, required
 * functions).  Only workers open plugins, so a plugin that crashes while loading
 * takes down its worker, never the node. */
#ifndef LLMR_ENGINE_HOST_PLUGIN_LOADER_H
#define LLMR_ENGINE_HOST_PLUGIN_LOADER_H

#include <stdbool.h>

#include "common/strbuf.h"
#include "llmr/engine.h"

typedef struct llmr_plugin {
    void *handle;
    const llmr_engine_api *api;
    llmr_engine_info info;   /* from describe(); strings are the plugin's */
    /* the optional functions the table offers (present and not NULL) */
    bool has_estimate, has_cancel, has_memory, has_logits;
} llmr_plugin;

/* Opens `library_path` and negotiates with `host` (which must outlive the plugin).
 * LLMR_LOAD_FAILED when the library does not open, lacks the entry point, or its
 * table lacks a required function; LLMR_ABI_MISMATCH when either side refuses the
 * other's major version or the table is smaller than version 1.0's.  err says which. */
llmr_status llmr_plugin_open(const char *library_path, const llmr_host_api *host,
                             llmr_plugin *out, llmr_strbuf *err);

/* dlclose.  Only after every model of the plugin is unloaded. */
void llmr_plugin_close(llmr_plugin *p);

/* A status the plugin returned, kept to the ten ABI codes (anything else is
 * LLMR_INTERNAL). */
llmr_status llmr_plugin_status(int value);

#endif
