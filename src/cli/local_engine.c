/* An engine in this process: see local_engine.h. */
#include "cli/local_engine.h"

#include <dirent.h>
#include <stdbool.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "engine_host/engine_registry.h"
#include "engine_host/host_services.h"
#include "engine_host/nvml.h"
#include "models/runtime.h"
#include "node/node_service.h"

/* The compute capability of GPU 0, or -1 without NVML or a GPU. */
static int gpu_capability(int *minor)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_nvml *nvml = llmr_nvml_open(NULL, &err);
    int major = -1;
    llmr_gpu_reading g;
    if (nvml && llmr_nvml_device_count(nvml) > 0 && llmr_nvml_read(nvml, 0, &g, &err) == LLMR_OK) {
        major = g.cc_major;
        *minor = g.cc_minor;
    }
    llmr_nvml_close(nvml);
    llmr_strbuf_free(&err);
    return major;
}

/* The format of the model in dir: gguf when it holds .gguf files and no .safetensors,
 * else safetensors (whose checks then say what is missing). */
static const char *local_format(const char *dir)
{
    bool gguf = false, safetensors = false;
    DIR *d = opendir(dir);
    for (struct dirent *ent; d && (ent = readdir(d));) {
        gguf |= llmr_name_has_suffix(ent->d_name, ".gguf");
        safetensors |= llmr_name_has_suffix(ent->d_name, ".safetensors");
    }
    if (d)
        closedir(d);
    return gguf && !safetensors ? "gguf" : "safetensors";
}

llmr_status llmr_local_engine_open(const llmr_config *cfg, const char *dir,
                                   const char *options_json, uint32_t context,
                                   llmr_local_engine *e, llmr_strbuf *err)
{
    memset(e, 0, sizeof *e);
    llmr_status st = llmr_model_desc_open("local", dir, local_format(dir), NULL, &e->desc, err);
    if (st != LLMR_OK)
        return st;
    const llmr_engine_model_desc *d = &e->desc.desc;
    if (strcmp(d->runtime, "none") == 0) {
        const char *why = e->desc.model ? e->desc.model->unsupported_reason : NULL;
        llmr_strbuf_printf(err, "no engine runs this model: %s", why ? why : "unknown runtime");
        llmr_model_desc_close(&e->desc);
        return LLMR_UNSUPPORTED;
    }
    size_t n_dirs = 0;
    char **dirs = llmr_node_plugin_dirs(cfg, &n_dirs);
    llmr_engine_registry *reg = llmr_engine_registry_create();
    llmr_problems problems;
    llmr_problems_init(&problems);
    if (reg)
        llmr_engine_registry_scan(reg, (const char *const *)dirs, n_dirs, &problems);
    llmr_problems_free(&problems);
    llmr_node_plugin_dirs_free(dirs);
    int minor = 0, major = gpu_capability(&minor), score = 0;
    llmr_engine_query q = {d->format, d->runtime, d->architecture, major, minor};
    const char *limitation = llmr_runtime_limitation(d->runtime);
    if (limitation)
        llmr_strbuf_printf(err, "%s (", limitation);
    const llmr_plugin_manifest *m = reg ? llmr_engine_registry_select(reg, &q, &score, err) : NULL;
    if (limitation)
        llmr_strbuf_putc(err, ')');
    if (!m) {
        llmr_engine_registry_free(reg);
        llmr_model_desc_close(&e->desc);
        return LLMR_UNSUPPORTED;
    }
    snprintf(e->plugin_name, sizeof e->plugin_name, "%s %s", m->id, m->version);
    llmr_host_services_init(&e->host, dir);
    st = llmr_plugin_open(m->library_path, &e->host, &e->plugin, err);
    llmr_engine_registry_free(reg);
    if (st != LLMR_OK) {
        llmr_model_desc_close(&e->desc);
        return st;
    }
    llmr_engine_load_params p = llmr_engine_load_default_params();
    p.context_length = context;
    p.gpu_index = score >= 2 ? 0 : -1;
    p.options_json = options_json;
    st = llmr_plugin_status(e->plugin.api->load(d, &p, &e->model));
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "%s could not load the model: %s", e->plugin_name,
                           e->plugin.api->last_error(NULL));
        e->model = NULL;
        llmr_local_engine_close(e);
        return st;
    }
    e->info.struct_size = sizeof e->info;
    e->plugin.api->model_info(e->model, &e->info);
    return LLMR_OK;
}

void llmr_local_engine_close(llmr_local_engine *e)
{
    if (e->model)
        e->plugin.api->unload(e->model);
    e->model = NULL;
    llmr_model_desc_close(&e->desc);
    /* The plugin stays mapped until the process ends: its threads may be finishing. */
}

llmr_status llmr_local_engine_options(const char *text, json_t *add, char **out,
                                      llmr_strbuf *err)
{
    *out = NULL;
    if (!text && !add)
        return LLMR_OK;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    json_t *o = text ? llmr_json_parse(text, strlen(text), &why) : json_object();
    if (!json_is_object(o)) {
        if (o) {
            llmr_strbuf_puts(&why, "got ");
            llmr_json_describe(&why, o);
        }
        llmr_strbuf_printf(err, "the engine options are not a JSON object: %s",
                           llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        json_decref(o);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_strbuf_free(&why);
    if (add && json_object_update(o, add) != 0) {
        json_decref(o);
        llmr_strbuf_puts(err, "out of memory for the engine options");
        return LLMR_OOM_RAM;
    }
    *out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!*out) {
        llmr_strbuf_puts(err, "out of memory for the engine options");
        return LLMR_OOM_RAM;
    }
    return LLMR_OK;
}
