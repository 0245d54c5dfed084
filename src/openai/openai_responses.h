/* The Responses API (POST /v1/responses) as the rest of the OpenAI module sees it: a
 * request is checked and turned into the chat request it amounts to (so that the same
 * parser, template input and answer builder serve both endpoints), and the answer,
 * built from the same chat deltas a harmony model's parser gives, comes back as a
 * response object and as the Responses stream's typed events.  No I/O.
 *
 *   input        a string (one user message), or a list of items: messages
 *                {role, content} (content a string or input_text / output_text
 *                parts), function_call {call_id, name, arguments},
 *                function_call_output {call_id, output}, reasoning {content:
 *                [{type: "reasoning_text", text}]} (the next assistant turn's
 *                reasoning_content);
 *   instructions the first message, as "system";
 *   tools        [{type: "function", name, description, parameters, strict}] (flat);
 *   tool_choice  "auto", "none", "required", {type: "function", name};
 *   reasoning    {effort: low|medium|high} (chat's reasoning_effort);
 *   max_output_tokens, temperature, top_p, parallel_tool_calls, stream, user;
 *   store        a boolean (what keeps responses is the router's);
 *   metadata     an object of strings, echoed;
 *   previous_response_id  only where a store can resolve it (allow_previous): the
 *                router expands it with llmr_oai_responses_chain before a node sees
 *                it; elsewhere a 400 saying so.
 * Each mistake is a 400 naming the Responses field ("input[2].call_id"), also when
 * the chat parser finds it. */
#ifndef LLMR_OPENAI_RESPONSES_H
#define LLMR_OPENAI_RESPONSES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "openai/openai_api.h"

typedef struct llmr_oai_responses {
    llmr_oai_request chat; /* the request as a chat (kind LLMR_OAI_CHAT) */
    json_t *request;       /* the body as sent (the response echoes its settings) */
    json_t *input;         /* the input as a list of items (a string: one user message) */
    bool store;            /* default true */
    const char *previous_response_id; /* in request; NULL when not given */
} llmr_oai_responses;

/* Parses and checks body.  false with *err filled (out then holds nothing). */
bool llmr_oai_responses_parse(const char *body, size_t len, bool allow_previous,
                              llmr_oai_responses *out, llmr_oai_error *err);
/* An error found later about the chat the request became (its chat template's, which
 * names "messages"), its param named as the Responses request's field ("input"). */
void llmr_oai_responses_name_error(llmr_oai_error *err);
void llmr_oai_responses_free(llmr_oai_responses *r);

/* The field of a chained request (router to node) that carries the previous response's
 * id, which the node echoes in its answer as previous_response_id. */
#define LLMR_OAI_PREVIOUS_ECHO "llmr_previous_response_id"

/* The body of the same request without previous_response_id, whose input is the
 * earlier response's input items, then its output items, then r's own input (new,
 * compact JSON, malloc'd); NULL without memory. */
char *llmr_oai_responses_chain(const llmr_oai_responses *r, const json_t *earlier_input,
                               const json_t *earlier_output);

/* ---- the answer ------------------------------------------------------------------- */

typedef struct llmr_oai_resp_usage {
    uint32_t input_tokens, output_tokens, reasoning_tokens;
} llmr_oai_resp_usage;

/* A response being built.  Events are appended to `events` (each {type,
 * sequence_number, ...}); pass NULL when nothing streams.  One per request, one
 * thread. */
typedef struct llmr_oai_resp_out llmr_oai_resp_out;

/* request: the body (llmr_oai_responses.request), read for the settings echoed.
 * NULL without memory. */
llmr_oai_resp_out *llmr_oai_resp_out_new(const char *id, const char *model, int64_t created,
                                         const json_t *request);
void llmr_oai_resp_out_free(llmr_oai_resp_out *o);
/* response.created, response.in_progress. */
void llmr_oai_resp_out_start(llmr_oai_resp_out *o, json_t *events);
/* A chat delta ({"reasoning_content"}, {"content"}, {"tool_calls": [...]}, as
 * openai_answer.h makes them): output items opened, added to and closed as the
 * pieces come (reasoning, message, function_call). */
void llmr_oai_resp_out_delta(llmr_oai_resp_out *o, const json_t *delta, json_t *events);
/* Answer text of a model that does not write harmony (need not be NUL-terminated;
 * ill-formed UTF-8 becomes U+FFFD), as llmr_oai_resp_out_delta of {"content": text}. */
void llmr_oai_resp_out_text(llmr_oai_resp_out *o, const char *text, size_t len, json_t *events);
/* The end: the open item closed, status "completed", or "incomplete" with
 * incomplete_details {reason: "max_output_tokens"} when length; usage set;
 * response.completed (or response.incomplete) with the whole response. */
void llmr_oai_resp_out_finish(llmr_oai_resp_out *o, bool length, const llmr_oai_resp_usage *u,
                              json_t *events);
/* The generation failed: status "failed" with error {code, message};
 * response.failed. */
void llmr_oai_resp_out_fail(llmr_oai_resp_out *o, const char *code, const char *message,
                            json_t *events);
/* The response object as it stands (a new reference), NULL without memory. */
json_t *llmr_oai_resp_out_response(const llmr_oai_resp_out *o);
/* Whether memory ran out on the way. */
bool llmr_oai_resp_out_failed(const llmr_oai_resp_out *o);

/* "event: TYPE\ndata: <compact JSON>\n\n" appended to out. */
void llmr_oai_sse_event(llmr_strbuf *out, const json_t *event);

#endif
