/* The render of the template renderer: scopes, statements, expressions, macro calls,
 * attribute and item access, with jinja2's semantics and the render's limits (depth,
 * loop iterations, output size).  Errors unwind to the render's entry by longjmp: all
 * values live in the render's arena, and the capture buffers open are freed there. */
#include <inttypes.h>
#include <stdlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/tpl_internal.h"

/* ---- errors and output ----------------------------------------------------------------- */

void tpl_fail(tpl_render *r, const tpl_node *at, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        snprintf(r->err, r->err_size, "line %u, column %u: %s", at->line, at->col, msg);
    else
        snprintf(r->err, r->err_size, "%s", msg);
    longjmp(r->fail, 1);
}

void tpl_require_defined(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.type != TV_UNDEFINED)
        return;
    if (v.u.undef.is_name && v.u.undef.owner)
        tpl_fail(r, at, "'%s object' has no attribute '%.*s'", v.u.undef.owner, (int)v.u.undef.name_n,
                 v.u.undef.text);
    if (v.u.undef.is_name)
        tpl_fail(r, at, "'%.*s' is undefined", (int)v.u.undef.name_n, v.u.undef.text);
    tpl_fail(r, at, "%s", v.u.undef.text ? v.u.undef.text : "a value is undefined");
}

static void emit(tpl_render *r, const tpl_node *at, const char *s, size_t n)
{
    if (r->out->len - r->out_base + n > r->opt.limits.max_output)
        tpl_fail(r, at, "the output passed its limit of %zu bytes", r->opt.limits.max_output);
    if (!llmr_strbuf_append(r->out, s, n))
        tpl_fail(r, at, "out of memory");
}

static void emit_value(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.type == TV_STR) {
        emit(r, at, v.u.str.s, v.u.str.n);
        return;
    }
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    tpl_write_str(&sb, v);
    tpl_value s = tpl_str(tpl_strndup(&r->arena, llmr_strbuf_cstr(&sb), sb.len), sb.len);
    llmr_strbuf_free(&sb);
    emit(r, at, s.u.str.s, s.u.str.n);
}

tpl_value tpl_to_str(tpl_render *r, tpl_value v)
{
    if (v.type == TV_STR)
        return v;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    tpl_write_str(&sb, v);
    tpl_value s = tpl_str(tpl_strndup(&r->arena, llmr_strbuf_cstr(&sb), sb.len), sb.len);
    llmr_strbuf_free(&sb);
    return s;
}

/* Output captured while a body renders (set blocks, filter blocks, macro calls): the
 * body writes on at the end of the output as usual; the capture then takes those bytes
 * out into a string of the arena.  No buffer of its own, nothing to free on failure. */
static size_t capture_begin(tpl_render *r)
{
    return r->out->len;
}

static tpl_value capture_end(tpl_render *r, size_t mark)
{
    size_t n = r->out->len - mark;
    tpl_value v = tpl_str(tpl_strndup(&r->arena, r->out->data ? r->out->data + mark : "", n), n);
    r->out->len = mark;
    if (r->out->data)
        r->out->data[mark] = 0;
    return v;
}

/* ---- scopes ------------------------------------------------------------------------ */

struct tpl_scope {
    tpl_scope *parent;
    const tpl_dict *context; /* the root only */
    const char **names;
    size_t *lens;
    tpl_value *vals;
    size_t n, cap;
};

static tpl_scope *scope_new(tpl_render *r, tpl_scope *parent)
{
    tpl_scope *s = tpl_alloc(&r->arena, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(tpl_render *r, tpl_scope *s, const char *name, size_t n, tpl_value v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->lens[i] == n && memcmp(s->names[i], name, n) == 0) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **names = tpl_alloc(&r->arena, cap * sizeof *names);
        size_t *lens = tpl_alloc(&r->arena, cap * sizeof *lens);
        tpl_value *vals = tpl_alloc(&r->arena, cap * sizeof *vals);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(lens, s->lens, s->n * sizeof *lens);
            memcpy(vals, s->vals, s->n * sizeof *vals);
        }
        s->names = names;
        s->lens = lens;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->lens[s->n] = n;
    s->vals[s->n] = v;
    s->n++;
}

static tpl_value lookup(tpl_render *r, tpl_scope *s, const char *name, size_t n)
{
    for (; s; s = s->parent) {
        for (size_t i = s->n; i-- > 0;)
            if (s->lens[i] == n && memcmp(s->names[i], name, n) == 0)
                return s->vals[i];
        if (s->context) {
            tpl_value *v = tpl_dict_get_str(s->context, name, n);
            if (v)
                return *v;
        }
    }
    (void)r;
    tpl_value g = tpl_global(name, n);
    if (g.type != TV_UNDEFINED)
        return g;
    return tpl_undefined_name(name, n);
}

/* ---- expressions ----------------------------------------------------------------------- */

static tpl_value eval(tpl_render *r, const tpl_node *e, tpl_scope *s);
/* eval with a literal's value taken in place (no call): literals are the most common
 * operands of +, ~, comparisons and arguments. */
#define EVAL(r, e, s) ((e)->type == N_LITERAL ? (e)->lit : eval((r), (e), (s)))
static int exec(tpl_render *r, const tpl_node *n, tpl_scope *s);

static void enter(tpl_render *r, const tpl_node *at)
{
    if (++r->depth > r->opt.limits.max_depth)
        tpl_fail(r, at, "nesting passed its depth limit of %u (a recursive macro?)", r->opt.limits.max_depth);
}

