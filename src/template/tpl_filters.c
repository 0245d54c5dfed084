/* jinja2's filters and tests for the template renderer, with their Python behaviour
 * (jinja2 3.1: map, select, reject, selectattr, rejectattr and unique give generators;
 * round is Python's round; int and float fall back to their default) and Hugging Face's
 * tojson (json.dumps with ensure_ascii=False unless asked). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

#define A(r) (&(r)->arena)

static bool eq(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

static tpl_value str_of(tpl_render *r, tpl_value v)
{
    return v.type == TV_UNDEFINED ? tpl_str("", 0) : tpl_to_str(r, v);
}

static tpl_value from_sb(tpl_render *r, llmr_strbuf *sb)
{
    tpl_value v = tpl_str(tpl_strndup(A(r), llmr_strbuf_cstr(sb), sb->len), sb->len);
    llmr_strbuf_free(sb);
    return v;
}

static tpl_value call_method(tpl_render *r, const tpl_node *at, tpl_value self, const char *name,
                             const tpl_value *args, size_t n)
{
    tpl_value m = tpl_method(r, at, self, name, strlen(name));
    tpl_call_args a = {0};
    a.pos = args;
    a.npos = n;
    return tpl_call(r, at, m, &a);
}

static tpl_value gen(tpl_value l)
{
    l.is_gen = true;
    return l;
}

/* An attribute path "a.b.0" of v, as jinja2's make_attrgetter. */
static tpl_value attr_path(tpl_render *r, const tpl_node *at, tpl_value v, tpl_value path)
{
    if (path.type == TV_INT)
        return tpl_getitem(r, at, v, path);
    if (path.type != TV_STR)
        tpl_fail(r, at, "an attribute name must be a string");
    const char *p = path.u.s;
    size_t n = path.len, i = 0;
    while (i <= n) {
        size_t e = i;
        while (e < n && p[e] != '.')
            e++;
        bool digits = e > i;
        int64_t k = 0;
        for (size_t j = i; j < e; j++) {
            if (p[j] < '0' || p[j] > '9')
                digits = false;
            else if (k > (INT64_MAX - 9) / 10)
                k = INT64_MAX; /* jinja2's int() has no bound: an index past every list */
            else
                k = k * 10 + (p[j] - '0');
        }
        v = digits ? tpl_getitem(r, at, v, tpl_int(k)) : tpl_getitem(r, at, v, tpl_str(p + i, e - i));
        i = e + 1;
    }
    return v;
}

static tpl_call_args rest_args(const tpl_call_args *a, size_t from)
{
    tpl_call_args b = *a;
    b.pos = a->npos > from ? a->pos + from : NULL;
    b.npos = a->npos > from ? a->npos - from : 0;
    return b;
}

/* Lowercased string keys when not case sensitive (sort, dictsort, unique, min, max). */
static tpl_value sort_key(tpl_render *r, const tpl_node *at, tpl_value v, bool case_sensitive)
{
    if (case_sensitive || v.type != TV_STR)
        return v;
    return call_method(r, at, v, "lower", NULL, 0);
}

typedef struct keyed {
    tpl_value key, val;
    size_t index;
} keyed;

static bool keyed_before(tpl_render *r, const tpl_node *at, const keyed *a, const keyed *b)
{
    int c;
    if (!tpl_compare(a->key, b->key, &c))
        tpl_fail(r, at, "'<' not supported between instances of '%s' and '%s'", tpl_type_name(a->key),
                 tpl_type_name(b->key));
    return c ? c < 0 : a->index < b->index; /* stable */
}

/* A merge sort by key (qsort has no context to fail through). */
static void sort_keyed(tpl_render *r, const tpl_node *at, keyed *k, size_t n)
{
    if (n < 2)
        return;
    keyed *tmp = tpl_alloc(A(r), n * sizeof *tmp);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = keyed_before(r, at, &k[j], &k[i]) ? k[j++] : k[i++];
            while (i < mid)
                tmp[o++] = k[i++];
            while (j < hi)
                tmp[o++] = k[j++];
        }
        memcpy(k, tmp, n * sizeof *k);
    }
}

/* ---- printf-style formatting (the format filter and str % args) ---------------------- */

