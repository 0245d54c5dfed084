/* Inside the OpenAI wire format (openai_api.h): what its files share.
 *
 *   openai_api.c      errors, responses, stream chunks, logprobs, SSE, ids, models
 *   openai_request.c  request bodies: the body, the parameters of both kinds,
 *                     completions' prompt, llmr_oai_parse
 *   openai_chat.c     chat's messages and chat-only parameters
 *   openai_tools.c    chat's tools, tool_choice and parallel_tool_calls
 *   openai_template.c what a chat template is given (llmr_oai_template_input)
 *   openai_answer.c   a harmony model's answer as message and deltas
 *   openai_responses.c        the Responses API's request as a chat request
 *   openai_responses_output.c the Responses API's response and stream events
 *
 * The helpers below each check one thing and, when it is wrong, fill the error and
 * return false, so that checks chain with && and the first failure is reported. */
#ifndef LLMR_OPENAI_INTERNAL_H
#define LLMR_OPENAI_INTERNAL_H

#include "openai/openai_api.h"

#define LLMR_OAI_INVALID "invalid_request_error"
#define LLMR_OAI_MAX_COUNT INT32_MAX /* max_tokens, top_k: what an engine's int holds */

/* "Invalid type for 'param': expected <expected>, but got <got's type> instead." */
bool llmr_oai_fail_type(llmr_oai_error *err, const char *param, const char *expected,
                        const json_t *got);
/* "Missing required parameter: 'param'." */
bool llmr_oai_fail_missing(llmr_oai_error *err, const char *param);
/* A 500: an allocation failed while reading the request. */
bool llmr_oai_fail_oom(llmr_oai_error *err);
/* A string that may not hold NUL holds one. */
bool llmr_oai_fail_nul(llmr_oai_error *err, const char *param);

/* A parameter name built like printf into buf ("messages[3].content"); returns buf. */
const char *llmr_oai_param(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool llmr_oai_has_nul(const json_t *s);

/* The member key of obj when present and not null (null is "not given"), or NULL. */
json_t *llmr_oai_given(const json_t *obj, const char *key);
/* A boolean member into *out; left alone when not given. */
bool llmr_oai_get_bool(const json_t *obj, const char *key, bool *out, llmr_oai_error *err);
/* An integer member in [min, max] into *out, and *set = true (set may be NULL); left
 * alone when not given.  A decimal number is refused even when whole, as OpenAI does. */
bool llmr_oai_get_int(const json_t *obj, const char *key, json_int_t min, json_int_t max,
                      json_int_t *out, bool *set, llmr_oai_error *err);

/* Chat's own members: messages, tools, tool_choice, chat_template_kwargs (with
 * reasoning_effort), max_tokens / max_completion_tokens, logprobs, top_logprobs,
 * include_reasoning and the output kinds.  root may gain chat_template_kwargs. */
bool llmr_oai_parse_chat(json_t *root, llmr_oai_request *r, llmr_oai_error *err);
/* tools, tool_choice, parallel_tool_calls (openai_tools.c). */
bool llmr_oai_parse_tools(const json_t *root, llmr_oai_request *r, llmr_oai_error *err);

/* The request body as a JSON object, or NULL with err filled (empty, not UTF-8, not
 * JSON, not an object: each its own message). */
json_t *llmr_oai_parse_body(const char *body, size_t len, llmr_oai_error *err);
/* llmr_oai_parse of a body already read (root may gain members). */
bool llmr_oai_parse_root(llmr_oai_kind kind, json_t *root, llmr_oai_request *out,
                         llmr_oai_error *err);

/* Text as a JSON string, ill-formed UTF-8 replaced by U+FFFD; NULL only without
 * memory.  A NULL text is "". */
json_t *llmr_oai_text_json(const char *s, size_t len);

#endif
