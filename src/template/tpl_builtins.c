/* The builtins of the template renderer: jinja2's filters and tests, the methods of
 * Python's str, list and dict that chat templates call (the sandbox refuses the ones
 * that would change a list or dict), and the globals (range, namespace, dict, cycler,
 * joiner, raise_exception, strftime_now). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "template/tpl_internal.h"

#define A(r) (&(r)->arena)

const tpl_value *tpl_arg(const tpl_call_args *a, size_t pos, const char *name)
{
    for (size_t i = 0; name && i < a->nkw; i++)
        if (!strcmp(a->kw_names[i], name))
            return &a->kw[i];
    return pos < a->npos ? &a->pos[pos] : NULL;
}

static bool eq_name(const char *name, size_t n, const char *lit)
{
    return n && name[0] == lit[0] && strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static tpl_value need_str(tpl_render *r, const tpl_node *at, tpl_value v, const char *what)
{
    if (v.type != TV_STR) {
        tpl_require_defined(r, at, v);
        tpl_fail(r, at, "%s expects a string, not '%s'", what, tpl_type_name(v));
    }
    return v;
}

static int64_t need_int(tpl_render *r, const tpl_node *at, const tpl_value *v, int64_t def, const char *what)
{
    if (!v || v->type == TV_NONE)
        return def;
    if (v->type == TV_INT)
        return v->u.i;
    if (v->type == TV_BOOL)
        return v->u.b;
    tpl_fail(r, at, "%s expects an integer, not '%s'", what, tpl_type_name(*v));
}

static tpl_value new_str(tpl_render *r, const char *s, size_t n)
{
    return tpl_str(tpl_strndup(A(r), s, n), n);
}

static tpl_value from_sb(tpl_render *r, llmr_strbuf *sb)
{
    tpl_value v = new_str(r, llmr_strbuf_cstr(sb), sb->len);
    llmr_strbuf_free(sb);
    return v;
}

/* ---- characters ------------------------------------------------------------------ */

static int32_t next_cp(const char *s, size_t n, size_t *i)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (len <= 0) {
        (*i)++;
        return 0xFFFD;
    }
    *i += (size_t)len;
    return cp;
}

static void put_cp(llmr_strbuf *sb, int32_t cp)
{
    utf8proc_uint8_t buf[4];
    utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
    llmr_strbuf_append(sb, buf, (size_t)n);
}

/* Python's str.isspace for one code point. */
static bool py_space(int32_t c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
           c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
           c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's full case mappings where one character becomes several (SpecialCasing):
 * upper and title forms; NULL when the simple mapping applies. */
static const char *special_case(int32_t c, bool title)
{
    switch (c) {
    case 0x00DF: return title ? "Ss" : "SS";          /* sharp s */
    case 0x0149: return title ? "\u02BCN" : "\u02BCN"; /* n preceded by apostrophe */
    case 0xFB00: return title ? "Ff" : "FF";
    case 0xFB01: return title ? "Fi" : "FI";
    case 0xFB02: return title ? "Fl" : "FL";
    case 0xFB03: return title ? "Ffi" : "FFI";
    case 0xFB04: return title ? "Ffl" : "FFL";
    case 0xFB05:
    case 0xFB06: return title ? "St" : "ST";
    default: return NULL;
    }
}

/* Mapped case of a string: mode 'u' upper, 'l' lower, 't' title, 'c' capitalize,
 * 's' swapcase. */
static tpl_value recase(tpl_render *r, tpl_value v, char mode)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < v.len;) {
        int32_t c = next_cp(v.u.s, v.len, &i), o = c;
        bool cased = utf8proc_toupper(c) != c || utf8proc_tolower(c) != c;
        switch (mode) {
        case 'u': o = utf8proc_toupper(c); break;
        case 'l': o = utf8proc_tolower(c); break;
        case 'c': o = first ? utf8proc_toupper(c) : utf8proc_tolower(c); break;
        case 't': o = prev_cased ? utf8proc_tolower(c) : utf8proc_toupper(c); break;
        case 's': o = utf8proc_toupper(c) != c ? utf8proc_toupper(c) : utf8proc_tolower(c); break;
        }
        if (mode == 't' && utf8proc_totitle(c) != c && !prev_cased)
            o = utf8proc_totitle(c);
        bool to_upper = mode == 'u' || (mode == 's' && utf8proc_tolower(c) == c) ||
                        ((mode == 't' && !prev_cased) || (mode == 'c' && first));
        const char *full = to_upper ? special_case(c, mode == 't' || mode == 'c') : NULL;
        if (full)
            llmr_strbuf_puts(&sb, full);
        else if ((mode == 'l' || (mode == 'c' && !first) || (mode == 't' && prev_cased)) && c == 0x0130)
            llmr_strbuf_puts(&sb, "i\u0307"); /* capital I with dot: i + combining dot */
        else
            put_cp(&sb, o);
        prev_cased = cased;
        first = false;
    }
    return from_sb(r, &sb);
}

