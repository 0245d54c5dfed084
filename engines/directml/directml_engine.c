/* The DirectML engine plugin, a skeleton: it takes gpt-oss models exported for
 * DirectML (model.directml.bin or model.dml.bin), looks for the DirectML runtime
 * library by a configurable path, and refuses the load with UNSUPPORTED and a
 * message naming the library and where to get it.  Where the library is found it
 * still refuses: driving DirectML is not written yet, and saying so is the honest
 * answer.  It is here so the node, the registry and the manifest rules already handle
 * a non-CUDA GPU engine and its model format.
 *
 * Load options (options_json): "library": the runtime's path.  Without it the
 * LLMR_DIRECTML_LIBRARY environment variable, else DirectML.dll (Windows) or
 * libdirectml.so (elsewhere). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include "llmr/engine.h"

#if defined(_WIN32)
#define DEFAULT_LIBRARY "DirectML.dll"
#else
#define DEFAULT_LIBRARY "libdirectml.so"
#endif

static const llmr_host_api *host;
static _Thread_local char error[1024];

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, sizeof error, fmt, ap);
    va_end(ap);
}

static void describe(llmr_engine_info *out)
{
    uint32_t size = out->struct_size;
    memset(out, 0, size < sizeof *out ? size : sizeof *out);
    out->struct_size = size;
    out->name = LLMR_PLUGIN_ID;
    out->version = LLMR_PLUGIN_VERSION;
    out->capabilities = 0;
}

/* The "library" string of a flat options object, copied into buf. */
static const char *option_library(const char *json, char *buf, size_t n)
{
    const char *p = json ? strstr(json, "\"library\"") : NULL;
    if (!p)
        return NULL;
    p = strchr(p + 9, '"');
    if (!p)
        return NULL;
    const char *end = strchr(p + 1, '"');
    if (!end || (size_t)(end - p - 1) >= n)
        return NULL;
    memcpy(buf, p + 1, (size_t)(end - p - 1));
    buf[end - p - 1] = '\0';
    return buf;
}

static llmr_status load(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                        llmr_engine_model **out)
{
    *out = NULL;
    if (strcmp(desc->format, "directml") != 0 || desc->file_count == 0) {
        set_error("the DirectML engine runs models exported for DirectML (model.directml.bin "
                  "or model.dml.bin), not %s",
                  desc->format);
        return LLMR_UNSUPPORTED;
    }
    char buf[512];
    const char *library = option_library(p->options_json, buf, sizeof buf);
    if (!library)
        library = getenv("LLMR_DIRECTML_LIBRARY");
    if (!library || !*library)
        library = DEFAULT_LIBRARY;
#if defined(_WIN32)
    HMODULE lib = LoadLibraryA(library);
    const char *why = lib ? NULL : "LoadLibrary failed";
#else
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    const char *why = lib ? NULL : dlerror();
#endif
    if (!lib) {
        set_error("the DirectML runtime %s is not available (%s): DirectML runs on Windows 10 "
                  "1903 or later, where DirectML.dll comes with the system or the "
                  "Microsoft.AI.DirectML package; point the engine option \"library\" or "
                  "LLMR_DIRECTML_LIBRARY at it.  Model %s (%s) cannot run on this node",
                  library, why ? why : "not found", desc->name, desc->files[0]);
        return LLMR_UNSUPPORTED;
    }
#if defined(_WIN32)
    FreeLibrary(lib);
#else
    dlclose(lib);
#endif
    set_error("the DirectML runtime %s was found, but this version of the DirectML engine "
              "(%s) does not run models on it yet",
              library, LLMR_PLUGIN_VERSION);
    return LLMR_UNSUPPORTED;
}

static void unload(llmr_engine_model *model)
{
    (void)model;
}

static llmr_status model_info(const llmr_engine_model *model, llmr_engine_model_info *out)
{
    (void)model;
    (void)out;
    return LLMR_UNSUPPORTED;
}

static llmr_status submit(llmr_engine_model *model, const llmr_engine_request_params *params,
                          llmr_engine_token_fn on_token, void *user)
{
    (void)model;
    (void)params;
    (void)on_token;
    (void)user;
    set_error("no DirectML model is loaded");
    return LLMR_UNSUPPORTED;
}

static const char *last_error(const llmr_engine_model *model)
{
    (void)model;
    return error;
}

static const llmr_engine_api table = {
    .struct_size = sizeof(llmr_engine_api),
    .abi_major = LLMR_ENGINE_ABI_MAJOR,
    .abi_minor = LLMR_ENGINE_ABI_MINOR,
    .describe = describe,
    .load = load,
    .unload = unload,
    .model_info = model_info,
    .submit = submit,
    .last_error = last_error,
};

LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *h,
                                                     const llmr_engine_api **out)
{
    if (!h || h->abi_major != LLMR_ENGINE_ABI_MAJOR)
        return LLMR_ABI_MISMATCH;
    host = h;
    *out = &table;
    return LLMR_OK;
}