__attribute__((noinline)) static tpl_call_args eval_args(tpl_render *r, const tpl_node *call, tpl_scope *s, size_t extra_kw)
{
    tpl_call_args a = {0};
    tpl_value *pos = tpl_alloc(&r->arena, (call->nkids + 1) * sizeof *pos);
    for (size_t i = 0; i < call->nkids; i++)
        pos[i] = EVAL(r, call->kids[i], s);
    tpl_value *kw = tpl_alloc(&r->arena, (call->nkw + extra_kw + 1) * sizeof *kw);
    const char **names = tpl_alloc(&r->arena, (call->nkw + extra_kw + 1) * sizeof *names);
    for (size_t i = 0; i < call->nkw; i++) {
        kw[i] = EVAL(r, call->kw[i], s);
        names[i] = call->kw_names[i];
    }
    a.pos = pos;
    a.npos = call->nkids;
    a.kw = kw;
    a.kw_names = names;
    a.nkw = call->nkw;
    return a;
}

static const char *type_for_msg(tpl_value v)
{
    return tpl_type_name(v);
}

__attribute__((noinline)) static tpl_value arith(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b)
{
    if (op[0] == '~' ) {
        tpl_value x = tpl_to_str(r, a), y = tpl_to_str(r, b);
        char *d = tpl_alloc(&r->arena, x.u.str.n + y.u.str.n + 1);
        memcpy(d, x.u.str.s, x.u.str.n);
        memcpy(d + x.u.str.n, y.u.str.s, y.u.str.n);
        return tpl_str(d, x.u.str.n + y.u.str.n);
    }
    tpl_require_defined(r, at, a);
    tpl_require_defined(r, at, b);
    bool nums = tpl_is_number(a) && tpl_is_number(b);
    bool ints = nums && a.type != TV_FLOAT && b.type != TV_FLOAT;
    int64_t x = a.type == TV_BOOL ? a.u.b : a.u.i, y = b.type == TV_BOOL ? b.u.b : b.u.i;
    double fx = tpl_as_double(a), fy = tpl_as_double(b);
    switch (op[0]) {
    case '+':
        if (ints) {
            int64_t z;
            if (__builtin_add_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in +");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx + fy);
        if (a.type == TV_STR && b.type == TV_STR) {
            bool safe = a.is_safe || b.is_safe; /* Markup + str escapes the str */
            if (safe) {
                a = tpl_escape(r, a);
                b = tpl_escape(r, b);
            }
            char *d = tpl_alloc(&r->arena, a.u.str.n + b.u.str.n + 1);
            memcpy(d, a.u.str.s, a.u.str.n);
            memcpy(d + a.u.str.n, b.u.str.s, b.u.str.n);
            tpl_value out = tpl_str(d, a.u.str.n + b.u.str.n);
            out.is_safe = safe;
            return out;
        }
        if (a.type == TV_LIST && b.type == TV_LIST && !a.is_gen && !b.is_gen) {
            tpl_value l = tpl_new_list(&r->arena, a.u.list->n + b.u.list->n);
            for (size_t i = 0; i < a.u.list->n; i++)
                tpl_list_push(&r->arena, l.u.list, a.u.list->items[i]);
            for (size_t i = 0; i < b.u.list->n; i++)
                tpl_list_push(&r->arena, l.u.list, b.u.list->items[i]);
            l.is_tuple = a.is_tuple;
            return l;
        }
        if (a.type == TV_STR)
            tpl_fail(r, at, "can only concatenate str (not \"%s\") to str", type_for_msg(b));
        if (a.type == TV_LIST)
            tpl_fail(r, at, "can only concatenate list (not \"%s\") to list", type_for_msg(b));
        break;
    case '-':
        if (ints) {
            int64_t z;
            if (__builtin_sub_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in -");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx - fy);
        break;
    case '*':
        if (op[1] == '*') { /* ** */
            if (ints && y >= 0) { /* by squaring: 64 rounds at most */
                int64_t z = 1, base = x;
                for (int64_t e = y; e; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(z, base, &z))
                        tpl_fail(r, at, "integer overflow in **");
                    if (e > 1 && __builtin_mul_overflow(base, base, &base))
                        tpl_fail(r, at, "integer overflow in **");
                }
                return tpl_int(z);
            }
            if (nums) {
                if (fx == 0 && fy < 0)
                    tpl_fail(r, at, "0.0 cannot be raised to a negative power");
                if (fx < 0 && fy != floor(fy))
                    tpl_fail(r, at, "a negative number to a fractional power is complex");
                double z = pow(fx, fy);
                if (isinf(z) && !isinf(fx) && !isinf(fy))
                    tpl_fail(r, at, "numerical result out of range in **");
                return tpl_float(z);
            }
            break;
        }
        if (ints) {
            int64_t z;
            if (__builtin_mul_overflow(x, y, &z))
                tpl_fail(r, at, "integer overflow in *");
            return tpl_int(z);
        }
        if (nums)
            return tpl_float(fx * fy);
        if ((a.type == TV_LIST && !a.is_gen && (b.type == TV_INT || b.type == TV_BOOL)) ||
            (b.type == TV_LIST && !b.is_gen && (a.type == TV_INT || a.type == TV_BOOL))) {
            tpl_value list = a.type == TV_LIST ? a : b;
            int64_t times = a.type == TV_LIST ? y : x;
            size_t n = list.u.list->n;
            if (times <= 0 || n == 0)
                return tpl_new_list(&r->arena, 0);
            if ((uint64_t)times * n > r->opt.limits.max_iterations)
                tpl_fail(r, at, "a repeated list would pass the iteration limit of %" PRIu64, r->opt.limits.max_iterations);
            tpl_value l = tpl_new_list(&r->arena, (size_t)times * n);
            for (int64_t k = 0; k < times; k++)
                memcpy(l.u.list->items + (size_t)k * n, list.u.list->items, n * sizeof(tpl_value));
            l.u.list->n = (size_t)times * n;
            l.is_tuple = list.is_tuple;
            return l;
        }
        if ((a.type == TV_STR && (b.type == TV_INT || b.type == TV_BOOL)) ||
            (b.type == TV_STR && (a.type == TV_INT || a.type == TV_BOOL))) {
            tpl_value str = a.type == TV_STR ? a : b;
            int64_t times = a.type == TV_STR ? y : x;
            if (times <= 0)
                return tpl_str("", 0);
            if ((uint64_t)times * str.u.str.n > r->opt.limits.max_output)
                tpl_fail(r, at, "a repeated string would pass the output limit of %zu bytes", r->opt.limits.max_output);
            size_t n = (size_t)times * str.u.str.n;
            char *d = tpl_alloc(&r->arena, n + 1);
            for (int64_t k = 0; k < times; k++)
                memcpy(d + (size_t)k * str.u.str.n, str.u.str.s, str.u.str.n);
            return tpl_str(d, n);
        }
        break;
    case '/':
        if (op[1] == '/') {
            if (!nums)
                break;
            if (ints) {
                if (y == 0)
                    tpl_fail(r, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1)
                    tpl_fail(r, at, "integer overflow in //");
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0)))
                    q--;
                return tpl_int(q);
            }
            if (fy == 0)
                tpl_fail(r, at, "float floor division by zero");
            return tpl_float(floor(fx / fy));
        }
        if (!nums)
            break;
        if (fy == 0)
            tpl_fail(r, at, "division by zero");
        return tpl_float(fx / fy);
    case '%':
        if (a.type == TV_STR) {
            tpl_call_args args = {0};
            if (a.is_safe) { /* Markup % args escapes the args */
                if (b.type == TV_LIST && b.is_tuple) {
                    tpl_value t = tpl_new_list(&r->arena, b.u.list->n);
                    for (size_t i = 0; i < b.u.list->n; i++)
                        t.u.list->items[i] = b.u.list->items[i].type == TV_STR || b.u.list->items[i].type == TV_NONE
                                                 ? tpl_escape(r, b.u.list->items[i]) : b.u.list->items[i];
                    t.u.list->n = b.u.list->n;
                    t.is_tuple = true;
                    b = t;
                } else if (b.type == TV_STR) {
                    b = tpl_escape(r, b);
                }
            }
            tpl_value one[1] = {b};
            if (b.type == TV_LIST && b.is_tuple) {
                args.pos = b.u.list->items;
                args.npos = b.u.list->n;
            } else {
                args.pos = one;
                args.npos = 1;
            }
            tpl_value f = tpl_filter(r, at, "format", a, &args);
            f.is_safe = a.is_safe;
            return f;
        }
        if (ints) {
            if (y == 0)
                tpl_fail(r, at, "integer division or modulo by zero");
            if (y == -1)
                return tpl_int(0);
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return tpl_int(m);
        }
        if (nums) {
            if (fy == 0)
                tpl_fail(r, at, "float modulo");
            double m = fmod(fx, fy);
            if (m != 0 && ((m < 0) != (fy < 0)))
                m += fy;
            return tpl_float(m);
        }
        break;
    default:
        break;
    }
    tpl_fail(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, type_for_msg(a), type_for_msg(b));
}