static bool in_chars(int32_t c, const tpl_value *chars)
{
    if (!chars || chars->type == TV_NONE)
        return py_space(c);
    for (size_t i = 0; i < chars->len;)
        if (next_cp(chars->u.s, chars->len, &i) == c)
            return true;
    return false;
}

/* strip: which 1 left, 2 right, 3 both. */
static tpl_value strip(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_value *chars, int which)
{
    if (chars && chars->type != TV_NONE)
        need_str(r, at, *chars, "strip's characters");
    const char *s = v.u.s;
    size_t lo = 0, hi = v.len;
    if (which & 1)
        while (lo < hi) {
            size_t i = lo;
            if (!in_chars(next_cp(s, hi, &i), chars))
                break;
            lo = i;
        }
    if (which & 2)
        while (hi > lo) {
            size_t start = hi - 1;
            while (start > lo && ((unsigned char)s[start] & 0xC0) == 0x80)
                start--;
            size_t i = start;
            if (!in_chars(next_cp(s, hi, &i), chars))
                break;
            hi = start;
        }
    return tpl_str(s + lo, hi - lo);
}

static bool has_prefix(tpl_value s, tpl_value p)
{
    return p.len <= s.len && memcmp(s.u.s, p.u.s, p.len) == 0;
}

static bool has_suffix(tpl_value s, tpl_value p)
{
    return p.len <= s.len && memcmp(s.u.s + s.len - p.len, p.u.s, p.len) == 0;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0)
        return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

static tpl_value replace(tpl_render *r, tpl_value s, tpl_value old, tpl_value new_, int64_t count)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t i = 0;
    int64_t done = 0;
    if (old.len == 0) { /* Python inserts between every character */
        while (count < 0 || done < count) {
            llmr_strbuf_append(&sb, new_.u.s, new_.len);
            done++;
            if (i >= s.len)
                break;
            size_t j = i;
            next_cp(s.u.s, s.len, &j);
            llmr_strbuf_append(&sb, s.u.s + i, j - i);
            i = j;
        }
        llmr_strbuf_append(&sb, s.u.s + i, s.len - i);
        return from_sb(r, &sb);
    }
    while (count < 0 || done < count) {
        const char *f = find_bytes(s.u.s + i, s.len - i, old.u.s, old.len);
        if (!f)
            break;
        size_t at = (size_t)(f - s.u.s);
        llmr_strbuf_append(&sb, s.u.s + i, at - i);
        llmr_strbuf_append(&sb, new_.u.s, new_.len);
        i = at + old.len;
        done++;
    }
    llmr_strbuf_append(&sb, s.u.s + i, s.len - i);
    return from_sb(r, &sb);
}

