/* The Responses API's request as a chat request (see openai_responses.h): the input
 * items checked and turned into chat messages, tools and tool_choice into chat's
 * nested shape, reasoning.effort and max_output_tokens into their chat names; then
 * the chat parser (llmr_oai_parse_root) checks the rest, and the names in its errors
 * are turned back into the Responses fields. */
#include "openai/openai_responses.h"

#include <stdlib.h>
#include <string.h>

#include "openai/openai_internal.h"

#define INVALID LLMR_OAI_INVALID

/* ---- input items -------------------------------------------------------------------- */

/* A string member of item that must be there. */
static const char *need_string(const json_t *item, const char *key, const char *at,
                               llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "%s.%s", at, key);
    json_t *v = json_object_get(item, key);
    if (!v || json_is_null(v))
        return llmr_oai_fail_missing(err, p), NULL;
    if (!json_is_string(v))
        return llmr_oai_fail_type(err, p, "a string", v), NULL;
    return json_string_value(v);
}

/* Text parts joined into *out: each {type, text} with a type in types. */
static bool parts_text(const json_t *parts, const char *at, const char *const *types,
                       llmr_strbuf *out, llmr_oai_error *err)
{
    char p[64];
    size_t j;
    json_t *part;
    json_array_foreach(parts, j, part)
    {
        llmr_oai_param(p, sizeof p, "%s[%zu]", at, j);
        if (!json_is_object(part))
            return llmr_oai_fail_type(err, p, "an object", part);
        const char *type = need_string(part, "type", p, err);
        if (!type)
            return false;
        bool known = false;
        for (size_t k = 0; types[k] && !known; k++)
            known = strcmp(type, types[k]) == 0;
        if (!known) {
            llmr_oai_error_set(err, 400, INVALID, "unsupported_value",
                               llmr_oai_param(p, sizeof p, "%s[%zu].type", at, j),
                               "Content of type '%.64s' is not supported here: only text parts "
                               "('%s'%s%s%s) are.",
                               type, types[0], types[1] ? ", '" : "", types[1] ? types[1] : "",
                               types[1] ? "'" : "");
            return false;
        }
        const char *text = need_string(part, "text", p, err);
        if (!text)
            return false;
        llmr_strbuf_append(out, text, json_string_length(json_object_get(part, "text")));
    }
    return true;
}

/* A content or output member (a string or a list of text parts) as a JSON string. */
static json_t *content_text(const json_t *item, const char *key, const char *at,
                            llmr_oai_error *err)
{
    static const char *const types[] = {"input_text", "output_text", NULL};
    char p[64];
    llmr_oai_param(p, sizeof p, "%s.%s", at, key);
    json_t *c = json_object_get(item, key);
    if (!c || json_is_null(c))
        return llmr_oai_fail_missing(err, p), NULL;
    if (json_is_string(c))
        return json_incref(c);
    if (!json_is_array(c))
        return llmr_oai_fail_type(err, p, "a string or an array of text parts", c), NULL;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    json_t *s = NULL;
    if (parts_text(c, p, types, &sb, err) &&
        !(s = json_stringn(sb.data ? sb.data : "", sb.len)))
        llmr_oai_fail_oom(err);
    llmr_strbuf_free(&sb);
    return s;
}

/* Where each chat message came from, so that the chat parser's errors about
 * messages[j] can name the input item (or instructions) the client sent. */
typedef enum { FROM_INSTRUCTIONS, FROM_MESSAGE, FROM_CALLS, FROM_OUTPUT } from_kind;

typedef struct origin {
    from_kind kind;
    size_t item;       /* its input item (the first call's, for FROM_CALLS) */
    long reasoning;    /* the first reasoning item given to it as reasoning_content, or -1 */
    size_t first_call; /* FROM_CALLS: its calls' items are call_items[first_call...] */
    size_t ncalls;
} origin;

typedef struct origins {
    origin *v;
    size_t n, cap;
    size_t *call_items; /* the input item of each tool call, in order */
    size_t ncall_items, call_cap;
    bool input_string;  /* input was a string: its one item is "input" */
} origins;

static void origins_free(origins *o)
{
    free(o->v);
    free(o->call_items);
    memset(o, 0, sizeof *o);
}

static bool grow(void **v, size_t *cap, size_t need, size_t each)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 8;
    void *p = realloc(*v, n * each);
    if (!p)
        return false;
    *v = p;
    *cap = n;
    return true;
}