__attribute__((noinline)) static bool contains(tpl_render *r, const tpl_node *at, tpl_value item, tpl_value seq)
{
    switch (seq.type) {
    case TV_UNDEFINED: return false;
    case TV_STR:
        if (item.type != TV_STR)
            tpl_fail(r, at, "'in <string>' requires string as left operand, not %s", type_for_msg(item));
        if (item.u.str.n == 0)
            return true;
        for (size_t i = 0; i + item.u.str.n <= seq.u.str.n; i++)
            if (memcmp(seq.u.str.s + i, item.u.str.s, item.u.str.n) == 0)
                return true;
        return false;
    case TV_LIST:
        for (size_t i = 0; i < seq.u.list->n; i++)
            if (tpl_equal(seq.u.list->items[i], item))
                return true;
        return false;
    case TV_DICT:
    case TV_NAMESPACE:
        return tpl_dict_get(seq.u.dict, item) != NULL;
    default:
        tpl_fail(r, at, "argument of type '%s' is not iterable", type_for_msg(seq));
    }
}

__attribute__((noinline)) static bool compare_op(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b)
{
    if (!strcmp(op, "=="))
        return tpl_equal(a, b);
    if (!strcmp(op, "!="))
        return !tpl_equal(a, b);
    if (!strcmp(op, "in"))
        return contains(r, at, a, b);
    if (!strcmp(op, "not in"))
        return !contains(r, at, a, b);
    tpl_require_defined(r, at, a);
    tpl_require_defined(r, at, b);
    int c;
    if (!tpl_compare(a, b, &c))
        tpl_fail(r, at, "'%s' not supported between instances of '%s' and '%s'", op, type_for_msg(a), type_for_msg(b));
    if (!strcmp(op, "<"))
        return c < 0;
    if (!strcmp(op, "<="))
        return c <= 0;
    if (!strcmp(op, ">"))
        return c > 0;
    return c >= 0;
}

