/* What the node's HTTP API needs of a model beyond the engine: its tokenizer, and its
 * chat format (the template and the special tokens it sees, chosen from the model's
 * files by template/chat_format.h).  A chat request from a router arrives rendered
 * already; the node renders the others.  Loaded on a model's first request and kept:
 * the cache hands out references that stay valid until llmr_node_prompts_free. */
#ifndef LLMR_NODE_NODE_PROMPT_H
#define LLMR_NODE_NODE_PROMPT_H

#include <jansson.h>

#include "common/strbuf.h"
#include "common/text_spans.h"
#include "llmr/status.h"
#include "models/harmony_parser.h"
#include "tokenizer/ids.h"
#include "tokenizer/tokenizer.h"

typedef struct llmr_node_prompt llmr_node_prompt;
typedef struct llmr_node_prompts llmr_node_prompts;

llmr_node_prompts *llmr_node_prompts_new(void);
void llmr_node_prompts_free(llmr_node_prompts *c);

/* The model's prompt context, loaded from dir on first use (thread-safe).  NULL with
 * err (and *status) when its tokenizer or template cannot be loaded. */
const llmr_node_prompt *llmr_node_prompts_get(llmr_node_prompts *c, const char *name,
                                              const char *dir, llmr_status *status,
                                              llmr_strbuf *err);

/* The model's files changed or went (it was removed, or synced again in another
 * version): the next get loads them again.  References handed out stay valid. */
void llmr_node_prompts_forget(llmr_node_prompts *c, const char *name);
const llmr_tokenizer *llmr_node_prompt_tokenizer(const llmr_node_prompt *p);

/* Where the template came from: one of LLMR_CHAT_ORIGIN_* (template/chat_format.h);
 * LLMR_CHAT_ORIGIN_DEFAULT when the model ships none. */
const char *llmr_node_prompt_template_origin(const llmr_node_prompt *p);

/* Whether the model writes its answers in the harmony format, told by its tokenizer:
 * it has the special tokens <|channel|>, <|message|>, <|call|> and <|return|>.  Then
 * *ids (may be NULL) are the tokenizer's ids of the harmony special tokens (-1 for
 * one it lacks). */
bool llmr_node_prompt_harmony(const llmr_node_prompt *p, llmr_harmony_ids *ids);
/* Whether the model's chat template writes harmony (llmr_chat_template_is_harmony). */
bool llmr_node_prompt_harmony_template(const llmr_node_prompt *p);

/* Renders chat messages (and tools, and chat_template_kwargs) with the model's
 * template and add_generation_prompt, into out.  false with err: the template's error
 * (a raise_exception message passes through).  With spans (not NULL), the request's
 * strings are request text (template/chat_text.h): spans gets the ranges of out that
 * must be tokenized as text, none when the model opts out (below). */
bool llmr_node_prompt_render(const llmr_node_prompt *p, const json_t *messages, const json_t *tools,
                             const json_t *kwargs, llmr_strbuf *out, llmr_text_spans *spans,
                             llmr_strbuf *err);

/* Encodes a prompt, recognising special tokens (a rendered template holds them) except
 * in the plain ranges (may be NULL), which are tokenized as ordinary text unless the
 * model opts out. */
llmr_status llmr_node_prompt_encode(const llmr_node_prompt *p, const char *text, size_t len,
                                    const llmr_text_spans *plain, llmr_ids *out, llmr_strbuf *err);

/* The per-model opt-out: a model whose config.json says "special_tokens_in_content":
 * true has the special tokens written in its request text recognised as special tokens
 * (the gpt-oss-echo test model, which drives any output through the stack, does). */
#define LLMR_SPECIAL_IN_CONTENT_KEY "special_tokens_in_content"
bool llmr_node_prompt_special_in_content(const llmr_node_prompt *p);
/* Reads the opt-out from dir/config.json (false when the file or key is absent or not
 * JSON); when set, logs a warning naming the model. */
bool llmr_model_dir_special_in_content(const char *name, const char *dir, bool log);

/* The text of one token for logprobs (special tokens included), into out. */
void llmr_node_prompt_token_text(const llmr_node_prompt *p, int32_t id, llmr_strbuf *out);

#endif
