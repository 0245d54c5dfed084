/* Values of the template renderer and Python's view of them: truth, ==, ordering, str()
 * and repr() (what `{{ x }}` prints: None, True, 1.0, 1e-05, ['a', {'b': None}]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

tpl_value tpl_cstr(const char *s)
{
    return tpl_str(s, strlen(s));
}

tpl_value tpl_new_list(tpl_arena *a, size_t cap)
{
    tpl_value v = {0};
    v.type = TV_LIST;
    if (cap > ((size_t)1 << 30))
        cap = (size_t)1 << 40; /* fails in tpl_alloc_raw as out of memory */
    /* the list and its items in one allocation; items are written before they are read */
    v.u.list = tpl_alloc_raw(a, sizeof *v.u.list + cap * sizeof(tpl_value));
    v.u.list->items = cap ? (tpl_value *)(v.u.list + 1) : NULL;
    v.u.list->n = 0;
    v.u.list->cap = cap;
    return v;
}

tpl_value tpl_new_dict(tpl_arena *a, size_t cap)
{
    tpl_value v = {0};
    v.type = TV_DICT;
    if (cap > ((size_t)1 << 30))
        cap = (size_t)1 << 40;
    v.u.dict = tpl_alloc_raw(a, sizeof *v.u.dict + 2 * cap * sizeof(tpl_value));
    v.u.dict->keys = cap ? (tpl_value *)(v.u.dict + 1) : NULL;
    v.u.dict->vals = cap ? v.u.dict->keys + cap : NULL;
    v.u.dict->n = 0;
    v.u.dict->cap = cap;
    return v;
}

void tpl_list_push(tpl_arena *a, tpl_list *l, tpl_value v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tpl_value *items = tpl_alloc_array(a, cap, sizeof *items);
        if (l->n)
            memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = v;
}

