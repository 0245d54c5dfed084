/* The OpenAI wire format, without any I/O, shared by the node and the router (neither
 * owns it: it sits below both): requests of /v1/chat/completions and
 * /v1/completions parsed and checked into llmr_oai_request (each mistake a 4xx error
 * with the parameter named, as OpenAI words them), and the JSON of the responses,
 * of the streamed chunks (Server-Sent Events) and of error objects.
 *
 * Reference: the OpenAI API reference for chat completions and completions.  What we
 * do not support (n > 1, best_of, echo, suffix, tools that are not functions, audio,
 * ...) is a 400 that says so, never silently ignored.  The answers of harmony models
 * (reasoning, tool calls) are built by openai_answer.h. */
#ifndef LLMR_OPENAI_API_H
#define LLMR_OPENAI_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/text_spans.h"

#include "common/strbuf.h"

/* A request's error: the HTTP status and the fields of OpenAI's error object. */
typedef struct llmr_oai_error {
    unsigned status;      /* 400, 404, 413, 422, ... */
    const char *type;     /* "invalid_request_error", "not_found_error", ... (static) */
    const char *code;     /* "invalid_type", "model_not_found", ... or NULL (static) */
    char param[64];       /* the parameter at fault ("messages[1].content"), or "" */
    char message[512];
} llmr_oai_error;

typedef enum llmr_oai_kind { LLMR_OAI_CHAT, LLMR_OAI_COMPLETION } llmr_oai_kind;

/* The chat request's extension field that carries a prompt rendered by the router. */
#define LLMR_OAI_RENDERED_PROMPT "llmr_prompt"
/* Beside it: the byte ranges of that prompt that hold request text (template/chat_text.h)
 * and are tokenized as ordinary text, [[offset, length], ...] in order and apart. */
#define LLMR_OAI_RENDERED_TEXT "llmr_prompt_text"
#define LLMR_OAI_MAX_TEXT_SPANS (1u << 20)

#define LLMR_OAI_MAX_STOP 16       /* stop strings per request */

/* tool_choice.  What is enforced: a named function must be one of `tools`, and
 * "required" needs tools (else a 400).  For a harmony chat template
 * (llmr_oai_template_input), "none" offers the model no tools and a named function
 * only that one; nothing constrains decoding, so a model may still answer without a
 * call under "required" or a named function, and that answer is returned as it is.
 * Other templates get no tools under "none" and refuse "required" and a named
 * function (their answers are not read for calls). */
typedef enum llmr_oai_tool_choice {
    LLMR_OAI_TOOL_AUTO = 0, /* the model decides (the default) */
    LLMR_OAI_TOOL_NONE,     /* no calls: a call the model makes anyway is text */
    LLMR_OAI_TOOL_REQUIRED, /* the model should call one or more tools */
    LLMR_OAI_TOOL_FUNCTION, /* the model should call tool_choice_name */
} llmr_oai_tool_choice;
#define LLMR_OAI_MAX_TOP_LOGPROBS 20