/* What turning items into messages carries from one item to the next. */
typedef struct conv {
    json_t *messages;
    llmr_strbuf reasoning;  /* reasoning items not yet given to an assistant turn */
    long reasoning_item;    /* the first of them, or -1 */
    json_t *calls;          /* the tool_calls of the assistant message last added, or NULL */
    origins *from;          /* one origin per message */
} conv;

/* Records where the message just about to be appended comes from. */
static bool note_origin(conv *c, from_kind kind, size_t item)
{
    origins *o = c->from;
    if (!grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v))
        return false;
    o->v[o->n++] = (origin){kind, item, -1, o->ncall_items, 0};
    return true;
}

static bool note_call(conv *c, size_t item)
{
    origins *o = c->from;
    if (!grow((void **)&o->call_items, &o->call_cap, o->ncall_items + 1, sizeof *o->call_items))
        return false;
    o->call_items[o->ncall_items++] = item;
    o->v[o->n - 1].ncalls++;
    return true;
}

/* The reasoning items before it as an assistant message's reasoning_content. */
static bool take_reasoning(conv *c, json_t *msg)
{
    if (!c->reasoning.len)
        return true;
    bool ok = json_object_set_new(msg, "reasoning_content",
                                  json_stringn(c->reasoning.data, c->reasoning.len)) == 0;
    llmr_strbuf_reset(&c->reasoning);
    c->from->v[c->from->n - 1].reasoning = c->reasoning_item;
    c->reasoning_item = -1;
    return ok;
}

static bool add_message(conv *c, const json_t *item, size_t i, const char *at,
                        llmr_oai_error *err)
{
    static const char *const roles[] = {"user", "assistant", "system", "developer", NULL};
    const char *role = need_string(item, "role", at, err);
    if (!role)
        return false;
    size_t k = 0;
    while (roles[k] && strcmp(roles[k], role) != 0)
        k++;
    char p[64];
    if (!roles[k]) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value",
                           llmr_oai_param(p, sizeof p, "%s.role", at),
                           "Invalid value for '%s': supported values are 'user', 'assistant', "
                           "'system' and 'developer'.",
                           p);
        return false;
    }
    json_t *text = content_text(item, "content", at, err);
    if (!text)
        return false;
    json_t *msg = json_pack("{s:s, s:o}", "role", role, "content", text);
    if (!msg || !note_origin(c, FROM_MESSAGE, i) ||
        (!strcmp(role, "assistant") && !take_reasoning(c, msg))) {
        json_decref(msg);
        return llmr_oai_fail_oom(err);
    }
    if (json_array_append_new(c->messages, msg) != 0)
        return llmr_oai_fail_oom(err);
    c->calls = NULL;
    return true;
}

static bool add_call(conv *c, const json_t *item, size_t i, const char *at, llmr_oai_error *err)
{
    const char *id = need_string(item, "call_id", at, err), *name, *args;
    if (!id || !(name = need_string(item, "name", at, err)) ||
        !(args = need_string(item, "arguments", at, err)))
        return false;
    json_t *call = json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", json_object_get(item, "call_id"),
                             "type", "function", "function", "name",
                             json_object_get(item, "name"), "arguments",
                             json_object_get(item, "arguments"));
    if (!call)
        return llmr_oai_fail_oom(err);
    if (c->calls && !c->reasoning.len) { /* calls in a row: one assistant turn */
        if (!note_call(c, i)) {
            json_decref(call);
            return llmr_oai_fail_oom(err);
        }
        return json_array_append_new(c->calls, call) == 0 || llmr_oai_fail_oom(err);
    }
    json_t *msg = json_pack("{s:s, s:n, s:[o]}", "role", "assistant", "content", "tool_calls", call);
    if (!msg || !note_origin(c, FROM_CALLS, i) || !note_call(c, i) || !take_reasoning(c, msg)) {
        json_decref(msg);
        return llmr_oai_fail_oom(err);
    }
    if (json_array_append_new(c->messages, msg) != 0)
        return llmr_oai_fail_oom(err);
    c->calls = json_object_get(msg, "tool_calls");
    return true;
}

