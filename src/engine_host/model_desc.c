/* Engine model descriptors: see model_desc.h. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "engine_host/model_desc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "storage/dtype.h"

const char *const llmr_directml_model_files[] = {"model.directml.bin", "model.dml.bin", NULL};

void llmr_model_desc_close(llmr_model_desc_owner *o)
{
    llmr_model_close(o->model);
    free(o->name);
    free(o->dir);
    free(o->format);
    free(o->runtime);
    free(o->architecture);
    free(o->primary_file);
    free(o->config_json);
    free(o->checked_config_json);
    if (!o->model && o->files)
        for (size_t i = 0; i < o->desc.file_count; i++)
            free((char *)o->files[i]);
    free(o->files);
    free(o->file_sizes);
    free(o->tensors);
    memset(o, 0, sizeof *o);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void problems_to_text(const llmr_problems *p, llmr_strbuf *err)
{
    for (size_t i = 0; i < p->count; i++) {
        if (i)
            llmr_strbuf_puts(err, "; ");
        if (p->items[i].file)
            llmr_strbuf_printf(err, "%s: ", p->items[i].file);
        llmr_strbuf_puts(err, p->items[i].message);
    }
    if (p->dropped)
        llmr_strbuf_printf(err, "; and %zu more", p->dropped);
}

static llmr_status from_storage(llmr_model_desc_owner *o, llmr_model_format format,
                                const char *gguf_file, llmr_strbuf *err)
{
    llmr_model_options options;
    llmr_model_options_default(&options);
    options.format = format;
    options.gguf_file = gguf_file;
    options.map_weights = true;
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_status st = llmr_model_open(o->dir, &options, &o->model, &problems);
    if (st != LLMR_OK) {
        problems_to_text(&problems, err);
        llmr_problems_free(&problems);
        return st;
    }
    llmr_problems_free(&problems);
    llmr_model *m = o->model;
    const char *runtime = llmr_runtime_name(m->runtime);
    o->runtime = strdup(runtime ? runtime : "none");
    o->architecture = dup_or_null(m->architecture);
    o->primary_file = dup_or_null(m->primary_file);
    o->config_json = m->config ? json_dumps(m->config, JSON_COMPACT) : NULL;
    o->checked_config_json = m->engine_config ? json_dumps(m->engine_config, JSON_COMPACT) : NULL;
    o->files = calloc(m->file_count ? m->file_count : 1, sizeof *o->files);
    o->file_sizes = calloc(m->file_count ? m->file_count : 1, sizeof *o->file_sizes);
    o->tensors = calloc(m->tensor_count ? m->tensor_count : 1, sizeof *o->tensors);
    if (!o->runtime || !o->files || !o->file_sizes || !o->tensors) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    for (size_t i = 0; i < m->file_count; i++) {
        o->files[i] = m->files[i].name;
        o->file_sizes[i] = m->files[i].size;
    }
    for (size_t i = 0; i < m->tensor_count; i++) {
        const llmr_st_tensor *t = m->tensors[i].info;
        llmr_engine_tensor *e = &o->tensors[i];
        e->name = t->name;
        e->dtype = llmr_dtype_name(t->dtype);
        e->rank = t->rank;
        memcpy(e->shape, t->shape, sizeof e->shape);
        e->data = llmr_model_tensor_data(m, &m->tensors[i]);
        e->size = t->end - t->begin;
    }
    o->desc.total_bytes = m->total_bytes;
    o->desc.file_count = m->file_count;
    o->desc.tensor_count = m->tensor_count;
    o->desc.tensor_stride = sizeof(llmr_engine_tensor);
    return LLMR_OK;
}

/* DirectML: the model file under one of its names; config.json when present. */
static llmr_status from_directml_files(llmr_model_desc_owner *o, llmr_strbuf *err)
{
    for (size_t i = 0; llmr_directml_model_files[i]; i++) {
        char *path = llmr_path_join(o->dir, llmr_directml_model_files[i]);
        struct stat st;
        bool found = path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
        free(path);
        if (!found)
            continue;
        o->files = calloc(1, sizeof *o->files);
        o->file_sizes = calloc(1, sizeof *o->file_sizes);
        o->primary_file = strdup(llmr_directml_model_files[i]);
        if (!o->files || !o->file_sizes || !o->primary_file ||
            !(o->files[0] = strdup(llmr_directml_model_files[i]))) {
            llmr_strbuf_puts(err, "out of memory");
            return LLMR_OOM_RAM;
        }
        o->file_sizes[0] = (uint64_t)st.st_size;
        o->desc.file_count = 1;
        o->desc.total_bytes = (uint64_t)st.st_size;
        o->runtime = strdup("gpt_oss");
        char *config = llmr_path_join(o->dir, "config.json");
        size_t len = 0;
        llmr_strbuf ignored = LLMR_STRBUF_INIT;
        if (config && llmr_read_file(config, LLMR_CONFIG_JSON_MAX_BYTES, &o->config_json, &len,
                                     &ignored) != LLMR_OK)
            o->config_json = NULL;
        llmr_strbuf_free(&ignored);
        free(config);
        return o->runtime ? LLMR_OK : LLMR_OOM_RAM;
    }
    llmr_strbuf_printf(err, "%s holds neither model.directml.bin nor model.dml.bin", o->dir);
    return LLMR_NOT_FOUND;
}

llmr_status llmr_model_desc_open(const char *name, const char *dir, const char *format,
                                 const char *gguf_file, llmr_model_desc_owner *o,
                                 llmr_strbuf *err)
{
    memset(o, 0, sizeof *o);
    char resolved[PATH_MAX];
    if (!realpath(dir, resolved)) {
        llmr_strbuf_printf(err, "model directory %s: %s", dir, strerror(errno));
        return LLMR_NOT_FOUND;
    }
    o->name = strdup(name);
    o->dir = strdup(resolved);
    o->format = strdup(format);
    if (!o->name || !o->dir || !o->format) {
        llmr_model_desc_close(o);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st;
    llmr_model_format f;
    if (strcmp(format, "directml") == 0) {
        st = from_directml_files(o, err);
    } else if (llmr_model_format_parse(format, &f)) {
        st = from_storage(o, f, gguf_file, err);
    } else {
        llmr_strbuf_printf(err, "unknown model format \"%s\"", format);
        st = LLMR_INVALID_ARGUMENT;
    }
    if (st != LLMR_OK) {
        llmr_model_desc_close(o);
        return st;
    }
    llmr_engine_model_desc *d = &o->desc;
    d->struct_size = sizeof *d;
    d->name = o->name;
    d->dir = o->dir;
    d->format = o->format;
    d->runtime = o->runtime;
    d->architecture = o->architecture;
    d->primary_file = o->primary_file;
    d->config_json = o->config_json;
    d->checked_config_json = o->checked_config_json;
    d->files = o->files;
    d->file_sizes = o->file_sizes;
    d->tensors = o->tensors;
    return LLMR_OK;
}
