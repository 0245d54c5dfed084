/* What the pieces of the chat-template renderer share (nothing outside src/template
 * includes this): the arena every value and node lives in, the values, the tokens
 * of the lexer, the syntax tree of the parser, and the entry points between them.
 *
 *   tpl_arena.c     the bump allocator (a compiled template owns one, a render another)
 *   tpl_value.c     values: constructors, truth, equality, order, str() and repr()
 *   tpl_json.c      JSON in (the context) and out (tojson, as Python's json.dumps)
 *   tpl_lexer.c     source -> tokens, with Jinja's whitespace control
 *   tpl_parser.c    tokens -> tree
 *   tpl_builtins.c  methods of strings/lists/dicts (the sandbox's refusals), globals
 *   tpl_filters.c   jinja2's filters and tests
 *   tpl_ops.c       Python's operators on values (arithmetic, ~, in, comparisons)
 *   tpl_eval.c      the render: scopes, statements, expressions, limits
 *   template.c      the public API (template.h) over these */
#ifndef LLMR_TEMPLATE_INTERNAL_H
#define LLMR_TEMPLATE_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/strbuf.h"
#include "template/template.h"

/* ---- arena ------------------------------------------------------------------------ */

typedef struct tpl_arena_block tpl_arena_block;
typedef struct tpl_arena {
    tpl_arena_block *head;
    char *base;       /* head's memory */
    size_t used, cap; /* of head */
    jmp_buf *oom;     /* where an allocation failure jumps (a render's error exit) */
} tpl_arena;

/* Larger than any render needs, and the longest string a value may hold: a request
 * this big is a runaway (or an overflowed count), answered as out of memory. */
#define TPL_ARENA_LARGEST ((size_t)UINT32_MAX)
#define TPL_ARENA_ALIGN sizeof(max_align_t)

void tpl_arena_init(tpl_arena *a);
/* An arena whose first block is the caller's memory (aligned for max_align_t), for
 * the allocations of a small render without a call to malloc. */
void tpl_arena_init_buffer(tpl_arena *a, void *mem, size_t size);
void tpl_arena_free(tpl_arena *a);
/* tpl_alloc_raw when the head block has no room: a new block, or the failure. */
void *tpl_arena_grow(tpl_arena *a, size_t n);
/* Memory that is not zeroed (for memory the caller fills at once); NULL on failure
 * unless a->oom is set (then it longjmps there). */
static inline void *tpl_alloc_raw(tpl_arena *a, size_t n)
{
    size_t rounded = (n + TPL_ARENA_ALIGN - 1) & ~(TPL_ARENA_ALIGN - 1);
    /* rounded - 1 wraps for 0 (n == 0, or an n so large the rounding overflowed) */
    if (__builtin_expect(rounded - 1 < TPL_ARENA_LARGEST && rounded <= a->cap - a->used, 1)) {
        void *p = a->base + a->used;
        a->used += rounded;
        return p;
    }
    return tpl_arena_grow(a, n);
}
/* The same, zeroed. */
void *tpl_alloc(tpl_arena *a, size_t n);
/* count * size bytes, zeroed; a product that overflows fails as out of memory. */
void *tpl_alloc_array(tpl_arena *a, size_t count, size_t size);
char *tpl_strndup(tpl_arena *a, const char *s, size_t n);

/* ---- values ----------------------------------------------------------------------- */

typedef enum {
    TV_UNDEFINED, TV_NONE, TV_BOOL, TV_INT, TV_FLOAT, TV_STR, TV_LIST, TV_DICT,
    TV_NAMESPACE, TV_MACRO, TV_BUILTIN, TV_LOOP, TV_CYCLER
} tpl_type;

typedef struct tpl_value tpl_value;
typedef struct tpl_dict tpl_dict;
typedef struct tpl_list tpl_list;
typedef struct tpl_node tpl_node;
typedef struct tpl_scope tpl_scope;
typedef struct tpl_loop tpl_loop;
typedef struct tpl_render tpl_render;
typedef struct tpl_macro_ref tpl_macro_ref;
typedef struct tpl_builtin tpl_builtin;

/* A builtin callable: a global (range, namespace, ...) or a method bound to self. */
typedef struct tpl_call_args tpl_call_args;
typedef tpl_value (*tpl_builtin_fn)(tpl_render *r, const tpl_node *at, tpl_value self,
                                    const tpl_call_args *args);

/* A value is 16 bytes, so that functions return it in registers: the type and its
 * flags, a 32-bit length (strings), and one word (a number, the bytes of a string, or a
 * pointer to what a larger value holds).  No string is 4 GiB long: the arena refuses an
 * allocation that large and the context's strings are checked as they come in. */