static bool add_call_output(conv *c, const json_t *item, size_t i, const char *at,
                            llmr_oai_error *err)
{
    const char *id = need_string(item, "call_id", at, err);
    json_t *text = id ? content_text(item, "output", at, err) : NULL;
    if (!text)
        return false;
    json_t *msg = json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id",
                            json_object_get(item, "call_id"), "content", text);
    if (!msg || !note_origin(c, FROM_OUTPUT, i)) {
        json_decref(msg);
        return llmr_oai_fail_oom(err);
    }
    if (json_array_append_new(c->messages, msg) != 0)
        return llmr_oai_fail_oom(err);
    /* a call after a tool result starts a new assistant turn */
    c->calls = NULL;
    return true;
}

static bool add_reasoning(conv *c, const json_t *item, size_t i, const char *at,
                          llmr_oai_error *err)
{
    static const char *const content_types[] = {"reasoning_text", NULL};
    static const char *const summary_types[] = {"summary_text", NULL};
    char p[64];
    json_t *content = llmr_oai_given(item, "content"), *summary = llmr_oai_given(item, "summary");
    if (content && !json_is_array(content))
        return llmr_oai_fail_type(err, llmr_oai_param(p, sizeof p, "%s.content", at), "an array",
                                  content);
    if (summary && !json_is_array(summary))
        return llmr_oai_fail_type(err, llmr_oai_param(p, sizeof p, "%s.summary", at), "an array",
                                  summary);
    if (c->reasoning_item < 0)
        c->reasoning_item = (long)i;
    /* the reasoning itself when given, else its summary */
    if (json_array_size(content))
        return parts_text(content, llmr_oai_param(p, sizeof p, "%s.content", at), content_types,
                          &c->reasoning, err);
    if (summary)
        return parts_text(summary, llmr_oai_param(p, sizeof p, "%s.summary", at), summary_types,
                          &c->reasoning, err);
    return true;
}

static bool add_item(conv *c, const json_t *item, size_t i, llmr_oai_error *err)
{
    char at[32];
    llmr_oai_param(at, sizeof at, "input[%zu]", i);
    if (!json_is_object(item))
        return llmr_oai_fail_type(err, at, "an object", item);
    json_t *type = llmr_oai_given(item, "type");
    if (!type) /* an easy input message: {role, content} */
        return add_message(c, item, i, at, err);
    char p[64];
    llmr_oai_param(p, sizeof p, "%s.type", at);
    if (!json_is_string(type))
        return llmr_oai_fail_type(err, p, "a string", type);
    const char *t = json_string_value(type);
    if (!strcmp(t, "message"))
        return add_message(c, item, i, at, err);
    if (!strcmp(t, "function_call"))
        return add_call(c, item, i, at, err);
    if (!strcmp(t, "function_call_output"))
        return add_call_output(c, item, i, at, err);
    if (!strcmp(t, "reasoning"))
        return add_reasoning(c, item, i, at, err);
    llmr_oai_error_set(err, 400, INVALID, "unsupported_value", p,
                       "Input items of type '%.64s' are not supported: send 'message', "
                       "'function_call', 'function_call_output' or 'reasoning' items.",
                       t);
    return false;
}

/* input (and instructions) as chat messages into chat["messages"], and where each
 * came from into *from. */
static bool convert_input(const json_t *root, json_t *chat, json_t **items, origins *from,
                          llmr_oai_error *err)
{
    json_t *input = json_object_get(root, "input");
    if (!input || json_is_null(input))
        return llmr_oai_fail_missing(err, "input");
    if (json_is_string(input))
        *items = json_pack("[{s:s, s:s, s:O}]", "type", "message", "role", "user", "content", input);
    else if (json_is_array(input))
        *items = json_incref(input);
    else
        return llmr_oai_fail_type(err, "input", "a string or an array of input items", input);
    if (!*items)
        return llmr_oai_fail_oom(err);
    from->input_string = json_is_string(input);
    conv c = {json_array(), LLMR_STRBUF_INIT, -1, NULL, from};
    bool ok = c.messages != NULL || llmr_oai_fail_oom(err);
    json_t *instructions = llmr_oai_given(root, "instructions");
    if (ok && instructions && !json_is_string(instructions))
        ok = llmr_oai_fail_type(err, "instructions", "a string", instructions);
    else if (ok && instructions)
        ok = (note_origin(&c, FROM_INSTRUCTIONS, 0) &&
              json_array_append_new(c.messages, json_pack("{s:s, s:O}", "role", "system",
                                                          "content", instructions)) == 0) ||
             llmr_oai_fail_oom(err);
    size_t i;
    json_t *item;
    json_array_foreach(*items, i, item)
    {
        if (!ok)
            break;
        ok = add_item(&c, item, i, err);
    }
    if (ok && json_array_size(c.messages) == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "input",
                           "Invalid 'input': give at least one message.");
        ok = false;
    }
    ok = ok && (json_object_set(chat, "messages", c.messages) == 0 || llmr_oai_fail_oom(err));
    json_decref(c.messages);
    llmr_strbuf_free(&c.reasoning);
    return ok;
}

