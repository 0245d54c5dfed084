/* The parser of the template renderer: tokens -> tree, with jinja2's grammar and
 * operator precedence (loosest first): conditional `x if c else y`, or, and, not,
 * comparisons (chained, in, not in), + and -, ~, * / // %, **, unary - and +, then
 * postfix (attribute, item or slice, call) with filters `|f` and tests `is t`. */
#include <stdio.h>
#include <string.h>

#include "template/tpl_internal.h"

/* A growable array of node pointers in the arena. */
typedef struct nodes {
    tpl_node **v;
    size_t n, cap;
} nodes;

typedef struct interned {
    const char *s;
    size_t n;
    bool bound; /* a target of set or for, a macro or a parameter somewhere */
} interned;

typedef struct parser {
    tpl_arena *a;
    const tpl_tokens *toks;
    size_t i;
    char *err;
    size_t err_size;
    bool failed;
    int depth;
    int loops; /* for bodies open around the current tag (a macro starts at 0) */
    interned *names; /* every name of the template, once (a table of names_cap slots) */
    size_t names_n, names_cap;
    nodes name_nodes; /* every NAME node, marked TPL_NAME_UNBOUND at the end when no
                         statement binds its name */
} parser;

#define MAX_NESTING 200

static const tpl_token *cur(const parser *P)
{
    return &P->toks->t[P->i];
}

static const tpl_token *next_tok(parser *P)
{
    const tpl_token *t = cur(P);
    if (t->type != TK_EOF)
        P->i++;
    return t;
}

static void *fail_at(parser *P, const tpl_token *t, const char *fmt, const char *arg)
{
    if (!P->failed) {
        char msg[200];
        snprintf(msg, sizeof msg, fmt, arg ? arg : "");
        snprintf(P->err, P->err_size, "line %u, column %u: %s", t->line, t->col, msg);
    }
    P->failed = true;
    return NULL;
}

static bool is_op(const tpl_token *t, const char *op)
{
    return t->type == TK_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}

static bool is_name(const tpl_token *t, const char *name)
{
    return t->type == TK_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

static bool expect_op(parser *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        fail_at(P, cur(P), "expected '%s'", op);
        return false;
    }
    next_tok(P);
    return true;
}

static tpl_node *node(parser *P, tpl_node_type type, const tpl_token *at)
{
    tpl_node *n = tpl_alloc(P->a, sizeof *n);
    if (!n)
        return fail_at(P, at, "out of memory%s", NULL);
    n->type = type;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* The names the renderer itself binds in scopes; the parser gives them out for these
 * names, so that every name of a template is one pointer (see name_of). */
const char TPL_NAME_LOOP[] = "loop", TPL_NAME_CALLER[] = "caller", TPL_NAME_VARARGS[] = "varargs",
           TPL_NAME_KWARGS[] = "kwargs";

static size_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return (size_t)h;
}

/* The entry of an interned name; NULL for the renderer's own (TPL_NAME_*). */
static interned *name_entry(parser *P, const char *name)
{
    if (!name || !P->names_cap)
        return NULL;
    size_t n = strlen(name);
    for (size_t j = name_hash(name, n) & (P->names_cap - 1); P->names[j].s; j = (j + 1) & (P->names_cap - 1))
        if (P->names[j].s == name)
            return &P->names[j];
    return NULL;
}

static void bind_name(parser *P, const char *name)
{
    interned *e = name_entry(P, name);
    if (e)
        e->bound = true;
}

/* The name as a string of the tree, the same pointer for the same name everywhere in
 * the template: scopes compare names by pointer. */
static const char *name_of(parser *P, const tpl_token *t)
{
    static const char *const special[] = {TPL_NAME_LOOP, TPL_NAME_CALLER, TPL_NAME_VARARGS, TPL_NAME_KWARGS};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        if (strlen(special[i]) == t->n && memcmp(special[i], t->s, t->n) == 0)
            return special[i];
    if (2 * (P->names_n + 1) > P->names_cap) { /* at most half full */
        size_t cap = P->names_cap ? 2 * P->names_cap : 64;
        interned *grown = tpl_alloc_array(P->a, cap, sizeof *grown);
        if (!grown)
            return NULL;
        for (size_t i = 0; i < P->names_cap; i++) {
            if (!P->names[i].s)
                continue;
            size_t j = name_hash(P->names[i].s, P->names[i].n) & (cap - 1);
            while (grown[j].s)
                j = (j + 1) & (cap - 1);
            grown[j] = P->names[i];
        }
        P->names = grown;
        P->names_cap = cap;
    }
    size_t j = name_hash(t->s, t->n) & (P->names_cap - 1);
    for (; P->names[j].s; j = (j + 1) & (P->names_cap - 1))
        if (P->names[j].n == t->n && memcmp(P->names[j].s, t->s, t->n) == 0)
            return P->names[j].s;
    char *copy = tpl_strndup(P->a, t->s, t->n);
    if (!copy)
        return NULL;
    P->names[j] = (interned){copy, t->n, false};
    P->names_n++;
    return copy;
}


