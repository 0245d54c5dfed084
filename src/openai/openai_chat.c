/* The OpenAI wire format, chat requests: the messages (each an object with a known
 * role, and content that is a string, null for an assistant, or an array of text
 * parts) and the parameters only chat has (see openai_internal.h); the tools are
 * openai_tools.c's.
 *
 * Messages are kept as sent for the chat template; what is checked here is what a
 * template relies on.  Images and audio are refused with a message saying so. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "openai/openai_internal.h"

#define INVALID LLMR_OAI_INVALID

/* ---- chat messages ----------------------------------------------------------------- */

static bool is_one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* Content parts we know of but cannot take: this server reads text only. */
static const char *const media_parts[] = {"image_url", "input_image", "image", "input_audio",
                                          "audio",     "audio_url",   "file",  "input_file",
                                          "video",     "video_url",   NULL};

static bool check_part(const json_t *part, size_t i, size_t j, bool assistant, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "messages[%zu].content[%zu]", i, j);
    if (!json_is_object(part))
        return llmr_oai_fail_type(err, p, "an object", part);
    json_t *type = json_object_get(part, "type");
    if (!type)
        return llmr_oai_fail_missing(
            err, llmr_oai_param(p, sizeof p, "messages[%zu].content[%zu].type", i, j));
    if (!json_is_string(type))
        return llmr_oai_fail_type(
            err, llmr_oai_param(p, sizeof p, "messages[%zu].content[%zu].type", i, j), "a string",
            type);
    const char *t = json_string_value(type);
    const char *field = strcmp(t, "text") == 0                   ? "text"
                        : assistant && strcmp(t, "refusal") == 0 ? "refusal"
                                                                 : NULL;
    if (field) {
        json_t *text = json_object_get(part, field);
        llmr_oai_param(p, sizeof p, "messages[%zu].content[%zu].%s", i, j, field);
        if (!text)
            return llmr_oai_fail_missing(err, p);
        if (!json_is_string(text))
            return llmr_oai_fail_type(err, p, "a string", text);
        return true;
    }
    llmr_oai_param(p, sizeof p, "messages[%zu].content[%zu].type", i, j);
    if (is_one_of(t, media_parts)) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_content", p,
                           "Content parts of type '%s' are not supported: this server takes "
                           "text only ({\"type\": \"text\", \"text\": \"...\"}).",
                           t);
        return false;
    }
    llmr_oai_error_set(err, 400, INVALID, "invalid_value", p,
                       "Invalid value for '%s': '%s'. Supported values are: 'text'%s.", p, t,
                       assistant ? " and 'refusal'" : "");
    return false;
}

/* content: a string, an array of text parts, or (assistant) null or absent. */
static bool check_content(const json_t *msg, size_t i, bool assistant, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "messages[%zu].content", i);
    json_t *content = json_object_get(msg, "content");
    if (!content && !assistant)
        return llmr_oai_fail_missing(err, p);
    if (!content || json_is_string(content) || (assistant && json_is_null(content)))
        return true;
    if (!json_is_array(content))
        return llmr_oai_fail_type(err, p, "a string or an array of content parts", content);
    if (json_array_size(content) == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", p,
                           "Invalid '%s': empty array. Expected an array with minimum length 1, "
                           "but got an empty array instead.",
                           p);
        return false;
    }
    size_t j;
    json_t *part;
    json_array_foreach(content, j, part) {
        if (!check_part(part, i, j, assistant, err))
            return false;
    }
    return true;
}

/* An optional string member of a message (name, tool_call_id, thinking, ...). */
static bool check_msg_string(const json_t *msg, size_t i, const char *key, bool required,
                             bool nul_ok, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "messages[%zu].%s", i, key);
    json_t *v = json_object_get(msg, key);
    if (!v || json_is_null(v))
        return required ? llmr_oai_fail_missing(err, p) : true;
    if (!json_is_string(v))
        return llmr_oai_fail_type(err, p, "a string", v);
    if (!nul_ok && llmr_oai_has_nul(v))
        return llmr_oai_fail_nul(err, p);
    return true;
}

/* An assistant's tool_calls, kept as they are for the chat template: each an object
 * whose function names the function called. */
static bool check_tool_calls(const json_t *calls, size_t i, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls))
        return llmr_oai_fail_type(err, p, "an array", calls);
    size_t j;
    json_t *call;
    json_array_foreach(calls, j, call) {
        llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu]", i, j);
        if (!json_is_object(call))
            return llmr_oai_fail_type(err, p, "an object", call);
        json_t *id = llmr_oai_given(call, "id");
        if (id && !json_is_string(id))
            return llmr_oai_fail_type(
                err, llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu].id", i, j),
                "a string", id);
        json_t *type = llmr_oai_given(call, "type");
        if (type && (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0)) {
            llmr_oai_error_set(err, 400, INVALID, "invalid_value",
                               llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu].type", i, j),
                               "Invalid value for '%s': only 'function' tool calls are supported.",
                               p);
            return false;
        }
        json_t *fn = json_object_get(call, "function");
        llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu].function", i, j);
        if (!fn)
            return llmr_oai_fail_missing(err, p);
        if (!json_is_object(fn))
            return llmr_oai_fail_type(err, p, "an object", fn);
        json_t *name = json_object_get(fn, "name");
        llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu].function.name", i, j);
        if (!name)
            return llmr_oai_fail_missing(err, p);
        if (!json_is_string(name))
            return llmr_oai_fail_type(err, p, "a string", name);
        json_t *args = json_object_get(fn, "arguments");
        llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls[%zu].function.arguments", i, j);
        if (args && !json_is_string(args) && !json_is_object(args))
            return llmr_oai_fail_type(err, p, "a string", args);
    }
    return true;
}