struct tpl_value {
    uint8_t type;       /* tpl_type */
    union {
        struct {
            bool is_tuple;  /* a list written as a tuple: repr (a, b) */
            bool is_gen;    /* a list that Python would hold as a generator (map, select,
                               ...): always true, not JSON, no len() */
            bool is_safe;   /* a string that is markupsafe's Markup (|safe, |escape): what
                               is added to it with + or % is HTML-escaped first */
        };
        struct { /* TV_UNDEFINED: why it is undefined, for the error when it is used */
            bool undef_is_name;  /* u.s is a missing name or attribute of len bytes:
                                    "'NAME' is undefined" or "'OWNER object' has no
                                    attribute 'NAME'", made only when it is used */
            uint8_t undef_owner; /* the owner of a missing attribute (tpl_owner_code) */
        };
    };
    uint32_t len;       /* TV_STR: the length of u.s; TV_UNDEFINED: of the name */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;  /* TV_STR: the bytes (not terminated); TV_UNDEFINED: the message
                           or the missing name (may be NULL) */
        tpl_list *list;
        tpl_dict *dict; /* dicts and namespaces */
        const tpl_macro_ref *macro;
        tpl_loop *loop;
        const tpl_builtin *builtin;
    } u;
};

_Static_assert(sizeof(tpl_value) == 16, "a template value is two words");

/* The longest string a value holds (the arena's largest allocation). */
#define TPL_MAX_STR TPL_ARENA_LARGEST

/* A macro (or a call block's caller) and the scope it was defined in. */
struct tpl_macro_ref {
    const tpl_node *def;
    tpl_scope *closure;
};

/* A builtin callable: a global (self is none) or a method bound to self. */
struct tpl_builtin {
    tpl_builtin_fn fn;
    tpl_value self;
};

struct tpl_list {
    tpl_value *items;
    size_t n, cap;
};

struct tpl_dict {
    tpl_value *keys, *vals;
    size_t n, cap;
};

struct tpl_call_args {
    const tpl_value *pos;
    size_t npos;
    const char **kw_names;
    const tpl_value *kw;
    size_t nkw;
};

/* The constructors of the scalar values (inline: they are everywhere in a render). */
static inline tpl_value tpl_undefined(const char *why) /* why: the message when it is used */
{
    tpl_value v = {.type = TV_UNDEFINED};
    v.u.s = why;
    return v;
}
/* The undefined of a missing name (the message is made only if it is used). */
static inline tpl_value tpl_undefined_name(const char *name, size_t n)
{
    tpl_value v = tpl_undefined(name);
    v.undef_is_name = true;
    v.len = (uint32_t)n; /* a name of the template or a string of a value: < 4 GiB */
    return v;
}
static inline tpl_value tpl_none(void) { return (tpl_value){.type = TV_NONE}; }
static inline tpl_value tpl_bool(bool b)
{
    tpl_value v = {.type = TV_BOOL};
    v.u.b = b;
    return v;
}
static inline tpl_value tpl_int(int64_t i)
{
    tpl_value v = {.type = TV_INT};
    v.u.i = i;
    return v;
}
static inline tpl_value tpl_float(double f)
{
    tpl_value v = {.type = TV_FLOAT};
    v.u.f = f;
    return v;
}
/* n is at most TPL_MAX_STR (see struct tpl_value). */
static inline tpl_value tpl_str(const char *s, size_t n)
{
    tpl_value v = {.type = TV_STR};
    v.u.s = s ? s : "";
    v.len = (uint32_t)n;
    return v;
}
tpl_value tpl_cstr(const char *s);
/* The owner of a missing attribute, kept in an undefined's undef_owner: obj's type
 * name (tpl_type_name) as a small code, and back. */
uint8_t tpl_owner_code(tpl_value obj);
const char *tpl_owner_name(uint8_t code);
tpl_value tpl_new_list(tpl_arena *a, size_t cap);
tpl_value tpl_new_dict(tpl_arena *a, size_t cap);
void tpl_list_push(tpl_arena *a, tpl_list *l, tpl_value v);
/* Sets key to v (replacing an equal key in place, else appending). */
void tpl_dict_set(tpl_arena *a, tpl_dict *d, tpl_value key, tpl_value v);
/* The value of key, or NULL. */
tpl_value *tpl_dict_get(const tpl_dict *d, tpl_value key);
tpl_value *tpl_dict_get_str(const tpl_dict *d, const char *key, size_t n);
/* Whether the n bytes at a and b are the same (the first byte before a call: most
 * names and keys a template compares differ there). */
static inline bool tpl_same_bytes(const char *a, const char *b, size_t n)
{
    return n == 0 || (a[0] == b[0] && memcmp(a, b, n) == 0);
}

