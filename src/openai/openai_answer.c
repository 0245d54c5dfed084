/* A harmony model's answer as OpenAI gives it: see openai_answer.h. */
#include "openai/openai_answer.h"

#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "openai/openai_internal.h"

typedef struct call {
    char id[40];
    llmr_strbuf name, args;
} call;

enum { IN_NONE, IN_CALL, IN_CALL_AS_TEXT, IN_DROPPED_CALL };

struct llmr_oai_answer {
    llmr_oai_answer_options o;
    llmr_strbuf reasoning, content;
    call *calls;
    size_t count, cap;
    int in;      /* what the pieces of a call go to */
    bool failed;
};

llmr_oai_answer *llmr_oai_answer_new(const llmr_oai_answer_options *o)
{
    llmr_oai_answer *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->o = *o;
    llmr_strbuf_init(&a->reasoning);
    llmr_strbuf_init(&a->content);
    return a;
}

void llmr_oai_answer_free(llmr_oai_answer *a)
{
    if (!a)
        return;
    llmr_strbuf_free(&a->reasoning);
    llmr_strbuf_free(&a->content);
    for (size_t i = 0; i < a->count; i++) {
        llmr_strbuf_free(&a->calls[i].name);
        llmr_strbuf_free(&a->calls[i].args);
    }
    free(a->calls);
    free(a);
}

/* {key: text} (and {key2: text} when key2), or NULL (failed set when out of memory). */
static json_t *text_delta(llmr_oai_answer *a, const char *key, const char *key2, const char *text,
                          size_t len)
{
    json_t *d = json_object(), *t = llmr_oai_text_json(text, len);
    bool ok = d && t && json_object_set(d, key, t) == 0 &&
              (!key2 || json_object_set(d, key2, t) == 0);
    json_decref(t);
    if (!ok) {
        a->failed = true;
        json_decref(d);
        return NULL;
    }
    return d;
}

json_t *llmr_oai_answer_reasoning(llmr_oai_answer *a, const char *text, size_t len)
{
    if (!len || !a->o.include_reasoning)
        return NULL;
    llmr_strbuf_append(&a->reasoning, text, len);
    return text_delta(a, "reasoning_content", "reasoning", text, len);
}

json_t *llmr_oai_answer_content(llmr_oai_answer *a, const char *text, size_t len)
{
    if (!len)
        return NULL;
    llmr_strbuf_append(&a->content, text, len);
    return text_delta(a, "content", NULL, text, len);
}

/* {"tool_calls": [{"index": i, ...fn}]} with the call's function object fn (taken). */
static json_t *call_delta(llmr_oai_answer *a, size_t i, bool first, json_t *fn)
{
    json_t *c = json_object(), *list = json_array(), *d = json_object();
    bool ok = c && list && d && fn && json_object_set_new(c, "index", json_integer((json_int_t)i)) == 0;
    if (ok && first)
        ok = json_object_set_new(c, "id", json_string(a->calls[i].id)) == 0 &&
             json_object_set_new(c, "type", json_string("function")) == 0;
    ok = ok && json_object_set(c, "function", fn) == 0 && json_array_append(list, c) == 0 &&
         json_object_set(d, "tool_calls", list) == 0;
    json_decref(fn);
    json_decref(c);
    json_decref(list);
    if (!ok) {
        a->failed = true;
        json_decref(d);
        return NULL;
    }
    return d;
}

json_t *llmr_oai_answer_call_start(llmr_oai_answer *a, const char *name, size_t len)
{
    if (!a->o.tool_calls) {
        a->in = IN_CALL_AS_TEXT;
        return NULL;
    }
    if (!a->o.parallel_tool_calls && a->count > 0) {
        a->in = IN_DROPPED_CALL;
        return NULL;
    }
    if (a->count == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 4;
        call *c = realloc(a->calls, cap * sizeof *c);
        if (!c) {
            a->failed = true;
            a->in = IN_DROPPED_CALL;
            return NULL;
        }
        a->calls = c;
        a->cap = cap;
    }
    call *c = &a->calls[a->count++];
    llmr_oai_new_id("call_", c->id, sizeof c->id);
    llmr_strbuf_init(&c->name);
    llmr_strbuf_init(&c->args);
    llmr_strbuf_append(&c->name, name, len);
    a->in = IN_CALL;
    json_t *fn = json_object(), *n = llmr_oai_text_json(name, len);
    if (fn && n && json_object_set(fn, "name", n) == 0 &&
        json_object_set_new(fn, "arguments", json_string("")) == 0) {
        json_decref(n);
        return call_delta(a, a->count - 1, true, fn);
    }
    json_decref(n);
    json_decref(fn);
    a->failed = true;
    return NULL;
}

json_t *llmr_oai_answer_call_args(llmr_oai_answer *a, const char *text, size_t len)
{
    if (a->in == IN_CALL_AS_TEXT)
        return llmr_oai_answer_content(a, text, len);
    if (a->in != IN_CALL || !len)
        return NULL;
    llmr_strbuf_append(&a->calls[a->count - 1].args, text, len);
    json_t *fn = json_object(), *t = llmr_oai_text_json(text, len);
    bool ok = fn && t && json_object_set(fn, "arguments", t) == 0;
    json_decref(t);
    if (!ok) {
        json_decref(fn);
        a->failed = true;
        return NULL;
    }
    return call_delta(a, a->count - 1, false, fn);
}

void llmr_oai_answer_call_end(llmr_oai_answer *a)
{
    a->in = IN_NONE;
}

bool llmr_oai_answer_failed(const llmr_oai_answer *a)
{
    if (a->failed || llmr_strbuf_failed(&a->reasoning) || llmr_strbuf_failed(&a->content))
        return true;
    for (size_t i = 0; i < a->count; i++)
        if (llmr_strbuf_failed(&a->calls[i].name) || llmr_strbuf_failed(&a->calls[i].args))
            return true;
    return false;
}

const char *llmr_oai_answer_finish_reason(const llmr_oai_answer *a, bool length)
{
    return length ? "length" : a->count ? "tool_calls" : "stop";
}

static json_t *sb_json(const llmr_strbuf *sb)
{
    return llmr_oai_text_json(sb->data ? sb->data : "", sb->len);
}

json_t *llmr_oai_answer_message(const llmr_oai_answer *a)
{
    json_t *m = json_object();
    bool ok = m && json_object_set_new(m, "role", json_string("assistant")) == 0 &&
              json_object_set_new(m, "content", a->content.len || !a->count
                                                    ? sb_json(&a->content)
                                                    : json_null()) == 0 &&
              json_object_set_new(m, "refusal", json_null()) == 0;
    if (ok && a->o.include_reasoning && a->reasoning.len) {
        json_t *r = sb_json(&a->reasoning);
        ok = r && json_object_set(m, "reasoning_content", r) == 0 &&
             json_object_set(m, "reasoning", r) == 0;
        json_decref(r);
    }
    if (ok && a->count) {
        json_t *list = json_array();
        ok = list && json_object_set_new(m, "tool_calls", list) == 0;
        for (size_t i = 0; ok && i < a->count; i++) {
            json_t *c = json_pack("{s:s, s:s, s:{s:o, s:o}}", "id", a->calls[i].id, "type",
                                  "function", "function", "name", sb_json(&a->calls[i].name),
                                  "arguments", sb_json(&a->calls[i].args));
            ok = json_array_append_new(list, c) == 0;
        }
    }
    if (!ok) {
        json_decref(m);
        return NULL;
    }
    return m;
}
