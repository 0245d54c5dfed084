/* A model's chat format: the chat template it uses and the special tokens that
 * template sees, chosen as Hugging Face transformers chooses them, and the render of a
 * chat request with it.  The node (node/node_prompt.c) and the router
 * (router/router_render.c) both go through here, so a conversation renders the same
 * bytes wherever it is rendered.
 *
 * The template, first found wins: the registration's own template (the router's
 * "chat_template" field), chat_template.jinja, chat_template.json's "chat_template",
 * tokenizer_config.json's "chat_template" (a string, or a list of {name, template} of
 * which "default" is taken), else the default ChatML template
 * (llmr_template_default_source).  The special tokens come from tokenizer_config.json:
 * bos_token and eos_token always ("" when it has none), unk_token, pad_token,
 * sep_token, cls_token and mask_token when present (each a string or
 * {"content": string}).  The texts of the tokenizer's special tokens, which a request's
 * strings may not form (template/chat_text.h), come from tokenizer_config.json's
 * added_tokens_decoder (the entries marked "special": true), when it has one. */
#ifndef LLMR_TEMPLATE_CHAT_FORMAT_H
#define LLMR_TEMPLATE_CHAT_FORMAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"
#include "llmr/status.h"
#include "template/template.h"

/* Where the template came from (static strings). */
#define LLMR_CHAT_ORIGIN_REGISTRATION "registration"
#define LLMR_CHAT_ORIGIN_JINJA "chat_template.jinja"
#define LLMR_CHAT_ORIGIN_JSON "chat_template.json"
#define LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG "tokenizer_config.json"
#define LLMR_CHAT_ORIGIN_DEFAULT "default"

/* The most bytes of a template or of one of the files it is read from. */
#define LLMR_CHAT_MAX_TEMPLATE_BYTES (4u << 20)
#define LLMR_CHAT_MAX_CONFIG_BYTES (16u << 20)

typedef struct llmr_chat_format {
    char *source;        /* the template's text (owned) */
    const char *origin;  /* one of LLMR_CHAT_ORIGIN_* */
    json_t *special;     /* {"bos_token": "...", ...} (owned) */
    json_t *special_tokens; /* ["<|end|>", ...] (owned), or NULL when the files list none */
} llmr_chat_format;

/* The texts of the files that decide the format, each NULL when the model has no such
 * file.  override: a template given at registration, or NULL. */
typedef struct llmr_chat_files {
    const char *override;
    const char *jinja;
    size_t jinja_len;
    const char *template_json;
    size_t template_json_len;
    const char *tokenizer_config;
    size_t tokenizer_config_len;
} llmr_chat_files;

/* Chooses the format (see above) into out.  MODEL_CORRUPT with err naming the file when
 * a file is not what it should be (JSON that does not parse, a chat_template of the
 * wrong type, a template that does not compile); OOM_RAM.  The template is compiled
 * once here to be checked. */
llmr_status llmr_chat_format_choose(const llmr_chat_files *files, llmr_chat_format *out, llmr_strbuf *err);
void llmr_chat_format_free(llmr_chat_format *f);

/* For storage: {"template": ..., "origin": ..., "special": {...}, "special_tokens":
 * [...] (when known)}, and back (false when the JSON is not of that shape). */
json_t *llmr_chat_format_to_json(const llmr_chat_format *f);
bool llmr_chat_format_from_json(const json_t *j, llmr_chat_format *out);

/* Whether a template writes the harmony format (gpt-oss's): its text holds the
 * special tokens <|channel|>, <|message|> and <|call|>.  Such a template reads the
 * messages in its own shape (llmr_oai_template_input). */
bool llmr_chat_template_is_harmony(const char *source);

/* Renders a chat: the context is the special tokens, then chat_template_kwargs (an
 * object, may be NULL; it may override them), then messages, tools (may be NULL) and
 * add_generation_prompt = true.  false with err ("the chat template failed: ...",
 * a raise_exception message passing through). */
bool llmr_chat_render(const llmr_template *tpl, const json_t *special, const json_t *messages,
                      const json_t *tools, const json_t *kwargs, llmr_strbuf *out, llmr_strbuf *err);

#endif