bool tpl_truthy(tpl_value v);
bool tpl_equal(tpl_value a, tpl_value b);
bool tpl_is_number(tpl_value v); /* int, float or bool (Python's numbers) */
double tpl_as_double(tpl_value v);
/* <0, 0, >0; false when the two cannot be ordered (Python's TypeError). */
bool tpl_compare(tpl_value a, tpl_value b, int *out);
const char *tpl_type_name(tpl_value v);

/* Python's str() and repr() of the value, appended. */
bool tpl_write_str(llmr_strbuf *sb, tpl_value v);
bool tpl_write_repr(llmr_strbuf *sb, tpl_value v);
/* Python's repr of a float (the shortest text that reads back the same). */
void tpl_write_float(llmr_strbuf *sb, double f);

/* ---- JSON ----------------------------------------------------------------------- */

#include <jansson.h>
/* The context's JSON as values (fails for a string longer than TPL_MAX_STR). */
tpl_value tpl_from_json(tpl_render *r, const json_t *j);
typedef struct tpl_json_opts {
    bool ensure_ascii, sort_keys;
    long indent;          /* < 0: none */
    const char *indent_str; /* when the indent was given as a string */
    const char *item_sep, *key_sep;
    size_t max_len;       /* the text's most bytes: past it tpl_to_json fails (0: any text fails) */
} tpl_json_opts;
/* json.dumps; false with *why set when a value is not JSON (an undefined, a macro). */
bool tpl_to_json(llmr_strbuf *sb, tpl_value v, const tpl_json_opts *o, const char **why);

/* ---- tokens ---------------------------------------------------------------------- */

typedef enum {
    TK_TEXT,        /* literal output (already whitespace-controlled) */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP, TK_EOF
} tpl_tok_type;

typedef struct tpl_token {
    tpl_tok_type type;
    const char *s;  /* TEXT, NAME, OP: the bytes; STRING: the unescaped value */
    size_t n;
    int64_t i;
    double f;
    uint32_t line, col;
} tpl_token;

typedef struct tpl_tokens {
    tpl_token *t;
    size_t n, cap;
} tpl_tokens;

/* Tokenizes src (newlines normalized, the final newline dropped, as jinja2 does);
 * false with the error in err. */
bool tpl_lex(tpl_arena *a, const char *src, size_t len, tpl_tokens *out, char *err,
             size_t err_size);

/* ---- syntax tree ---------------------------------------------------------------- */

typedef tpl_value (*tpl_filter_fn)(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a);
typedef bool (*tpl_test_fn)(tpl_render *r, const tpl_node *at, tpl_value v, const tpl_call_args *a);

typedef enum {
    /* expressions */
    N_LITERAL, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_NOT, N_NEG,
    N_POS, N_BINOP, N_AND, N_OR, N_COMPARE, N_COND, N_LIST, N_TUPLE, N_DICT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK,
    N_FILTER_BLOCK, N_BREAK, N_CONTINUE
} tpl_node_type;

struct tpl_node {
    tpl_node_type type;
    uint32_t line, col;
    const char *name;      /* NAME, ATTR, FILTER, TEST, MACRO, SET_BLOCK; BINOP/COMPARE ops */
    size_t name_n;
    tpl_value lit;         /* LITERAL */
    tpl_node *a, *b, *c;   /* operands; FOR: a target, b iterable, c condition */
    tpl_node **kids;       /* BODY statements, CALL/FILTER/TEST positional args,
                              LIST/TUPLE items, DICT keys/values interleaved, COMPARE
                              operands, MACRO defaults */
    size_t nkids;
    const char **kw_names; /* CALL/FILTER/TEST keyword args; MACRO/CALL_BLOCK params */
    tpl_node **kw;
    size_t nkw;
    const char **ops;      /* COMPARE: the operators between operands */
    tpl_node *body, *else_body; /* IF/FOR/MACRO/SET_BLOCK/CALL_BLOCK/FILTER_BLOCK */
    uint32_t bits;         /* MACRO, CALL_BLOCK: TPL_USES_*; ATTR: TPL_ATTR_METHOD */
    union {                /* FILTER, TEST: found at parse (NULL: none of that name, an
                              error when the render reaches it, as in jinja2) */
        tpl_filter_fn filter;
        tpl_test_fn test;
    } impl;
};

#define TPL_USES_VARARGS 1u /* the body reads `varargs`: extra positional arguments go there */
#define TPL_USES_KWARGS 2u  /* the body reads `kwargs` */
#define TPL_ATTR_METHOD 4u  /* ATTR: the name is a method of str, list or dict somewhere */
#define TPL_NAME_UNBOUND 8u /* NAME: no statement of the template binds the name, so no
                               scope holds it: straight to the context and the globals */

/* The names the renderer binds itself (loop, caller, varargs, kwargs): the parser
 * gives every name of a template out as one pointer, these four included, so scopes
 * compare names by pointer. */
extern const char TPL_NAME_LOOP[], TPL_NAME_CALLER[], TPL_NAME_VARARGS[], TPL_NAME_KWARGS[];

