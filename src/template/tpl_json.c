/* JSON for the template renderer: the context in (jansson -> values, objects keep their
 * order) and the tojson filter out, byte for byte as Python's json.dumps writes it
 * (separators, indent as a number or a string, ensure_ascii, sort_keys, floats as
 * repr, Infinity/NaN, non-string keys turned into strings). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

tpl_value tpl_from_json(tpl_render *r, const json_t *j)
{
    tpl_arena *a = &r->arena;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        tpl_value d = tpl_new_dict(a, json_object_size(j));
        tpl_dict *dict = d.u.dict;
        /* keys are unique in jansson: append without the lookup */
        for (void *it = json_object_iter((json_t *)j); it && dict->n < dict->cap;
             it = json_object_iter_next((json_t *)j, it)) {
            dict->keys[dict->n] = tpl_str(json_object_iter_key(it), json_object_iter_key_len(it));
            dict->vals[dict->n] = tpl_from_json(r, json_object_iter_value(it));
            dict->n++;
        }
        return d;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        tpl_value l = tpl_new_list(a, n);
        for (size_t i = 0; i < n; i++)
            l.u.list->items[i] = tpl_from_json(r, json_array_get(j, i));
        l.u.list->n = n;
        return l;
    }
    case JSON_STRING:
        if (json_string_length(j) > TPL_MAX_STR)
            tpl_fail(r, NULL, "a string of the context is longer than %zu bytes", TPL_MAX_STR);
        return tpl_str(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return tpl_int((int64_t)json_integer_value(j));
    case JSON_REAL: return tpl_float(json_real_value(j));
    case JSON_TRUE: return tpl_bool(true);
    case JSON_FALSE: return tpl_bool(false);
    default: return tpl_none();
    }
}

static void put_u(llmr_strbuf *sb, unsigned cp)
{
    llmr_strbuf_printf(sb, "\\u%04x", cp);
}

static void write_json_str(llmr_strbuf *sb, const char *s, size_t n, bool ascii)
{
    llmr_strbuf_putc(sb, '"');
    size_t run = 0; /* bytes [run, i) go out as they are, in one append */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x7f || !ascii)) {
            i++;
            continue;
        }
        llmr_strbuf_append(sb, s + run, i - run);
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            llmr_strbuf_puts(sb, esc);
            i++;
        } else if (c < 0x80) { /* other controls, and DEL when ascii */
            put_u(sb, c);
            i++;
        } else { /* ascii: a non-ASCII character as \\uXXXX (a surrogate pair above the BMP) */
            utf8proc_int32_t cp;
            utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
            if (len <= 0) {
                put_u(sb, 0xfffd);
                i++;
            } else {
                if (cp >= 0x10000) {
                    unsigned v = (unsigned)cp - 0x10000;
                    put_u(sb, 0xD800 + (v >> 10));
                    put_u(sb, 0xDC00 + (v & 0x3FF));
                } else {
                    put_u(sb, (unsigned)cp);
                }
                i += (size_t)len;
            }
        }
        run = i;
    }
    llmr_strbuf_append(sb, s + run, n - run);
    llmr_strbuf_putc(sb, '"');
}

/* A newline and level indents; false with *why set when that would take the text past
 * o->max_len (an indent of 10^14 spaces is a valid template, not a valid allocation). */
static bool newline_indent(llmr_strbuf *sb, const tpl_json_opts *o, int level, const char **why)
{
    size_t width = o->indent_str ? strlen(o->indent_str) : (size_t)o->indent;
    if (sb->len >= o->max_len || (width && (size_t)level > (o->max_len - sb->len - 1) / width)) {
        *why = "the indented JSON would pass the output limit";
        return false;
    }
    llmr_strbuf_putc(sb, '\n');
    for (int i = 0; i < level; i++) {
        if (o->indent_str)
            llmr_strbuf_puts(sb, o->indent_str);
        else
            for (size_t k = 0; k < width; k++)
                llmr_strbuf_putc(sb, ' ');
    }
    return true;
}

/* false with *why set once the text is past o->max_len */
static bool within_limit(const llmr_strbuf *sb, const tpl_json_opts *o, const char **why)
{
    if (sb->len <= o->max_len)
        return true;
    *why = "the JSON would pass the output limit";
    return false;
}

static bool indented(const tpl_json_opts *o)
{
    return o->indent_str || o->indent >= 0;
}

/* A dict key as json.dumps turns it into a string; false when it cannot. */
static bool key_text(llmr_strbuf *sb, tpl_value k)
{
    switch (k.type) {
    case TV_STR: llmr_strbuf_append(sb, k.u.s, k.len); return true;
    case TV_BOOL: llmr_strbuf_puts(sb, k.u.b ? "true" : "false"); return true;
    case TV_NONE: llmr_strbuf_puts(sb, "null"); return true;
    case TV_INT: llmr_strbuf_printf(sb, "%lld", (long long)k.u.i); return true;
    case TV_FLOAT: tpl_write_float(sb, k.u.f); return true;
    default: return false;
    }
}

static bool write_json(llmr_strbuf *sb, tpl_value v, const tpl_json_opts *o, int level, const char **why);

