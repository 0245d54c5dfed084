/* config.json field reads: see config_reader.h. */
#include "models/config_reader.h"

#include <math.h>
#include <stdarg.h>

#include "common/json_util.h"
#include "common/strbuf.h"

void llmr_config_reader_init(llmr_config_reader *r, const json_t *root, const char *file,
                             const char *context, llmr_problems *problems)
{
    r->root = root;
    r->file = file;
    r->context = context;
    r->problems = problems;
    r->ok = true;
}

void llmr_config_fail(llmr_config_reader *r, llmr_status code, const char *key,
                      const char *fmt, ...)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb, "%s ", key);
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    llmr_problems_add(r->problems, code, r->file, "%s", llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    r->ok = false;
}

static void missing(llmr_config_reader *r, const char *name)
{
    llmr_config_fail(r, LLMR_MODEL_CORRUPT, name, "is missing (%s needs it)", r->context);
}

static void wrong(llmr_config_reader *r, const char *name, const char *expected, const json_t *got)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_json_describe(&sb, got);
    llmr_config_fail(r, LLMR_MODEL_CORRUPT, name, "must be %s, got %s", expected,
                     llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
}

/* "parent.key" or "key". */
static void field_name(llmr_strbuf *sb, const char *parent, const char *key)
{
    if (parent)
        llmr_strbuf_printf(sb, "%s.%s", parent, key);
    else
        llmr_strbuf_puts(sb, key);
}

bool llmr_config_u64_in(llmr_config_reader *r, const json_t *parent, const char *parent_name,
                        const char *key, uint64_t min, uint64_t max, bool required,
                        uint64_t def, uint64_t *out)
{
    llmr_strbuf name = LLMR_STRBUF_INIT;
    field_name(&name, parent_name, key);
    const json_t *v = json_is_object(parent) ? json_object_get(parent, key) : NULL;
    bool ok = false;
    uint64_t x;
    if (!v || json_is_null(v)) {
        if (required)
            missing(r, llmr_strbuf_cstr(&name));
        else
            *out = def;
        ok = !required;
    } else if (!llmr_json_as_u64(v, &x) || x < min || x > max) {
        llmr_strbuf range = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&range, "a whole number from %llu to %llu", (unsigned long long)min,
                           (unsigned long long)max);
        wrong(r, llmr_strbuf_cstr(&name), llmr_strbuf_cstr(&range), v);
        llmr_strbuf_free(&range);
    } else {
        *out = x;
        ok = true;
    }
    llmr_strbuf_free(&name);
    return ok;
}

bool llmr_config_f64_in(llmr_config_reader *r, const json_t *parent, const char *parent_name,
                        const char *key, double min, double max, bool required, double def,
                        double *out)
{
    llmr_strbuf name = LLMR_STRBUF_INIT;
    field_name(&name, parent_name, key);
    const json_t *v = json_is_object(parent) ? json_object_get(parent, key) : NULL;
    bool ok = false;
    if (!v || json_is_null(v)) {
        if (required)
            missing(r, llmr_strbuf_cstr(&name));
        else
            *out = def;
        ok = !required;
    } else if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
               json_number_value(v) < min || json_number_value(v) > max) {
        llmr_strbuf range = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&range, "a number from %g to %g", min, max);
        wrong(r, llmr_strbuf_cstr(&name), llmr_strbuf_cstr(&range), v);
        llmr_strbuf_free(&range);
    } else {
        *out = json_number_value(v);
        ok = true;
    }
    llmr_strbuf_free(&name);
    return ok;
}

bool llmr_config_u64(llmr_config_reader *r, const char *key, uint64_t min, uint64_t max,
                     bool required, uint64_t def, uint64_t *out)
{
    return llmr_config_u64_in(r, r->root, NULL, key, min, max, required, def, out);
}

bool llmr_config_f64(llmr_config_reader *r, const char *key, double min, double max,
                     bool required, double def, double *out)
{
    return llmr_config_f64_in(r, r->root, NULL, key, min, max, required, def, out);
}

bool llmr_config_bool(llmr_config_reader *r, const char *key, bool required, bool def, bool *out)
{
    const json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        if (required) {
            missing(r, key);
            return false;
        }
        *out = def;
        return true;
    }
    if (!json_is_boolean(v)) {
        wrong(r, key, "true or false", v);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

const char *llmr_config_string(llmr_config_reader *r, const char *key, bool required)
{
    const json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        if (required)
            missing(r, key);
        return NULL;
    }
    if (!json_is_string(v)) {
        wrong(r, key, "a string", v);
        return NULL;
    }
    return json_string_value(v);
}