static tpl_value split(tpl_render *r, const tpl_node *at, tpl_value s, const tpl_value *sep, int64_t maxsplit, bool from_right)
{
    tpl_value out = tpl_new_list(A(r), 0);
    const char *p = s.u.s;
    size_t n = s.len;
    if (!sep || sep->type == TV_NONE) { /* runs of whitespace */
        size_t i = 0;
        int64_t done = 0;
        if (from_right) {
            /* collect all words, then merge the first ones when maxsplit limits */
            tpl_value all = split(r, at, s, NULL, -1, false);
            size_t w = all.u.list->n;
            if (maxsplit < 0 || (size_t)maxsplit + 1 >= w)
                return all;
            /* the head: everything up to the start of word w - maxsplit, right-stripped */
            size_t keep = (size_t)maxsplit, pos = n;
            for (size_t k = 0; k < keep; k++) {
                while (pos > 0 && py_space((unsigned char)p[pos - 1]))
                    pos--;
                while (pos > 0 && !py_space((unsigned char)p[pos - 1]))
                    pos--;
            }
            tpl_value head = strip(r, at, tpl_str(p, pos), NULL, 3);
            tpl_list_push(A(r), out.u.list, head);
            for (size_t k = w - keep; k < w; k++)
                tpl_list_push(A(r), out.u.list, all.u.list->items[k]);
            return out;
        }
        while (i < n) {
            size_t j = i;
            while (i < n) {
                j = i;
                if (!py_space(next_cp(p, n, &j)))
                    break;
                i = j;
            }
            if (i >= n)
                break;
            if (maxsplit >= 0 && done == maxsplit) {
                tpl_value rest = strip(r, at, tpl_str(p + i, n - i), NULL, 2);
                tpl_list_push(A(r), out.u.list, rest);
                return out;
            }
            size_t start = i;
            while (i < n) {
                j = i;
                if (py_space(next_cp(p, n, &j)))
                    break;
                i = j;
            }
            tpl_list_push(A(r), out.u.list, tpl_str(p + start, i - start));
            done++;
        }
        return out;
    }
    need_str(r, at, *sep, "split's separator");
    if (sep->len == 0)
        tpl_fail(r, at, "empty separator");
    const char *q = sep->u.s;
    size_t qn = sep->len;
    if (from_right) {
        /* split from the right: find occurrences from the end */
        size_t end = n;
        int64_t done = 0;
        tpl_value rev = tpl_new_list(A(r), 0);
        while (maxsplit < 0 || done < maxsplit) {
            size_t k = end;
            bool found = false;
            while (k >= qn) {
                if (memcmp(p + k - qn, q, qn) == 0) {
                    found = true;
                    break;
                }
                k--;
            }
            if (!found)
                break;
            tpl_list_push(A(r), rev.u.list, tpl_str(p + k, end - k));
            end = k - qn;
            done++;
        }
        tpl_list_push(A(r), out.u.list, tpl_str(p, end));
        for (size_t k = rev.u.list->n; k-- > 0;)
            tpl_list_push(A(r), out.u.list, rev.u.list->items[k]);
        return out;
    }
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *f = maxsplit >= 0 && done >= maxsplit ? NULL : find_bytes(p + i, n - i, q, qn);
        if (!f) {
            tpl_list_push(A(r), out.u.list, tpl_str(p + i, n - i));
            break;
        }
        size_t pos = (size_t)(f - p);
        tpl_list_push(A(r), out.u.list, tpl_str(p + i, pos - i));
        i = pos + qn;
        done++;
    }
    return out;
}

/* ---- methods ------------------------------------------------------------------------ */


/* Markup's methods give Markup (markupsafe wraps them). */
static tpl_value keep_safe(tpl_value self, tpl_value out)
{
    out.is_safe = self.is_safe;
    return out;
}

