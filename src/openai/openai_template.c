/* What a chat template is given for a request (llmr_oai_template_input, openai_api.h):
 * the request's messages and tools as they are, or, for a template that writes the
 * harmony format, the shape gpt-oss's chat template reads.  That template takes an
 * assistant's reasoning from `thinking`, renders only the first of an assistant
 * message's tool_calls and writes its arguments with tojson (so a JSON text would come
 * out quoted), names a tool result by the most recent call before it, and fails on a
 * null content or on a tool without a description; the mapping below gives it what
 * it can render, so a whole tool round trip comes out as harmony. */
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "openai/openai_internal.h"

/* Text parts joined (with "\n", as other servers join them); a string as it is. */
static json_t *joined_content(const json_t *content)
{
    if (!json_is_array(content))
        return json_incref((json_t *)content);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t i, n = 0;
    json_t *part;
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(text))
            text = json_object_get(part, "refusal");
        if (!json_is_string(text))
            continue;
        if (n++)
            llmr_strbuf_puts(&sb, "\n");
        llmr_strbuf_append(&sb, json_string_value(text), json_string_length(text));
    }
    json_t *s = llmr_strbuf_failed(&sb) ? NULL : json_stringn(sb.data ? sb.data : "", sb.len);
    llmr_strbuf_free(&sb);
    return s;
}

/* A copy of a message (not assistant) with its content parts joined. */
static json_t *plain_message(const json_t *m)
{
    json_t *c = json_copy((json_t *)m);
    json_t *content = json_object_get(m, "content");
    if (c && json_is_array(content) && json_object_set_new(c, "content", joined_content(content)) != 0) {
        json_decref(c);
        return NULL;
    }
    return c;
}

/* An assistant message without its calls: reasoning as thinking, no null content.  With
 * calls (with_calls), gpt-oss's template renders content or thinking as the analysis
 * before the call and refuses both: a turn the model wrote as analysis, a commentary
 * preamble and a call (which clients send back as it came) keeps its reasoning, the
 * analysis it was, and drops the preamble. */
static json_t *assistant_base(const json_t *m, bool with_calls)
{
    json_t *c = json_copy((json_t *)m);
    if (!c)
        return NULL;
    json_object_del(c, "tool_calls");
    json_t *content = json_object_get(m, "content");
    bool ok = true;
    if (!content || json_is_null(content))
        json_object_del(c, "content");
    else if (json_is_array(content))
        ok = json_object_set_new(c, "content", joined_content(content)) == 0;
    if (json_is_null(json_object_get(c, "thinking")))
        json_object_del(c, "thinking");
    const char *from[] = {"thinking", "reasoning_content", "reasoning"};
    for (size_t i = 0; ok && i < 3; i++) {
        json_t *t = json_object_get(m, from[i]);
        if (json_is_string(t)) {
            ok = i == 0 || json_object_set(c, "thinking", t) == 0;
            break;
        }
    }
    if (!ok) {
        json_decref(c);
        return NULL;
    }
    if (with_calls && json_string_length(json_object_get(c, "thinking")) &&
        json_string_length(json_object_get(c, "content")))
        json_object_del(c, "content");
    return c;
}

/* A call with its arguments as the JSON value they hold (kept a string when they hold
 * none). */
static json_t *call_with_object_arguments(const json_t *call)
{
    json_t *c = json_copy((json_t *)call);
    json_t *fn = c ? json_copy(json_object_get(call, "function")) : NULL;
    if (!fn || json_object_set_new(c, "function", fn) != 0) {
        json_decref(c);
        return NULL;
    }
    json_t *args = json_object_get(fn, "arguments");
    if (json_is_string(args)) {
        json_t *v = json_loadb(json_string_value(args), json_string_length(args),
                               JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
        if (v && json_object_set_new(fn, "arguments", v) != 0) {
            json_decref(c);
            return NULL;
        }
    }
    return c;
}

static bool is_role(const json_t *m, const char *role)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r && strcmp(r, role) == 0;
}

/* An assistant message with calls: one message per call (the first with the content
 * and reasoning), each followed by the results among the tool messages right after
 * it (from i + 1) whose tool_call_id names it; those are marked taken. */
