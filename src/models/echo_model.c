/* The gpt-oss-echo test model: see echo_model.h. */
#include "models/echo_model.h"

#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "models/loopback_model.h"
#include "tokenizer/tokenizer.h"

/* The id of a special token the echo needs. */
static bool special_id(const llmr_tokenizer *tok, const char *token, uint32_t *out,
                       llmr_strbuf *err)
{
    int64_t id = llmr_tokenizer_token_to_id(tok, token, strlen(token));
    if (id < 0) {
        llmr_strbuf_printf(err, "the tokenizer has no %s token: the %s preset needs gpt-oss's "
                                "(harmony) tokenizer",
                           token, LLMR_ECHO_PRESET);
        return false;
    }
    *out = (uint32_t)id;
    return true;
}

/* The echo's ids from the tokenizer: <|start|>user<|message|> opens a user message's
 * text, <|end|> closes it, <|return|> ends the answer unless it ends in <|return|>,
 * <|call|> or <|end|>. */
static llmr_status echo_ids(const llmr_tokenizer *tok, llmr_loopback_echo *e, llmr_strbuf *err)
{
    uint32_t start, message, call;
    memset(e, 0, sizeof *e);
    if (!special_id(tok, "<|start|>", &start, err) ||
        !special_id(tok, "<|message|>", &message, err) ||
        !special_id(tok, "<|end|>", &e->end_id, err) ||
        !special_id(tok, "<|return|>", &e->return_id, err) ||
        !special_id(tok, "<|call|>", &call, err))
        return LLMR_MODEL_CORRUPT;
    llmr_ids user = LLMR_IDS_INIT;
    llmr_status st = llmr_tokenizer_encode(tok, "user", 4, 0, &user, err);
    if (st == LLMR_OK && (user.count == 0 || user.count + 2 > LLMR_LOOPBACK_MAX_IDS)) {
        llmr_strbuf_printf(err, "\"user\" is %zu tokens; the echo takes 1 to %d", user.count,
                           LLMR_LOOPBACK_MAX_IDS - 2);
        st = LLMR_MODEL_CORRUPT;
    }
    if (st == LLMR_OK) {
        e->user_header[e->user_header_len++] = start;
        for (size_t i = 0; i < user.count; i++)
            e->user_header[e->user_header_len++] = user.data[i];
        e->user_header[e->user_header_len++] = message;
        e->turn_end_ids[0] = e->return_id;
        e->turn_end_ids[1] = call;
        e->turn_end_ids[2] = e->end_id;
        e->turn_end_len = 3;
    }
    free(user.data);
    return st;
}

llmr_status llmr_echo_model_write(const char *out_dir, const char *tokenizer_dir,
                                  llmr_strbuf *err)
{
    static const char *const required[] = {"tokenizer.json", "chat_template.jinja"};
    static const char *const optional[] = {"tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < 2; i++)
        if (!llmr_dir_has_file(tokenizer_dir, required[i])) {
            llmr_strbuf_printf(err, "%s has no %s: the %s preset needs gpt-oss's tokenizer.json "
                                    "and its own chat_template.jinja",
                               tokenizer_dir, required[i], LLMR_ECHO_PRESET);
            return LLMR_NOT_FOUND;
        }
    if (!llmr_dir_is_empty_or_absent(out_dir)) {
        llmr_strbuf_printf(err, "%s exists and is not empty; choose a new directory", out_dir);
        return LLMR_INVALID_ARGUMENT;
    }
    char *path = llmr_path_join(tokenizer_dir, "tokenizer.json");
    llmr_tokenizer *tok = NULL;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = path ? llmr_tokenizer_load_file(path, &tok, &why) : LLMR_OOM_RAM;
    free(path);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "the tokenizer in %s: %s", tokenizer_dir,
                           why.len ? llmr_strbuf_cstr(&why) : "out of memory");
        llmr_strbuf_free(&why);
        return st;
    }
    llmr_strbuf_free(&why);
    llmr_loopback_echo echo;
    llmr_loopback_model_options o;
    llmr_loopback_model_options_default(&o);
    o.echo = &echo;
    o.no_tokenizer = true;
    /* it answers with the user's text token for token, special tokens recognised: the
     * per-model opt-out from request text staying text (docs/tokenizer.md) */
    o.special_tokens_in_content = true;
    o.context_length = 8192; /* the engine's buffer per request is this many KiB */
    o.vocab_size = llmr_tokenizer_vocab_size(tok);
    if ((st = echo_ids(tok, &echo, err)) == LLMR_OK)
        st = llmr_loopback_model_write(out_dir, &o, err);
    llmr_tokenizer_free(tok);
    for (size_t i = 0; st == LLMR_OK && i < 2; i++)
        st = llmr_copy_file(tokenizer_dir, out_dir, required[i], err);
    for (size_t i = 0; st == LLMR_OK && i < 2; i++)
        if (llmr_dir_has_file(tokenizer_dir, optional[i]))
            st = llmr_copy_file(tokenizer_dir, out_dir, optional[i], err);
    return st;
}