static tpl_value m_strip(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { return keep_safe(self, strip(r, at, self, tpl_arg(a, 0, NULL), 3)); }
static tpl_value m_lstrip(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { return keep_safe(self, strip(r, at, self, tpl_arg(a, 0, NULL), 1)); }
static tpl_value m_rstrip(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { return keep_safe(self, strip(r, at, self, tpl_arg(a, 0, NULL), 2)); }
static tpl_value m_upper(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return keep_safe(self, recase(r, self, 'u')); }
static tpl_value m_lower(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return keep_safe(self, recase(r, self, 'l')); }
static tpl_value m_title(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return keep_safe(self, recase(r, self, 't')); }
static tpl_value m_capitalize(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return keep_safe(self, recase(r, self, 'c')); }
static tpl_value m_swapcase(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return keep_safe(self, recase(r, self, 's')); }

static tpl_value m_split(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    return split(r, at, self, tpl_arg(a, 0, "sep"), need_int(r, at, tpl_arg(a, 1, "maxsplit"), -1, "maxsplit"), false);
}

static tpl_value m_rsplit(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    return split(r, at, self, tpl_arg(a, 0, "sep"), need_int(r, at, tpl_arg(a, 1, "maxsplit"), -1, "maxsplit"), true);
}

static tpl_value m_splitlines(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    bool keep = tpl_arg(a, 0, "keepends") && tpl_truthy(*tpl_arg(a, 0, "keepends"));
    tpl_value out = tpl_new_list(A(r), 0);
    const char *p = self.u.s;
    size_t n = self.len, start = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int32_t c = next_cp(p, n, &j);
        bool br = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
                  c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
        if (br) {
            size_t end = j;
            if (c == '\r' && j < n && p[j] == '\n')
                end = ++j;
            tpl_list_push(A(r), out.u.list, tpl_str(p + start, (keep ? end : i) - start));
            start = j;
        }
        i = j;
    }
    if (start < n)
        tpl_list_push(A(r), out.u.list, tpl_str(p + start, n - start));
    return out;
}

static tpl_value affix(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a, bool prefix)
{
    const tpl_value *p = tpl_arg(a, 0, NULL);
    if (!p)
        tpl_fail(r, at, "%s takes at least 1 argument", prefix ? "startswith" : "endswith");
    tpl_value s = self;
    const tpl_value *st = tpl_arg(a, 1, NULL);
    if (st && st->type == TV_INT) { /* start offset, in code points */
        tpl_call_args none = {0};
        (void)none;
        int64_t k = st->u.i;
        size_t i = 0;
        for (int64_t c = 0; c < k && i < s.len; c++)
            next_cp(s.u.s, s.len, &i);
        s = tpl_str(s.u.s + i, s.len - i);
    }
    if (p->type == TV_LIST && p->is_tuple) {
        for (size_t i = 0; i < p->u.list->n; i++) {
            tpl_value x = need_str(r, at, p->u.list->items[i], prefix ? "startswith" : "endswith");
            if (prefix ? has_prefix(s, x) : has_suffix(s, x))
                return tpl_bool(true);
        }
        return tpl_bool(false);
    }
    if (p->type != TV_STR)
        tpl_fail(r, at, "%s first arg must be str or a tuple of str, not %s", prefix ? "startswith" : "endswith", tpl_type_name(*p));
    return tpl_bool(prefix ? has_prefix(s, *p) : has_suffix(s, *p));
}

static tpl_value m_startswith(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { return affix(r, at, self, a, true); }
static tpl_value m_endswith(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { return affix(r, at, self, a, false); }

static tpl_value m_replace(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *o = tpl_arg(a, 0, NULL), *n = tpl_arg(a, 1, NULL);
    if (!o || !n)
        tpl_fail(r, at, "replace takes at least 2 arguments");
    return replace(r, self, need_str(r, at, *o, "replace"), need_str(r, at, *n, "replace"),
                   need_int(r, at, tpl_arg(a, 2, "count"), -1, "replace's count"));
}

static int64_t cp_index(tpl_value s, size_t byte)
{
    int64_t k = 0;
    for (size_t i = 0; i < byte; i++)
        k += ((unsigned char)s.u.s[i] & 0xC0) != 0x80;
    return k;
}

static tpl_value m_find(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "find takes at least 1 argument");
    need_str(r, at, *x, "find");
    const char *f = find_bytes(self.u.s, self.len, x->u.s, x->len);
    return tpl_int(f ? cp_index(self, (size_t)(f - self.u.s)) : -1);
}

static tpl_value m_rfind(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "rfind takes at least 1 argument");
    need_str(r, at, *x, "rfind");
    for (size_t k = self.len + 1; k-- > 0;)
        if (k + x->len <= self.len && memcmp(self.u.s + k, x->u.s, x->len) == 0)
            return tpl_int(cp_index(self, k));
    return tpl_int(-1);
}

static tpl_value m_count(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "count takes exactly 1 argument");
    if (self.type == TV_LIST) {
        int64_t c = 0;
        for (size_t i = 0; i < self.u.list->n; i++)
            c += tpl_equal(self.u.list->items[i], *x);
        return tpl_int(c);
    }
    need_str(r, at, *x, "count");
    if (x->len == 0)
        return tpl_int(cp_index(self, self.len) + 1);
    int64_t c = 0;
    for (size_t i = 0; i + x->len <= self.len;) {
        if (memcmp(self.u.s + i, x->u.s, x->len) == 0) {
            c++;
            i += x->len;
        } else {
            i++;
        }
    }
    return tpl_int(c);
}

static tpl_value m_index(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "index takes at least 1 argument");
    if (self.type == TV_LIST) {
        for (size_t i = 0; i < self.u.list->n; i++)
            if (tpl_equal(self.u.list->items[i], *x))
                return tpl_int((int64_t)i);
        tpl_fail(r, at, "the value is not in the list");
    }
    tpl_value f = m_find(r, at, self, a);
    if (f.u.i < 0)
        tpl_fail(r, at, "substring not found");
    return f;
}

static tpl_value m_join(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *x = tpl_arg(a, 0, NULL);
    if (!x)
        tpl_fail(r, at, "join takes exactly one argument");
    tpl_list *items = tpl_iterate(r, at, *x);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < items->n; i++) {
        if (items->items[i].type != TV_STR) {
            llmr_strbuf_free(&sb);
            tpl_fail(r, at, "sequence item %zu: expected str instance, %s found", i, tpl_type_name(items->items[i]));
        }
        if (i)
            llmr_strbuf_append(&sb, self.u.s, self.len);
        llmr_strbuf_append(&sb, items->items[i].u.s, items->items[i].len);
    }
    return from_sb(r, &sb);
}

