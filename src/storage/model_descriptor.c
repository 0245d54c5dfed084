/* The ModelDescriptor as JSON: what `llmr inspect` prints and what the router will
 * store and send to nodes. */
#include <string.h>

#include "storage/model_storage.h"

static json_t *string_or_null(const char *s)
{
    json_t *v = s ? json_string(s) : NULL;
    return v ? v : json_null();
}

json_t *llmr_model_descriptor_json(const llmr_model *m)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "path", string_or_null(m->dir));
    json_object_set_new(o, "format", json_string(llmr_model_format_name(m->format)));
    json_object_set_new(o, "runtime", string_or_null(llmr_runtime_name(m->runtime)));
    if (m->runtime == LLMR_RUNTIME_NONE)
        json_object_set_new(o, "unsupported_reason", string_or_null(m->unsupported_reason));
    json_object_set_new(o, "model_type", string_or_null(m->model_type));
    json_object_set_new(o, "architecture", string_or_null(m->architecture));
    json_object_set_new(o, "primary_file", string_or_null(m->primary_file));
    json_t *files = json_array();
    for (size_t i = 0; i < m->file_count; i++) {
        json_t *f = json_object();
        json_object_set_new(f, "name", string_or_null(m->files[i].name));
        json_object_set_new(f, "size", json_integer((json_int_t)m->files[i].size));
        json_object_set_new(f, "role", json_string(m->files[i].role));
        json_array_append_new(files, f);
    }
    json_object_set_new(o, "files", files);
    json_object_set_new(o, "total_bytes", json_integer((json_int_t)m->total_bytes));
    size_t tensors = m->tensor_count;
    for (size_t i = 0; i < m->gguf_count; i++)
        tensors += m->gguf[i].header.tensor_count;
    json_object_set_new(o, "tensor_count", json_integer((json_int_t)tensors));
    json_object_set_new(o, "config", m->engine_config ? json_incref(m->engine_config) : json_null());
    json_object_set_new(o, "notes", json_incref(m->notes));
    json_object_set_new(o, "warnings", json_incref(m->warnings));
    return o;
}