static bool add(parser *P, nodes *l, tpl_node *n)
{
    if (!n)
        return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tpl_node **v = tpl_alloc(P->a, cap * sizeof *v);
        if (!v)
            return false;
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return true;
}

typedef struct names {
    const char **v;
    size_t n, cap;
} names;

static bool add_name(parser *P, names *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        const char **v = tpl_alloc(P->a, cap * sizeof *v);
        if (!v)
            return false;
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return true;
}

static tpl_node *parse_expr(parser *P);
static tpl_node *parse_or(parser *P);
static tpl_node *parse_unary(parser *P, bool with_filter);
static tpl_node *parse_primary(parser *P);
static tpl_node *parse_postfix(parser *P, tpl_node *n);

/* ( args ) of a call, filter or test into n->kids / n->kw. */
static bool parse_call_args(parser *P, tpl_node *n)
{
    nodes pos = {0}, kw = {0};
    names kwn = {0};
    if (!expect_op(P, "("))
        return false;
    while (!is_op(cur(P), ")")) {
        if (pos.n + kw.n && !expect_op(P, ","))
            return false;
        if (is_op(cur(P), ")"))
            break;
        const tpl_token *t = cur(P);
        if (t->type == TK_NAME && is_op(&P->toks->t[P->i + 1], "=")) {
            next_tok(P);
            next_tok(P);
            if (!add_name(P, &kwn, name_of(P, t)) || !add(P, &kw, parse_expr(P)))
                return false;
        } else {
            if (is_op(t, "*") || is_op(t, "**")) {
                fail_at(P, t, "*args and **kwargs in calls are not supported%s", NULL);
                return false;
            }
            if (kw.n) {
                fail_at(P, t, "a positional argument follows a keyword argument%s", NULL);
                return false;
            }
            if (!add(P, &pos, parse_expr(P)))
                return false;
        }
    }
    next_tok(P);
    n->kids = pos.v;
    n->nkids = pos.n;
    n->kw = kw.v;
    n->kw_names = kwn.v;
    n->nkw = kw.n;
    return true;
}

/* callee(args) at the '(' token t. */
static tpl_node *parse_call(parser *P, const tpl_token *t, tpl_node *callee)
{
    tpl_node *cn = node(P, N_CALL, t);
    if (!cn)
        return NULL;
    cn->a = callee;
    return parse_call_args(P, cn) ? cn : NULL;
}

/* NAME [ (args) ] after a '|': a FILTER node applied to operand. */
static tpl_node *parse_one_filter(parser *P, tpl_node *operand)
{
    const tpl_token *f = next_tok(P);
    if (f->type != TK_NAME)
        return fail_at(P, f, "expected a filter name after '|'%s", NULL);
    tpl_node *fn = node(P, N_FILTER, f);
    if (!fn)
        return NULL;
    fn->name = name_of(P, f);
    fn->impl.filter = fn->name ? tpl_find_filter(fn->name) : NULL;
    fn->a = operand;
    if (is_op(cur(P), "(") && !parse_call_args(P, fn))
        return NULL;
    return fn;
}

