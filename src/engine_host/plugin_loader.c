/* Opening engine plugins: see plugin_loader.h. */
#include "engine_host/plugin_loader.h"

#include <dlfcn.h>
#include <string.h>

/* The size of a version 1.0 table up to its last required member. */
#define REQUIRED_TABLE_BYTES (offsetof(llmr_engine_api, last_error) + sizeof(void *))

llmr_status llmr_plugin_status(int value)
{
    return value >= LLMR_OK && value <= LLMR_LOAD_FAILED ? (llmr_status)value : LLMR_INTERNAL;
}

static llmr_status refuse(llmr_plugin *p, llmr_status st)
{
    if (p->handle)
        dlclose(p->handle);
    memset(p, 0, sizeof *p);
    return st;
}

llmr_status llmr_plugin_open(const char *library_path, const llmr_host_api *host,
                             llmr_plugin *p, llmr_strbuf *err)
{
    memset(p, 0, sizeof *p);
    dlerror();
    p->handle = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        const char *why = dlerror();
        llmr_strbuf_printf(err, "cannot open the plugin library: %s", why ? why : library_path);
        return LLMR_LOAD_FAILED;
    }
    llmr_engine_negotiate_fn negotiate;
    void *sym = dlsym(p->handle, LLMR_ENGINE_NEGOTIATE_SYMBOL);
    memcpy(&negotiate, &sym, sizeof negotiate); /* object to function pointer */
    if (!negotiate) {
        llmr_strbuf_printf(err, "%s does not export %s: it is not an llmr engine plugin, or it "
                                "was built without LLMR_ENGINE_EXPORT",
                           library_path, LLMR_ENGINE_NEGOTIATE_SYMBOL);
        return refuse(p, LLMR_LOAD_FAILED);
    }
    const llmr_engine_api *api = NULL;
    llmr_status st = llmr_plugin_status(negotiate(host, &api));
    if (st == LLMR_ABI_MISMATCH) {
        llmr_strbuf_printf(err, "the plugin refused this llmr's engine ABI %u.%u",
                           host->abi_major, host->abi_minor);
        return refuse(p, st);
    }
    if (st != LLMR_OK || !api) {
        llmr_strbuf_printf(err, "%s failed (%s)", LLMR_ENGINE_NEGOTIATE_SYMBOL,
                           st != LLMR_OK ? llmr_status_name(st) : "no table returned");
        return refuse(p, st != LLMR_OK ? st : LLMR_LOAD_FAILED);
    }
    if (api->abi_major != LLMR_ENGINE_ABI_MAJOR) {
        llmr_strbuf_printf(err, "the plugin was built for engine ABI %u.%u; this llmr speaks "
                                "%u.x: rebuild the plugin against this llmr's engine.h",
                           api->abi_major, api->abi_minor, LLMR_ENGINE_ABI_MAJOR);
        return refuse(p, LLMR_ABI_MISMATCH);
    }
    if (api->struct_size < REQUIRED_TABLE_BYTES) {
        llmr_strbuf_printf(err, "the plugin's function table is %u bytes, smaller than the %zu "
                                "of engine ABI %u.0",
                           api->struct_size, REQUIRED_TABLE_BYTES, LLMR_ENGINE_ABI_MAJOR);
        return refuse(p, LLMR_ABI_MISMATCH);
    }
    const char *missing = !api->describe     ? "describe"
                          : !api->load       ? "load"
                          : !api->unload     ? "unload"
                          : !api->model_info ? "model_info"
                          : !api->submit     ? "submit"
                          : !api->last_error ? "last_error"
                                             : NULL;
    if (missing) {
        llmr_strbuf_printf(err, "the plugin's table has no %s, which engine ABI %u.0 requires",
                           missing, LLMR_ENGINE_ABI_MAJOR);
        return refuse(p, LLMR_LOAD_FAILED);
    }
    p->api = api;
    p->has_estimate = LLMR_ENGINE_HAS(api, llmr_engine_api, estimate) && api->estimate;
    p->has_cancel = LLMR_ENGINE_HAS(api, llmr_engine_api, cancel) && api->cancel;
    p->has_memory = LLMR_ENGINE_HAS(api, llmr_engine_api, memory) && api->memory;
    p->has_logits = LLMR_ENGINE_HAS(api, llmr_engine_api, logits) && api->logits;
    p->info.struct_size = sizeof p->info;
    api->describe(&p->info);
    if (!p->info.name || !p->info.version) {
        llmr_strbuf_puts(err, "the plugin's describe() gave no name or version");
        return refuse(p, LLMR_LOAD_FAILED);
    }
    return LLMR_OK;
}

void llmr_plugin_close(llmr_plugin *p)
{
    if (p->handle)
        dlclose(p->handle);
    memset(p, 0, sizeof *p);
}
