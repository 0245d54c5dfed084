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

void tpl_fail_undefined(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.undef_is_name && v.undef_owner)
        tpl_fail(r, at, "'%s object' has no attribute '%.*s'", tpl_owner_name(v.undef_owner), (int)v.len,
                 v.u.s);
    if (v.undef_is_name)
        tpl_fail(r, at, "'%.*s' is undefined", (int)v.len, v.u.s);
    tpl_fail(r, at, "%s", v.u.s ? v.u.s : "a value is undefined");
}

static void emit(tpl_render *r, const tpl_node *at, const char *s, size_t n)
{
    llmr_strbuf *out = r->out;
    if (out->len - r->out_base + n > r->opt.limits.max_output)
        tpl_fail(r, at, "the output passed its limit of %zu bytes", r->opt.limits.max_output);
    if (out->data && !out->failed && out->cap - out->len > n) { /* room for the bytes and the NUL */
        memcpy(out->data + out->len, s, n);
        out->len += n;
        out->data[out->len] = 0;
        return;
    }
    if (!llmr_strbuf_append(out, s, n))
        tpl_fail(r, at, "out of memory");
}

static void emit_value(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.type == TV_STR) {
        emit(r, at, v.u.s, v.len);
        return;
    }
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    tpl_write_str(&sb, v);
    tpl_value s = tpl_str(tpl_strndup(&r->arena, llmr_strbuf_cstr(&sb), sb.len), sb.len);
    llmr_strbuf_free(&sb);
    emit(r, at, s.u.s, s.len);
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

/* A scope's names are the parser's interned names (TPL_NAME_* for the renderer's own),
 * compared by pointer; the first few live in the scope itself, so a scope is one
 * allocation. */
typedef struct scope_entry {
    const char *name;
    tpl_value v;
} scope_entry;

#define SCOPE_INLINE 6

struct tpl_scope {
    tpl_scope *parent;
    scope_entry *e;          /* `inline_e` until it outgrows it */
    size_t n, cap;
    scope_entry inline_e[SCOPE_INLINE];
};

static tpl_scope *scope_new(tpl_render *r, tpl_scope *parent)
{
    tpl_scope *s = tpl_alloc_raw(&r->arena, sizeof *s);
    s->parent = parent;
    s->e = s->inline_e;
    s->n = 0;
    s->cap = SCOPE_INLINE;
    return s;
}

static void scope_set(tpl_render *r, tpl_scope *s, const char *name, tpl_value v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].name == name) {
            s->e[i].v = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap * 2;
        scope_entry *e = tpl_alloc_array(&r->arena, cap, sizeof *e);
        memcpy(e, s->e, s->n * sizeof *e);
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (scope_entry){name, v};
}

/* name (n bytes, interned): the innermost scope from s out that binds it, else the
 * context, else a global, else an undefined.  s is NULL for a name no statement binds. */