static tpl_value m_isclass(tpl_render *r, tpl_value self, char cls)
{
    (void)r;
    if (self.len == 0)
        return tpl_bool(false);
    bool any_cased = false;
    for (size_t i = 0; i < self.len;) {
        int32_t c = next_cp(self.u.s, self.len, &i);
        utf8proc_category_t cat = utf8proc_category(c);
        bool digit = cat == UTF8PROC_CATEGORY_ND;
        bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        switch (cls) {
        case 'd': if (!digit) return tpl_bool(false); break;
        case 'a': if (!alpha) return tpl_bool(false); break;
        case 'n': if (!alpha && !digit && cat != UTF8PROC_CATEGORY_NL && cat != UTF8PROC_CATEGORY_NO) return tpl_bool(false); break;
        case 's': if (!py_space(c)) return tpl_bool(false); break;
        case 'u': if (utf8proc_toupper(c) != c) return tpl_bool(false); if (utf8proc_tolower(c) != c) any_cased = true; break;
        case 'l': if (utf8proc_tolower(c) != c) return tpl_bool(false); if (utf8proc_toupper(c) != c) any_cased = true; break;
        }
    }
    return tpl_bool(cls == 'u' || cls == 'l' ? any_cased : true);
}

static tpl_value m_isdigit(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 'd'); }
static tpl_value m_isalpha(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 'a'); }
static tpl_value m_isalnum(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 'n'); }
static tpl_value m_isspace(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 's'); }
static tpl_value m_isupper(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 'u'); }
static tpl_value m_islower(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a) { (void)at; (void)a; return m_isclass(r, self, 'l'); }

static tpl_value m_removeprefix(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *p = tpl_arg(a, 0, NULL);
    if (!p)
        tpl_fail(r, at, "removeprefix takes exactly one argument");
    need_str(r, at, *p, "removeprefix");
    return has_prefix(self, *p) ? tpl_str(self.u.s + p->len, self.len - p->len) : self;
}

static tpl_value m_removesuffix(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *p = tpl_arg(a, 0, NULL);
    if (!p)
        tpl_fail(r, at, "removesuffix takes exactly one argument");
    need_str(r, at, *p, "removesuffix");
    return has_suffix(self, *p) && p->len ? tpl_str(self.u.s, self.len - p->len) : self;
}

/* str.format: {} {0} {name} {name.attr} {0[key]} with !r / !s and an empty spec. */
static tpl_value m_format(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t auto_i = 0;
    const char *p = self.u.s;
    size_t n = self.len;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '}' ) {
            if (i + 1 < n && p[i + 1] == '}')
                i++;
            else {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "Single '}' encountered in format string");
            }
            llmr_strbuf_putc(&sb, '}');
            continue;
        }
        if (p[i] != '{') {
            llmr_strbuf_putc(&sb, p[i]);
            continue;
        }
        if (i + 1 < n && p[i + 1] == '{') {
            llmr_strbuf_putc(&sb, '{');
            i++;
            continue;
        }
        size_t e = i + 1;
        while (e < n && p[e] != '}')
            e++;
        if (e >= n) {
            llmr_strbuf_free(&sb);
            tpl_fail(r, at, "Single '{' encountered in format string");
        }
        const char *f = p + i + 1;
        size_t fn = e - i - 1, name_n = 0;
        while (name_n < fn && f[name_n] != '!' && f[name_n] != ':' && f[name_n] != '.' && f[name_n] != '[')
            name_n++;
        tpl_value v;
        if (name_n == 0) {
            if (auto_i >= a->npos) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "Replacement index %zu out of range for positional args tuple", auto_i);
            }
            v = a->pos[auto_i++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t k = (size_t)strtoul(f, NULL, 10);
            if (k >= a->npos) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "Replacement index %zu out of range for positional args tuple", k);
            }
            v = a->pos[k];
        } else {
            const tpl_value *kv = NULL;
            for (size_t k = 0; k < a->nkw; k++)
                if (eq_name(f, name_n, a->kw_names[k]))
                    kv = &a->kw[k];
            if (!kv) {
                llmr_strbuf_free(&sb);
                tpl_fail(r, at, "KeyError: '%.*s'", (int)name_n, f);
            }
            v = *kv;
        }
        size_t k = name_n;
        while (k < fn && (f[k] == '.' || f[k] == '[')) {
            size_t s0 = k + 1, s1 = s0;
            while (s1 < fn && f[s1] != '.' && f[s1] != '[' && f[s1] != ']' && f[s1] != '!' && f[s1] != ':')
                s1++;
            v = f[k] == '.' ? tpl_getattr(r, at, v, f + s0, s1 - s0) : tpl_getitem(r, at, v, tpl_str(f + s0, s1 - s0));
            k = s1 + (f[k] == '[' && s1 < fn && f[s1] == ']');
        }
        bool repr = k + 1 < fn && f[k] == '!' && f[k + 1] == 'r';
        if (repr)
            tpl_write_repr(&sb, v);
        else
            tpl_write_str(&sb, v);
        i = e;
    }
    return from_sb(r, &sb);
}