static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};

static bool check_message(const json_t *msg, size_t i, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "messages[%zu]", i);
    if (!json_is_object(msg))
        return llmr_oai_fail_type(err, p, "an object", msg);
    json_t *role = json_object_get(msg, "role");
    llmr_oai_param(p, sizeof p, "messages[%zu].role", i);
    if (!role)
        return llmr_oai_fail_missing(err, p);
    if (!json_is_string(role))
        return llmr_oai_fail_type(err, p, "a string", role);
    const char *r = json_string_value(role);
    if (strcmp(r, "function") == 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", p,
                           "The 'function' role is deprecated and not supported: send a tool's "
                           "result as a message with role 'tool' and its 'tool_call_id'.");
        return false;
    }
    if (llmr_oai_has_nul(role) || !is_one_of(r, roles)) {
        llmr_strbuf shown = LLMR_STRBUF_INIT;
        llmr_strbuf_put_display(&shown, r,
                                json_string_length(role) > 32 ? 32 : json_string_length(role));
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", p,
                           "Invalid value for '%s': '%s'. Supported values are: 'system', "
                           "'developer', 'user', 'assistant', and 'tool'.",
                           p, llmr_strbuf_cstr(&shown));
        llmr_strbuf_free(&shown);
        return false;
    }
    bool assistant = strcmp(r, "assistant") == 0;
    if (!check_content(msg, i, assistant, err) ||
        !check_msg_string(msg, i, "name", false, false, err))
        return false;
    if (strcmp(r, "tool") == 0 && !check_msg_string(msg, i, "tool_call_id", true, false, err))
        return false;
    /* Reasoning text of an earlier turn, for templates that show it. */
    if (!check_msg_string(msg, i, "thinking", false, true, err) ||
        !check_msg_string(msg, i, "reasoning_content", false, true, err) ||
        !check_msg_string(msg, i, "reasoning", false, true, err))
        return false;
    json_t *calls = llmr_oai_given(msg, "tool_calls");
    if (calls && !assistant) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value",
                           llmr_oai_param(p, sizeof p, "messages[%zu].tool_calls", i),
                           "Invalid '%s': only messages with role 'assistant' may carry tool "
                           "calls, this one has role '%s'.",
                           p, r);
        return false;
    }
    return !calls || check_tool_calls(calls, i, err);
}

static bool parse_messages(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *messages = llmr_oai_given(root, "messages");
    if (!messages)
        return llmr_oai_fail_missing(err, "messages");
    if (!json_is_array(messages))
        return llmr_oai_fail_type(err, "messages", "an array", messages);
    if (json_array_size(messages) == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "messages",
                           "Invalid 'messages': empty array. Expected an array with minimum "
                           "length 1, but got an empty array instead.");
        return false;
    }
    size_t i;
    json_t *msg;
    json_array_foreach(messages, i, msg) {
        if (!check_message(msg, i, err))
            return false;
    }
    r->messages = json_incref(messages);
    return true;
}

/* chat_template_kwargs, with reasoning_effort folded in for templates that read it
 * (gpt-oss's) unless the kwargs name one already. */
static bool parse_template_kwargs(json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *kwargs = llmr_oai_given(root, "chat_template_kwargs");
    if (kwargs && !json_is_object(kwargs))
        return llmr_oai_fail_type(err, "chat_template_kwargs", "an object", kwargs);
    json_t *effort = llmr_oai_given(root, "reasoning_effort");
    if (effort && !json_is_string(effort))
        return llmr_oai_fail_type(err, "reasoning_effort", "a string", effort);
    if (effort && llmr_oai_has_nul(effort))
        return llmr_oai_fail_nul(err, "reasoning_effort");
    if (effort) { /* what gpt-oss's template knows, and OpenAI takes */
        const char *v = json_string_value(effort);
        if (strcmp(v, "low") != 0 && strcmp(v, "medium") != 0 && strcmp(v, "high") != 0) {
            llmr_oai_error_set(err, 400, LLMR_OAI_INVALID, "invalid_value", "reasoning_effort",
                               "Invalid value: '%.64s'. Supported values are: 'low', 'medium', "
                               "and 'high'.",
                               v);
            return false;
        }
    }
    if (effort && !(kwargs && json_object_get(kwargs, "reasoning_effort"))) {
        if (!kwargs) {
            kwargs = json_object();
            if (!kwargs || json_object_set_new(root, "chat_template_kwargs", kwargs) != 0)
                return llmr_oai_fail_oom(err);
        }
        if (json_object_set(kwargs, "reasoning_effort", effort) != 0)
            return llmr_oai_fail_oom(err);
    }
    if (kwargs)
        r->template_kwargs = json_incref(kwargs);
    return true;
}