static tpl_value percent_format(tpl_render *r, const tpl_node *at, tpl_value fmt, const tpl_call_args *a)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t argi = 0;
    const char *p = fmt.u.s;
    size_t n = fmt.len;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') {
            llmr_strbuf_putc(&sb, p[i]);
            continue;
        }
        if (++i >= n) {
            llmr_strbuf_free(&sb);
            tpl_fail(r, at, "incomplete format");
        }
        tpl_value v;
        if (p[i] == '%') {
            llmr_strbuf_putc(&sb, '%');
            continue;
        }
        if (p[i] == '(') {
            size_t e = i + 1;
            while (e < n && p[e] != ')')
                e++;
            const tpl_value *d = a->npos ? &a->pos[0] : NULL;
            tpl_value *found = d && d->type == TV_DICT ? tpl_dict_get_str(d->u.dict, p + i + 1, e - i - 1) : NULL;
            if (!found) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "format requires a mapping with key '%.*s'", (int)(e - i - 1), p + i + 1);
            }
            v = *found;
            i = e + 1;
        } else {
            if (argi >= a->npos) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "not enough arguments for format string");
            }
            v = a->pos[argi++];
        }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (i < n && strchr("-+ #0123456789.", p[i]) && k < sizeof spec - 4)
            spec[k++] = p[i++];
        if (i >= n) {
            llmr_strbuf_free(&sb);
            tpl_fail(r, at, "incomplete format");
        }
        char conv = p[i];
        if (conv == 's' || conv == 'r') {
            llmr_strbuf tmp = LLMR_STRBUF_INIT;
            if (conv == 'r')
                tpl_write_repr(&tmp, v);
            else
                tpl_write_str(&tmp, v);
            spec[k++] = 's';
            spec[k] = 0;
            llmr_strbuf_printf(&sb, spec, llmr_strbuf_cstr(&tmp));
            llmr_strbuf_free(&tmp);
        } else if (strchr("dixXo", conv)) {
            if (!tpl_is_number(v)) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "%%%c format: a real number is required, not %s", conv, tpl_type_name(v));
            }
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = conv == 'i' ? 'd' : conv;
            spec[k] = 0;
            llmr_strbuf_printf(&sb, spec, (long long)(v.type == TV_FLOAT ? (long long)v.u.f : v.type == TV_BOOL ? v.u.b : v.u.i));
        } else if (strchr("fFeEgG", conv)) {
            if (!tpl_is_number(v)) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "must be real number, not %s", tpl_type_name(v));
            }
            spec[k++] = conv;
            spec[k] = 0;
            llmr_strbuf_printf(&sb, spec, tpl_as_double(v));
        } else {
            llmr_strbuf_free(&sb);
            tpl_fail(r, at, "unsupported format character '%c'", conv);
        }
    }
    return from_sb(r, &sb);
}

/* ---- tests ---------------------------------------------------------------------------- */

typedef tpl_test_fn test_fn;

static const tpl_value *arg0(tpl_render *r, const tpl_node *at, const tpl_call_args *a, const char *test)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "the test '%s' needs an argument", test);
    return x;
}

static int cmp_or_fail(tpl_render *r, const tpl_node *at, tpl_value a, tpl_value b, const char *op)
{
    int c;
    tpl_require_defined(r, at, a);
    tpl_require_defined(r, at, b);
    if (!tpl_compare(a, b, &c))
        tpl_fail(r, at, "'%s' not supported between instances of '%s' and '%s'", op, tpl_type_name(a), tpl_type_name(b));
    return c;
}

static bool t_defined(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type != TV_UNDEFINED; }
static bool t_undefined(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_UNDEFINED; }
static bool t_none(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_NONE; }
static bool t_boolean(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_BOOL; }
static bool t_false(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_BOOL && !v.u.b; }
static bool t_true(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_BOOL && v.u.b; }
static bool t_integer(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_INT; }
static bool t_float(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_FLOAT; }
static bool t_number(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return tpl_is_number(v); }
static bool t_string(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_STR; }
static bool t_mapping(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_DICT; }
static bool t_iterable(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_STR || v.type == TV_LIST || v.type == TV_DICT || v.type == TV_UNDEFINED; }
static bool t_sequence(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_STR || (v.type == TV_LIST && !v.is_gen) || v.type == TV_DICT || v.type == TV_UNDEFINED; }
static bool t_callable(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)a; return v.type == TV_MACRO || v.type == TV_BUILTIN; }
static bool t_escaped(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)r; (void)at; (void)v; (void)a; return false; }

static int64_t int_of(tpl_render *r, const tpl_node *at, tpl_value v, const char *test)
{
    if (v.type == TV_INT)
        return v.u.i;
    if (v.type == TV_BOOL)
        return v.u.b;
    tpl_require_defined(r, at, v);
    tpl_fail(r, at, "the test '%s' needs an integer, not '%s'", test, tpl_type_name(v));
}

static bool t_odd(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)a; return int_of(r, at, v, "odd") % 2 != 0; }
static bool t_even(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)a; return int_of(r, at, v, "even") % 2 == 0; }

static bool t_divisibleby(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    int64_t d = int_of(r, at, *arg0(r, at, a, "divisibleby"), "divisibleby");
    if (d == 0)
        tpl_fail(r, at, "integer division or modulo by zero");
    return int_of(r, at, v, "divisibleby") % d == 0;
}

static bool t_eq(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return tpl_equal(v, *arg0(r, at, a, "eq")); }
static bool t_ne(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return !tpl_equal(v, *arg0(r, at, a, "ne")); }
static bool t_lt(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return cmp_or_fail(r, at, v, *arg0(r, at, a, "lt"), "<") < 0; }
static bool t_le(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return cmp_or_fail(r, at, v, *arg0(r, at, a, "le"), "<=") <= 0; }
static bool t_gt(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return cmp_or_fail(r, at, v, *arg0(r, at, a, "gt"), ">") > 0; }
static bool t_ge(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return cmp_or_fail(r, at, v, *arg0(r, at, a, "ge"), ">=") >= 0; }