typedef struct llmr_oai_request {
    llmr_oai_kind kind;
    char *model;
    /* chat: the messages, checked (each an object with a known role and content that
     * is a string, null, or an array of text parts), and tools when given */
    json_t *messages;             /* owned reference, or NULL */
    json_t *tools;                /* owned reference, or NULL (none, or an empty array) */
    llmr_oai_tool_choice tool_choice;
    char *tool_choice_name;       /* LLMR_OAI_TOOL_FUNCTION: the function named */
    bool parallel_tool_calls;     /* default true; false: at most one call per answer */
    bool include_reasoning;       /* default true; false: answers carry no reasoning */
    json_t *template_kwargs;      /* chat_template_kwargs (an object), or NULL */
    /* completions: the prompt as text, or as token ids; chat: the prompt a router
     * rendered (the LLMR_OAI_RENDERED_PROMPT extension), or NULL */
    char *prompt;                 /* NUL-terminated; NULL when prompt_ids */
    size_t prompt_len;
    llmr_text_spans prompt_text;  /* chat: the rendered prompt's request text (the
                                     LLMR_OAI_RENDERED_TEXT extension); none for a
                                     completions prompt, which is the caller's own */
    int32_t *prompt_ids;
    size_t prompt_id_count;
    bool stream;
    bool include_usage;           /* stream_options.include_usage */
    bool max_tokens_set;          /* max_tokens (or chat's max_completion_tokens) */
    uint32_t max_tokens;
    double temperature;           /* default 1, 0..2 */
    double top_p;                 /* default 1, 0..1 */
    uint32_t top_k;               /* extension; 0 off */
    double min_p;                 /* extension; 0 off */
    double repetition_penalty;    /* extension; default 1 */
    double presence_penalty;      /* -2..2 */
    double frequency_penalty;     /* -2..2 */
    bool seed_set;
    uint64_t seed;
    char *stop[LLMR_OAI_MAX_STOP];  /* NUL-terminated copies (a stop may not hold NUL) */
    size_t stop_len[LLMR_OAI_MAX_STOP];
    size_t stop_count;
    bool logprobs;                /* chat: logprobs: true; completions: logprobs given */
    uint32_t top_logprobs;        /* chat: top_logprobs; completions: the logprobs number */
    char *user;                   /* the "user" field, or NULL */
} llmr_oai_request;

/* Parses body as a request of that kind.  false with *err filled (the request holds
 * nothing to free then).  Malformed JSON, invalid UTF-8, a wrong type, a value out of
 * range, a missing required field, an unsupported feature: each a distinct message
 * naming the parameter. */
bool llmr_oai_parse(llmr_oai_kind kind, const char *body, size_t len, llmr_oai_request *out,
                    llmr_oai_error *err);
void llmr_oai_request_free(llmr_oai_request *r);

/* Fills err (printf-style message). */
void llmr_oai_error_set(llmr_oai_error *err, unsigned status, const char *type, const char *code,
                        const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {"message", "type", "param", "code"}} */
json_t *llmr_oai_error_json(const llmr_oai_error *err);

typedef struct llmr_oai_usage {
    uint32_t prompt_tokens, completion_tokens;
} llmr_oai_usage;

/* One sampled token's log-probabilities, for the logprobs fields. */
typedef struct llmr_oai_token_logprob {
    const char *text;           /* the token's text (may be empty for a partial char) */
    size_t len;
    float logprob;
    uint32_t top_count;
    const char *const *top_text; /* top_count texts and their lengths and logprobs */
    const size_t *top_len;
    const float *top_logprob;
} llmr_oai_token_logprob;

/* chat: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}
 * (an entry of choices[0].logprobs.content). */
json_t *llmr_oai_chat_logprob(const llmr_oai_token_logprob *t);

/* completions' logprobs object for these tokens: {"tokens", "token_logprobs",
 * "top_logprobs": [{text: logprob}], "text_offset"}; text_offset counts from
 * offset0. */
json_t *llmr_oai_completion_logprobs(const llmr_oai_token_logprob *t, size_t n, size_t offset0);
/* How far text moves text_offset: its length in Unicode characters, as OpenAI counts
 * offsets (each ill-formed UTF-8 run one character, the U+FFFD it is sent as).  Sum
 * it over the text already sent to get offset0. */
size_t llmr_oai_text_chars(const char *text, size_t len);

/* A whole response.  finish_reason: "stop", "length" (or NULL: null).  logprobs: the
 * content array (chat) or the object (completions), taken; NULL: null. */
json_t *llmr_oai_chat_response(const char *id, const char *model, int64_t created, const char *text,
                               size_t len, const char *finish_reason, const llmr_oai_usage *usage,
                               json_t *logprobs);
json_t *llmr_oai_completion_response(const char *id, const char *model, int64_t created,
                                     const char *text, size_t len, const char *finish_reason,
                                     const llmr_oai_usage *usage, json_t *logprobs);

