/* The OpenAI wire format, requests: the bodies of POST /v1/chat/completions and
 * POST /v1/completions parsed and checked into llmr_oai_request (see openai_api.h;
 * chat's messages and tools are checked in openai_chat.c).
 *
 * Every mistake is a 400 naming the parameter at fault, worded as OpenAI words its
 * own ("Invalid type for 'temperature': expected a number, but got a string
 * instead.").  null counts as "not given" for every optional parameter, as it does
 * at OpenAI; keys we do not know are ignored.  What we know but cannot do (n > 1,
 * best_of, echo, suffix, images, audio, JSON output) is refused
 * with a message saying so rather than silently dropped. */
#include "openai/openai_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "engine_host/stop_strings.h"

#define INVALID LLMR_OAI_INVALID
#define COMPLETION_MAX_LOGPROBS 5

/* ---- errors ------------------------------------------------------------------------ */

/* "a string", "an integer", ...: what a value is, as the messages say it. */
static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

bool llmr_oai_fail_type(llmr_oai_error *err, const char *param, const char *expected,
                        const json_t *got)
{
    llmr_oai_error_set(err, 400, INVALID, "invalid_type", param,
                       "Invalid type for '%s': expected %s, but got %s instead.", param, expected,
                       type_name(got));
    return false;
}

bool llmr_oai_fail_missing(llmr_oai_error *err, const char *param)
{
    llmr_oai_error_set(err, 400, INVALID, "missing_required_parameter", param,
                       "Missing required parameter: '%s'.", param);
    return false;
}

bool llmr_oai_fail_oom(llmr_oai_error *err)
{
    llmr_oai_error_set(err, 500, "server_error", NULL, NULL,
                       "The server ran out of memory while reading the request.");
    return false;
}

const char *llmr_oai_param(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}

bool llmr_oai_has_nul(const json_t *s)
{
    return memchr(json_string_value(s), '\0', json_string_length(s)) != NULL;
}

bool llmr_oai_fail_nul(llmr_oai_error *err, const char *param)
{
    llmr_oai_error_set(err, 400, INVALID, "invalid_value", param,
                       "Invalid '%s': the string contains a NUL character (\\u0000), which is "
                       "not allowed here.",
                       param);
    return false;
}

/* ---- typed members ----------------------------------------------------------------- */

json_t *llmr_oai_given(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

bool llmr_oai_get_bool(const json_t *obj, const char *key, bool *out, llmr_oai_error *err)
{
    json_t *v = llmr_oai_given(obj, key);
    if (!v)
        return true;
    if (!json_is_boolean(v))
        return llmr_oai_fail_type(err, key, "a boolean", v);
    *out = json_is_true(v);
    return true;
}

bool llmr_oai_get_int(const json_t *obj, const char *key, json_int_t min, json_int_t max,
                      json_int_t *out, bool *set, llmr_oai_error *err)
{
    json_t *v = llmr_oai_given(obj, key);
    if (!v)
        return true;
    if (!json_is_integer(v))
        return llmr_oai_fail_type(err, key, "an integer", v);
    json_int_t n = json_integer_value(v);
    if (n < min || n > max) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", key,
                           "Invalid '%s': integer %s value. Expected a value %s %lld, but got "
                           "%lld instead.",
                           key, n < min ? "below minimum" : "above maximum",
                           n < min ? ">=" : "<=", (long long)(n < min ? min : max), (long long)n);
        return false;
    }
    *out = n;
    if (set)
        *set = true;
    return true;
}

/* A number in [min, max] (or (min, max] when min_open). */
static bool get_number(const json_t *obj, const char *key, double min, bool min_open, double max,
                       double *out, llmr_oai_error *err)
{
    json_t *v = llmr_oai_given(obj, key);
    if (!v)
        return true;
    if (!json_is_number(v))
        return llmr_oai_fail_type(err, key, "a number", v);
    double x = json_number_value(v);
    bool low = min_open ? !(x > min) : !(x >= min);
    if (low || x > max) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", key,
                           "Invalid '%s': number %s value. Expected a value %s %g, but got %g "
                           "instead.",
                           key, low ? "below minimum" : "above maximum",
                           low ? (min_open ? ">" : ">=") : "<=", low ? min : max, x);
        return false;
    }
    *out = x;
    return true;
}

/* A string without NUL, copied; *out stays NULL when none was given. */
static bool get_string(const json_t *obj, const char *key, char **out, llmr_oai_error *err)
{
    json_t *v = llmr_oai_given(obj, key);
    if (!v)
        return true;
    if (!json_is_string(v))
        return llmr_oai_fail_type(err, key, "a string", v);
    if (llmr_oai_has_nul(v))
        return llmr_oai_fail_nul(err, key);
    *out = strdup(json_string_value(v));
    return *out ? true : llmr_oai_fail_oom(err);
}