static bool t_in(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    tpl_value seq = *arg0(r, at, a, "in");
    if (seq.type == TV_STR) {
        if (v.type != TV_STR)
            tpl_fail(r, at, "'in <string>' requires string as left operand, not %s", tpl_type_name(v));
        if (!v.len)
            return true;
        for (size_t i = 0; i + v.len <= seq.len; i++)
            if (!memcmp(seq.u.s + i, v.u.s, v.len))
                return true;
        return false;
    }
    if (seq.type == TV_DICT)
        return tpl_dict_get(seq.u.dict, v) != NULL;
    tpl_list *items = tpl_iterate(r, at, seq);
    for (size_t i = 0; i < items->n; i++)
        if (tpl_equal(items->items[i], v))
            return true;
    return false;
}

static bool t_sameas(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    tpl_value o = *arg0(r, at, a, "sameas");
    if (v.type != o.type)
        return false;
    switch (v.type) {
    case TV_NONE: case TV_UNDEFINED: return true;
    case TV_BOOL: return v.u.b == o.u.b;
    case TV_INT: return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's small ints */
    case TV_STR: return v.u.s == o.u.s && v.len == o.len;
    case TV_LIST: return v.u.list == o.u.list;
    case TV_DICT: case TV_NAMESPACE: return v.u.dict == o.u.dict;
    default: return false;
    }
}

static bool t_lower(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    return v.type == TV_STR && tpl_truthy(call_method(r, at, v, "islower", NULL, 0));
}

static bool t_upper(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    return v.type == TV_STR && tpl_truthy(call_method(r, at, v, "isupper", NULL, 0));
}

static bool t_filter(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a);
static bool t_test(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a);

typedef struct named_test {
    const char *name;
    test_fn fn;
} named_test;

static const named_test TESTS[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
    {"false", t_false}, {"true", t_true}, {"integer", t_integer}, {"float", t_float},
    {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable}, {"escaped", t_escaped}, {"odd", t_odd},
    {"even", t_even}, {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq},
    {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt},
    {"le", t_le}, {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge},
    {">=", t_ge}, {"in", t_in}, {"sameas", t_sameas}, {"lower", t_lower}, {"upper", t_upper},
    {"filter", t_filter}, {"test", t_test}, {NULL, NULL}};

tpl_test_fn tpl_find_test(const char *name)
{
    for (size_t i = 0; TESTS[i].name; i++)
        if (eq(name, TESTS[i].name))
            return TESTS[i].fn;
    return NULL;
}

bool tpl_test(tpl_render *r, const tpl_node *at, const char *name, tpl_value v, const tpl_call_args *args)
{
    test_fn fn = tpl_find_test(name);
    if (!fn)
        tpl_fail(r, at, "No test named '%s'.", name);
    return fn(r, at, v, args);
}

/* ---- filters --------------------------------------------------------------------------- */

typedef tpl_filter_fn filter_fn;

static bool flag(const tpl_call_args *a, size_t pos, const char *name, bool def)
{
    const tpl_value *v = tpl_arg(a, pos, name);
    return v ? tpl_truthy(*v) : def;
}

static tpl_value f_default(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)r;
    (void)at;
    const tpl_value *d = tpl_arg(a, 0, "default_value");
    bool boolean = flag(a, 1, "boolean", false);
    if (v.type == TV_UNDEFINED || (boolean && !tpl_truthy(v)))
        return d ? *d : tpl_str("", 0);
    return v;
}

static tpl_value f_length(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    return tpl_int(tpl_length(r, at, v));
}

static tpl_value f_trim(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *chars = tpl_arg(a, 0, "chars");
    return call_method(r, at, str_of(r, v), "strip", chars, chars ? 1 : 0);
}

static tpl_value f_upper(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)a; return call_method(r, at, str_of(r, v), "upper", NULL, 0); }
static tpl_value f_lower(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)a; return call_method(r, at, str_of(r, v), "lower", NULL, 0); }
static tpl_value f_capitalize(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { (void)a; return call_method(r, at, str_of(r, v), "capitalize", NULL, 0); }

/* jinja2's title: each run after [-\s({[<] starts upper, continues lower. */
static tpl_value f_title(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value s = str_of(r, v);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    bool start = true;
    for (size_t i = 0; i < s.len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.len - i), &c);
        if (len <= 0) {
            c = 0xFFFD;
            len = 1;
        }
        bool sep = c == '-' || c == ' ' || (c >= 9 && c <= 13) || c == '(' || c == '{' || c == '[' || c == '<';
        utf8proc_int32_t o = sep ? c : start ? utf8proc_toupper(c) : utf8proc_tolower(c);
        utf8proc_uint8_t buf[4];
        llmr_strbuf_append(&sb, buf, (size_t)utf8proc_encode_char(o, buf));
        start = sep;
        i += (size_t)len;
    }
    return from_sb(r, &sb);
}

static tpl_value f_replace(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    tpl_value args[3];
    size_t n = 0;
    const tpl_value *o = tpl_arg(a, 0, "old"), *nw = tpl_arg(a, 1, "new"), *c = tpl_arg(a, 2, "count");
    if (!o || !nw)
        tpl_fail(r, at, "replace needs old and new");
    args[n++] = str_of(r, *o);
    args[n++] = str_of(r, *nw);
    if (c && c->type != TV_NONE)
        args[n++] = *c;
    return call_method(r, at, str_of(r, v), "replace", args, n);
}