static tpl_node *parse_filters(parser *P, tpl_node *n)
{
    while (n) {
        const tpl_token *t = cur(P);
        if (is_op(t, "|")) {
            next_tok(P);
            n = parse_one_filter(P, n);
        } else if (is_name(t, "is")) {
            next_tok(P);
            bool negate = false;
            if (is_name(cur(P), "not")) {
                negate = true;
                next_tok(P);
            }
            const tpl_token *f = next_tok(P);
            if (f->type != TK_NAME)
                return fail_at(P, f, "expected a test name after 'is'%s", NULL);
            tpl_node *tn = node(P, N_TEST, f);
            if (!tn)
                return NULL;
            tn->name = name_of(P, f);
            tn->impl.test = tn->name ? tpl_find_test(tn->name) : NULL;
            tn->a = n;
            const tpl_token *c = cur(P);
            if (is_op(c, "(")) {
                if (!parse_call_args(P, tn))
                    return NULL;
            } else if ((c->type == TK_NAME && !is_name(c, "else") && !is_name(c, "or") &&
                        !is_name(c, "and") && !is_name(c, "if") && !is_name(c, "is") &&
                        !is_name(c, "not") && !is_name(c, "in")) ||
                       c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                       is_op(c, "[") || is_op(c, "{")) {
                tpl_node *arg = parse_postfix(P, parse_primary(P));
                if (!arg)
                    return NULL;
                tn->kids = tpl_alloc(P->a, sizeof *tn->kids);
                if (!tn->kids)
                    return NULL;
                tn->kids[0] = arg;
                tn->nkids = 1;
            }
            n = tn;
            if (negate) {
                tpl_node *nn = node(P, N_NOT, f);
                if (!nn)
                    return NULL;
                nn->a = n;
                n = nn;
            }
        } else if (is_op(t, "(")) { /* a call of a filter's result */
            n = parse_call(P, t, n);
        } else {
            break;
        }
    }
    return n;
}

static tpl_node *parse_postfix(parser *P, tpl_node *n)
{
    while (n) {
        const tpl_token *t = cur(P);
        if (is_op(t, ".")) {
            next_tok(P);
            const tpl_token *f = next_tok(P);
            if (f->type == TK_NAME) {
                tpl_node *an = node(P, N_ATTR, f);
                if (!an)
                    return NULL;
                an->name = name_of(P, f);
                an->name_n = f->n;
                an->a = n;
                an->bits = tpl_is_method_name(f->s, f->n) ? TPL_ATTR_METHOD : 0;
                n = an;
            } else if (f->type == TK_INT) {
                tpl_node *in = node(P, N_ITEM, f), *lit = node(P, N_LITERAL, f);
                if (!in || !lit)
                    return NULL;
                lit->lit = tpl_int(f->i);
                in->a = n;
                in->b = lit;
                n = in;
            } else {
                return fail_at(P, f, "expected an attribute name after '.'%s", NULL);
            }
        } else if (is_op(t, "[")) {
            next_tok(P);
            tpl_node *parts[3] = {NULL, NULL, NULL};
            bool slice = false;
            int k = 0;
            for (;;) {
                if (!is_op(cur(P), ":") && !is_op(cur(P), "]")) {
                    parts[k] = parse_expr(P);
                    if (!parts[k])
                        return NULL;
                }
                if (is_op(cur(P), ":") && k < 2) {
                    slice = true;
                    next_tok(P);
                    k++;
                    continue;
                }
                break;
            }
            if (!expect_op(P, "]"))
                return NULL;
            tpl_node *in = node(P, slice ? N_SLICE : N_ITEM, t);
            if (!in)
                return NULL;
            in->a = n;
            if (slice) {
                in->kids = tpl_alloc(P->a, 3 * sizeof *in->kids);
                if (!in->kids)
                    return NULL;
                memcpy(in->kids, parts, sizeof parts);
                in->nkids = 3;
            } else {
                in->b = parts[0];
                if (!in->b)
                    return fail_at(P, t, "an empty subscript []%s", NULL);
            }
            n = in;
        } else if (is_op(t, "(")) {
            n = parse_call(P, t, n);
        } else {
            break;
        }
    }
    return n;
}

/* Items up to `close` (a list, a tuple in parentheses, a dict). */
static tpl_node *parse_sequence(parser *P, const tpl_token *open, tpl_node_type type, const char *close)
{
    tpl_node *n = node(P, type, open);
    nodes items = {0};
    bool comma = false;
    if (!n)
        return NULL;
    while (!is_op(cur(P), close)) {
        if (items.n) {
            if (!expect_op(P, ","))
                return NULL;
            comma = true;
            if (is_op(cur(P), close))
                break;
        }
        if (!add(P, &items, parse_expr(P)))
            return NULL;
        if (type == N_DICT) {
            if (!expect_op(P, ":") || !add(P, &items, parse_expr(P)))
                return NULL;
        }
    }
    next_tok(P);
    if (type == N_TUPLE && items.n == 1 && !comma)
        return items.v[0]; /* (x) is x */
    n->kids = items.v;
    n->nkids = items.n;
    return n;
}

