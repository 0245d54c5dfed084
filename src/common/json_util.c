/* JSON helpers: see json_util.h. */
#include "common/json_util.h"

#include <math.h>
#include <stdlib.h>

#include "common/fs_util.h"

json_t *llmr_json_parse(const char *text, size_t len, llmr_strbuf *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        llmr_strbuf_printf(err, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    return root;
}

json_t *llmr_json_load_file(const char *path, size_t max_bytes, llmr_status *status,
                            llmr_strbuf *err)
{
    char *data;
    size_t len;
    *status = llmr_read_file(path, max_bytes, &data, &len, err);
    if (*status != LLMR_OK)
        return NULL;
    json_t *root = llmr_json_parse(data, len, err);
    free(data);
    if (!root)
        *status = LLMR_MODEL_CORRUPT;
    return root;
}

bool llmr_json_as_u64(const json_t *value, uint64_t *out)
{
    if (json_is_integer(value)) {
        json_int_t v = json_integer_value(value);
        if (v < 0)
            return false;
        *out = (uint64_t)v;
        return true;
    }
    if (json_is_real(value)) {
        double v = json_real_value(value);
        if (!(v >= 0) || v != floor(v) || v >= 18446744073709551616.0)
            return false;
        *out = (uint64_t)v;
        return true;
    }
    return false;
}

void llmr_json_describe(llmr_strbuf *sb, const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        llmr_strbuf_puts(sb, "an object");
        return;
    case JSON_ARRAY:
        llmr_strbuf_puts(sb, "an array");
        return;
    case JSON_NULL:
        llmr_strbuf_puts(sb, "null");
        return;
    case JSON_TRUE:
        llmr_strbuf_puts(sb, "true");
        return;
    case JSON_FALSE:
        llmr_strbuf_puts(sb, "false");
        return;
    case JSON_INTEGER:
        llmr_strbuf_printf(sb, "%lld", (long long)json_integer_value(value));
        return;
    case JSON_REAL:
        llmr_strbuf_printf(sb, "%g", json_real_value(value));
        return;
    case JSON_STRING: {
        size_t n = json_string_length(value);
        llmr_strbuf_putc(sb, '"');
        llmr_strbuf_put_display(sb, json_string_value(value), n > 64 ? 64 : n);
        llmr_strbuf_puts(sb, n > 64 ? "...\"" : "\"");
        return;
    }
    }
}

char *llmr_json_pretty(const json_t *value)
{
    return json_dumps(value, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
}