static tpl_value f_tojson(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    tpl_json_opts o = {0};
    o.ensure_ascii = flag(a, 0, "ensure_ascii", false);
    o.sort_keys = flag(a, 3, "sort_keys", false);
    o.indent = -1;
    const tpl_value *ind = tpl_arg(a, 1, "indent"), *sep = tpl_arg(a, 2, "separators");
    if (ind && ind->type == TV_INT)
        o.indent = ind->u.i < 0 ? 0 : ind->u.i;
    else if (ind && ind->type == TV_STR)
        o.indent_str = tpl_strndup(A(r), ind->u.s, ind->len);
    else if (ind && ind->type != TV_NONE)
        tpl_fail(r, at, "tojson's indent must be an integer or a string");
    bool indented = o.indent >= 0 || o.indent_str;
    o.item_sep = indented ? "," : ", ";
    o.key_sep = ": ";
    o.max_len = r->opt.limits.max_output;
    if (sep && sep->type != TV_NONE) {
        if (sep->type != TV_LIST || sep->u.list->n != 2 || sep->u.list->items[0].type != TV_STR ||
            sep->u.list->items[1].type != TV_STR)
            tpl_fail(r, at, "tojson's separators must be two strings");
        o.item_sep = tpl_strndup(A(r), sep->u.list->items[0].u.s, sep->u.list->items[0].len);
        o.key_sep = tpl_strndup(A(r), sep->u.list->items[1].u.s, sep->u.list->items[1].len);
    }
    if (v.type == TV_LIST && v.is_gen)
        tpl_fail(r, at, "Object of type generator is not JSON serializable");
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    const char *why;
    if (!tpl_to_json(&sb, v, &o, &why)) {
        llmr_strbuf_free(&sb);
        tpl_fail(r, at, "tojson: %s", why ? why : "the value is not JSON serializable");
    }
    return from_sb(r, &sb);
}

static tpl_value f_join(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *d = tpl_arg(a, 0, "d"), *attr = tpl_arg(a, 1, "attribute");
    tpl_value sep = d ? str_of(r, *d) : tpl_str("", 0);
    tpl_list *items = tpl_iterate(r, at, v);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < items->n; i++) {
        tpl_value x = items->items[i];
        if (attr && attr->type != TV_NONE)
            x = attr_path(r, at, x, *attr);
        if (i)
            llmr_strbuf_append(&sb, sep.u.s, sep.len);
        tpl_write_str(&sb, x);
    }
    return from_sb(r, &sb);
}

static tpl_value f_first(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    tpl_list *items = tpl_iterate(r, at, v);
    return items->n ? items->items[0] : tpl_undefined("No first item, sequence was empty.");
}

static tpl_value f_last(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    if (v.type == TV_LIST && v.is_gen)
        return tpl_undefined("No last item, sequence was empty.");
    tpl_list *items = tpl_iterate(r, at, v);
    return items->n ? items->items[items->n - 1] : tpl_undefined("No last item, sequence was empty.");
}

static tpl_value f_list(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    tpl_list *items = tpl_iterate(r, at, v);
    tpl_value l = tpl_new_list(A(r), items->n);
    if (items->n)
        memcpy(l.u.list->items, items->items, items->n * sizeof(tpl_value));
    l.u.list->n = items->n;
    return l;
}

static tpl_value f_string(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    return str_of(r, v);
}

static tpl_value f_safe(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value s = str_of(r, v);
    s.is_safe = true;
    return s;
}

tpl_value tpl_escape(tpl_render *r, tpl_value v)
{
    if (v.type == TV_STR && v.is_safe)
        return v;
    tpl_value s = str_of(r, v);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.u.s[i];
        switch (c) {
        case '&': llmr_strbuf_puts(&sb, "&amp;"); break;
        case '<': llmr_strbuf_puts(&sb, "&lt;"); break;
        case '>': llmr_strbuf_puts(&sb, "&gt;"); break;
        case '"': llmr_strbuf_puts(&sb, "&#34;"); break;
        case '\'': llmr_strbuf_puts(&sb, "&#39;"); break;
        default: llmr_strbuf_putc(&sb, c);
        }
    }
    tpl_value out = from_sb(r, &sb);
    out.is_safe = true;
    return out;
}

static tpl_value f_escape(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    return tpl_escape(r, v);
}