/* ---- the other fields ---------------------------------------------------------------- */

/* Responses' flat function tools as chat's {type, function: {...}}. */
static bool convert_tools(const json_t *root, json_t *chat, llmr_oai_error *err)
{
    json_t *tools = llmr_oai_given(root, "tools");
    if (!tools)
        return true;
    if (!json_is_array(tools))
        return llmr_oai_fail_type(err, "tools", "an array", tools);
    json_t *out = json_array();
    if (!out || json_object_set_new(chat, "tools", out) != 0)
        return llmr_oai_fail_oom(err);
    size_t i;
    json_t *tool;
    char p[64];
    json_array_foreach(tools, i, tool)
    {
        llmr_oai_param(p, sizeof p, "tools[%zu]", i);
        if (!json_is_object(tool))
            return llmr_oai_fail_type(err, p, "an object", tool);
        const char *type = need_string(tool, "type", p, err);
        if (!type)
            return false;
        if (strcmp(type, "function") != 0) {
            llmr_oai_error_set(err, 400, INVALID, "unsupported_value",
                               llmr_oai_param(p, sizeof p, "tools[%zu].type", i),
                               "Tools of type '%.64s' are not supported: only 'function' tools "
                               "are.",
                               type);
            return false;
        }
        json_t *fn = json_deep_copy(tool);
        if (!fn)
            return llmr_oai_fail_oom(err);
        json_object_del(fn, "type");
        if (!json_object_get(fn, "name")) { /* chat's parser would say function.name */
            json_decref(fn);
            return llmr_oai_fail_missing(err, llmr_oai_param(p, sizeof p, "tools[%zu].name", i));
        }
        if (json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn)))
            return llmr_oai_fail_oom(err);
    }
    return true;
}

/* {type: "function", name} as chat's {type, function: {name}}; strings as they are. */
static bool convert_tool_choice(const json_t *root, json_t *chat, llmr_oai_error *err)
{
    json_t *choice = llmr_oai_given(root, "tool_choice");
    if (!choice)
        return true;
    if (!json_is_object(choice))
        return json_object_set(chat, "tool_choice", choice) == 0 || llmr_oai_fail_oom(err);
    const char *type = need_string(choice, "type", "tool_choice", err);
    if (!type)
        return false;
    if (strcmp(type, "function") != 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "tool_choice.type",
                           "Invalid value for 'tool_choice.type': only 'function' is supported.");
        return false;
    }
    if (!need_string(choice, "name", "tool_choice", err))
        return false;
    return json_object_set_new(chat, "tool_choice",
                               json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                                         json_object_get(choice, "name"))) == 0 ||
           llmr_oai_fail_oom(err);
}

static bool check_reasoning(const json_t *root, json_t *chat, llmr_oai_error *err)
{
    json_t *reasoning = llmr_oai_given(root, "reasoning");
    if (!reasoning)
        return true;
    if (!json_is_object(reasoning))
        return llmr_oai_fail_type(err, "reasoning", "an object", reasoning);
    json_t *effort = llmr_oai_given(reasoning, "effort");
    return !effort || json_object_set(chat, "reasoning_effort", effort) == 0 ||
           llmr_oai_fail_oom(err);
}

/* store, background, metadata, text.format, previous_response_id: checked here, as
 * chat has none of them. */
