/* The gpt-oss-echo test model (`llmr model synth --preset gpt-oss-echo`): a loopback
 * model in mode echo_last_user (models/loopback_config.h) with gpt-oss's own
 * tokenizer and chat template, so that its answer to a chat is the text of the last
 * user message, token for token with the special tokens the tokenizer recognises in
 * it, followed by <|return|> unless the text already ends in <|return|>, <|call|> or
 * <|end|>.  A test writes any harmony output as a user message and drives it through
 * the whole stack (rendering, tokenizing, the engine, the answer's parsing).
 *
 * The special tokens of a message's text are recognised because the node tokenizes
 * the rendered prompt with special tokens on; when that changes for user content, this
 * model's directory is where a per-model opt-out belongs. */
#ifndef LLMR_MODELS_ECHO_MODEL_H
#define LLMR_MODELS_ECHO_MODEL_H

#include "common/strbuf.h"
#include "llmr/status.h"

#define LLMR_ECHO_PRESET "gpt-oss-echo"

/* Writes the model into out_dir (created; it must not exist or be empty), copying
 * tokenizer.json and chat_template.jinja (both required) and tokenizer_config.json,
 * special_tokens_map.json (when present) from tokenizer_dir.  NOT_FOUND naming the
 * missing file, MODEL_CORRUPT when the tokenizer lacks a harmony special token,
 * INVALID_ARGUMENT for a non-empty out_dir. */
llmr_status llmr_echo_model_write(const char *out_dir, const char *tokenizer_dir,
                                  llmr_strbuf *err);

#endif