/* Python's int() of a string: optional sign and blanks around decimal digits. */
static bool parse_int(tpl_value s, int64_t *out)
{
    const char *p = s.u.s, *e = p + s.len;
    while (p < e && (*p == ' ' || (*p >= 9 && *p <= 13)))
        p++;
    while (e > p && (e[-1] == ' ' || (e[-1] >= 9 && e[-1] <= 13)))
        e--;
    bool neg = false;
    if (p < e && (*p == '+' || *p == '-'))
        neg = *p++ == '-';
    if (p == e)
        return false;
    int64_t v = 0;
    for (const char *q = p; q < e; q++) {
        if (*q == '_' && q > p && q + 1 < e && q[1] != '_')
            continue;
        if (*q < '0' || *q > '9' || v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (*q - '0');
    }
    *out = neg ? -v : v;
    return true;
}

static bool parse_float(tpl_render *r, tpl_value s, double *out)
{
    char *z = tpl_strndup(A(r), s.u.s, s.len), *end;
    char *p = z;
    while (*p == ' ' || (*p >= 9 && *p <= 13))
        p++;
    if (!*p)
        return false;
    *out = strtod(p, &end);
    while (*end == ' ' || (*end >= 9 && *end <= 13))
        end++;
    return *end == 0 && end != p;
}

/* int(f): truncated; inf and nan give the default (Python: an error, which the filter
 * turns into its default); beyond 64 bits is an error (Python would have a big int). */
static tpl_value float_to_int(tpl_render *r, const tpl_node *at, double f, tpl_value def)
{
    if (!isfinite(f))
        return def;
    if (f >= 9223372036854775808.0 || f < -9223372036854775808.0)
        tpl_fail(r, at, "int: %g is beyond 64-bit integers", f);
    return tpl_int((int64_t)f);
}

static tpl_value f_int(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *d = tpl_arg(a, 0, "default");
    tpl_value def = d ? *d : tpl_int(0);
    int64_t i;
    double f;
    switch (v.type) {
    case TV_INT: return v;
    case TV_BOOL: return tpl_int(v.u.b);
    case TV_FLOAT: return float_to_int(r, at, v.u.f, def);
    case TV_STR:
        if (parse_int(v, &i))
            return tpl_int(i);
        if (parse_float(r, v, &f))
            return float_to_int(r, at, f, def);
        return def;
    default: return def;
    }
}

static tpl_value f_float(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    const tpl_value *d = tpl_arg(a, 0, "default");
    double f;
    if (tpl_is_number(v))
        return tpl_float(tpl_as_double(v));
    if (v.type == TV_STR && parse_float(r, v, &f))
        return tpl_float(f);
    return d ? *d : tpl_float(0.0);
}

static tpl_value f_round(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *pv = tpl_arg(a, 0, "precision"), *mv = tpl_arg(a, 1, "method");
    int64_t p = pv && pv->type == TV_INT ? pv->u.i : 0;
    const char *method = mv && mv->type == TV_STR ? tpl_strndup(A(r), mv->u.s, mv->len) : "common";
    if (!tpl_is_number(v)) {
        tpl_require_defined(r, at, v);
        tpl_fail(r, at, "round needs a number, not '%s'", tpl_type_name(v));
    }
    double x = tpl_as_double(v), scale = pow(10.0, (double)p);
    if (eq(method, "ceil"))
        return tpl_float(ceil(x * scale) / scale);
    if (eq(method, "floor"))
        return tpl_float(floor(x * scale) / scale);
    if (!eq(method, "common"))
        tpl_fail(r, at, "method must be common, ceil or floor");
    if (v.type != TV_FLOAT) /* Python's round(int, n) stays an int */
        return v.type == TV_BOOL ? tpl_int(v.u.b) : v;
    if (p < 0 || p > 300 || !isfinite(x))
        return tpl_float(p < 0 ? round(x / pow(10.0, (double)-p)) * pow(10.0, (double)-p) : x);
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)p, x); /* correctly rounded, ties to even */
    return tpl_float(strtod(buf, NULL));
}

static tpl_value f_abs(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    if (v.type == TV_INT && v.u.i == INT64_MIN)
        tpl_fail(r, at, "integer overflow in abs");
    if (v.type == TV_INT)
        return tpl_int(v.u.i < 0 ? -v.u.i : v.u.i);
    if (v.type == TV_BOOL)
        return tpl_int(v.u.b);
    if (v.type == TV_FLOAT)
        return tpl_float(fabs(v.u.f));
    tpl_require_defined(r, at, v);
    tpl_fail(r, at, "bad operand type for abs(): '%s'", tpl_type_name(v));
}

static tpl_value items_of(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.type == TV_UNDEFINED)
        return tpl_new_list(A(r), 0);
    if (v.type != TV_DICT)
        tpl_fail(r, at, "can only get item pairs from a mapping");
    return call_method(r, at, v, "items", NULL, 0);
}

static tpl_value f_items(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    return items_of(r, at, v);
}