static tpl_node *parse_primary(parser *P)
{
    const tpl_token *t = next_tok(P);
    tpl_node *n;
    switch (t->type) {
    case TK_NAME:
        n = node(P, N_LITERAL, t);
        if (!n)
            return NULL;
        if (is_name(t, "true") || is_name(t, "True"))
            n->lit = tpl_bool(true);
        else if (is_name(t, "false") || is_name(t, "False"))
            n->lit = tpl_bool(false);
        else if (is_name(t, "none") || is_name(t, "None"))
            n->lit = tpl_none();
        else {
            n->type = N_NAME;
            n->name = name_of(P, t);
            n->name_n = t->n;
            if (!add(P, &P->name_nodes, n))
                return fail_at(P, t, "out of memory%s", NULL);
        }
        return n;
    case TK_STRING: {
        /* adjacent literals concatenate */
        size_t total = t->n, first = P->i - 1;
        while (cur(P)->type == TK_STRING)
            total += next_tok(P)->n;
        char *s = tpl_alloc(P->a, total + 1);
        n = node(P, N_LITERAL, t);
        if (!s || !n)
            return NULL;
        size_t o = 0;
        for (size_t k = first; k < P->i; k++) {
            memcpy(s + o, P->toks->t[k].s, P->toks->t[k].n);
            o += P->toks->t[k].n;
        }
        n->lit = tpl_str(s, total);
        return n;
    }
    case TK_INT:
        n = node(P, N_LITERAL, t);
        if (n)
            n->lit = tpl_int(t->i);
        return n;
    case TK_FLOAT:
        n = node(P, N_LITERAL, t);
        if (n)
            n->lit = tpl_float(t->f);
        return n;
    case TK_OP:
        if (is_op(t, "("))
            return parse_sequence(P, t, N_TUPLE, ")");
        if (is_op(t, "["))
            return parse_sequence(P, t, N_LIST, "]");
        if (is_op(t, "{"))
            return parse_sequence(P, t, N_DICT, "}");
        break;
    default:
        break;
    }
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF)
        return fail_at(P, t, "expected an expression, found the end of the tag%s", NULL);
    return fail_at(P, t, "unexpected token '%s'", t->s ? tpl_strndup(P->a, t->s, t->n > 40 ? 40 : t->n) : "?");
}

static tpl_node *parse_unary(parser *P, bool with_filter)
{
    const tpl_token *t = cur(P);
    tpl_node *n;
    if (++P->depth > MAX_NESTING)
        return fail_at(P, t, "expressions nest too deeply%s", NULL);
    if (is_op(t, "-") || is_op(t, "+")) {
        next_tok(P);
        n = node(P, is_op(t, "-") ? N_NEG : N_POS, t);
        if (n && !(n->a = parse_unary(P, false)))
            n = NULL;
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter)
        n = parse_filters(P, n);
    P->depth--;
    return n;
}

static tpl_node *binop(parser *P, const tpl_token *t, const char *op, tpl_node *l, tpl_node *r)
{
    if (!l || !r)
        return NULL;
    tpl_node *n = node(P, N_BINOP, t);
    if (!n)
        return NULL;
    n->name = op;
    n->a = l;
    n->b = r;
    return n;
}

static tpl_node *parse_pow(parser *P)
{
    tpl_node *l = parse_unary(P, true);
    while (l && is_op(cur(P), "**")) {
        const tpl_token *t = next_tok(P);
        l = binop(P, t, "**", l, parse_unary(P, true));
    }
    return l;
}

static tpl_node *parse_math2(parser *P)
{
    tpl_node *l = parse_pow(P);
    while (l) {
        const tpl_token *t = cur(P);
        const char *op = is_op(t, "*") ? "*" : is_op(t, "/") ? "/" : is_op(t, "//") ? "//" : is_op(t, "%") ? "%" : NULL;
        if (!op)
            break;
        next_tok(P);
        l = binop(P, t, op, l, parse_pow(P));
    }
    return l;
}

static tpl_node *parse_concat(parser *P)
{
    tpl_node *l = parse_math2(P);
    while (l && is_op(cur(P), "~")) {
        const tpl_token *t = next_tok(P);
        l = binop(P, t, "~", l, parse_math2(P));
    }
    return l;
}

static tpl_node *parse_math1(parser *P)
{
    tpl_node *l = parse_concat(P);
    while (l) {
        const tpl_token *t = cur(P);
        const char *op = is_op(t, "+") ? "+" : is_op(t, "-") ? "-" : NULL;
        if (!op)
            break;
        next_tok(P);
        l = binop(P, t, op, l, parse_concat(P));
    }
    return l;
}