/* ---- the body ---------------------------------------------------------------------- */

/* 1-based line and column of a byte offset, for the invalid UTF-8 message. */
static void line_column(const char *body, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (body[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

json_t *llmr_oai_parse_body(const char *body, size_t len, llmr_oai_error *err)
{
    size_t start = 0;
    while (start < len && (body[start] == ' ' || body[start] == '\t' || body[start] == '\r' ||
                           body[start] == '\n'))
        start++;
    if (start == len) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_json", NULL,
                           "The request body is empty: expected a JSON object.");
        return NULL;
    }
    /* jansson checks UTF-8 too, but here the message can say which byte and where. */
    size_t bad;
    if (!llmr_utf8_valid(body, len, &bad)) {
        size_t line, col;
        line_column(body, bad, &line, &col);
        llmr_oai_error_set(err, 400, INVALID, "invalid_json", NULL,
                           "The request body is not valid UTF-8: the byte 0x%02X at offset %zu "
                           "(line %zu, column %zu) does not start a valid character. Send the "
                           "JSON body encoded as UTF-8.",
                           (unsigned char)body[bad], bad, line, col);
        return NULL;
    }
    /* NUL is let through the parse so that a string holding one is refused by the
     * parameter it belongs to, and allowed where text may hold it. */
    json_error_t jerr;
    json_t *root =
        json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_json", NULL,
                           "The request body is not valid JSON (line %d, column %d: %s). Expected "
                           "a JSON object.",
                           jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_json", NULL,
                           "The request body must be a JSON object, but it is %s.",
                           type_name(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ---- completions ------------------------------------------------------------------- */

static bool several_prompts(llmr_oai_error *err, size_t n)
{
    llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "prompt",
                       "Invalid 'prompt': only one prompt per request is supported, but got %zu. "
                       "Send each prompt in its own request.",
                       n);
    return false;
}

/* An array of token ids (each 0 .. 2^31-1), copied into r. */
static bool parse_prompt_ids(const json_t *ids, const char *param, llmr_oai_request *r,
                             llmr_oai_error *err)
{
    size_t n = json_array_size(ids);
    if (n == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", param,
                           "Invalid '%s': empty array. Expected at least one token id.", param);
        return false;
    }
    r->prompt_ids = malloc(n * sizeof *r->prompt_ids);
    if (!r->prompt_ids)
        return llmr_oai_fail_oom(err);
    char p[64];
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) {
        llmr_oai_param(p, sizeof p, "%s[%zu]", param, i);
        if (!json_is_integer(id))
            return llmr_oai_fail_type(err, p, "an integer token id", id);
        json_int_t v = json_integer_value(id);
        if (v < 0 || v > INT32_MAX) {
            llmr_oai_error_set(err, 400, INVALID, "invalid_value", p,
                               "Invalid '%s': %lld is not a token id. Expected a value between 0 "
                               "and %d.",
                               p, (long long)v, INT32_MAX);
            return false;
        }
        r->prompt_ids[i] = (int32_t)v;
    }
    r->prompt_id_count = n;
    return true;
}

static bool set_prompt_text(const json_t *s, llmr_oai_request *r, llmr_oai_error *err)
{
    size_t n = json_string_length(s);
    r->prompt = malloc(n + 1);
    if (!r->prompt)
        return llmr_oai_fail_oom(err);
    memcpy(r->prompt, json_string_value(s), n + 1);
    r->prompt_len = n;
    return true;
}

/* prompt: a string, [string], [ids...] or [[ids...]]. */
static bool parse_prompt(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *prompt = llmr_oai_given(root, "prompt");
    const char *expected = "a string, an array of one string, or an array of token ids";
    if (!prompt)
        return llmr_oai_fail_missing(err, "prompt");
    if (json_is_string(prompt))
        return set_prompt_text(prompt, r, err);
    if (!json_is_array(prompt))
        return llmr_oai_fail_type(err, "prompt", expected, prompt);
    size_t n = json_array_size(prompt);
    if (n == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "prompt",
                           "Invalid 'prompt': empty array. Expected %s.", expected);
        return false;
    }
    json_t *first = json_array_get(prompt, 0);
    if (json_is_integer(first))
        return parse_prompt_ids(prompt, "prompt", r, err);
    if (json_is_string(first) || json_is_array(first)) {
        if (n > 1)
            return several_prompts(err, n);
        return json_is_string(first) ? set_prompt_text(first, r, err)
                                     : parse_prompt_ids(first, "prompt[0]", r, err);
    }
    return llmr_oai_fail_type(err, "prompt[0]",
                              "a string, an integer token id or an array of token ids", first);
}