static tpl_value f_dictsort(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    bool cs = flag(a, 0, "case_sensitive", false), rev = flag(a, 2, "reverse", false);
    const tpl_value *by = tpl_arg(a, 1, "by");
    int pos = 0;
    if (by && by->type == TV_STR) {
        if (by->len == 5 && !memcmp(by->u.s, "value", 5))
            pos = 1;
        else if (!(by->len == 3 && !memcmp(by->u.s, "key", 3)))
            tpl_fail(r, at, "You can only sort by either \"key\" or \"value\"");
    }
    tpl_value pairs = items_of(r, at, v);
    size_t n = pairs.u.list->n;
    keyed *k = tpl_alloc(A(r), (n + 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        k[i].val = pairs.u.list->items[i];
        k[i].key = sort_key(r, at, k[i].val.u.list->items[pos], cs);
        k[i].index = rev ? n - i : i;
    }
    sort_keyed(r, at, k, n);
    tpl_value out = tpl_new_list(A(r), n);
    for (size_t i = 0; i < n; i++)
        out.u.list->items[i] = k[rev ? n - 1 - i : i].val;
    out.u.list->n = n;
    return out;
}

static tpl_value f_sort(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    bool rev = flag(a, 0, "reverse", false), cs = flag(a, 1, "case_sensitive", false);
    const tpl_value *attr = tpl_arg(a, 2, "attribute");
    tpl_list *items = tpl_iterate(r, at, v);
    size_t n = items->n;
    keyed *k = tpl_alloc(A(r), (n + 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        k[i].val = items->items[i];
        tpl_value key = attr && attr->type != TV_NONE ? attr_path(r, at, k[i].val, *attr) : k[i].val;
        k[i].key = sort_key(r, at, key, cs);
        k[i].index = rev ? n - i : i;
    }
    sort_keyed(r, at, k, n);
    tpl_value out = tpl_new_list(A(r), n);
    for (size_t i = 0; i < n; i++)
        out.u.list->items[i] = k[rev ? n - 1 - i : i].val;
    out.u.list->n = n;
    return out;
}

static tpl_value min_max(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a, int sign)
{
    bool cs = flag(a, 0, "case_sensitive", false);
    const tpl_value *attr = tpl_arg(a, 1, "attribute");
    tpl_list *items = tpl_iterate(r, at, v);
    if (!items->n)
        return tpl_undefined(sign < 0 ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    size_t best = 0;
    tpl_value bk = {0};
    for (size_t i = 0; i < items->n; i++) {
        tpl_value key = attr && attr->type != TV_NONE ? attr_path(r, at, items->items[i], *attr) : items->items[i];
        key = sort_key(r, at, key, cs);
        if (i == 0 || cmp_or_fail(r, at, key, bk, "<") * sign > 0) {
            best = i;
            bk = key;
        }
    }
    return items->items[best];
}

static tpl_value f_min(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return min_max(r, at, v, a, -1); }
static tpl_value f_max(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return min_max(r, at, v, a, 1); }

static tpl_value f_sum(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *attr = tpl_arg(a, 0, "attribute"), *start = tpl_arg(a, 1, "start");
    tpl_value acc = start ? *start : tpl_int(0);
    tpl_list *items = tpl_iterate(r, at, v);
    for (size_t i = 0; i < items->n; i++) {
        tpl_value x = attr && attr->type != TV_NONE ? attr_path(r, at, items->items[i], *attr) : items->items[i];
        if (!tpl_is_number(x) || !tpl_is_number(acc))
            tpl_fail(r, at, "unsupported operand type(s) for +: '%s' and '%s'", tpl_type_name(acc), tpl_type_name(x));
        if (acc.type != TV_FLOAT && x.type != TV_FLOAT)
            acc = tpl_int((acc.type == TV_BOOL ? acc.u.b : acc.u.i) + (x.type == TV_BOOL ? x.u.b : x.u.i));
        else
            acc = tpl_float(tpl_as_double(acc) + tpl_as_double(x));
    }
    return acc;
}

static tpl_value f_reverse(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)a;
    if (v.type == TV_STR) {
        tpl_list *chars = tpl_iterate(r, at, v);
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        for (size_t i = chars->n; i-- > 0;)
            llmr_strbuf_append(&sb, chars->items[i].u.s, chars->items[i].len);
        return from_sb(r, &sb);
    }
    tpl_list *items = tpl_iterate(r, at, v);
    tpl_value out = tpl_new_list(A(r), items->n);
    for (size_t i = 0; i < items->n; i++)
        out.u.list->items[i] = items->items[items->n - 1 - i];
    out.u.list->n = items->n;
    return gen(out);
}

static tpl_value f_unique(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    bool cs = flag(a, 0, "case_sensitive", false);
    const tpl_value *attr = tpl_arg(a, 1, "attribute");
    tpl_list *items = tpl_iterate(r, at, v);
    tpl_value out = tpl_new_list(A(r), items->n), seen = tpl_new_list(A(r), items->n);
    for (size_t i = 0; i < items->n; i++) {
        tpl_value key = attr && attr->type != TV_NONE ? attr_path(r, at, items->items[i], *attr) : items->items[i];
        key = sort_key(r, at, key, cs);
        bool dup = false;
        for (size_t k = 0; k < seen.u.list->n && !dup; k++)
            dup = tpl_equal(seen.u.list->items[k], key);
        if (!dup) {
            tpl_list_push(A(r), seen.u.list, key);
            tpl_list_push(A(r), out.u.list, items->items[i]);
        }
    }
    return gen(out);
}

static tpl_value f_map(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    if (!tpl_truthy(v)) /* jinja2 maps only `if value` */
        return gen(tpl_new_list(A(r), 0));
    tpl_list *items = tpl_iterate(r, at, v);
    tpl_value out = tpl_new_list(A(r), items->n);
    const tpl_value *attr = tpl_arg(a, (size_t)-1, "attribute");
    if (attr) {
        const tpl_value *def = tpl_arg(a, (size_t)-1, "default");
        for (size_t i = 0; i < items->n; i++) {
            tpl_value x = attr_path(r, at, items->items[i], *attr);
            out.u.list->items[i] = x.type == TV_UNDEFINED && def ? *def : x;
        }
    } else {
        if (!a->npos || a->pos[0].type != TV_STR)
            tpl_fail(r, at, "map needs a filter name or attribute=");
        const char *name = tpl_strndup(A(r), a->pos[0].u.s, a->pos[0].len);
        tpl_call_args rest = rest_args(a, 1);
        for (size_t i = 0; i < items->n; i++)
            out.u.list->items[i] = tpl_filter(r, at, name, items->items[i], &rest);
    }
    out.u.list->n = items->n;
    return gen(out);
}

/* select / reject (attr: selectattr / rejectattr). */
static tpl_value select_common(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a,
                               bool keep, bool by_attr)
{
    if (!tpl_truthy(v)) /* jinja2 selects only `if value` */
        return gen(tpl_new_list(A(r), 0));
    tpl_list *items = tpl_iterate(r, at, v);
    tpl_value out = tpl_new_list(A(r), items->n);
    size_t first = 0;
    tpl_value attr = {0};
    if (by_attr) {
        if (!a->npos)
            tpl_fail(r, at, "selectattr and rejectattr need an attribute name");
        attr = a->pos[0];
        first = 1;
    }
    const char *test = NULL;
    if (a->npos > first) {
        if (a->pos[first].type != TV_STR)
            tpl_fail(r, at, "a test name must be a string");
        test = tpl_strndup(A(r), a->pos[first].u.s, a->pos[first].len);
    }
    tpl_call_args rest = rest_args(a, first + 1);
    for (size_t i = 0; i < items->n; i++) {
        tpl_value x = by_attr ? attr_path(r, at, items->items[i], attr) : items->items[i];
        bool pass = test ? tpl_test(r, at, test, x, &rest) : tpl_truthy(x);
        if (pass == keep)
            tpl_list_push(A(r), out.u.list, items->items[i]);
    }
    return gen(out);
}

static tpl_value f_select(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return select_common(r, at, v, a, true, false); }
static tpl_value f_reject(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return select_common(r, at, v, a, false, false); }
static tpl_value f_selectattr(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return select_common(r, at, v, a, true, true); }
static tpl_value f_rejectattr(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a) { return select_common(r, at, v, a, false, true); }

static tpl_value f_indent(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *w = tpl_arg(a, 0, "width");
    bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
    llmr_strbuf ind = LLMR_STRBUF_INIT;
    if (w && w->type == TV_INT && (w->u.i < 0 || (uint64_t)w->u.i > r->opt.limits.max_output))
        tpl_fail(r, at, "indent's width %lld would pass the output limit", (long long)w->u.i);
    if (w && w->type == TV_STR)
        llmr_strbuf_append(&ind, w->u.s, w->len);
    else
        for (int64_t i = 0; i < (w && w->type == TV_INT ? w->u.i : 4); i++)
            llmr_strbuf_putc(&ind, ' ');
    tpl_value s = str_of(r, v);
    /* s + "\n", split into lines (Python's splitlines) */
    char *text = tpl_alloc(A(r), s.len + 2);
    memcpy(text, s.u.s, s.len);
    text[s.len] = '\n';
    tpl_value lines = call_method(r, at, tpl_str(text, s.len + 1), "splitlines", NULL, 0);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (first)
        llmr_strbuf_append(&sb, ind.data ? ind.data : "", ind.len);
    for (size_t i = 0; i < lines.u.list->n; i++) {
        tpl_value line = lines.u.list->items[i];
        if (i) {
            llmr_strbuf_putc(&sb, '\n');
            if (blank || line.len)
                llmr_strbuf_append(&sb, ind.data ? ind.data : "", ind.len);
        }
        llmr_strbuf_append(&sb, line.u.s, line.len);
    }
    llmr_strbuf_free(&ind);
    return from_sb(r, &sb);
}

static tpl_value f_center(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *w = tpl_arg(a, 0, "width");
    tpl_value width = w ? *w : tpl_int(80);
    return call_method(r, at, str_of(r, v), "center", &width, 1);
}

static tpl_value f_wordcount(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value s = str_of(r, v);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.len - i), &c);
        if (len <= 0) {
            c = 0;
            len = 1;
        }
        utf8proc_category_t cat = utf8proc_category(c);
        bool w = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                 (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        if (w && !in_word)
            words++;
        in_word = w;
        i += (size_t)len;
    }
    return tpl_int(words);
}