static int cmp_keys(const void *x, const void *y)
{
    const llmr_strbuf *a = *(const llmr_strbuf *const *)x, *b = *(const llmr_strbuf *const *)y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(llmr_strbuf_cstr(a), llmr_strbuf_cstr(b), n);
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

typedef struct keyed {
    llmr_strbuf key; /* first: cmp_keys reads it through the pointer */
    tpl_value val;
} keyed;

/* A key as json.dumps writes it (a JSON string); false when it cannot be one. */
static bool write_key(llmr_strbuf *sb, tpl_value k, bool ascii)
{
    if (k.type == TV_STR) {
        write_json_str(sb, k.u.s, k.len, ascii);
        return true;
    }
    llmr_strbuf text = LLMR_STRBUF_INIT;
    bool ok = key_text(&text, k);
    if (ok)
        write_json_str(sb, llmr_strbuf_cstr(&text), text.len, ascii);
    llmr_strbuf_free(&text);
    return ok;
}

static bool write_dict(llmr_strbuf *sb, const tpl_dict *d, const tpl_json_opts *o, int level, const char **why)
{
    if (d->n == 0)
        return llmr_strbuf_puts(sb, "{}");
    if (!o->sort_keys) { /* in the dict's order: no copies */
        llmr_strbuf_putc(sb, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                llmr_strbuf_puts(sb, o->item_sep);
            if (indented(o) && !newline_indent(sb, o, level + 1, why))
                return false;
            if (!write_key(sb, d->keys[i], o->ensure_ascii)) {
                *why = "keys must be str, int, float, bool or None";
                return false;
            }
            llmr_strbuf_puts(sb, o->key_sep);
            if (!write_json(sb, d->vals[i], o, level + 1, why) || !within_limit(sb, o, why))
                return false;
        }
        if (indented(o) && !newline_indent(sb, o, level, why))
            return false;
        return llmr_strbuf_putc(sb, '}');
    }
    keyed *items = calloc(d->n, sizeof *items);
    keyed **order = calloc(d->n, sizeof *order);
    bool ok = items && order;
    for (size_t i = 0; ok && i < d->n; i++) {
        llmr_strbuf_init(&items[i].key);
        items[i].val = d->vals[i];
        order[i] = &items[i];
        if (!key_text(&items[i].key, d->keys[i])) {
            *why = "keys must be str, int, float, bool or None";
            ok = false;
        }
    }
    if (ok && o->sort_keys)
        qsort(order, d->n, sizeof *order, cmp_keys);
    if (ok) {
        llmr_strbuf_putc(sb, '{');
        for (size_t i = 0; ok && i < d->n; i++) {
            if (i)
                llmr_strbuf_puts(sb, o->item_sep);
            if (indented(o) && !newline_indent(sb, o, level + 1, why)) {
                ok = false;
                break;
            }
            write_json_str(sb, llmr_strbuf_cstr(&order[i]->key), order[i]->key.len, o->ensure_ascii);
            llmr_strbuf_puts(sb, o->key_sep);
            ok = write_json(sb, order[i]->val, o, level + 1, why) && within_limit(sb, o, why);
        }
        if (ok && indented(o))
            ok = newline_indent(sb, o, level, why);
        llmr_strbuf_putc(sb, '}');
    }
    for (size_t i = 0; items && i < d->n; i++)
        llmr_strbuf_free(&items[i].key);
    free(items);
    free(order);
    if (!items || !order)
        *why = "out of memory";
    return ok;
}

static bool write_json(llmr_strbuf *sb, tpl_value v, const tpl_json_opts *o, int level, const char **why)
{
    if (level > 200) {
        *why = "nesting too deep";
        return false;
    }
    switch (v.type) {
    case TV_NONE: return llmr_strbuf_puts(sb, "null");
    case TV_BOOL: return llmr_strbuf_puts(sb, v.u.b ? "true" : "false");
    case TV_INT: return llmr_strbuf_printf(sb, "%lld", (long long)v.u.i);
    case TV_FLOAT:
        if (v.u.f != v.u.f)
            return llmr_strbuf_puts(sb, "NaN");
        if (v.u.f > 1.7976931348623157e308)
            return llmr_strbuf_puts(sb, "Infinity");
        if (v.u.f < -1.7976931348623157e308)
            return llmr_strbuf_puts(sb, "-Infinity");
        tpl_write_float(sb, v.u.f);
        return true;
    case TV_STR: write_json_str(sb, v.u.s, v.len, o->ensure_ascii); return true;
    case TV_LIST:
        if (v.u.list->n == 0)
            return llmr_strbuf_puts(sb, "[]");
        llmr_strbuf_putc(sb, '[');
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i)
                llmr_strbuf_puts(sb, o->item_sep);
            if (indented(o) && !newline_indent(sb, o, level + 1, why))
                return false;
            if (!write_json(sb, v.u.list->items[i], o, level + 1, why) || !within_limit(sb, o, why))
                return false;
        }
        if (indented(o) && !newline_indent(sb, o, level, why))
            return false;
        return llmr_strbuf_putc(sb, ']');
    case TV_DICT: return write_dict(sb, v.u.dict, o, level, why);
    default:
        *why = v.type == TV_UNDEFINED ? "Object of type Undefined is not JSON serializable"
                                       : "the value is not JSON serializable";
        return false;
    }
}

bool tpl_to_json(llmr_strbuf *sb, tpl_value v, const tpl_json_opts *o, const char **why)
{
    *why = NULL;
    return write_json(sb, v, o, 0, why) && within_limit(sb, o, why);
}