static bool parse_completion(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    if (!parse_prompt(root, r, err))
        return false;
    json_int_t n = 0;
    if (!llmr_oai_get_int(root, "max_tokens", 1, LLMR_OAI_MAX_COUNT, &n, &r->max_tokens_set, err))
        return false;
    r->max_tokens = (uint32_t)n;
    /* logprobs is a count here: the top alternatives to report, 0 for only the
     * sampled token's. */
    if (!llmr_oai_get_int(root, "logprobs", 0, COMPLETION_MAX_LOGPROBS, &n, &r->logprobs, err))
        return false;
    r->top_logprobs = r->logprobs ? (uint32_t)n : 0;

    bool echo = false;
    if (!llmr_oai_get_bool(root, "echo", &echo, err))
        return false;
    if (echo) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "echo",
                           "'echo': true is not supported: the response holds only the "
                           "completion, not the prompt.");
        return false;
    }
    json_t *suffix = llmr_oai_given(root, "suffix");
    if (suffix && !json_is_string(suffix))
        return llmr_oai_fail_type(err, "suffix", "a string", suffix);
    if (suffix && json_string_length(suffix) > 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_parameter", "suffix",
                           "'suffix' (text after the completion, for insertion) is not "
                           "supported.");
        return false;
    }
    if (!llmr_oai_get_int(root, "best_of", 1, INT32_MAX, &n, NULL, err))
        return false;
    if (llmr_oai_given(root, "best_of") && n > 1) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "best_of",
                           "'best_of' greater than 1 is not supported (got %lld): this server "
                           "generates one completion per request.",
                           (long long)n);
        return false;
    }
    return true;
}

/* ---- both kinds -------------------------------------------------------------------- */

static bool parse_model(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *model = llmr_oai_given(root, "model");
    if (!model)
        return llmr_oai_fail_missing(err, "model");
    if (!json_is_string(model))
        return llmr_oai_fail_type(err, "model", "a string", model);
    if (json_string_length(model) == 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "model",
                           "Invalid 'model': empty string. Expected the id of a model (see GET "
                           "/v1/models).");
        return false;
    }
    return get_string(root, "model", &r->model, err);
}

static bool add_stop(const json_t *s, const char *param, llmr_oai_request *r, llmr_oai_error *err)
{
    size_t n = json_string_length(s);
    if (n == 0 || n > LLMR_STOP_STRING_MAX_BYTES) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", param,
                           "Invalid '%s': a stop string must hold 1 to %d bytes, but this one "
                           "has %zu.",
                           param, LLMR_STOP_STRING_MAX_BYTES, n);
        return false;
    }
    if (llmr_oai_has_nul(s))
        return llmr_oai_fail_nul(err, param);
    r->stop[r->stop_count] = strdup(json_string_value(s));
    if (!r->stop[r->stop_count])
        return llmr_oai_fail_oom(err);
    r->stop_len[r->stop_count++] = n;
    return true;
}

static bool parse_stop(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *stop = llmr_oai_given(root, "stop");
    if (!stop)
        return true;
    if (json_is_string(stop))
        return add_stop(stop, "stop", r, err);
    if (!json_is_array(stop))
        return llmr_oai_fail_type(err, "stop", "a string or an array of strings", stop);
    size_t n = json_array_size(stop);
    if (n > LLMR_OAI_MAX_STOP) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "stop",
                           "Invalid 'stop': array too long. Expected an array with maximum length "
                           "%d, but got an array with length %zu instead.",
                           LLMR_OAI_MAX_STOP, n);
        return false;
    }
    char p[64];
    size_t i;
    json_t *s;
    json_array_foreach(stop, i, s) {
        llmr_oai_param(p, sizeof p, "stop[%zu]", i);
        if (!json_is_string(s))
            return llmr_oai_fail_type(err, p, "a string", s);
        if (!add_stop(s, p, r, err))
            return false;
    }
    return true;
}

static bool parse_stream(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    if (!llmr_oai_get_bool(root, "stream", &r->stream, err))
        return false;
    json_t *opts = llmr_oai_given(root, "stream_options");
    if (!opts)
        return true;
    if (!json_is_object(opts))
        return llmr_oai_fail_type(err, "stream_options", "an object", opts);
    if (!r->stream) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "stream_options",
                           "Invalid 'stream_options': it is only allowed when 'stream' is "
                           "true.");
        return false;
    }
    json_t *usage = llmr_oai_given(opts, "include_usage");
    if (usage && !json_is_boolean(usage))
        return llmr_oai_fail_type(err, "stream_options.include_usage", "a boolean", usage);
    r->include_usage = json_is_true(usage);
    return true;
}