static tpl_node *parse_compare(parser *P)
{
    const tpl_token *start = cur(P);
    tpl_node *first = parse_math1(P);
    nodes operands = {0};
    names ops = {0};
    if (!first)
        return NULL;
    for (;;) {
        const tpl_token *t = cur(P);
        const char *op = NULL;
        if (is_op(t, "==")) op = "==";
        else if (is_op(t, "!=")) op = "!=";
        else if (is_op(t, "<")) op = "<";
        else if (is_op(t, "<=")) op = "<=";
        else if (is_op(t, ">")) op = ">";
        else if (is_op(t, ">=")) op = ">=";
        else if (is_name(t, "in")) op = "in";
        else if (is_name(t, "not") && is_name(&P->toks->t[P->i + 1], "in")) {
            next_tok(P);
            op = "not in";
        }
        if (!op)
            break;
        next_tok(P);
        if (!operands.n && !add(P, &operands, first))
            return NULL;
        if (!add_name(P, &ops, op) || !add(P, &operands, parse_math1(P)))
            return NULL;
    }
    if (!operands.n)
        return first;
    tpl_node *n = node(P, N_COMPARE, start);
    if (!n)
        return NULL;
    n->kids = operands.v;
    n->nkids = operands.n;
    n->ops = ops.v;
    return n;
}