static tpl_value m_center(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    int64_t w = need_int(r, at, tpl_arg(a, 0, NULL), 0, "center's width"), len = tpl_length(r, at, self);
    if (w <= len)
        return self;
    if ((uint64_t)w > r->opt.limits.max_output)
        tpl_fail(r, at, "center's width %lld would pass the output limit", (long long)w);
    int64_t total = w - len, left = total / 2 + (total & w & 1);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (int64_t i = 0; i < left; i++)
        llmr_strbuf_putc(&sb, ' ');
    llmr_strbuf_append(&sb, self.u.s, self.len);
    for (int64_t i = 0; i < total - left; i++)
        llmr_strbuf_putc(&sb, ' ');
    return from_sb(r, &sb);
}

static tpl_value m_items(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value out = tpl_new_list(A(r), self.u.dict->n);
    for (size_t i = 0; i < self.u.dict->n; i++) {
        tpl_value pair = tpl_new_list(A(r), 2);
        pair.u.list->items[0] = self.u.dict->keys[i];
        pair.u.list->items[1] = self.u.dict->vals[i];
        pair.u.list->n = 2;
        pair.is_tuple = true;
        out.u.list->items[i] = pair;
    }
    out.u.list->n = self.u.dict->n;
    return out;
}

static tpl_value m_keys(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value out = tpl_new_list(A(r), self.u.dict->n);
    memcpy(out.u.list->items, self.u.dict->keys, self.u.dict->n * sizeof(tpl_value));
    out.u.list->n = self.u.dict->n;
    return out;
}

static tpl_value m_values(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    tpl_value out = tpl_new_list(A(r), self.u.dict->n);
    memcpy(out.u.list->items, self.u.dict->vals, self.u.dict->n * sizeof(tpl_value));
    out.u.list->n = self.u.dict->n;
    return out;
}

static tpl_value m_get(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    const tpl_value *k = tpl_arg(a, 0, NULL), *d = tpl_arg(a, 1, NULL);
    if (!k)
        tpl_fail(r, at, "get expected at least 1 argument, got 0");
    tpl_value *v = tpl_dict_get(self.u.dict, *k);
    return v ? *v : d ? *d : tpl_none();
}

static tpl_value m_copy(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    (void)a;
    if (self.type == TV_LIST) {
        tpl_value l = tpl_new_list(A(r), self.u.list->n);
        memcpy(l.u.list->items, self.u.list->items, self.u.list->n * sizeof(tpl_value));
        l.u.list->n = self.u.list->n;
        return l;
    }
    tpl_value d = tpl_new_dict(A(r), self.u.dict->n);
    for (size_t i = 0; i < self.u.dict->n; i++)
        tpl_dict_set(A(r), d.u.dict, self.u.dict->keys[i], self.u.dict->vals[i]);
    return d;
}

typedef struct method {
    const char *name;
    tpl_builtin_fn fn;
} method;

static const method STR_METHODS[] = {
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"split", m_split},
    {"rsplit", m_rsplit}, {"splitlines", m_splitlines}, {"startswith", m_startswith},
    {"endswith", m_endswith}, {"replace", m_replace}, {"upper", m_upper}, {"lower", m_lower},
    {"title", m_title}, {"capitalize", m_capitalize}, {"swapcase", m_swapcase},
    {"format", m_format}, {"join", m_join}, {"find", m_find}, {"rfind", m_rfind},
    {"count", m_count}, {"index", m_index}, {"isdigit", m_isdigit}, {"isalpha", m_isalpha},
    {"isalnum", m_isalnum}, {"isspace", m_isspace}, {"isupper", m_isupper},
    {"islower", m_islower}, {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
    {"center", m_center}, {NULL, NULL}};
