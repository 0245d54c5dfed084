/* The answer of a harmony model (one that writes its reasoning, its answer and its
 * tool calls apart, as gpt-oss does) in the shape of OpenAI's chat completions, built
 * from the pieces a parser of its output finds (models/harmony_parser.h):
 *
 *   whole    message.content (the answer; null when the turn is only tool calls),
 *            message.reasoning_content and message.reasoning (the same text: vLLM's
 *            older and newer names; absent when the model wrote none or the request
 *            said include_reasoning: false), message.tool_calls [{id: "call_...",
 *            type: "function", function: {name, arguments}}] with the arguments as
 *            the model wrote them;
 *   streamed one delta per piece: {"reasoning_content", "reasoning"}, {"content"},
 *            {"tool_calls": [{index, id, type, function: {name, arguments: ""}}]} when
 *            a call starts, then {"tool_calls": [{index, function: {arguments}}]};
 *            nothing for an empty piece.  The deltas joined are the whole answer.
 *
 * Calls become tool_calls only when the request offered tools and did not say
 * tool_choice "none"; otherwise what a call's message holds is answer text, as it is
 * at servers that do not read calls then.  parallel_tool_calls: false keeps the first
 * call and drops the others.  One per request, used from one thread. */
#ifndef LLMR_OPENAI_ANSWER_H
#define LLMR_OPENAI_ANSWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_oai_answer_options {
    bool include_reasoning;   /* the reasoning fields */
    bool tool_calls;          /* calls are tool_calls (else their arguments are content) */
    bool parallel_tool_calls; /* false: the first call only */
} llmr_oai_answer_options;

typedef struct llmr_oai_answer llmr_oai_answer;

/* NULL without memory. */
llmr_oai_answer *llmr_oai_answer_new(const llmr_oai_answer_options *o);
void llmr_oai_answer_free(llmr_oai_answer *a);

/* Each adds a piece (text need not be NUL-terminated) and returns the delta that
 * streams it (a new object), or NULL when there is nothing to send. */
json_t *llmr_oai_answer_reasoning(llmr_oai_answer *a, const char *text, size_t len);
json_t *llmr_oai_answer_content(llmr_oai_answer *a, const char *text, size_t len);
json_t *llmr_oai_answer_call_start(llmr_oai_answer *a, const char *name, size_t len);
json_t *llmr_oai_answer_call_args(llmr_oai_answer *a, const char *text, size_t len);
void llmr_oai_answer_call_end(llmr_oai_answer *a);

/* Whether memory ran out on the way (the answer is then incomplete). */
bool llmr_oai_answer_failed(const llmr_oai_answer *a);
/* "tool_calls" when the answer holds calls, else "stop"; "length" when the engine
 * stopped at the token limit. */
const char *llmr_oai_answer_finish_reason(const llmr_oai_answer *a, bool length);
/* The whole message: {"role": "assistant", "content", "refusal": null, ...} (new). */
json_t *llmr_oai_answer_message(const llmr_oai_answer *a);

#endif