/* Parses the token stream into a BODY node; NULL with the error in err.  Names are
 * interned (see above). */
tpl_node *tpl_parse(tpl_arena *a, const tpl_tokens *toks, char *err, size_t err_size);

/* ---- the render ---------------------------------------------------------------------- */

struct tpl_loop {
    tpl_list *items;
    size_t index0;       /* of the current item */
    tpl_value cycle_fn;  /* loop.cycle bound to this loop */
    tpl_value changed_fn; /* loop.changed bound to this loop */
    const tpl_value *last_changed;
    bool has_changed;
};

struct tpl_render {
    tpl_arena arena;
    jmp_buf fail;
    char *err;
    size_t err_size;
    llmr_template_options opt;
    uint64_t iterations;
    uint32_t depth;
    llmr_strbuf *out;       /* the caller's buffer: the render appends there (captures
                               cut their bytes back out); a failure truncates it back */
    size_t out_base;        /* out's length before the render */
    const tpl_dict *context; /* the caller's variables, below every scope */
};

/* Renders a parsed template (tpl_eval.c); see llmr_template_render. */
bool tpl_render_tree(const tpl_node *root, const json_t *context, const llmr_template_options *opt,
                     llmr_strbuf *out, char *err, size_t err_size);
/* Ends the render with an error at node `at` (NULL: no position). */
_Noreturn void tpl_fail(tpl_render *r, const tpl_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Ends the render with the error of an undefined value that was used. */
_Noreturn void tpl_fail_undefined(tpl_render *r, const tpl_node *at, tpl_value v);
/* Fails when v is undefined (it is about to be used as a value). */
static inline void tpl_require_defined(tpl_render *r, const tpl_node *at, tpl_value v)
{
    if (v.type == TV_UNDEFINED)
        tpl_fail_undefined(r, at, v);
}

/* obj.name: methods and attributes first, then items (jinja2's getattr); undefined
 * when there is neither. */
tpl_value tpl_getattr(tpl_render *r, const tpl_node *at, tpl_value obj, const char *name, size_t n);
/* obj[key]: items first, then attributes (jinja2's getitem). */
tpl_value tpl_getitem(tpl_render *r, const tpl_node *at, tpl_value obj, tpl_value key);
/* Calls a macro, a builtin or a bound method. */
tpl_value tpl_call(tpl_render *r, const tpl_node *at, tpl_value callee, const tpl_call_args *args);
/* The items of an iterable (a list, a dict's keys, a string's characters, nothing for
 * an undefined); fails for the rest. */
tpl_list *tpl_iterate(tpl_render *r, const tpl_node *at, tpl_value v);
/* len(); fails where Python's len fails. */
int64_t tpl_length(tpl_render *r, const tpl_node *at, tpl_value v);
/* str(v) as a value (strings as they are). */
tpl_value tpl_to_str(tpl_render *r, tpl_value v);
/* markupsafe's escape(): & < > " ' as entities; the result is Markup.  Markup stays. */
tpl_value tpl_escape(tpl_render *r, tpl_value v);

/* Python's a OP b for the operators + - * / // % ** ~ (tpl_ops.c). */
tpl_value tpl_arith(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b);
/* item in seq. */
bool tpl_contains(tpl_render *r, const tpl_node *at, tpl_value item, tpl_value seq);
/* a OP b for ==, !=, in, not in, <, <=, >, >= (the parser's operator strings). */
bool tpl_compare_op(tpl_render *r, const tpl_node *at, const char *op, tpl_value a, tpl_value b);

/* The filter or test of that name; NULL when there is none. */
tpl_filter_fn tpl_find_filter(const char *name);
tpl_test_fn tpl_find_test(const char *name);
/* Applies the filter or test of that name (fails when there is none). */
tpl_value tpl_filter(tpl_render *r, const tpl_node *at, const char *name, tpl_value v,
                     const tpl_call_args *args);
bool tpl_test(tpl_render *r, const tpl_node *at, const char *name, tpl_value v,
              const tpl_call_args *args);
/* A global (range, namespace, raise_exception, strftime_now, dict, cycler, joiner) or
 * an undefined. */
tpl_value tpl_global(const char *name, size_t n);
/* A method of a string, list or dict, bound to self; an undefined when there is none;
 * fails for the methods the sandbox forbids (append, pop, update, ...). */
tpl_value tpl_method(tpl_render *r, const tpl_node *at, tpl_value self, const char *name, size_t n);
/* Whether any str, list or dict method (allowed or not) has this name. */
bool tpl_is_method_name(const char *name, size_t n);
/* A keyword argument by name, else the positional one at index pos, else NULL. */
const tpl_value *tpl_arg(const tpl_call_args *a, size_t pos, const char *name);

#endif