__attribute__((noinline)) static tpl_value lookup(tpl_render *r, tpl_scope *s, const char *name, size_t n)
{
    for (; s; s = s->parent) {
        for (size_t i = s->n; i-- > 0;)
            if (s->e[i].name == name)
                return s->e[i].v;
    }
    tpl_value *v = tpl_dict_get_str(r->context, name, n);
    if (v)
        return *v;
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
    /* the positional values, the keyword values and their names in one allocation,
       each with room for one more (call_macro and the call blocks add `caller`) */
    size_t npos = call->nkids, nkw = call->nkw + extra_kw;
    char *mem = tpl_alloc_raw(&r->arena, (npos + 1 + nkw + 1) * sizeof(tpl_value) + (nkw + 1) * sizeof(char *));
    tpl_value *pos = (tpl_value *)mem, *kw = pos + npos + 1;
    const char **names = (const char **)(kw + nkw + 1);
    for (size_t i = 0; i < npos; i++)
        pos[i] = EVAL(r, call->kids[i], s);
    for (size_t i = 0; i < call->nkw; i++) {
        kw[i] = EVAL(r, call->kw[i], s);
        names[i] = call->kw_names[i];
    }
    tpl_call_args a = {0};
    a.pos = pos;
    a.npos = npos;
    a.kw = kw;
    a.kw_names = names;
    a.nkw = call->nkw;
    return a;
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
        for (size_t i = 0; i < obj.len; i++)
            ncp += ((unsigned char)obj.u.s[i] & 0xC0) != 0x80;
        size_t *offs = tpl_alloc(&r->arena, (ncp + 1) * sizeof *offs);
        size_t k = 0;
        for (size_t i = 0; i < obj.len; i++)
            if (((unsigned char)obj.u.s[i] & 0xC0) != 0x80)
                offs[k++] = i;
        offs[ncp] = obj.len;
        int64_t start, step, cnt = slice_count((int64_t)ncp, pv, &start, &step);
        char *d = tpl_alloc(&r->arena, obj.len + 1);
        size_t o = 0;
        for (int64_t i = 0; i < cnt; i++) {
            size_t c = (size_t)(start + i * step);
            memcpy(d + o, obj.u.s + offs[c], offs[c + 1] - offs[c]);
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
    tpl_fail(r, at, "'%s' object is not subscriptable", tpl_type_name(obj));
}

__attribute__((noinline)) static tpl_value eval_call(tpl_render *r, const tpl_node *e, tpl_scope *s, tpl_value caller)
{
    enter(r, e);
    tpl_value callee = eval(r, e->a, s);
    tpl_call_args args = eval_args(r, e, s, 1);
    if (caller.type == TV_MACRO) {
        ((const char **)args.kw_names)[args.nkw] = "caller";
        ((tpl_value *)args.kw)[args.nkw] = caller;
        args.nkw++;
    }
    tpl_value v = tpl_call(r, e, callee, &args);
    r->depth--;
    return v;
}

/* The filters of a chain (FILTER nodes, innermost a = NULL) applied to v. */
__attribute__((noinline)) static tpl_value apply_chain(tpl_render *r, const tpl_node *f, tpl_value v, tpl_scope *s)
{
    if (!f)
        return v;
    v = apply_chain(r, f->a, v, s);
    tpl_call_args args = eval_args(r, f, s, 0);
    return f->impl.filter ? f->impl.filter(r, f, v, &args) : tpl_filter(r, f, f->name, v, &args);
}

static tpl_value eval(tpl_render *r, const tpl_node *e, tpl_scope *s);

/* The cases of eval kept out of it, so its own frame stays small (it is the hottest
 * function of a render). */
__attribute__((noinline)) static tpl_value eval_filter_or_test(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    enter(r, e);
    tpl_value x = eval(r, e->a, s);
    tpl_call_args args = eval_args(r, e, s, 0);
    tpl_value v;
    if (e->type == N_FILTER)
        v = e->impl.filter ? e->impl.filter(r, e, x, &args) : tpl_filter(r, e, e->name, x, &args);
    else
        v = tpl_bool(e->impl.test ? e->impl.test(r, e, x, &args) : tpl_test(r, e, e->name, x, &args));
    r->depth--;
    return v;
}

__attribute__((noinline)) static tpl_value eval_compare(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    enter(r, e);
    bool holds = true;
    tpl_value left = EVAL(r, e->kids[0], s);
    for (size_t i = 1; i < e->nkids && holds; i++) {
        tpl_value right = EVAL(r, e->kids[i], s);
        holds = tpl_compare_op(r, e, e->ops[i - 1], left, right);
        left = right;
    }
    r->depth--;
    return tpl_bool(holds);
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

/* A chain of one operator, a + b + c or a ~ b ~ c (the parser nests it to the left):
 * the operands are evaluated in order as Python does, but runs of plain strings are
 * joined once at the end instead of pair by pair.  With emit_it, strings are written
 * to the output instead of joined, and the result is an undefined (nothing more to
 * print). */
#define CHAIN_MAX 32

static tpl_value join_parts(tpl_render *r, const tpl_value *parts, size_t n)
{
    if (n == 1)
        return parts[0];
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += parts[i].len; /* < 32 * 4 GiB: no overflow */
    char *d = tpl_alloc_raw(&r->arena, len + 1), *p = d;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, parts[i].u.s, parts[i].len);
        p += parts[i].len;
    }
    *p = 0;
    return tpl_str(d, len);
}

static bool is_chain_op(const tpl_node *x, char op)
{
    return x->type == N_BINOP && x->name[0] == op && x->name[1] == 0;
}