static bool parse_sampling(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    if (!get_number(root, "temperature", 0, false, 2, &r->temperature, err) ||
        !get_number(root, "top_p", 0, false, 1, &r->top_p, err) ||
        !get_number(root, "min_p", 0, false, 1, &r->min_p, err) ||
        !get_number(root, "repetition_penalty", 0, true, HUGE_VAL, &r->repetition_penalty, err) ||
        !get_number(root, "presence_penalty", -2, false, 2, &r->presence_penalty, err) ||
        !get_number(root, "frequency_penalty", -2, false, 2, &r->frequency_penalty, err))
        return false;
    /* top_k: -1 is "off" in other servers' dialect, as 0 is here. */
    json_int_t n = 0;
    if (!llmr_oai_get_int(root, "top_k", -1, LLMR_OAI_MAX_COUNT, &n, NULL, err))
        return false;
    r->top_k = n > 0 ? (uint32_t)n : 0;
    /* Any 64-bit seed; a negative one keeps its bit pattern. */
    if (!llmr_oai_get_int(root, "seed", INT64_MIN, INT64_MAX, &n, &r->seed_set, err))
        return false;
    r->seed = (uint64_t)n;
    return true;
}

/* n, logit_bias, response_format: accepted at their defaults only. */
static bool parse_unsupported(const json_t *root, llmr_oai_error *err)
{
    json_int_t n = 1;
    if (!llmr_oai_get_int(root, "n", 1, INT32_MAX, &n, NULL, err))
        return false;
    if (n != 1) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "n",
                           "'n' = %lld is not supported: this server generates one choice per "
                           "request (n must be 1).",
                           (long long)n);
        return false;
    }
    json_t *bias = llmr_oai_given(root, "logit_bias");
    if (bias && !json_is_object(bias))
        return llmr_oai_fail_type(err, "logit_bias", "an object", bias);
    if (bias && json_object_size(bias) > 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_parameter", "logit_bias",
                           "'logit_bias' is not supported: send an empty object or leave it "
                           "out.");
        return false;
    }
    json_t *format = llmr_oai_given(root, "response_format");
    if (!format)
        return true;
    if (!json_is_object(format))
        return llmr_oai_fail_type(err, "response_format", "an object", format);
    json_t *type = json_object_get(format, "type");
    if (!type)
        return llmr_oai_fail_missing(err, "response_format.type");
    if (!json_is_string(type))
        return llmr_oai_fail_type(err, "response_format.type", "a string", type);
    const char *t = json_string_value(type);
    if (strcmp(t, "text") == 0)
        return true;
    if (strcmp(t, "json_object") == 0 || strcmp(t, "json_schema") == 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", "response_format.type",
                           "response_format '%s' is not supported: this server cannot constrain "
                           "output to JSON. Use 'text'.",
                           t);
        return false;
    }
    llmr_oai_error_set(err, 400, INVALID, "invalid_value", "response_format.type",
                       "Invalid value for 'response_format.type': supported values are 'text', "
                       "'json_object' and 'json_schema'.");
    return false;
}

bool llmr_oai_parse(llmr_oai_kind kind, const char *body, size_t len, llmr_oai_request *out,
                    llmr_oai_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = llmr_oai_parse_body(body ? body : "", body ? len : 0, err);
    if (!root)
        return false;
    bool ok = llmr_oai_parse_root(kind, root, out, err);
    json_decref(root);
    return ok;
}

bool llmr_oai_parse_root(llmr_oai_kind kind, json_t *root, llmr_oai_request *out,
                         llmr_oai_error *err)
{
    memset(out, 0, sizeof *out);
    llmr_oai_request r = {0};
    r.kind = kind;
    r.temperature = 1;
    r.top_p = 1;
    r.repetition_penalty = 1;
    r.parallel_tool_calls = true;
    r.include_reasoning = true;
    bool ok = parse_model(root, &r, err) &&
              (kind == LLMR_OAI_CHAT ? llmr_oai_parse_chat(root, &r, err)
                                     : parse_completion(root, &r, err)) &&
              parse_stream(root, &r, err) && parse_sampling(root, &r, err) &&
              parse_stop(root, &r, err) && parse_unsupported(root, err) &&
              get_string(root, "user", &r.user, err);
    if (!ok) {
        llmr_oai_request_free(&r);
        return false;
    }
    *out = r;
    return true;
}

void llmr_oai_request_free(llmr_oai_request *r)
{
    if (!r)
        return;
    free(r->model);
    json_decref(r->messages);
    json_decref(r->tools);
    free(r->tool_choice_name);
    json_decref(r->template_kwargs);
    free(r->prompt);
    llmr_text_spans_free(&r->prompt_text);
    free(r->prompt_ids);
    for (size_t i = 0; i < r->stop_count; i++)
        free(r->stop[i]);
    free(r->user);
    memset(r, 0, sizeof *r);
}
