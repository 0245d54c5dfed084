/* Request text stays text: the render of a chat whose request strings (message
 * contents, names, tool results, tool call arguments, tool definitions, chat template
 * kwargs: every string and object key that comes from the request) may hold the text
 * of the model's special tokens, with the byte ranges of the output where such text
 * landed, so that tokenization (llmr_tokenizer_encode_text) makes ordinary text of it
 * and only the template's own text yields special tokens.
 *
 * How: before the render, every stretch of a request string that could become a
 * special token -- an occurrence of one, a start that ends one ("|>" of "<|end|>"), an
 * end that starts one ("<|en"), and the placeholder's own marker character -- is
 * replaced by a placeholder (U+10FFFD, its index in decimal, U+10FFFD); the template
 * renders as usual and its output's placeholders are put back to the bytes they stood
 * for, each such range recorded.  A request without such text renders exactly as
 * llmr_chat_render does.  The template sees placeholders where the request had
 * special-token text (a test such as `'<|channel|>' in content` is false for it);
 * a template that escapes non-ASCII (tojson with ensure_ascii) shows the placeholder
 * escaped instead of the text (still text).  docs/chat-templates.md has the why. */
#ifndef LLMR_TEMPLATE_CHAT_TEXT_H
#define LLMR_TEMPLATE_CHAT_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"
#include "common/text_spans.h"
#include "template/template.h"

/* The special tokens' texts to keep as text, indexed by first byte.  Immutable once
 * built: one guard serves concurrent renders. */
typedef struct llmr_chat_guard llmr_chat_guard;

/* The guard of a JSON array of strings, the tokens' texts (empty ones are ignored);
 * NULL when out of memory or not such an array. */
llmr_chat_guard *llmr_chat_guard_from_json(const json_t *tokens);
size_t llmr_chat_guard_count(const llmr_chat_guard *g);
void llmr_chat_guard_free(llmr_chat_guard *g);

/* llmr_chat_render (chat_format.h) with the request's strings guarded: out gets the
 * render (appended), spans the ranges of out (offsets from out's start) that hold
 * request text which could have formed a special token.  messages, tools and kwargs
 * are request input; special (bos_token, ...) is the model's. */
bool llmr_chat_render_text(const llmr_template *tpl, const json_t *special, const json_t *messages,
                           const json_t *tools, const json_t *kwargs, const llmr_chat_guard *g,
                           llmr_strbuf *out, llmr_text_spans *spans, llmr_strbuf *err);

#endif