static const method LIST_METHODS[] = {{"index", m_index}, {"count", m_count}, {"copy", m_copy}, {NULL, NULL}};
static const method DICT_METHODS[] = {{"items", m_items}, {"keys", m_keys}, {"values", m_values},
                                      {"get", m_get}, {"copy", m_copy}, {NULL, NULL}};
static const char *const LIST_UNSAFE[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", NULL};
static const char *const DICT_UNSAFE[] = {"update", "pop", "popitem", "setdefault", "clear", NULL};

bool tpl_is_method_name(const char *name, size_t n)
{
    const method *tables[] = {STR_METHODS, LIST_METHODS, DICT_METHODS};
    const char *const *unsafe[] = {LIST_UNSAFE, DICT_UNSAFE};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; tables[t][i].name; i++)
            if (eq_name(name, n, tables[t][i].name))
                return true;
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; unsafe[t][i]; i++)
            if (eq_name(name, n, unsafe[t][i]))
                return true;
    return false;
}

tpl_value tpl_method(tpl_render *r, const tpl_node *at, tpl_value self, const char *name, size_t n)
{
    const method *table = self.type == TV_STR ? STR_METHODS : self.type == TV_LIST ? LIST_METHODS
                        : self.type == TV_DICT ? DICT_METHODS : NULL;
    const char *const *unsafe = self.type == TV_LIST ? LIST_UNSAFE : self.type == TV_DICT ? DICT_UNSAFE : NULL;
    for (size_t i = 0; unsafe && unsafe[i]; i++)
        if (eq_name(name, n, unsafe[i]))
            tpl_fail(r, at, "access to attribute '%s' of '%s' object is unsafe.", unsafe[i], tpl_type_name(self));
    for (size_t i = 0; table && table[i].name; i++)
        if (eq_name(name, n, table[i].name)) {
            tpl_value m = {0};
            m.type = TV_BUILTIN;
            tpl_builtin *b = tpl_alloc_raw(A(r), sizeof *b);
            b->fn = table[i].fn;
            b->self = self;
            m.u.builtin = b;
            return m;
        }
    return tpl_undefined(NULL);
}

/* ---- globals ------------------------------------------------------------------------ */

static tpl_value g_range(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)self;
    if (a->npos == 0 || a->npos > 3)
        tpl_fail(r, at, "range expected 1 to 3 arguments, got %zu", a->npos);
    int64_t lo = 0, hi, step = 1;
    if (a->npos == 1) {
        hi = need_int(r, at, &a->pos[0], 0, "range");
    } else {
        lo = need_int(r, at, &a->pos[0], 0, "range");
        hi = need_int(r, at, &a->pos[1], 0, "range");
        if (a->npos == 3)
            step = need_int(r, at, &a->pos[2], 1, "range");
    }
    if (step == 0)
        tpl_fail(r, at, "range() arg 3 must not be zero");
    /* the length without overflow: differences as unsigned, (d - 1) / |step| + 1 */
    uint64_t d = step > 0 ? (hi > lo ? (uint64_t)hi - (uint64_t)lo : 0)
                          : (lo > hi ? (uint64_t)lo - (uint64_t)hi : 0);
    uint64_t mag = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
    uint64_t ucount = d ? (d - 1) / mag + 1 : 0;
    if (ucount > 100000) /* jinja2's sandbox: MAX_RANGE */
        tpl_fail(r, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    int64_t count = (int64_t)ucount;
    if (ucount > r->opt.limits.max_iterations)
        tpl_fail(r, at, "range of %" PRId64 " items passes the iteration limit of %" PRIu64, count, r->opt.limits.max_iterations);
    tpl_value l = tpl_new_list(A(r), (size_t)count);
    for (int64_t i = 0; i < count; i++)
        l.u.list->items[i] = tpl_int(lo + i * step);
    l.u.list->n = (size_t)count;
    return l;
}

static tpl_value g_namespace(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)self;
    tpl_value ns = tpl_new_dict(A(r), a->nkw);
    ns.type = TV_NAMESPACE;
    for (size_t i = 0; i < a->npos; i++) {
        if (a->pos[i].type != TV_DICT)
            tpl_fail(r, at, "namespace() takes keyword arguments or a dict");
        for (size_t k = 0; k < a->pos[i].u.dict->n; k++)
            tpl_dict_set(A(r), ns.u.dict, a->pos[i].u.dict->keys[k], a->pos[i].u.dict->vals[k]);
    }
    for (size_t i = 0; i < a->nkw; i++)
        tpl_dict_set(A(r), ns.u.dict, tpl_cstr(a->kw_names[i]), a->kw[i]);
    return ns;
}