/* llmr_prompt (an extension): the chat rendered already, by a router that holds the
 * model's chat format (docs/node.md); the node then tokenizes it as it is. */
static bool parse_rendered_prompt(json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *p = llmr_oai_given(root, LLMR_OAI_RENDERED_PROMPT);
    if (!p)
        return true;
    if (!json_is_string(p))
        return llmr_oai_fail_type(err, LLMR_OAI_RENDERED_PROMPT, "a string", p);
    size_t n = json_string_length(p);
    if (!(r->prompt = malloc(n + 1)))
        return llmr_oai_fail_oom(err);
    memcpy(r->prompt, json_string_value(p), n + 1);
    r->prompt_len = n;
    json_t *spans = llmr_oai_given(root, LLMR_OAI_RENDERED_TEXT);
    if (!spans)
        return true;
    if (!json_is_array(spans) || json_array_size(spans) > LLMR_OAI_MAX_TEXT_SPANS)
        return llmr_oai_fail_type(err, LLMR_OAI_RENDERED_TEXT, "an array of [offset, length] pairs", spans);
    size_t i, end = 0;
    bool in_order = true;
    json_t *s;
    json_array_foreach(spans, i, s) {
        json_t *o = json_array_get(s, 0), *l = json_array_get(s, 1);
        if (json_array_size(s) != 2 || !json_is_integer(o) || !json_is_integer(l) || json_integer_value(o) < 0 ||
            json_integer_value(l) <= 0)
            return llmr_oai_fail_type(err, LLMR_OAI_RENDERED_TEXT, "an array of [offset, length] pairs", spans);
        size_t off = (size_t)json_integer_value(o), len = (size_t)json_integer_value(l);
        in_order = in_order && off >= end && len <= SIZE_MAX - off;
        end = in_order ? off + len : end;
        llmr_text_spans_push(&r->prompt_text, off, len);
    }
    if (r->prompt_text.failed)
        return llmr_oai_fail_oom(err);
    if (!in_order || !llmr_text_spans_valid(r->prompt_text.v, r->prompt_text.n, n)) {
        llmr_oai_error_set(err, 400, LLMR_OAI_INVALID, "invalid_value", LLMR_OAI_RENDERED_TEXT,
                           "%s must list ranges of %s in order, apart, and within it", LLMR_OAI_RENDERED_TEXT,
                           LLMR_OAI_RENDERED_PROMPT);
        return false;
    }
    return true;
}

bool llmr_oai_parse_chat(json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    if (!parse_messages(root, r, err) || !llmr_oai_parse_tools(root, r, err) ||
        !parse_template_kwargs(root, r, err) || !parse_rendered_prompt(root, r, err))
        return false;

    /* max_completion_tokens replaces max_tokens, and wins when both are given. */
    json_int_t n = 0;
    if (!llmr_oai_get_int(root, "max_tokens", 1, LLMR_OAI_MAX_COUNT, &n, &r->max_tokens_set, err) ||
        !llmr_oai_get_int(root, "max_completion_tokens", 1, LLMR_OAI_MAX_COUNT, &n,
                          &r->max_tokens_set, err))
        return false;
    r->max_tokens = (uint32_t)n;

    bool top_set = false;
    if (!llmr_oai_get_bool(root, "logprobs", &r->logprobs, err) ||
        !llmr_oai_get_int(root, "top_logprobs", 0, LLMR_OAI_MAX_TOP_LOGPROBS, &n, &top_set, err))
        return false;
    if (top_set && !r->logprobs) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "top_logprobs",
                           "Invalid 'top_logprobs': 'logprobs' must be set to true when "
                           "'top_logprobs' is given.");
        return false;
    }
    r->top_logprobs = top_set ? (uint32_t)n : 0;
    /* include_reasoning (vLLM's): false leaves the reasoning out of the answer */
    if (!llmr_oai_get_bool(root, "include_reasoning", &r->include_reasoning, err))
        return false;

    if (llmr_oai_given(root, "audio")) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_parameter", "audio",
                           "Audio output is not supported: this server answers with text only.");
        return false;
    }
    json_t *modalities = llmr_oai_given(root, "modalities");
    if (modalities) {
        if (!json_is_array(modalities))
            return llmr_oai_fail_type(err, "modalities", "an array", modalities);
        size_t i;
        json_t *m;
        char p[64];
        json_array_foreach(modalities, i, m) {
            llmr_oai_param(p, sizeof p, "modalities[%zu]", i);
            if (!json_is_string(m))
                return llmr_oai_fail_type(err, p, "a string", m);
            if (strcmp(json_string_value(m), "text") != 0) {
                llmr_oai_error_set(err, 400, INVALID, "unsupported_value", p,
                                   "Only the 'text' modality is supported.");
                return false;
            }
        }
    }
    return true;
}