/* Python's slice of a sequence's length into (start, step, count). */
static int64_t slice_count(int64_t len, const tpl_value *v[3], int64_t *start, int64_t *step)
{
    int64_t st = v[2] && v[2]->type != TV_NONE ? v[2]->u.i : 1;
    int64_t lo, hi;
    /* a step beyond the length takes one item at most: clamp it (no overflow below) */
    if (st > len)
        st = len + 1;
    if (st < -len)
        st = -len - 1;
    if (st > 0) {
        lo = v[0] && v[0]->type != TV_NONE ? v[0]->u.i : 0;
        hi = v[1] && v[1]->type != TV_NONE ? v[1]->u.i : len;
        if (lo < 0) lo = lo + len < 0 ? 0 : lo + len;
        if (lo > len) lo = len;
        if (hi < 0) hi = hi + len < 0 ? 0 : hi + len;
        if (hi > len) hi = len;
        *start = lo;
        *step = st;
        return hi > lo ? (hi - lo + st - 1) / st : 0;
    }
    lo = v[0] && v[0]->type != TV_NONE ? v[0]->u.i : len - 1;
    hi = v[1] && v[1]->type != TV_NONE ? v[1]->u.i : -len - 1;
    if (lo < 0) lo = lo + len < -1 ? -1 : lo + len;
    if (lo >= len) lo = len - 1;
    if (hi < 0) hi = hi + len < -1 ? -1 : hi + len;
    if (hi >= len) hi = len - 1;
    *start = lo;
    *step = st;
    return lo > hi ? (lo - hi - st - 1) / -st : 0;
}

__attribute__((noinline)) static tpl_value do_slice(tpl_render *r, const tpl_node *at, tpl_value obj, tpl_scope *s, const tpl_node *n)
{
    tpl_value parts[3];
    const tpl_value *pv[3];
    for (int k = 0; k < 3; k++) {
        pv[k] = NULL;
        if (n->kids[k]) {
            parts[k] = eval(r, n->kids[k], s);
            if (parts[k].type == TV_BOOL)
                parts[k] = tpl_int(parts[k].u.b);
            if (parts[k].type != TV_INT && parts[k].type != TV_NONE)
                tpl_fail(r, at, "slice indices must be integers or None");
            pv[k] = &parts[k];
        }
    }
    if (pv[2] && pv[2]->type == TV_INT && pv[2]->u.i == 0)
        tpl_fail(r, at, "slice step cannot be zero");
    tpl_require_defined(r, at, obj);
    if (obj.type == TV_STR) {
        /* by code points */
        size_t ncp = 0;
        for (size_t i = 0; i < obj.u.str.n; i++)
            ncp += ((unsigned char)obj.u.str.s[i] & 0xC0) != 0x80;
        size_t *offs = tpl_alloc(&r->arena, (ncp + 1) * sizeof *offs);
        size_t k = 0;
        for (size_t i = 0; i < obj.u.str.n; i++)
            if (((unsigned char)obj.u.str.s[i] & 0xC0) != 0x80)
                offs[k++] = i;
        offs[ncp] = obj.u.str.n;
        int64_t start, step, cnt = slice_count((int64_t)ncp, pv, &start, &step);
        char *d = tpl_alloc(&r->arena, obj.u.str.n + 1);
        size_t o = 0;
        for (int64_t i = 0; i < cnt; i++) {
            size_t c = (size_t)(start + i * step);
            memcpy(d + o, obj.u.str.s + offs[c], offs[c + 1] - offs[c]);
            o += offs[c + 1] - offs[c];
        }
        return tpl_str(d, o);
    }
    if (obj.type == TV_LIST) {
        int64_t start, step, cnt = slice_count((int64_t)obj.u.list->n, pv, &start, &step);
        tpl_value l = tpl_new_list(&r->arena, (size_t)cnt);
        for (int64_t i = 0; i < cnt; i++)
            l.u.list->items[i] = obj.u.list->items[start + i * step];
        l.u.list->n = (size_t)cnt;
        l.is_tuple = obj.is_tuple;
        return l;
    }
    tpl_fail(r, at, "'%s' object is not subscriptable", type_for_msg(obj));
}

__attribute__((noinline)) static tpl_value eval_call(tpl_render *r, const tpl_node *e, tpl_scope *s, tpl_value caller)
{
    tpl_value callee = eval(r, e->a, s);
    tpl_call_args args = eval_args(r, e, s, 1);
    if (caller.type == TV_MACRO) {
        ((const char **)args.kw_names)[args.nkw] = "caller";
        ((tpl_value *)args.kw)[args.nkw] = caller;
        args.nkw++;
    }
    return tpl_call(r, e, callee, &args);
}

/* The filters of a chain (FILTER nodes, innermost a = NULL) applied to v. */
__attribute__((noinline)) static tpl_value apply_chain(tpl_render *r, const tpl_node *f, tpl_value v, tpl_scope *s)
{
    if (!f)
        return v;
    v = apply_chain(r, f->a, v, s);
    tpl_call_args args = eval_args(r, f, s, 0);
    return tpl_filter(r, f, f->name, v, &args);
}

static tpl_value eval(tpl_render *r, const tpl_node *e, tpl_scope *s);

/* The cases of eval kept out of it, so its own frame stays small (it is the hottest
 * function of a render). */
__attribute__((noinline)) static tpl_value eval_filter_or_test(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    tpl_value x = eval(r, e->a, s);
    tpl_call_args args = eval_args(r, e, s, 0);
    if (e->type == N_FILTER)
        return tpl_filter(r, e, e->name, x, &args);
    return tpl_bool(tpl_test(r, e, e->name, x, &args));
}

__attribute__((noinline)) static tpl_value eval_compare(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    tpl_value left = EVAL(r, e->kids[0], s);
    for (size_t i = 1; i < e->nkids; i++) {
        tpl_value right = EVAL(r, e->kids[i], s);
        if (!compare_op(r, e, e->ops[i - 1], left, right))
            return tpl_bool(false);
        left = right;
    }
    return tpl_bool(true);
}