static tpl_value f_format(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    if (a->nkw) {
        tpl_value d = tpl_new_dict(A(r), a->nkw);
        for (size_t i = 0; i < a->nkw; i++)
            tpl_dict_set(A(r), d.u.dict, tpl_cstr(a->kw_names[i]), a->kw[i]);
        tpl_call_args one = {0};
        one.pos = &d;
        one.npos = 1;
        return percent_format(r, at, str_of(r, v), &one);
    }
    return percent_format(r, at, str_of(r, v), a);
}

static tpl_value f_attr(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *name = tpl_arg(a, 0, "name");
    if (!name || name->type != TV_STR)
        tpl_fail(r, at, "attr needs an attribute name");
    return tpl_getattr(r, at, v, name->u.s, name->len);
}

static tpl_value f_batch(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    int64_t n = 0;
    const tpl_value *c = tpl_arg(a, 0, "linecount"), *fill = tpl_arg(a, 1, "fill_with");
    if (c && (c->type == TV_INT))
        n = c->u.i;
    if (n <= 0)
        tpl_fail(r, at, "batch needs a positive count");
    tpl_list *items = tpl_iterate(r, at, v);
    size_t cap = (uint64_t)n < items->n ? (size_t)n : items->n;
    tpl_value out = tpl_new_list(A(r), 0), cur = tpl_new_list(A(r), cap);
    for (size_t i = 0; i < items->n; i++) {
        tpl_list_push(A(r), cur.u.list, items->items[i]);
        if ((int64_t)cur.u.list->n == n) {
            tpl_list_push(A(r), out.u.list, cur);
            cur = tpl_new_list(A(r), cap);
        }
    }
    if (cur.u.list->n) {
        while (fill && fill->type != TV_NONE && (int64_t)cur.u.list->n < n)
            tpl_list_push(A(r), cur.u.list, *fill);
        tpl_list_push(A(r), out.u.list, cur);
    }
    return gen(out);
}