tpl_value *tpl_dict_get(const tpl_dict *d, tpl_value key)
{
    for (size_t i = 0; i < d->n; i++)
        if (tpl_equal(d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

tpl_value *tpl_dict_get_str(const tpl_dict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++) {
        const tpl_value *k = &d->keys[i];
        if (k->type == TV_STR && k->len == n && tpl_same_bytes(k->u.s, key, n))
            return &d->vals[i];
    }
    return NULL;
}

void tpl_dict_set(tpl_arena *a, tpl_dict *d, tpl_value key, tpl_value v)
{
    tpl_value *old = tpl_dict_get(d, key);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        tpl_value *k = tpl_alloc_array(a, cap, sizeof *k), *vals = tpl_alloc_array(a, cap, sizeof *vals);
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof *k);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = k;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = v;
    d->n++;
}

/* ---- Python semantics -------------------------------------------------------------- */

bool tpl_truthy(tpl_value v)
{
    switch (v.type) {
    case TV_UNDEFINED:
    case TV_NONE: return false;
    case TV_BOOL: return v.u.b;
    case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.f != 0.0;
    case TV_STR: return v.len != 0;
    case TV_LIST: return v.u.list->n != 0;
    case TV_DICT: return v.u.dict->n != 0;
    default: return true;
    }
}

bool tpl_is_number(tpl_value v)
{
    return v.type == TV_INT || v.type == TV_FLOAT || v.type == TV_BOOL;
}

double tpl_as_double(tpl_value v)
{
    return v.type == TV_FLOAT ? v.u.f : v.type == TV_INT ? (double)v.u.i : v.type == TV_BOOL ? (double)v.u.b : 0.0;
}

static int64_t as_int(tpl_value v)
{
    return v.type == TV_BOOL ? (int64_t)v.u.b : v.u.i;
}

bool tpl_equal(tpl_value a, tpl_value b)
{
    if (tpl_is_number(a) && tpl_is_number(b)) {
        if (a.type != TV_FLOAT && b.type != TV_FLOAT)
            return as_int(a) == as_int(b);
        return tpl_as_double(a) == tpl_as_double(b);
    }
    if (a.type != b.type)
        return false;
    switch (a.type) {
    case TV_UNDEFINED:
    case TV_NONE: return true;
    case TV_STR: return a.len == b.len && memcmp(a.u.s, b.u.s, a.len) == 0;
    case TV_LIST:
        if (a.is_tuple != b.is_tuple || a.u.list->n != b.u.list->n)
            return false;
        for (size_t i = 0; i < a.u.list->n; i++)
            if (!tpl_equal(a.u.list->items[i], b.u.list->items[i]))
                return false;
        return true;
    case TV_DICT:
        if (a.u.dict->n != b.u.dict->n)
            return false;
        for (size_t i = 0; i < a.u.dict->n; i++) {
            tpl_value *o = tpl_dict_get(b.u.dict, a.u.dict->keys[i]);
            if (!o || !tpl_equal(a.u.dict->vals[i], *o))
                return false;
        }
        return true;
    case TV_NAMESPACE: return a.u.dict == b.u.dict;
    case TV_MACRO: return a.u.macro->def == b.u.macro->def;
    default: return false;
    }
}

bool tpl_compare(tpl_value a, tpl_value b, int *out)
{
    if (tpl_is_number(a) && tpl_is_number(b)) {
        if (a.type != TV_FLOAT && b.type != TV_FLOAT) {
            int64_t x = as_int(a), y = as_int(b);
            *out = x < y ? -1 : x > y;
        } else {
            double x = tpl_as_double(a), y = tpl_as_double(b);
            *out = x < y ? -1 : x > y; /* nan: neither, as Python (0 here) */
        }
        return true;
    }
    if (a.type == TV_STR && b.type == TV_STR) {
        size_t n = a.len < b.len ? a.len : b.len;
        int c = memcmp(a.u.s, b.u.s, n);
        *out = c ? (c < 0 ? -1 : 1) : (a.len < b.len ? -1 : a.len > b.len);
        return true;
    }
    if (a.type == TV_LIST && b.type == TV_LIST) {
        size_t n = a.u.list->n < b.u.list->n ? a.u.list->n : b.u.list->n;
        for (size_t i = 0; i < n; i++) {
            if (tpl_equal(a.u.list->items[i], b.u.list->items[i]))
                continue;
            return tpl_compare(a.u.list->items[i], b.u.list->items[i], out);
        }
        *out = a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
        return true;
    }
    return false;
}

const char *tpl_type_name(tpl_value v)
{
    switch (v.type) {
    case TV_UNDEFINED: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return v.is_tuple ? "tuple" : "list";
    case TV_DICT: return "dict";
    case TV_NAMESPACE: return "Namespace";
    case TV_MACRO: return "Macro";
    case TV_LOOP: return "LoopContext";
    case TV_CYCLER: return "Cycler";
    default: return "builtin_function_or_method";
    }
}

uint8_t tpl_owner_code(tpl_value obj)
{
    return (uint8_t)(1 + (obj.type << 1 | (obj.type == TV_LIST && obj.is_tuple)));
}

const char *tpl_owner_name(uint8_t code)
{
    if (code == 0)
        return NULL;
    tpl_value v = {.type = (uint8_t)((code - 1) >> 1)};
    v.is_tuple = (code - 1) & 1;
    return tpl_type_name(v);
}

/* ---- str() and repr() -------------------------------------------------------------- */

void tpl_write_float(llmr_strbuf *sb, double f)
{
    if (isnan(f)) {
        llmr_strbuf_puts(sb, "nan");
        return;
    }
    if (isinf(f)) {
        llmr_strbuf_puts(sb, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest %.Ne that reads back as f */
    char buf[40];
    int prec = 0;
    for (prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    /* split into sign, digits and exponent */
    char digits[24];
    size_t nd = 0;
    const char *p = buf;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    if (neg)
        llmr_strbuf_putc(sb, '-');
    if (exp < -4 || exp >= 16) {
        llmr_strbuf_putc(sb, digits[0]);
        if (nd > 1) {
            llmr_strbuf_putc(sb, '.');
            llmr_strbuf_append(sb, digits + 1, nd - 1);
        }
        llmr_strbuf_printf(sb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        llmr_strbuf_puts(sb, "0.");
        for (int i = 0; i < -exp - 1; i++)
            llmr_strbuf_putc(sb, '0');
        llmr_strbuf_append(sb, digits, nd);
    } else {
        for (int i = 0; i <= exp; i++)
            llmr_strbuf_putc(sb, (size_t)i < nd ? digits[i] : '0');
        llmr_strbuf_putc(sb, '.');
        if ((size_t)exp + 1 < nd)
            llmr_strbuf_append(sb, digits + exp + 1, nd - (size_t)exp - 1);
        else
            llmr_strbuf_putc(sb, '0');
    }
}

/* Python's str.isprintable for one code point. */
static bool printable(int32_t cp)
{
    if (cp == ' ')
        return true;
    if (cp < 0x20 || cp == 0x7f)
        return false;
    if (cp < 0x7f)
        return true;
    utf8proc_category_t c = utf8proc_category(cp);
    return !(c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
             c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZL ||
             c == UTF8PROC_CATEGORY_ZP || c == UTF8PROC_CATEGORY_ZS);
}

static void write_str_repr(llmr_strbuf *sb, const char *s, size_t n)
{
    bool has_single = memchr(s, '\'', n) != NULL, has_double = memchr(s, '"', n) != NULL;
    char q = has_single && !has_double ? '"' : '\'';
    llmr_strbuf_putc(sb, q);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == q || c == '\\') {
            llmr_strbuf_putc(sb, '\\');
            llmr_strbuf_putc(sb, (char)c);
            i++;
        } else if (c == '\n') {
            llmr_strbuf_puts(sb, "\\n");
            i++;
        } else if (c == '\r') {
            llmr_strbuf_puts(sb, "\\r");
            i++;
        } else if (c == '\t') {
            llmr_strbuf_puts(sb, "\\t");
            i++;
        } else {
            utf8proc_int32_t cp;
            utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
            if (len <= 0) { /* cannot happen for checked input: show the byte */
                llmr_strbuf_printf(sb, "\\x%02x", c);
                i++;
                continue;
            }
            if (printable(cp))
                llmr_strbuf_append(sb, s + i, (size_t)len);
            else if (cp < 0x100)
                llmr_strbuf_printf(sb, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000)
                llmr_strbuf_printf(sb, "\\u%04x", (unsigned)cp);
            else
                llmr_strbuf_printf(sb, "\\U%08x", (unsigned)cp);
            i += (size_t)len;
        }
    }
    llmr_strbuf_putc(sb, q);
}

static bool write_value(llmr_strbuf *sb, tpl_value v, bool repr)
{
    switch (v.type) {
    case TV_UNDEFINED: return true;
    case TV_NONE: return llmr_strbuf_puts(sb, "None");
    case TV_BOOL: return llmr_strbuf_puts(sb, v.u.b ? "True" : "False");
    case TV_INT: {
        char buf[24], *p = buf + sizeof buf;
        uint64_t x = v.u.i < 0 ? 0 - (uint64_t)v.u.i : (uint64_t)v.u.i;
        do
            *--p = (char)('0' + x % 10);
        while (x /= 10);
        if (v.u.i < 0)
            *--p = '-';
        return llmr_strbuf_append(sb, p, (size_t)(buf + sizeof buf - p));
    }
    case TV_FLOAT: tpl_write_float(sb, v.u.f); return true;
    case TV_STR:
        if (repr)
            write_str_repr(sb, v.u.s, v.len);
        else
            llmr_strbuf_append(sb, v.u.s, v.len);
        return true;
    case TV_LIST:
        llmr_strbuf_putc(sb, v.is_tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i)
                llmr_strbuf_puts(sb, ", ");
            write_value(sb, v.u.list->items[i], true);
        }
        if (v.is_tuple && v.u.list->n == 1)
            llmr_strbuf_putc(sb, ',');
        return llmr_strbuf_putc(sb, v.is_tuple ? ')' : ']');
    case TV_DICT:
        llmr_strbuf_putc(sb, '{');
        for (size_t i = 0; i < v.u.dict->n; i++) {
            if (i)
                llmr_strbuf_puts(sb, ", ");
            write_value(sb, v.u.dict->keys[i], true);
            llmr_strbuf_puts(sb, ": ");
            write_value(sb, v.u.dict->vals[i], true);
        }
        return llmr_strbuf_putc(sb, '}');
    case TV_NAMESPACE: return llmr_strbuf_puts(sb, "<Namespace>");
    case TV_MACRO: return llmr_strbuf_puts(sb, "<Macro>");
    case TV_LOOP: return llmr_strbuf_puts(sb, "<LoopContext>");
    default: return llmr_strbuf_puts(sb, "<built-in function>");
    }
}

bool tpl_write_str(llmr_strbuf *sb, tpl_value v)
{
    return write_value(sb, v, false);
}

bool tpl_write_repr(llmr_strbuf *sb, tpl_value v)
{
    return write_value(sb, v, true);
}