static bool split_calls(const json_t *messages, size_t i, bool *taken, json_t *out)
{
    const json_t *m = json_array_get(messages, i);
    json_t *calls = json_object_get(m, "tool_calls");
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call) {
        json_t *one = k == 0 ? assistant_base(m, true) : json_object();
        json_t *list = json_array();
        bool ok = one && list && json_array_append_new(list, call_with_object_arguments(call)) == 0 &&
                  json_object_set_new(one, "role", json_string("assistant")) == 0 &&
                  json_object_set(one, "tool_calls", list) == 0 &&
                  json_array_append(out, one) == 0;
        json_decref(one);
        json_decref(list);
        if (!ok)
            return false;
        const char *id = json_string_value(json_object_get(call, "id"));
        for (size_t j = i + 1; id && j < json_array_size(messages); j++) {
            const json_t *t = json_array_get(messages, j);
            if (!is_role(t, "tool"))
                break;
            const char *tid = json_string_value(json_object_get(t, "tool_call_id"));
            if (taken[j] || !tid || strcmp(tid, id) != 0)
                continue;
            taken[j] = true;
            if (json_array_append_new(out, plain_message(t)) != 0)
                return false;
        }
    }
    return true;
}

static json_t *harmony_messages(const json_t *messages)
{
    size_t n = json_array_size(messages);
    bool *taken = calloc(n + 1, sizeof *taken);
    json_t *out = json_array();
    bool ok = taken && out;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (taken[i])
            continue;
        if (!is_role(m, "assistant"))
            ok = json_array_append_new(out, plain_message(m)) == 0;
        else if (json_array_size(json_object_get(m, "tool_calls")) > 0)
            ok = split_calls(messages, i, taken, out);
        else
            ok = json_array_append_new(out, assistant_base(m, false)) == 0;
    }
    free(taken);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The tools tool_choice offers, each with a description. */
static json_t *harmony_tools(const llmr_oai_request *r, bool *ok)
{
    *ok = true;
    if (!r->tools || r->tool_choice == LLMR_OAI_TOOL_NONE)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *tool;
    json_array_foreach(r->tools, i, tool) {
        json_t *fn = json_object_get(tool, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (r->tool_choice == LLMR_OAI_TOOL_FUNCTION &&
            (!name || strcmp(name, r->tool_choice_name) != 0))
            continue;
        json_t *t = json_copy(tool), *f = json_copy(fn);
        bool good = t && f && json_object_set_new(t, "function", f) == 0;
        if (good && !json_is_string(json_object_get(f, "description")))
            good = json_object_set_new(f, "description", json_string("")) == 0;
        if (!good || json_array_append_new(out, t) != 0) {
            if (!good)
                json_decref(t);
            *ok = false;
            break;
        }
    }
    if (!*ok || !out) {
        json_decref(out);
        *ok = false;
        return NULL;
    }
    return out;
}

bool llmr_oai_template_input(const llmr_oai_request *r, bool harmony, json_t **messages,
                             json_t **tools, llmr_oai_error *err)
{
    *messages = NULL;
    *tools = NULL;
    if (!harmony) {
        /* answers are not read for calls: nothing could honour a call asked for */
        if (r->tool_choice == LLMR_OAI_TOOL_REQUIRED || r->tool_choice == LLMR_OAI_TOOL_FUNCTION) {
            llmr_oai_error_set(err, 400, LLMR_OAI_INVALID, "unsupported_value", "tool_choice",
                               "this model's answers are not read for tool calls (its chat template "
                               "does not write the harmony format), so tool_choice \"required\" or "
                               "a named function cannot be honoured; use \"auto\" or \"none\"");
            return false;
        }
        *messages = json_incref(r->messages);
        /* "none": the model is offered no tools */
        *tools = r->tool_choice == LLMR_OAI_TOOL_NONE ? NULL : json_incref(r->tools);
        return true;
    }
    bool ok;
    *tools = harmony_tools(r, &ok);
    if (ok && !(*messages = harmony_messages(r->messages)))
        ok = false;
    if (!ok) {
        json_decref(*tools);
        *tools = NULL;
        return llmr_oai_fail_oom(err);
    }
    return true;
}