/* jinja2's truncate(length=255, killwords=False, end='...', leeway=5), in code points. */
static tpl_value f_truncate(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    const tpl_value *lv = tpl_arg(a, 0, "length"), *ev = tpl_arg(a, 2, "end"), *wv = tpl_arg(a, 3, "leeway");
    int64_t length = lv && lv->type == TV_INT ? lv->u.i : 255, leeway = wv && wv->type == TV_INT ? wv->u.i : 5;
    bool killwords = flag(a, 1, "killwords", false);
    tpl_value end = ev ? str_of(r, *ev) : tpl_str("...", 3), s = str_of(r, v);
    int64_t end_len = tpl_length(r, at, end), len = tpl_length(r, at, s);
    if (length < end_len)
        tpl_fail(r, at, "expected length >= %lld, got %lld", (long long)end_len, (long long)length);
    if (leeway < 0)
        tpl_fail(r, at, "expected leeway >= 0, got %lld", (long long)leeway);
    if (len <= length || len - length <= leeway) /* no overflow for huge lengths */
        return s;
    tpl_list *chars = tpl_iterate(r, at, s);
    size_t keep = (size_t)(length - end_len), bytes = 0;
    for (size_t i = 0; i < keep && i < chars->n; i++)
        bytes += chars->items[i].len;
    size_t cut = bytes;
    if (!killwords) { /* rsplit(" ", 1)[0] */
        while (cut > 0 && s.u.s[cut - 1] != ' ')
            cut--;
        cut = cut ? cut - 1 : bytes;
    }
    char *d = tpl_alloc(A(r), cut + end.len + 1);
    memcpy(d, s.u.s, cut);
    memcpy(d + cut, end.u.s, end.len);
    return tpl_str(d, cut + end.len);
}

typedef struct named_filter {
    const char *name;
    filter_fn fn;
} named_filter;

static const named_filter FILTERS[] = {
    {"default", f_default}, {"d", f_default}, {"length", f_length}, {"count", f_length},
    {"trim", f_trim}, {"upper", f_upper}, {"lower", f_lower}, {"capitalize", f_capitalize},
    {"title", f_title}, {"replace", f_replace}, {"tojson", f_tojson}, {"join", f_join},
    {"first", f_first}, {"last", f_last}, {"list", f_list}, {"string", f_string},
    {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_escape},
    {"int", f_int}, {"float", f_float}, {"round", f_round}, {"abs", f_abs}, {"items", f_items},
    {"dictsort", f_dictsort}, {"sort", f_sort}, {"min", f_min}, {"max", f_max}, {"sum", f_sum},
    {"reverse", f_reverse}, {"unique", f_unique}, {"map", f_map}, {"select", f_select},
    {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"indent", f_indent}, {"center", f_center}, {"wordcount", f_wordcount},
    {"format", f_format}, {"attr", f_attr}, {"batch", f_batch}, {"truncate", f_truncate},
    {NULL, NULL}};

tpl_filter_fn tpl_find_filter(const char *name)
{
    for (size_t i = 0; FILTERS[i].name; i++)
        if (eq(name, FILTERS[i].name))
            return FILTERS[i].fn;
    return NULL;
}

tpl_value tpl_filter(tpl_render *r, const tpl_node *at, const char *name, tpl_value v, const tpl_call_args *args)
{
    filter_fn fn = tpl_find_filter(name);
    if (!fn)
        tpl_fail(r, at, "No filter named '%s'.", name);
    return fn(r, at, v, args);
}

/* `x is filter` / `x is test`: whether a filter or test of that name exists. */
static bool t_filter(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)r;
    (void)at;
    (void)a;
    for (size_t i = 0; v.type == TV_STR && FILTERS[i].name; i++)
        if (strlen(FILTERS[i].name) == v.len && !memcmp(FILTERS[i].name, v.u.s, v.len))
            return true;
    return false;
}

static bool t_test(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a)
{
    (void)r;
    (void)at;
    (void)a;
    for (size_t i = 0; v.type == TV_STR && TESTS[i].name; i++)
        if (strlen(TESTS[i].name) == v.len && !memcmp(TESTS[i].name, v.u.s, v.len))
            return true;
    return false;
}