/* [a, b], (a, b), {k: v} */
__attribute__((noinline)) static tpl_value eval_display(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    tpl_value v;
    switch (e->type) {
    case N_LIST:
    case N_TUPLE: {
        v = tpl_new_list(&r->arena, e->nkids);
        for (size_t i = 0; i < e->nkids; i++)
            v.u.list->items[i] = eval(r, e->kids[i], s);
        v.u.list->n = e->nkids;
        v.is_tuple = e->type == N_TUPLE;
        return v;
    }
    case N_DICT: {
        v = tpl_new_dict(&r->arena, e->nkids / 2);
        for (size_t i = 0; i + 1 < e->nkids; i += 2) {
            tpl_value k = eval(r, e->kids[i], s);
            if (k.type == TV_LIST && !k.is_tuple)
                tpl_fail(r, e, "unhashable type: 'list'");
            if (k.type == TV_DICT)
                tpl_fail(r, e, "unhashable type: 'dict'");
            tpl_dict_set(&r->arena, v.u.dict, k, eval(r, e->kids[i + 1], s));
        }
        return v;
    }
    default:
        return tpl_none();
    }
}

static tpl_value eval(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    enter(r, e);
    tpl_value v;
    switch (e->type) {
    case N_LITERAL:
        v = e->lit;
        break;
    case N_NAME:
        v = lookup(r, s, e->name, e->name_n);
        break;
    case N_ATTR: {
        tpl_value obj = eval(r, e->a, s);
        tpl_require_defined(r, e, obj);
        tpl_value *item;
        if (obj.type == TV_DICT && !(e->bits & TPL_ATTR_METHOD) && e->name[0] != '_' &&
            (item = tpl_dict_get_str(obj.u.dict, e->name, e->name_n)))
            v = *item; /* no method has the name: straight to the item */
        else
            v = tpl_getattr(r, e, obj, e->name, e->name_n);
        break;
    }
    case N_ITEM: {
        tpl_value obj = eval(r, e->a, s);
        tpl_value key = eval(r, e->b, s);
        tpl_require_defined(r, e, obj);
        v = tpl_getitem(r, e, obj, key);
        break;
    }
    case N_SLICE:
        v = do_slice(r, e, eval(r, e->a, s), s, e);
        break;
    case N_CALL:
        v = eval_call(r, e, s, tpl_undefined(NULL));
        break;
    case N_FILTER:
    case N_TEST:
        v = eval_filter_or_test(r, e, s);
        break;
    case N_NOT:
        v = tpl_bool(!tpl_truthy(eval(r, e->a, s)));
        break;
    case N_NEG:
    case N_POS: {
        tpl_value x = eval(r, e->a, s);
        tpl_require_defined(r, e, x);
        if (!tpl_is_number(x))
            tpl_fail(r, e, "bad operand type for unary %c: '%s'", e->type == N_NEG ? '-' : '+', type_for_msg(x));
        if (e->type == N_POS)
            v = x.type == TV_BOOL ? tpl_int(x.u.b) : x;
        else if (x.type == TV_FLOAT)
            v = tpl_float(-x.u.f);
        else if (x.type == TV_INT && x.u.i == INT64_MIN)
            tpl_fail(r, e, "integer overflow in unary -");
        else
            v = tpl_int(-(x.type == TV_BOOL ? (int64_t)x.u.b : x.u.i));
        break;
    }
    case N_BINOP:
        v = arith(r, e, e->name, EVAL(r, e->a, s), EVAL(r, e->b, s));
        break;
    case N_AND: {
        tpl_value x = eval(r, e->a, s);
        v = tpl_truthy(x) ? eval(r, e->b, s) : x;
        break;
    }
    case N_OR: {
        tpl_value x = eval(r, e->a, s);
        v = tpl_truthy(x) ? x : eval(r, e->b, s);
        break;
    }
    case N_COMPARE:
        v = eval_compare(r, e, s);
        break;
    case N_COND:
        if (tpl_truthy(eval(r, e->b, s)))
            v = eval(r, e->a, s);
        else if (e->c)
            v = eval(r, e->c, s);
        else
            v = tpl_undefined("the condition was false and the if-expression has no else");
        break;
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        v = eval_display(r, e, s);
        break;
    default:
        tpl_fail(r, e, "internal error: node %d is not an expression", (int)e->type);
    }
    r->depth--;
    return v;
}

/* ---- attributes and items -------------------------------------------------------------- */

static tpl_value undefined_attr(tpl_value obj, const char *name, size_t n)
{
    tpl_value u = tpl_undefined_name(name, n);
    u.u.undef.owner = tpl_type_name(obj);
    return u;
}

static tpl_value loop_attr(tpl_render *r, const tpl_node *at, tpl_loop *l, const char *name, size_t n)
{
    size_t len = l->items->n, i = l->index0;
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(name, lit, n) == 0)
    if (IS("index")) return tpl_int((int64_t)i + 1);
    if (IS("index0")) return tpl_int((int64_t)i);
    if (IS("revindex")) return tpl_int((int64_t)(len - i));
    if (IS("revindex0")) return tpl_int((int64_t)(len - i - 1));
    if (IS("first")) return tpl_bool(i == 0);
    if (IS("last")) return tpl_bool(i + 1 == len);
    if (IS("length")) return tpl_int((int64_t)len);
    if (IS("depth")) return tpl_int(1);
    if (IS("depth0")) return tpl_int(0);
    if (IS("previtem")) return i > 0 ? l->items->items[i - 1] : tpl_undefined("there is no previous item");
    if (IS("nextitem")) return i + 1 < len ? l->items->items[i + 1] : tpl_undefined("there is no next item");
    if (IS("cycle")) return l->cycle_fn;
    if (IS("changed")) return l->changed_fn;