static tpl_node *parse_not(parser *P)
{
    if (is_name(cur(P), "not")) {
        const tpl_token *t = next_tok(P);
        if (++P->depth > MAX_NESTING)
            return fail_at(P, t, "expressions nest too deeply%s", NULL);
        tpl_node *n = node(P, N_NOT, t);
        if (!n || !(n->a = parse_not(P)))
            return NULL;
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

/* operand (word operand)*, left to right: `and` over not-expressions, `or` over ands. */
static tpl_node *parse_chain(parser *P, const char *word, tpl_node_type type,
                             tpl_node *(*operand)(parser *))
{
    tpl_node *l = operand(P);
    while (l && is_name(cur(P), word)) {
        const tpl_token *t = next_tok(P);
        tpl_node *n = node(P, type, t);
        if (!n || !(n->b = operand(P)))
            return NULL;
        n->a = l;
        l = n;
    }
    return l;
}

static tpl_node *parse_and(parser *P)
{
    return parse_chain(P, "and", N_AND, parse_not);
}

static tpl_node *parse_or(parser *P)
{
    return parse_chain(P, "or", N_OR, parse_and);
}

static tpl_node *parse_expr(parser *P)
{
    if (++P->depth > MAX_NESTING)
        return fail_at(P, cur(P), "expressions nest too deeply%s", NULL);
    tpl_node *n = parse_or(P);
    while (n && is_name(cur(P), "if")) {
        const tpl_token *t = next_tok(P);
        tpl_node *c = node(P, N_COND, t);
        if (!c || !(c->b = parse_or(P)))
            return NULL;
        c->a = n;
        if (is_name(cur(P), "else")) {
            next_tok(P);
            if (!(c->c = parse_expr(P)))
                return NULL;
        }
        n = c;
    }
    P->depth--;
    return n;
}

/* expr, or an unparenthesized tuple `a, b` where jinja2 allows one. */
static tpl_node *parse_tuple(parser *P, bool names_only)
{
    const tpl_token *start = cur(P);
    if (names_only && is_op(start, "(")) { /* (a, b) as a target */
        next_tok(P);
        tpl_node *inner = parse_tuple(P, true);
        if (!inner || !expect_op(P, ")"))
            return NULL;
        return inner;
    }
    nodes items = {0};
    bool comma = false;
    for (;;) {
        tpl_node *e;
        if (names_only) {
            const tpl_token *t = next_tok(P);
            if (t->type != TK_NAME)
                return fail_at(P, t, "expected a name%s", NULL);
            e = node(P, N_NAME, t);
            if (!e)
                return NULL;
            e->name = name_of(P, t);
            e->name_n = t->n;
            if (!add(P, &P->name_nodes, e))
                return fail_at(P, t, "out of memory%s", NULL);
            if (!is_op(cur(P), ".")) /* a name the statement binds, not ns of ns.attr */
                bind_name(P, e->name);
            if (is_op(cur(P), ".")) { /* ns.attr (set only) */
                next_tok(P);
                const tpl_token *f = next_tok(P);
                if (f->type != TK_NAME)
                    return fail_at(P, f, "expected an attribute name%s", NULL);
                tpl_node *an = node(P, N_ATTR, f);
                if (!an)
                    return NULL;
                an->a = e;
                an->name = name_of(P, f);
                an->name_n = f->n;
                e = an;
            }
        } else {
            e = parse_expr(P);
        }
        if (!add(P, &items, e))
            return NULL;
        if (!is_op(cur(P), ","))
            break;
        comma = true;
        next_tok(P);
        const tpl_token *c = cur(P);
        if (c->type == TK_BLOCK_END || c->type == TK_VAR_END || is_name(c, "in") || is_op(c, "="))
            break;
    }
    if (!comma)
        return items.v[0];
    tpl_node *n = node(P, N_TUPLE, start);
    if (!n)
        return NULL;
    n->kids = items.v;
    n->nkids = items.n;
    return n;
}

/* ---- statements --------------------------------------------------------------------- */

static tpl_node *parse_body(parser *P, const char *const *ends, const tpl_token **ended);

static bool expect_block_end(parser *P)
{
    if (cur(P)->type != TK_BLOCK_END) {
        fail_at(P, cur(P), "expected the end of the tag (%%}), found more%s", NULL);
        return false;
    }
    next_tok(P);
    return true;
}

static tpl_node *parse_if(parser *P, const tpl_token *t)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    tpl_node *n = node(P, N_IF, t);
    const tpl_token *ended;
    if (!n || !(n->a = parse_expr(P)) || !expect_block_end(P))
        return NULL;
    if (!(n->body = parse_body(P, ends, &ended)))
        return NULL;
    if (is_name(ended, "elif")) {
        tpl_node *e = parse_if(P, ended);
        if (!e)
            return NULL;
        n->else_body = e;
        return n;
    }
    if (is_name(ended, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if (!expect_block_end(P) || !(n->else_body = parse_body(P, ends2, &ended)))
            return NULL;
    }
    return expect_block_end(P) ? n : NULL;
}

static tpl_node *parse_for(parser *P, const tpl_token *t)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    tpl_node *n = node(P, N_FOR, t);
    const tpl_token *ended;
    if (!n || !(n->a = parse_tuple(P, true)))
        return NULL;
    if (!is_name(cur(P), "in"))
        return fail_at(P, cur(P), "expected 'in' in the for tag%s", NULL);
    next_tok(P);
    /* the iterable: a tuple without parentheses, up to `if` or `recursive` */
    if (!(n->b = parse_or(P)))
        return NULL;
    if (is_name(cur(P), "if")) {
        next_tok(P);
        if (!(n->c = parse_expr(P)))
            return NULL;
    }
    if (is_name(cur(P), "recursive"))
        return fail_at(P, cur(P), "recursive loops are not supported%s", NULL);
    if (!expect_block_end(P))
        return NULL;
    P->loops++;
    n->body = parse_body(P, ends, &ended);
    P->loops--;
    if (!n->body)
        return NULL;
    if (is_name(ended, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        if (!expect_block_end(P) || !(n->else_body = parse_body(P, ends2, &ended)))
            return NULL;
    }
    return expect_block_end(P) ? n : NULL;
}

/* A filter chain without an operand yet (filter blocks, block sets): FILTER nodes
 * whose innermost operand is NULL, filled in at render. */
static tpl_node *parse_filter_chain(parser *P)
{
    tpl_node *n = parse_one_filter(P, NULL);
    while (n && is_op(cur(P), "|")) {
        next_tok(P);
        n = parse_one_filter(P, n);
    }
    return n;
}

static tpl_node *parse_set(parser *P, const tpl_token *t)
{
    tpl_node *target = parse_tuple(P, true);
    if (!target)
        return NULL;
    if (is_op(cur(P), "=")) {
        next_tok(P);
        tpl_node *n = node(P, N_SET, t);
        if (!n || !(n->b = parse_tuple(P, false)) || !expect_block_end(P))
            return NULL;
        n->a = target;
        return n;
    }
    if (target->type != N_NAME)
        return fail_at(P, t, "a block set takes one name%s", NULL);
    static const char *const ends[] = {"endset", NULL};
    const tpl_token *ended;
    tpl_node *n = node(P, N_SET_BLOCK, t);
    if (!n)
        return NULL;
    n->a = target;
    if (is_op(cur(P), "|") && (next_tok(P), !(n->c = parse_filter_chain(P))))
        return NULL;
    if (!expect_block_end(P) || !(n->body = parse_body(P, ends, &ended)))
        return NULL;
    return expect_block_end(P) ? n : NULL;
}

/* Whether the tree reads the name (a macro's varargs, kwargs), found once at parse. */
static bool uses_name(const tpl_node *n, const char *name)
{
    if (!n)
        return false;
    if (n->type == N_NAME && !strcmp(n->name, name))
        return true;
    if (uses_name(n->a, name) || uses_name(n->b, name) || uses_name(n->c, name) ||
        uses_name(n->body, name) || uses_name(n->else_body, name))
        return true;
    for (size_t i = 0; i < n->nkids; i++)
        if (uses_name(n->kids[i], name))
            return true;
    for (size_t i = 0; n->kw && i < n->nkw; i++)
        if (uses_name(n->kw[i], name))
            return true;
    return false;
}

static void note_uses(tpl_node *n)
{
    n->bits = (uses_name(n->body, "varargs") ? TPL_USES_VARARGS : 0) |
              (uses_name(n->body, "kwargs") ? TPL_USES_KWARGS : 0);
}

/* (a, b=default, ...) of a macro or a call block. */
static bool parse_params(parser *P, tpl_node *n)
{
    names params = {0};
    nodes defaults = {0};
    if (!expect_op(P, "("))
        return false;
    while (!is_op(cur(P), ")")) {
        if (params.n && !expect_op(P, ","))
            return false;
        const tpl_token *t = next_tok(P);
        if (t->type != TK_NAME) {
            fail_at(P, t, "expected a parameter name%s", NULL);
            return false;
        }
        tpl_node *def = NULL;
        if (is_op(cur(P), "=")) {
            next_tok(P);
            if (!(def = parse_expr(P)))
                return false;
        } else if (defaults.n && defaults.v[defaults.n - 1]) {
            fail_at(P, t, "a parameter without a default follows one with a default%s", NULL);
            return false;
        }
        const char *param = name_of(P, t);
        if (!add_name(P, &params, param))
            return false;
        bind_name(P, param);
        if (defaults.n == defaults.cap) { /* add allows NULL only through this path */
            size_t cap = defaults.cap ? defaults.cap * 2 : 4;
            tpl_node **v = tpl_alloc(P->a, cap * sizeof *v);
            if (!v)
                return false;
            if (defaults.n)
                memcpy(v, defaults.v, defaults.n * sizeof *v);
            defaults.v = v;
            defaults.cap = cap;
        }
        defaults.v[defaults.n++] = def;
    }
    next_tok(P);
    n->kw_names = params.v;
    n->nkw = params.n;
    n->kids = defaults.v;
    n->nkids = defaults.n;
    return true;
}

static tpl_node *parse_macro(parser *P, const tpl_token *t)
{
    const tpl_token *nm = next_tok(P);
    if (nm->type != TK_NAME)
        return fail_at(P, nm, "expected the macro's name%s", NULL);
    tpl_node *n = node(P, N_MACRO, t);
    static const char *const ends[] = {"endmacro", NULL};
    const tpl_token *ended;
    if (!n)
        return NULL;
    n->name = name_of(P, nm);
    n->name_n = nm->n;
    bind_name(P, n->name);
    int loops = P->loops;
    P->loops = 0;
    if (!parse_params(P, n) || !expect_block_end(P) || !(n->body = parse_body(P, ends, &ended)))
        return NULL;
    P->loops = loops;
    note_uses(n);
    return expect_block_end(P) ? n : NULL;
}

static tpl_node *parse_call_block(parser *P, const tpl_token *t)
{
    tpl_node *n = node(P, N_CALL_BLOCK, t);
    static const char *const ends[] = {"endcall", NULL};
    const tpl_token *ended;
    if (!n)
        return NULL;
    n->name = TPL_NAME_CALLER;
    if (is_op(cur(P), "(") && !parse_params(P, n))
        return NULL;
    if (!(n->a = parse_expr(P)))
        return NULL;
    if (n->a->type != N_CALL)
        return fail_at(P, t, "{%% call %%} needs a macro call%s", NULL);
    if (!expect_block_end(P) || !(n->body = parse_body(P, ends, &ended)))
        return NULL;
    note_uses(n);
    return expect_block_end(P) ? n : NULL;
}

static tpl_node *parse_statement(parser *P)
{
    const tpl_token *t = next_tok(P);
    if (t->type != TK_NAME)
        return fail_at(P, t, "expected a tag name after {%%%s", NULL);
    if (is_name(t, "if"))
        return parse_if(P, t);
    if (is_name(t, "for"))
        return parse_for(P, t);
    if (is_name(t, "set"))
        return parse_set(P, t);
    if (is_name(t, "macro"))
        return parse_macro(P, t);
    if (is_name(t, "call"))
        return parse_call_block(P, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops)
            return fail_at(P, t, "'%s' outside of a loop", is_name(t, "break") ? "break" : "continue");
        tpl_node *n = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        return n && expect_block_end(P) ? n : NULL;
    }
    if (is_name(t, "filter")) {
        tpl_node *n = node(P, N_FILTER_BLOCK, t);
        static const char *const ends[] = {"endfilter", NULL};
        const tpl_token *ended;
        if (!n || !(n->c = parse_filter_chain(P)) || !expect_block_end(P) ||
            !(n->body = parse_body(P, ends, &ended)))
            return NULL;
        return expect_block_end(P) ? n : NULL;
    }
    if (is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        const tpl_token *ended;
        tpl_node *body;
        if (!expect_block_end(P) || !(body = parse_body(P, ends, &ended)))
            return NULL;
        return expect_block_end(P) ? body : NULL;
    }
    return fail_at(P, t, "unknown tag '%s'", tpl_strndup(P->a, t->s, t->n > 40 ? 40 : t->n));
}

/* Statements up to one of `ends` (a tag name; NULL: the end of the source).  The
 * ending tag's name token is consumed and returned in *ended. */
static tpl_node *parse_body(parser *P, const char *const *ends, const tpl_token **ended)
{
    const tpl_token *start = cur(P);
    tpl_node *body = node(P, N_BODY, start);
    nodes kids = {0};
    if (!body)
        return NULL;
    if (++P->depth > MAX_NESTING)
        return fail_at(P, start, "tags nest too deeply%s", NULL);
    for (;;) {
        const tpl_token *t = cur(P);
        if (t->type == TK_EOF) {
            if (ends)
                return fail_at(P, t, "unexpected end of template: expected {%% %s %%}", ends[0]);
            break;
        }
        if (t->type == TK_TEXT) {
            tpl_node *n = node(P, N_TEXT, t);
            if (!n)
                return NULL;
            n->lit = tpl_str(t->s, t->n);
            next_tok(P);
            if (!add(P, &kids, n))
                return NULL;
        } else if (t->type == TK_VAR_BEGIN) {
            next_tok(P);
            tpl_node *n = node(P, N_OUTPUT, t);
            if (!n || !(n->a = parse_tuple(P, false)))
                return NULL;
            if (cur(P)->type != TK_VAR_END)
                return fail_at(P, cur(P), "expected the end of the expression (}}), found more%s", NULL);
            next_tok(P);
            if (!add(P, &kids, n))
                return NULL;
        } else if (t->type == TK_BLOCK_BEGIN) {
            const tpl_token *name = &P->toks->t[P->i + 1];
            bool is_end = false;
            for (size_t k = 0; ends && ends[k]; k++)
                if (is_name(name, ends[k]))
                    is_end = true;
            if (is_end) {
                P->i += 2;
                *ended = name;
                break;
            }
            if (name->type == TK_NAME &&
                (is_name(name, "endif") || is_name(name, "endfor") || is_name(name, "else") ||
                 is_name(name, "elif") || is_name(name, "endmacro") || is_name(name, "endset") ||
                 is_name(name, "endcall") || is_name(name, "endfilter") ||
                 is_name(name, "endgeneration")))
                return fail_at(P, name, "unexpected {%% %s %%}", tpl_strndup(P->a, name->s, name->n));
            next_tok(P);
            if (!add(P, &kids, parse_statement(P)))
                return NULL;
        } else {
            return fail_at(P, t, "unexpected token%s", NULL);
        }
    }
    P->depth--;
    body->kids = kids.v;
    body->nkids = kids.n;
    return body;
}

tpl_node *tpl_parse(tpl_arena *a, const tpl_tokens *toks, char *err, size_t err_size)
{
    parser P = {a, toks, 0, err, err_size, false, 0, 0, NULL, 0, 0, {0}};
    const tpl_token *ended = NULL;
    tpl_node *n = parse_body(&P, NULL, &ended);
    if (P.failed)
        return NULL;
    for (size_t i = 0; i < P.name_nodes.n; i++) {
        interned *e = name_entry(&P, P.name_nodes.v[i]->name);
        if (e && !e->bound)
            P.name_nodes.v[i]->bits |= TPL_NAME_UNBOUND;
    }
    return n;
}