static bool check_own(const json_t *root, bool allow_previous, llmr_oai_responses *r,
                      llmr_oai_error *err)
{
    r->store = true;
    if (!llmr_oai_get_bool(root, "store", &r->store, err))
        return false;
    bool background = false;
    if (!llmr_oai_get_bool(root, "background", &background, err))
        return false;
    if (background) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "background",
                           "'background' responses are not supported: send background: false or "
                           "leave it out.");
        return false;
    }
    json_t *metadata = llmr_oai_given(root, "metadata"), *v;
    const char *key;
    if (metadata && !json_is_object(metadata))
        return llmr_oai_fail_type(err, "metadata", "an object", metadata);
    json_object_foreach(metadata, key, v)
    {
        char p[64];
        if (!json_is_string(v))
            return llmr_oai_fail_type(err, llmr_oai_param(p, sizeof p, "metadata.%.40s", key),
                                      "a string", v);
    }
    json_t *text = llmr_oai_given(root, "text");
    if (text && !json_is_object(text))
        return llmr_oai_fail_type(err, "text", "an object", text);
    json_t *format = text ? llmr_oai_given(text, "format") : NULL;
    if (format) {
        const char *type = json_is_object(format) ? need_string(format, "type", "text.format", err)
                                                  : (llmr_oai_fail_type(err, "text.format",
                                                                        "an object", format),
                                                     NULL);
        if (!type)
            return false;
        if (strcmp(type, "text") != 0) {
            llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "text.format.type",
                               "text.format '%.64s' is not supported: this server cannot "
                               "constrain output to JSON. Use 'text'.",
                               type);
            return false;
        }
    }
    json_t *prev = llmr_oai_given(root, "previous_response_id");
    if (prev && !json_is_string(prev))
        return llmr_oai_fail_type(err, "previous_response_id", "a string", prev);
    if (prev && !allow_previous) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_parameter", "previous_response_id",
                           "'previous_response_id' needs the router's response store: this node "
                           "keeps no responses. Send the request through the router, or send "
                           "the whole conversation as 'input'.");
        return false;
    }
    r->previous_response_id = prev ? json_string_value(prev) : NULL;
    return true;
}

/* Each `from` in s (of size bytes) as `to`, as far as there is room. */
static void replace_all(char *s, size_t size, const char *from_text, const char *to_text)
{
    size_t from = strlen(from_text), to = strlen(to_text);
    if (!from)
        return;
    for (char *at = strstr(s, from_text); at; at = strstr(at + to, from_text)) {
        size_t tail = strlen(at + from);
        if ((size_t)(at - s) + to + tail + 1 > size)
            break;
        memmove(at + to, at + from, tail + 1);
        memcpy(at, to_text, to);
    }
}