#undef IS
    (void)at;
    return tpl_undefined(tpl_strndup(&r->arena, "the loop has no such attribute", 30));
}

tpl_value tpl_getattr(tpl_render *r, const tpl_node *at, tpl_value obj, const char *name, size_t n)
{
    if (n && name[0] == '_')
        tpl_fail(r, at, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name, tpl_type_name(obj));
    if (obj.type == TV_LOOP)
        return loop_attr(r, at, obj.u.loop, name, n);
    if (obj.type == TV_NAMESPACE) {
        tpl_value *v = tpl_dict_get_str(obj.u.dict, name, n);
        return v ? *v : undefined_attr(obj, name, n);
    }
    tpl_value m = tpl_method(r, at, obj, name, n);
    if (m.type != TV_UNDEFINED)
        return m;
    if (obj.type == TV_DICT) {
        tpl_value *v = tpl_dict_get_str(obj.u.dict, name, n);
        if (v)
            return *v;
    }
    return undefined_attr(obj, name, n);
}

tpl_value tpl_getitem(tpl_render *r, const tpl_node *at, tpl_value obj, tpl_value key)
{
    if (obj.type == TV_DICT || obj.type == TV_NAMESPACE) {
        tpl_value *v = tpl_dict_get(obj.u.dict, key);
        if (v)
            return *v;
    } else if ((obj.type == TV_LIST || obj.type == TV_STR) && (key.type == TV_INT || key.type == TV_BOOL)) {
        int64_t i = key.type == TV_BOOL ? key.u.b : key.u.i;
        if (obj.type == TV_LIST) {
            int64_t len = (int64_t)obj.u.list->n;
            if (i < 0)
                i += len;
            if (i >= 0 && i < len)
                return obj.u.list->items[i];
        } else {
            tpl_value one;
            /* a character by code point */
            size_t ncp = 0;
            for (size_t k = 0; k < obj.u.str.n; k++)
                ncp += ((unsigned char)obj.u.str.s[k] & 0xC0) != 0x80;
            if (i < 0)
                i += (int64_t)ncp;
            if (i >= 0 && (size_t)i < ncp) {
                size_t c = 0, k = 0;
                for (; k < obj.u.str.n; k++)
                    if (((unsigned char)obj.u.str.s[k] & 0xC0) != 0x80 && c++ == (size_t)i)
                        break;
                size_t e = k + 1;
                while (e < obj.u.str.n && ((unsigned char)obj.u.str.s[e] & 0xC0) == 0x80)
                    e++;
                one = tpl_str(obj.u.str.s + k, e - k);
                return one;
            }
        }
    } else if (key.type == TV_STR) {
        return tpl_getattr(r, at, obj, key.u.str.s, key.u.str.n);
    }
    if (key.type == TV_STR)
        return tpl_getattr(r, at, obj, key.u.str.s, key.u.str.n);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    tpl_write_repr(&sb, key);
    char *msg = tpl_alloc(&r->arena, sb.len + 64);
    snprintf(msg, sb.len + 64, "'%s object' has no attribute %s", tpl_type_name(obj), llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    return tpl_undefined(msg);
}

tpl_list *tpl_iterate(tpl_render *r, const tpl_node *at, tpl_value v)
{
    switch (v.type) {
    case TV_UNDEFINED: {
        tpl_list *l = tpl_alloc(&r->arena, sizeof *l);
        return l;
    }
    case TV_LIST: return v.u.list;
    case TV_DICT: {
        tpl_list *l = tpl_alloc(&r->arena, sizeof *l);
        l->items = v.u.dict->keys;
        l->n = l->cap = v.u.dict->n;
        return l;
    }
    case TV_STR: {
        tpl_list *l = tpl_alloc(&r->arena, sizeof *l);
        for (size_t i = 0; i < v.u.str.n;) {
            size_t e = i + 1;
            while (e < v.u.str.n && ((unsigned char)v.u.str.s[e] & 0xC0) == 0x80)
                e++;
            tpl_list_push(&r->arena, l, tpl_str(v.u.str.s + i, e - i));
            i = e;
        }
        return l;
    }
    default:
        tpl_fail(r, at, "'%s' object is not iterable", tpl_type_name(v));
    }
}

int64_t tpl_length(tpl_render *r, const tpl_node *at, tpl_value v)
{
    switch (v.type) {
    case TV_UNDEFINED: return 0;
    case TV_STR: {
        int64_t n = 0;
        for (size_t i = 0; i < v.u.str.n; i++)
            n += ((unsigned char)v.u.str.s[i] & 0xC0) != 0x80;
        return n;
    }
    case TV_LIST:
        if (v.is_gen)
            tpl_fail(r, at, "object of type 'generator' has no len()");
        return (int64_t)v.u.list->n;
    case TV_DICT: return (int64_t)v.u.dict->n;
    default: tpl_fail(r, at, "object of type '%s' has no len()", tpl_type_name(v));
    }
}

/* ---- macros ------------------------------------------------------------------------- */

static tpl_value call_macro(tpl_render *r, const tpl_node *at, tpl_value m, const tpl_call_args *args)
{
    const tpl_node *def = m.u.macro.def;
    tpl_scope *s = scope_new(r, m.u.macro.closure);
    size_t np = def->nkw;
    bool varargs = def->bits & TPL_USES_VARARGS, kwargs = def->bits & TPL_USES_KWARGS;
    if (args->npos > np && !varargs)
        tpl_fail(r, at, "macro '%s' takes not more than %zu argument(s)", def->name ? def->name : "caller", np);
    tpl_value *bound = tpl_alloc(&r->arena, (np + 1) * sizeof *bound);
    bool *set = tpl_alloc(&r->arena, np + 1);
    for (size_t i = 0; i < np && i < args->npos; i++) {
        bound[i] = args->pos[i];
        set[i] = true;
    }
    tpl_value kw = tpl_new_dict(&r->arena, 0);
    tpl_value caller = tpl_undefined("'caller' is undefined");
    for (size_t k = 0; k < args->nkw; k++) {
        size_t i = 0;
        for (; i < np; i++)
            if (!strcmp(def->kw_names[i], args->kw_names[k]))
                break;
        if (i < np) {
            if (set[i])
                tpl_fail(r, at, "macro '%s' got multiple values for argument '%s'", def->name, args->kw_names[k]);
            bound[i] = args->kw[k];
            set[i] = true;
        } else if (!strcmp(args->kw_names[k], "caller")) {
            caller = args->kw[k];
        } else if (kwargs) {
            tpl_dict_set(&r->arena, kw.u.dict, tpl_cstr(args->kw_names[k]), args->kw[k]);
        } else {
            tpl_fail(r, at, "macro '%s' takes no keyword argument '%s'", def->name ? def->name : "caller", args->kw_names[k]);
        }
    }
    for (size_t i = 0; i < np; i++) {
        if (!set[i]) {
            if (def->kids[i]) {
                bound[i] = eval(r, def->kids[i], s);
            } else {
                char *msg = tpl_alloc(&r->arena, strlen(def->kw_names[i]) + 64);
                sprintf(msg, "parameter '%s' was not provided", def->kw_names[i]);
                bound[i] = tpl_undefined(msg);
            }
        }
        scope_set(r, s, def->kw_names[i], strlen(def->kw_names[i]), bound[i]);
    }
    if (varargs) {
        size_t extra = args->npos > np ? args->npos - np : 0;
        tpl_value va = tpl_new_list(&r->arena, extra);
        for (size_t i = 0; i < extra; i++)
            va.u.list->items[i] = args->pos[np + i];
        va.u.list->n = extra;
        va.is_tuple = true;
        scope_set(r, s, "varargs", 7, va);
    }
    if (kwargs)
        scope_set(r, s, "kwargs", 6, kw);
    if (def->type == N_MACRO)
        scope_set(r, s, "caller", 6, caller);
    enter(r, at);
    size_t mark = capture_begin(r);
    exec(r, def->body, s);
    tpl_value out = capture_end(r, mark);
    r->depth--;
    return out;
}

tpl_value tpl_call(tpl_render *r, const tpl_node *at, tpl_value callee, const tpl_call_args *args)
{
    if (callee.type == TV_MACRO)
        return call_macro(r, at, callee, args);
    if (callee.type == TV_BUILTIN)
        return callee.u.builtin.fn(r, at, callee.u.builtin.self ? *callee.u.builtin.self : tpl_none(), args);
    tpl_require_defined(r, at, callee);
    tpl_fail(r, at, "'%s' object is not callable", tpl_type_name(callee));
}

/* ---- statements ------------------------------------------------------------------------ */

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static void assign(tpl_render *r, tpl_scope *s, const tpl_node *target, tpl_value v)
{
    if (target->type == N_NAME) {
        scope_set(r, s, target->name, target->name_n, v);
    } else if (target->type == N_ATTR) {
        tpl_value ns = eval(r, target->a, s);
        if (ns.type != TV_NAMESPACE)
            tpl_fail(r, target, "cannot assign attribute on non-namespace object");
        tpl_dict_set(&r->arena, ns.u.dict, tpl_str(target->name, target->name_n), v);
    } else if (target->type == N_TUPLE) {
        tpl_list *items = tpl_iterate(r, target, v);
        if (items->n != target->nkids)
            tpl_fail(r, target, items->n > target->nkids ? "too many values to unpack (expected %zu)"
                                                          : "not enough values to unpack (expected %zu)", target->nkids);
        for (size_t i = 0; i < target->nkids; i++)
            assign(r, s, target->kids[i], items->items[i]);
    } else {
        tpl_fail(r, target, "cannot assign to this expression");
    }
}

static tpl_value cycle_fn(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *args)
{
    if (args->npos == 0)
        tpl_fail(r, at, "no items for cycling given");
    return args->pos[self.u.loop->index0 % args->npos];
}

/* loop.changed(*values): true when the values differ from the last call's. */
static tpl_value changed_fn(tpl_render *r, const tpl_node *at, tpl_value self, const tpl_call_args *args)
{
    (void)at;
    tpl_loop *l = self.u.loop;
    tpl_value now = tpl_new_list(&r->arena, args->npos);
    if (args->npos)
        memcpy(now.u.list->items, args->pos, args->npos * sizeof(tpl_value));
    now.u.list->n = args->npos;
    if (l->has_changed && tpl_equal(*l->last_changed, now))
        return tpl_bool(false);
    tpl_value *keep = tpl_alloc(&r->arena, sizeof *keep);
    *keep = now;
    l->last_changed = keep;
    l->has_changed = true;
    return tpl_bool(true);
}

static tpl_value bound(tpl_render *r, tpl_builtin_fn fn, tpl_value self)
{
    tpl_value f = {0};
    f.type = TV_BUILTIN;
    f.u.builtin.fn = fn;
    f.u.builtin.self = tpl_alloc(&r->arena, sizeof(tpl_value));
    *f.u.builtin.self = self;
    return f;
}

static int exec_for(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    tpl_value seq = eval(r, n->b, s);
    tpl_list *all = tpl_iterate(r, n->b, seq);
    tpl_scope *ls = scope_new(r, s);
    tpl_list *items = all;
    if (n->c) { /* the loop's filter first: loop.length counts what passes */
        items = tpl_alloc(&r->arena, sizeof *items);
        for (size_t i = 0; i < all->n; i++) {
            assign(r, ls, n->a, all->items[i]);
            if (tpl_truthy(eval(r, n->c, ls)))
                tpl_list_push(&r->arena, items, all->items[i]);
        }
    }
    tpl_loop *loop = tpl_alloc(&r->arena, sizeof *loop);
    loop->items = items;
    tpl_value lv = {0};
    lv.type = TV_LOOP;
    lv.u.loop = loop;
    loop->cycle_fn = bound(r, cycle_fn, lv);
    loop->changed_fn = bound(r, changed_fn, lv);
    for (size_t i = 0; i < items->n; i++) {
        if (++r->iterations > r->opt.limits.max_iterations)
            tpl_fail(r, n, "loops passed their limit of %" PRIu64 " iterations", r->opt.limits.max_iterations);
        loop->index0 = i;
        assign(r, ls, n->a, items->items[i]);
        scope_set(r, ls, "loop", 4, lv);
        if (exec(r, n->body, ls) == FLOW_BREAK)
            break;
    }
    if (items->n == 0 && n->else_body)
        exec(r, n->else_body, s);
    return FLOW_NEXT;
}

static int exec(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    switch (n->type) {
    case N_BODY:
        for (size_t i = 0; i < n->nkids; i++) {
            int f = exec(r, n->kids[i], s);
            if (f != FLOW_NEXT)
                return f;
        }
        return FLOW_NEXT;
    case N_TEXT:
        emit(r, n, n->lit.u.str.s, n->lit.u.str.n);
        return FLOW_NEXT;
    case N_OUTPUT: {
        tpl_value v = eval(r, n->a, s);
        if (v.type == TV_LIST && v.is_gen)
            tpl_fail(r, n, "printing a generator (map, select, ...) gives no text; add |list or |join");
        if (v.type != TV_UNDEFINED)
            emit_value(r, n, v);
        return FLOW_NEXT;
    }
    case N_IF:
        if (tpl_truthy(eval(r, n->a, s)))
            return exec(r, n->body, s);
        if (n->else_body)
            return exec(r, n->else_body, s);
        return FLOW_NEXT;
    case N_FOR:
        return exec_for(r, n, s);
    case N_SET:
        assign(r, s, n->a, eval(r, n->b, s));
        return FLOW_NEXT;
    case N_SET_BLOCK: {
        size_t mark = capture_begin(r);
        exec(r, n->body, s);
        tpl_value v = capture_end(r, mark);
        assign(r, s, n->a, apply_chain(r, n->c, v, s));
        return FLOW_NEXT;
    }
    case N_MACRO: {
        tpl_value m = {0};
        m.type = TV_MACRO;
        m.u.macro.def = n;
        m.u.macro.closure = s;
        scope_set(r, s, n->name, n->name_n, m);
        return FLOW_NEXT;
    }
    case N_CALL_BLOCK: {
        tpl_value caller = {0};
        caller.type = TV_MACRO;
        caller.u.macro.def = n;
        caller.u.macro.closure = s;
        tpl_value v = eval_call(r, n->a, s, caller);
        if (v.type != TV_UNDEFINED)
            emit_value(r, n, v);
        return FLOW_NEXT;
    }
    case N_FILTER_BLOCK: {
        size_t mark = capture_begin(r);
        exec(r, n->body, s);
        tpl_value v = capture_end(r, mark);
        emit_value(r, n, apply_chain(r, n->c, v, s));
        return FLOW_NEXT;
    }
    case N_BREAK:
        return FLOW_BREAK;
    case N_CONTINUE:
        return FLOW_CONTINUE;
    default:
        tpl_fail(r, n, "internal error: node %d is not a statement", (int)n->type);
    }
}

/* ---- entry --------------------------------------------------------------------------- */

/* The render's state and the first block of its arena, in one allocation. */
#define FIRST_ARENA (48u << 10)
typedef struct render_block {
    tpl_render r;
    max_align_t arena[FIRST_ARENA / sizeof(max_align_t)];
} render_block;

bool tpl_render_tree(const tpl_node *root, const json_t *context, const llmr_template_options *opt,
                     llmr_strbuf *out, char *err, size_t err_size)
{
    render_block *rb = malloc(sizeof *rb);
    if (!rb) {
        snprintf(err, err_size, "out of memory");
        return false;
    }
    tpl_render *r = &rb->r;
    memset(r, 0, sizeof *r);
    tpl_arena_init_buffer(&r->arena, rb->arena, sizeof rb->arena);
    r->arena.oom = &r->fail;
    r->err = err;
    r->err_size = err_size;
    r->opt = opt ? *opt : llmr_template_default_options();
    r->out = out;
    r->out_base = out->len;
    bool was_failed = out->failed;
    volatile bool ok = false;
    err[0] = 0;
    if (setjmp(r->fail) == 0) {
        if (!context || !json_is_object(context))
            tpl_fail(r, NULL, "the context must be a JSON object");
        tpl_value ctx = tpl_from_json(&r->arena, context);
        tpl_scope *root_scope = scope_new(r, NULL);
        root_scope->context = ctx.u.dict;
        exec(r, root, root_scope);
        ok = true;
    } else if (!err[0]) { /* the arena jumped: an allocation failed */
        snprintf(err, err_size, "out of memory: the render needed more memory than there is");
    }
    if (!ok) { /* the caller's buffer as it was */
        out->len = r->out_base;
        if (out->data)
            out->data[out->len] = 0;
        out->failed = was_failed;
    }
    tpl_arena_free(&r->arena);
    free(rb);
    return ok;
}