/* A chat response whose choice's message is `message` (taken): the form of a harmony
 * model's answer (openai_answer.h).  The rest as llmr_oai_chat_response. */
json_t *llmr_oai_chat_response_message(const char *id, const char *model, int64_t created,
                                       json_t *message, const char *finish_reason,
                                       const llmr_oai_usage *usage, json_t *logprobs);
/* A chat chunk whose delta is `delta` (taken; NULL: {}).  The rest as
 * llmr_oai_chat_chunk. */
json_t *llmr_oai_chat_delta_chunk(const char *id, const char *model, int64_t created, json_t *delta,
                                  const char *finish_reason, json_t *logprobs,
                                  bool with_null_usage);

/* What a chat template is given for this request: *messages and *tools (new
 * references; *tools may be NULL).  For most templates, the request's own.  For a
 * template that writes the harmony format (harmony: gpt-oss's, which reads
 * `thinking`, one call per assistant message with its arguments as an object, and a
 * tool result's function from the call before it), the messages in that shape: an
 * assistant's reasoning_content (or reasoning) as thinking, its content null
 * dropped, one assistant message per tool call with the arguments parsed when they
 * are JSON, each tool result moved after the call its tool_call_id names, content
 * parts joined into text; and the tools tool_choice offers (none for "none", only the
 * named one for a function), each with a description ("" when it has none).  Other
 * templates' answers are not read for calls: tool_choice "none" offers them no tools,
 * and "required" or a named function is refused (false, a 400 on tool_choice).  false
 * (500) also without memory. */
bool llmr_oai_template_input(const llmr_oai_request *r, bool harmony, json_t **messages,
                             json_t **tools, llmr_oai_error *err);

/* A streamed chunk.  chat: the first chunk has delta {"role": "assistant",
 * "content": ""} (first = true), then {"content": text}; the last has an empty delta
 * and finish_reason.  usage: the final usage-only chunk (choices empty) when
 * include_usage; otherwise pass NULL and the field is absent (OpenAI sends
 * "usage": null on the other chunks only when include_usage is set: with_null_usage). */
json_t *llmr_oai_chat_chunk(const char *id, const char *model, int64_t created, bool first,
                            const char *text, size_t len, const char *finish_reason,
                            json_t *logprobs, bool with_null_usage);
json_t *llmr_oai_completion_chunk(const char *id, const char *model, int64_t created,
                                  const char *text, size_t len, const char *finish_reason,
                                  json_t *logprobs, bool with_null_usage);
/* The usage chunk of a stream: choices [] and usage. */
json_t *llmr_oai_usage_chunk(llmr_oai_kind kind, const char *id, const char *model, int64_t created,
                             const llmr_oai_usage *usage);

/* Compact JSON text as it goes on the wire (logprobs in their shortest float form);
 * malloc'd, NULL on failure.  Use it for whole responses too. */
char *llmr_oai_dumps(const json_t *obj);
/* "data: <compact JSON>\n\n" appended to out; obj is not taken. */
void llmr_oai_sse_data(llmr_strbuf *out, const json_t *obj);
/* "data: [DONE]\n\n" */
void llmr_oai_sse_done(llmr_strbuf *out);

/* An id for a response: prefix ("chatcmpl-", "cmpl-") + 24 random [A-Za-z0-9]. */
void llmr_oai_new_id(const char *prefix, char *out, size_t size);

/* GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created",
 * "owned_by"}]} for the ready ones, and "not_ready": [{"id", "reason"}] beside it. */
typedef struct llmr_oai_model_entry {
    const char *id;
    int64_t created;
    const char *owned_by;
    bool ready;
    const char *reason; /* when not ready */
} llmr_oai_model_entry;
json_t *llmr_oai_models_list(const llmr_oai_model_entry *models, size_t n);
/* One model as GET /v1/models/{id} answers it: {"id", "object": "model", "created",
 * "owned_by"}. */
json_t *llmr_oai_model_json(const llmr_oai_model_entry *model);

#endif