static tpl_value g_dict(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    tpl_value d = g_namespace(r, at, self, a);
    d.type = TV_DICT;
    return d;
}

static tpl_value g_raise(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)self;
    const tpl_value *m = tpl_arg(a, 0, NULL);
    tpl_value s = m ? tpl_to_str(r, *m) : tpl_str("", 0);
    tpl_fail(r, at, "raise_exception: %.*s", (int)(s.len > 300 ? 300 : s.len), s.u.s);
}

static tpl_value g_strftime(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)self;
    const tpl_value *f = tpl_arg(a, 0, NULL);
    if (!f)
        tpl_fail(r, at, "strftime_now takes a format");
    need_str(r, at, *f, "strftime_now");
    struct tm now;
    if (r->opt.fixed_now) {
        now = *r->opt.fixed_now;
    } else {
        time_t t = time(NULL);
        localtime_r(&t, &now);
    }
    char *fmt = tpl_strndup(A(r), f->u.s, f->len);
    char buf[512];
    size_t n = strftime(buf, sizeof buf, fmt, &now);
    if (n == 0 && f->len)
        tpl_fail(r, at, "strftime_now: the format gives no text or more than %zu bytes", sizeof buf);
    return new_str(r, buf, n);
}

static tpl_value g_joiner(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a);
static tpl_value g_cycler(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a);

typedef struct global {
    const char *name;
    tpl_builtin call; /* self: none */
} global;

#define GLOBAL(name, fn) {name, {fn, {.type = TV_NONE}}}
static const global GLOBALS[] = {GLOBAL("range", g_range), GLOBAL("namespace", g_namespace),
                                 GLOBAL("dict", g_dict), GLOBAL("raise_exception", g_raise),
                                 GLOBAL("strftime_now", g_strftime), GLOBAL("joiner", g_joiner),
                                 GLOBAL("cycler", g_cycler), {NULL, {NULL, {.type = TV_NONE}}}};
#undef GLOBAL

tpl_value tpl_global(const char *name, size_t n)
{
    for (size_t i = 0; GLOBALS[i].name; i++)
        if (eq_name(name, n, GLOBALS[i].name)) {
            tpl_value g = {.type = TV_BUILTIN};
            g.u.builtin = &GLOBALS[i].call;
            return g;
        }
    return tpl_undefined(NULL);
}

/* joiner(sep): a callable that returns "" the first time, sep after. */
static tpl_value joiner_call(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)r;
    (void)at;
    (void)a;
    tpl_value *used = tpl_dict_get_str(self.u.dict, "used", 4), *sep = tpl_dict_get_str(self.u.dict, "sep", 3);
    if (!tpl_truthy(*used)) {
        *used = tpl_bool(true);
        return tpl_str("", 0);
    }
    return *sep;
}

static tpl_value g_joiner(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)at;
    (void)self;
    const tpl_value *s = tpl_arg(a, 0, "sep");
    tpl_value state = tpl_new_dict(A(r), 2);
    tpl_dict_set(A(r), state.u.dict, tpl_cstr("used"), tpl_bool(false));
    tpl_dict_set(A(r), state.u.dict, tpl_cstr("sep"), s ? *s : tpl_str(", ", 2));
    tpl_value j = {0};
    j.type = TV_BUILTIN;
    tpl_builtin *b = tpl_alloc_raw(A(r), sizeof *b);
    b->fn = joiner_call;
    b->self = state;
    j.u.builtin = b;
    return j;
}

static tpl_value g_cycler(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *a)
{
    (void)self;
    (void)at;
    tpl_value ns = tpl_new_dict(A(r), 2);
    ns.type = TV_NAMESPACE;
    tpl_value items = tpl_new_list(A(r), a->npos);
    memcpy(items.u.list->items, a->pos, a->npos * sizeof(tpl_value));
    items.u.list->n = a->npos;
    tpl_dict_set(A(r), ns.u.dict, tpl_cstr("items"), items);
    tpl_dict_set(A(r), ns.u.dict, tpl_cstr("current"), a->npos ? a->pos[0] : tpl_none());
    return ns;
}