static tpl_value eval_chain_operands(tpl_render *r, const tpl_node *e, tpl_scope *s, bool emit_it)
{
    char op = e->name[0];
    const tpl_node *binop[CHAIN_MAX]; /* binop[k] joins operand k+1 to what is left of it */
    const tpl_node *x = e;
    size_t nops = 0;
    while (is_chain_op(x, op) && nops < CHAIN_MAX - 1) {
        binop[nops++] = x;
        x = x->a;
    }
    /* operands, left to right: x, then binop[nops-1]->b ... binop[0]->b */
    tpl_value parts[CHAIN_MAX];
    size_t np = 0;
    tpl_value acc = EVAL(r, x, s);
    bool plain = false; /* acc is the pending strings parts[0..np) */
    if (op == '~') {
        parts[np++] = tpl_to_str(r, acc);
        plain = true;
    } else if (acc.type == TV_STR && !acc.is_safe) {
        parts[np++] = acc;
        plain = true;
    }
    for (size_t k = nops; k-- > 0;) {
        tpl_value v = EVAL(r, binop[k]->b, s);
        if (op == '~') {
            parts[np++] = tpl_to_str(r, v);
        } else if (plain && v.type == TV_STR && !v.is_safe) {
            parts[np++] = v;
        } else {
            if (plain) {
                acc = join_parts(r, parts, np);
                plain = false;
                np = 0;
            }
            acc = tpl_arith(r, binop[k], "+", acc, v);
        }
    }
    if (!plain)
        return acc;
    if (!emit_it)
        return join_parts(r, parts, np);
    for (size_t i = 0; i < np; i++)
        emit(r, e, parts[i].u.s, parts[i].len);
    return tpl_undefined(NULL);
}

__attribute__((noinline)) static tpl_value eval_chain(tpl_render *r, const tpl_node *e, tpl_scope *s, bool emit_it)
{
    enter(r, e);
    tpl_value v = eval_chain_operands(r, e, s, emit_it);
    r->depth--;
    return v;
}

