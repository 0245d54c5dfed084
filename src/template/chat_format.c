/* The choice of a model's chat template and special tokens, and a chat's render: see
 * chat_format.h. */
#include "template/chat_format.h"

#include <stdlib.h>
#include <string.h>

static const char *const OPTIONAL_TOKENS[] = {"unk_token", "pad_token", "sep_token", "cls_token",
                                              "mask_token"};

/* tokenizer_config.json's token fields are strings or {"content": string}. */
static const char *token_string(const json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_string_value(v);
}

/* Parses a JSON file's text; its numbers may be huge (model_max_length 1e30), so
 * integers are read as reals. */
static json_t *parse_file(const char *file, const char *text, size_t len, llmr_strbuf *err)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &je);
    if (!j)
        llmr_strbuf_printf(err, "%s is not valid JSON (line %d, column %d: %s)", file, je.line, je.column,
                           je.text);
    else if (!json_is_object(j)) {
        llmr_strbuf_printf(err, "%s is not a JSON object", file);
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* A "chat_template" value: a string, or a list of {name, template} whose "default" is
 * taken.  *text NULL when the value is absent or the list has no default; false (with
 * err) when it is of another type. */
static bool template_value(const char *file, const json_t *t, const char **text, llmr_strbuf *err)
{
    *text = NULL;
    if (!t || json_is_null(t))
        return true;
    if (json_is_string(t)) {
        *text = json_string_value(t);
        return true;
    }
    if (json_is_array(t)) {
        size_t i;
        const json_t *entry;
        json_array_foreach(t, i, entry)
        {
            const char *n = json_string_value(json_object_get(entry, "name"));
            if (n && strcmp(n, "default") == 0)
                *text = json_string_value(json_object_get(entry, "template"));
        }
        return true;
    }
    llmr_strbuf_printf(err, "%s: \"chat_template\" must be a string or a list of {name, template}", file);
    return false;
}

static void set_special(json_t *special, const json_t *tcfg)
{
    const char *bos = token_string(json_object_get(tcfg, "bos_token"));
    const char *eos = token_string(json_object_get(tcfg, "eos_token"));
    json_object_set_new(special, "bos_token", json_string(bos ? bos : ""));
    json_object_set_new(special, "eos_token", json_string(eos ? eos : ""));
    for (size_t i = 0; i < sizeof OPTIONAL_TOKENS / sizeof OPTIONAL_TOKENS[0]; i++) {
        const char *v = token_string(json_object_get(tcfg, OPTIONAL_TOKENS[i]));
        if (v)
            json_object_set_new(special, OPTIONAL_TOKENS[i], json_string(v));
    }
}

/* The special tokens' texts of added_tokens_decoder ({"ID": {"content": ..., "special":
 * true}, ...}), or NULL when there is none or it marks none special (the caller then
 * reads them from tokenizer.json, as the node's tokenizer does). */
static json_t *special_token_texts(const json_t *tcfg)
{
    json_t *decoder = json_object_get(tcfg, "added_tokens_decoder");
    if (!json_is_object(decoder))
        return NULL;
    json_t *out = json_array();
    const char *id;
    json_t *t;
    json_object_foreach(decoder, id, t) {
        json_t *content = json_object_get(t, "content");
        if (out && json_is_true(json_object_get(t, "special")) && json_string_length(content) > 0)
            json_array_append(out, content);
    }
    if (out && json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

llmr_status llmr_chat_format_choose(const llmr_chat_files *files, llmr_chat_format *out, llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    json_t *tcfg = NULL, *tjson = NULL;
    const char *text = NULL;
    size_t text_len = 0;
    llmr_status st = LLMR_MODEL_CORRUPT;
    if (files->tokenizer_config &&
        !(tcfg = parse_file(LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG, files->tokenizer_config,
                            files->tokenizer_config_len, err)))
        goto fail;
    if (files->override) {
        text = files->override;
        text_len = strlen(text);
        out->origin = LLMR_CHAT_ORIGIN_REGISTRATION;
    } else if (files->jinja) {
        text = files->jinja;
        text_len = files->jinja_len;
        out->origin = LLMR_CHAT_ORIGIN_JINJA;
    } else {
        if (files->template_json) {
            if (!(tjson = parse_file(LLMR_CHAT_ORIGIN_JSON, files->template_json, files->template_json_len, err)) ||
                !template_value(LLMR_CHAT_ORIGIN_JSON, json_object_get(tjson, "chat_template"), &text, err))
                goto fail;
            out->origin = LLMR_CHAT_ORIGIN_JSON;
        }
        if (!text) {
            if (!template_value(LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG, json_object_get(tcfg, "chat_template"), &text,
                                err))
                goto fail;
            out->origin = LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG;
        }
        if (!text) {
            text = llmr_template_default_source();
            out->origin = LLMR_CHAT_ORIGIN_DEFAULT;
        }
        text_len = strlen(text);
    }
    if (text_len > LLMR_CHAT_MAX_TEMPLATE_BYTES) {
        llmr_strbuf_printf(err, "the chat template from %s has %zu bytes, more than the %u allowed", out->origin,
                           text_len, LLMR_CHAT_MAX_TEMPLATE_BYTES);
        goto fail;
    }
    char terr[512];
    llmr_template *tpl = llmr_template_compile(text, text_len, terr, sizeof terr);
    if (!tpl) {
        llmr_strbuf_printf(err, "the chat template from %s does not compile: %s", out->origin, terr);
        goto fail;
    }
    llmr_template_free(tpl);
    st = LLMR_OOM_RAM;
    if (!(out->source = malloc(text_len + 1)) || !(out->special = json_object())) {
        llmr_strbuf_puts(err, "out of memory");
        goto fail;
    }
    memcpy(out->source, text, text_len);
    out->source[text_len] = 0;
    set_special(out->special, tcfg);
    out->special_tokens = special_token_texts(tcfg);
    json_decref(tcfg);
    json_decref(tjson);
    return LLMR_OK;

fail:
    json_decref(tcfg);
    json_decref(tjson);
    llmr_chat_format_free(out);
    return st;
}

void llmr_chat_format_free(llmr_chat_format *f)
{
    if (!f)
        return;
    free(f->source);
    json_decref(f->special);
    json_decref(f->special_tokens);
    memset(f, 0, sizeof *f);
}

json_t *llmr_chat_format_to_json(const llmr_chat_format *f)
{
    json_t *j = json_pack("{s:s, s:s, s:O}", "template", f->source, "origin", f->origin, "special", f->special);
    if (j && f->special_tokens && json_object_set(j, "special_tokens", f->special_tokens) != 0) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

static const char *known_origin(const char *o)
{
    static const char *const all[] = {LLMR_CHAT_ORIGIN_REGISTRATION, LLMR_CHAT_ORIGIN_JINJA, LLMR_CHAT_ORIGIN_JSON,
                                      LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG, LLMR_CHAT_ORIGIN_DEFAULT};
    for (size_t i = 0; o && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(o, all[i]) == 0)
            return all[i];
    return NULL;
}

bool llmr_chat_format_from_json(const json_t *j, llmr_chat_format *out)
{
    memset(out, 0, sizeof *out);
    const char *src = json_string_value(json_object_get(j, "template"));
    const char *origin = known_origin(json_string_value(json_object_get(j, "origin")));
    json_t *special = json_object_get(j, "special");
    if (!src || !origin || !json_is_object(special))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(special, k, v)
    {
        if (!json_is_string(v))
            return false;
    }
    json_t *tokens = json_object_get(j, "special_tokens");
    size_t i;
    json_array_foreach(tokens, i, v) {
        if (!json_is_string(v))
            return false;
    }
    if ((tokens && !json_is_array(tokens)) || !(out->source = strdup(src)))
        return false;
    out->origin = origin;
    out->special = json_incref(special);
    out->special_tokens = json_incref(tokens);
    return true;
}

bool llmr_chat_render(const llmr_template *tpl, const json_t *special, const json_t *messages,
                      const json_t *tools, const json_t *kwargs, llmr_strbuf *out, llmr_strbuf *err)
{
    json_t *ctx = special ? json_deep_copy(special) : json_object();
    if (!ctx) {
        llmr_strbuf_puts(err, "out of memory");
        return false;
    }
    if (json_is_object(kwargs))
        json_object_update(ctx, (json_t *)kwargs);
    json_object_set(ctx, "messages", (json_t *)messages);
    if (tools)
        json_object_set(ctx, "tools", (json_t *)tools);
    json_object_set_new(ctx, "add_generation_prompt", json_true());
    char terr[512];
    bool ok = llmr_template_render(tpl, ctx, NULL, out, terr, sizeof terr);
    if (!ok)
        llmr_strbuf_printf(err, "the chat template failed: %s", terr);
    json_decref(ctx);
    return ok;
}

bool llmr_chat_template_is_harmony(const char *source)
{
    return source && strstr(source, "<|channel|>") && strstr(source, "<|message|>") &&
           strstr(source, "<|call|>");
}