/* The chat parser's names for what it found wrong, as the Responses fields. */
static void rename_fields(char *s, size_t size)
{
    static const char *const pairs[][2] = {{"max_completion_tokens", "max_output_tokens"},
                                           {"reasoning_effort", "reasoning.effort"},
                                           {"tool_choice.function.name", "tool_choice.name"},
                                           {"].function.", "]."},
                                           {"messages", "input"}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        replace_all(s, size, pairs[k][0], pairs[k][1]);
}

void llmr_oai_responses_name_error(llmr_oai_error *err)
{
    rename_fields(err->param, sizeof err->param);
}

/* "[n]" at *s: n, with *s moved past it; false when *s holds none. */
static bool read_index(const char **s, size_t *n)
{
    if (**s != '[')
        return false;
    char *end;
    unsigned long long v = strtoull(*s + 1, &end, 10);
    if (end == *s + 1 || *end != ']')
        return false;
    *n = (size_t)v;
    *s = end + 1;
    return true;
}

/* The member of an input item a chat message's member (rest, after "messages[j]")
 * came from. */
static const char *item_member(from_kind kind, const char *rest)
{
    static const char *const calls[][2] = {{".id", ".call_id"},
                                           {".function.name", ".name"},
                                           {".function.arguments", ".arguments"},
                                           {".function", ""}};
    if (kind == FROM_CALLS) {
        for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
            if (!strcmp(rest, calls[k][0]))
                return calls[k][1];
        return rest;
    }
    if (kind == FROM_OUTPUT && !strcmp(rest, ".tool_call_id"))
        return ".call_id";
    if (kind == FROM_OUTPUT && !strncmp(rest, ".content", 8))
        return ".output"; /* a string the chat parser sees, from the output's text */
    if (kind == FROM_MESSAGE && !strncmp(rest, ".content", 8))
        return ".content";
    return rest;
}

/* An error of the chat parser about messages[j]... as one about the input item (or
 * instructions) that message j came from: param and message both. */
static void name_input_item(const origins *o, llmr_oai_error *err)
{
    static const char prefix[] = "messages";
    const char *s = err->param;
    size_t j, k;
    if (strncmp(s, prefix, sizeof prefix - 1) != 0)
        return;
    s += sizeof prefix - 1;
    if (!read_index(&s, &j) || j >= o->n)
        return;
    const origin *m = &o->v[j];
    size_t item = m->item;
    from_kind kind = m->kind;
    const char *rest = s;
    if (kind == FROM_CALLS && !strncmp(rest, ".tool_calls", 11)) {
        const char *after = rest + 11;
        if (read_index(&after, &k) && k < m->ncalls) {
            item = o->call_items[m->first_call + k];
            rest = after;
        } else if (*after == '\0') {
            rest = "";
        }
    }
    char name[sizeof err->param];
    if (m->reasoning >= 0 && (!strcmp(rest, ".reasoning_content") || !strcmp(rest, ".thinking") ||
                              !strcmp(rest, ".reasoning")))
        llmr_oai_param(name, sizeof name, "input[%ld]", m->reasoning);
    else if (kind == FROM_INSTRUCTIONS)
        llmr_oai_param(name, sizeof name, "instructions");
    else if (o->input_string)
        llmr_oai_param(name, sizeof name, "input");
    else
        llmr_oai_param(name, sizeof name, "input[%zu]%s", item, item_member(kind, rest));
    char old[sizeof err->param];
    memcpy(old, err->param, sizeof old);
    replace_all(err->message, sizeof err->message, old, name);
    memcpy(err->param, name, sizeof err->param);
}

bool llmr_oai_responses_parse(const char *body, size_t len, bool allow_previous,
                              llmr_oai_responses *out, llmr_oai_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = llmr_oai_parse_body(body ? body : "", body ? len : 0, err);
    if (!root)
        return false;
    llmr_oai_responses r = {0};
    origins from = {0};
    r.request = root;
    json_t *chat = json_object();
    static const char *const same[] = {"model", "temperature", "top_p", "stream",
                                       "parallel_tool_calls", "user", LLMR_OAI_RENDERED_PROMPT,
                                       LLMR_OAI_RENDERED_TEXT, NULL};
    bool ok = chat != NULL || llmr_oai_fail_oom(err);
    for (size_t k = 0; ok && same[k]; k++) {
        json_t *v = json_object_get(root, same[k]);
        ok = !v || json_object_set(chat, same[k], v) == 0 || llmr_oai_fail_oom(err);
    }
    json_t *max = json_object_get(root, "max_output_tokens");
    ok = ok && (!max || json_object_set(chat, "max_completion_tokens", max) == 0 ||
                llmr_oai_fail_oom(err));
    ok = ok && check_own(root, allow_previous, &r, err) &&
         convert_input(root, chat, &r.input, &from, err) && convert_tools(root, chat, err) &&
         convert_tool_choice(root, chat, err) && check_reasoning(root, chat, err);
    if (ok && !llmr_oai_parse_root(LLMR_OAI_CHAT, chat, &r.chat, err)) {
        name_input_item(&from, err);
        rename_fields(err->param, sizeof err->param);
        rename_fields(err->message, sizeof err->message);
        ok = false;
    }
    json_decref(chat);
    origins_free(&from);
    if (!ok) {
        llmr_oai_responses_free(&r);
        return false;
    }
    *out = r;
    return true;
}

void llmr_oai_responses_free(llmr_oai_responses *r)
{
    if (!r)
        return;
    llmr_oai_request_free(&r->chat);
    json_decref(r->request);
    json_decref(r->input);
    memset(r, 0, sizeof *r);
}

char *llmr_oai_responses_chain(const llmr_oai_responses *r, const json_t *earlier_input,
                               const json_t *earlier_output)
{
    json_t *body = json_copy(r->request), *items = json_array();
    char *text = NULL;
    if (body && items && json_array_extend(items, (json_t *)earlier_input) == 0 &&
        json_array_extend(items, (json_t *)earlier_output) == 0 && json_array_extend(items, r->input) == 0 &&
        json_object_set(body, "input", items) == 0 &&
        json_object_del(body, "previous_response_id") == 0 &&
        /* for the answer's echo: the node takes no previous_response_id itself */
        json_object_set_new(body, LLMR_OAI_PREVIOUS_ECHO, json_string(r->previous_response_id)) == 0)
        text = llmr_oai_dumps(body);
    json_decref(items);
    json_decref(body);
    return text;
}