__attribute__((noinline)) static tpl_value eval_other(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    enter(r, e);
    tpl_value v;
    switch (e->type) {
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
    case N_NOT:
        v = tpl_bool(!tpl_truthy(eval(r, e->a, s)));
        break;
    case N_NEG:
    case N_POS: {
        tpl_value x = eval(r, e->a, s);
        tpl_require_defined(r, e, x);
        if (!tpl_is_number(x))
            tpl_fail(r, e, "bad operand type for unary %c: '%s'", e->type == N_NEG ? '-' : '+', tpl_type_name(x));
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
    case N_BINOP: /* not a chain of + or ~ (see eval) */
        v = tpl_arith(r, e, e->name, EVAL(r, e->a, s), EVAL(r, e->b, s));
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

/* An attribute, obj.name: a dict's item straight away when no method has the name. */
__attribute__((noinline)) static tpl_value eval_attr(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    enter(r, e);
    tpl_value obj = eval(r, e->a, s);
    tpl_require_defined(r, e, obj);
    tpl_value *item, v;
    if (obj.type == TV_DICT && !(e->bits & TPL_ATTR_METHOD) && e->name[0] != '_' &&
        (item = tpl_dict_get_str(obj.u.dict, e->name, e->name_n)))
        v = *item;
    else
        v = tpl_getattr(r, e, obj, e->name, e->name_n);
    r->depth--;
    return v;
}

/* An expression: the hottest function of a render, so a dispatch without a frame of its
 * own; each kind counts its depth where it recurses (names and literals are leaves). */
static tpl_value eval(tpl_render *r, const tpl_node *e, tpl_scope *s)
{
    switch (e->type) {
    case N_LITERAL:
        return e->lit;
    case N_NAME:
        return lookup(r, e->bits & TPL_NAME_UNBOUND ? NULL : s, e->name, e->name_n);
    case N_ATTR:
        return eval_attr(r, e, s);
    case N_CALL:
        return eval_call(r, e, s, tpl_undefined(NULL));
    case N_FILTER:
    case N_TEST:
        return eval_filter_or_test(r, e, s);
    case N_COMPARE:
        return eval_compare(r, e, s);
    case N_BINOP:
        if (is_chain_op(e, '+') || is_chain_op(e, '~'))
            return eval_chain(r, e, s, false);
        return eval_other(r, e, s);
    default:
        return eval_other(r, e, s);
    }
}

/* ---- attributes and items -------------------------------------------------------------- */

static tpl_value undefined_attr(tpl_value obj, const char *name, size_t n)
{
    tpl_value u = tpl_undefined_name(name, n);
    u.undef_owner = tpl_owner_code(obj);
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
            for (size_t k = 0; k < obj.len; k++)
                ncp += ((unsigned char)obj.u.s[k] & 0xC0) != 0x80;
            if (i < 0)
                i += (int64_t)ncp;
            if (i >= 0 && (size_t)i < ncp) {
                size_t c = 0, k = 0;
                for (; k < obj.len; k++)
                    if (((unsigned char)obj.u.s[k] & 0xC0) != 0x80 && c++ == (size_t)i)
                        break;
                size_t e = k + 1;
                while (e < obj.len && ((unsigned char)obj.u.s[e] & 0xC0) == 0x80)
                    e++;
                one = tpl_str(obj.u.s + k, e - k);
                return one;
            }
        }
    } else if (key.type == TV_STR) {
        return tpl_getattr(r, at, obj, key.u.s, key.len);
    }
    if (key.type == TV_STR)
        return tpl_getattr(r, at, obj, key.u.s, key.len);
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
        for (size_t i = 0; i < v.len;) {
            size_t e = i + 1;
            while (e < v.len && ((unsigned char)v.u.s[e] & 0xC0) == 0x80)
                e++;
            tpl_list_push(&r->arena, l, tpl_str(v.u.s + i, e - i));
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
        for (size_t i = 0; i < v.len; i++)
            n += ((unsigned char)v.u.s[i] & 0xC0) != 0x80;
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
    const tpl_node *def = m.u.macro->def;
    tpl_scope *s = scope_new(r, m.u.macro->closure);
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
        scope_set(r, s, def->kw_names[i], bound[i]);
    }
    if (varargs) {
        size_t extra = args->npos > np ? args->npos - np : 0;
        tpl_value va = tpl_new_list(&r->arena, extra);
        for (size_t i = 0; i < extra; i++)
            va.u.list->items[i] = args->pos[np + i];
        va.u.list->n = extra;
        va.is_tuple = true;
        scope_set(r, s, TPL_NAME_VARARGS, va);
    }
    if (kwargs)
        scope_set(r, s, TPL_NAME_KWARGS, kw);
    if (def->type == N_MACRO)
        scope_set(r, s, TPL_NAME_CALLER, caller);
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
        return callee.u.builtin->fn(r, at, callee.u.builtin->self, args);
    tpl_require_defined(r, at, callee);
    tpl_fail(r, at, "'%s' object is not callable", tpl_type_name(callee));
}

/* ---- statements ------------------------------------------------------------------------ */

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static void assign(tpl_render *r, tpl_scope *s, const tpl_node *target, tpl_value v)
{
    if (target->type == N_NAME) {
        scope_set(r, s, target->name, v);
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
    tpl_builtin *b = tpl_alloc_raw(&r->arena, sizeof *b);
    b->fn = fn;
    b->self = self;
    f.u.builtin = b;
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
        scope_set(r, ls, TPL_NAME_LOOP, lv);
        if (exec(r, n->body, ls) == FLOW_BREAK)
            break;
    }
    if (items->n == 0 && n->else_body)
        exec(r, n->else_body, s);
    return FLOW_NEXT;
}

/* The statements that are not the common three (see exec). */
__attribute__((noinline)) static int exec_other(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    switch (n->type) {
    case N_TEXT:
        emit(r, n, n->lit.u.s, n->lit.len);
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
        tpl_macro_ref *ref = tpl_alloc_raw(&r->arena, sizeof *ref);
        ref->def = n;
        ref->closure = s;
        m.u.macro = ref;
        scope_set(r, s, n->name, m);
        return FLOW_NEXT;
    }
    case N_CALL_BLOCK: {
        tpl_value caller = {0};
        caller.type = TV_MACRO;
        tpl_macro_ref *ref = tpl_alloc_raw(&r->arena, sizeof *ref);
        ref->def = n;
        ref->closure = s;
        caller.u.macro = ref;
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

__attribute__((noinline)) static int exec_body(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    for (size_t i = 0; i < n->nkids; i++) {
        int f = exec(r, n->kids[i], s);
        if (f != FLOW_NEXT)
            return f;
    }
    return FLOW_NEXT;
}

__attribute__((noinline)) static int exec_output(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    tpl_value v = is_chain_op(n->a, '+') || is_chain_op(n->a, '~') ? eval_chain(r, n->a, s, true)
                                                                   : eval(r, n->a, s);
    if (v.type == TV_LIST && v.is_gen)
        tpl_fail(r, n, "printing a generator (map, select, ...) gives no text; add |list or |join");
    if (v.type != TV_UNDEFINED)
        emit_value(r, n, v);
    return FLOW_NEXT;
}

__attribute__((noinline)) static int exec_if(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    if (tpl_truthy(eval(r, n->a, s)))
        return exec(r, n->body, s);
    if (n->else_body)
        return exec(r, n->else_body, s);
    return FLOW_NEXT;
}

/* A statement: bodies, outputs and ifs (most of a template) without a frame of
 * their own, the rest in exec_other. */
static int exec(tpl_render *r, const tpl_node *n, tpl_scope *s)
{
    switch (n->type) {
    case N_BODY: return exec_body(r, n, s);
    case N_OUTPUT: return exec_output(r, n, s);
    case N_IF: return exec_if(r, n, s);
    default: return exec_other(r, n, s);
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
        tpl_value ctx = tpl_from_json(r, context);
        r->context = ctx.u.dict;
        tpl_scope *root_scope = scope_new(r, NULL);
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
