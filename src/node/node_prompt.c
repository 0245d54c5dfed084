/* The node's per-model prompt context: see node_prompt.h. */
#include "node/node_prompt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "template/template.h"

#define MAX_CONFIG_BYTES (16u << 20)
#define MAX_TEMPLATE_BYTES (4u << 20)

struct llmr_node_prompt {
    llmr_node_prompt *next;
    char *name, *dir;
    llmr_tokenizer *tok;
    llmr_template *tpl;
    json_t *special; /* {"bos_token": ..., "eos_token": ...} for the template */
};

struct llmr_node_prompts {
    pthread_mutex_t lock;
    llmr_node_prompt *head;
};

llmr_node_prompts *llmr_node_prompts_new(void)
{
    llmr_node_prompts *c = calloc(1, sizeof *c);
    if (c)
        pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void prompt_free(llmr_node_prompt *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->dir);
    llmr_tokenizer_free(p->tok);
    llmr_template_free(p->tpl);
    json_decref(p->special);
    free(p);
}

void llmr_node_prompts_free(llmr_node_prompts *c)
{
    if (!c)
        return;
    for (llmr_node_prompt *p = c->head, *next; p; p = next) {
        next = p->next;
        prompt_free(p);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* tokenizer_config.json's token fields are strings or {"content": string}. */
static const char *token_string(const json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_string_value(v);
}

/* The template source: chat_template.jinja, tokenizer_config.json's chat_template (a
 * string, or a list of {name, template} where "default" is taken), else the default.
 * *src is malloc'd. */
static llmr_status template_source(const char *dir, const json_t *tcfg, char **src, llmr_strbuf *err)
{
    char *path = llmr_path_join(dir, "chat_template.jinja");
    size_t len = 0;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    llmr_status st = path ? llmr_read_file(path, MAX_TEMPLATE_BYTES, src, &len, &e) : LLMR_OOM_RAM;
    free(path);
    if (st != LLMR_NOT_FOUND) {
        if (st != LLMR_OK)
            llmr_strbuf_printf(err, "chat_template.jinja: %s", llmr_strbuf_cstr(&e));
        llmr_strbuf_free(&e);
        return st;
    }
    llmr_strbuf_free(&e);
    const json_t *t = json_object_get(tcfg, "chat_template");
    if (json_is_array(t)) {
        size_t i;
        const json_t *entry, *chosen = NULL;
        json_array_foreach(t, i, entry)
        {
            const char *n = json_string_value(json_object_get(entry, "name"));
            if (n && strcmp(n, "default") == 0)
                chosen = json_object_get(entry, "template");
        }
        t = chosen;
    }
    const char *s = json_is_string(t) ? json_string_value(t) : llmr_template_default_source();
    *src = strdup(s);
    return *src ? LLMR_OK : LLMR_OOM_RAM;
}

static llmr_node_prompt *prompt_load(const char *name, const char *dir, llmr_status *status,
                                     llmr_strbuf *err)
{
    llmr_node_prompt *p = calloc(1, sizeof *p);
    char *tok_path = llmr_path_join(dir, "tokenizer.json");
    char *cfg_path = llmr_path_join(dir, "tokenizer_config.json");
    char *src = NULL;
    json_t *tcfg = NULL;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    *status = LLMR_OOM_RAM;
    if (!p || !tok_path || !cfg_path || !(p->name = strdup(name)) || !(p->dir = strdup(dir)))
        goto fail;
    if ((*status = llmr_tokenizer_load_file(tok_path, &p->tok, &e)) != LLMR_OK) {
        llmr_strbuf_printf(err, "the tokenizer of model %s: %s", name, llmr_strbuf_cstr(&e));
        goto fail;
    }
    /* its numbers may be huge (model_max_length 1e30): read them as reals */
    char *text = NULL;
    size_t text_len = 0;
    llmr_status cst = llmr_read_file(cfg_path, MAX_CONFIG_BYTES, &text, &text_len, &e);
    if (cst == LLMR_OK) {
        json_error_t je;
        tcfg = json_loadb(text, text_len, JSON_DECODE_INT_AS_REAL, &je);
        if (!tcfg) {
            cst = LLMR_MODEL_CORRUPT;
            llmr_strbuf_printf(&e, "line %d, column %d: %s", je.line, je.column, je.text);
        }
    }
    free(text);
    if (!tcfg && cst != LLMR_NOT_FOUND) {
        *status = cst;
        llmr_strbuf_printf(err, "tokenizer_config.json of model %s: %s", name, llmr_strbuf_cstr(&e));
        goto fail;
    }
    if ((*status = template_source(dir, tcfg, &src, &e)) != LLMR_OK) {
        llmr_strbuf_printf(err, "the chat template of model %s: %s", name, llmr_strbuf_cstr(&e));
        goto fail;
    }
    char terr[512];
    if (!(p->tpl = llmr_template_compile(src, strlen(src), terr, sizeof terr))) {
        *status = LLMR_MODEL_CORRUPT;
        llmr_strbuf_printf(err, "the chat template of model %s does not compile: %s", name, terr);
        goto fail;
    }
    p->special = json_object();
    const char *bos = token_string(json_object_get(tcfg, "bos_token"));
    const char *eos = token_string(json_object_get(tcfg, "eos_token"));
    json_object_set_new(p->special, "bos_token", json_string(bos ? bos : ""));
    json_object_set_new(p->special, "eos_token", json_string(eos ? eos : ""));
    *status = LLMR_OK;
    goto done;
fail:
    if (*status == LLMR_OOM_RAM && !err->len)
        llmr_strbuf_puts(err, "out of memory");
    prompt_free(p);
    p = NULL;
done:
    free(tok_path);
    free(cfg_path);
    free(src);
    json_decref(tcfg);
    llmr_strbuf_free(&e);
    return p;
}

const llmr_node_prompt *llmr_node_prompts_get(llmr_node_prompts *c, const char *name,
                                              const char *dir, llmr_status *status,
                                              llmr_strbuf *err)
{
    pthread_mutex_lock(&c->lock);
    llmr_node_prompt *p = c->head;
    while (p && !(strcmp(p->name, name) == 0 && strcmp(p->dir, dir) == 0))
        p = p->next;
    if (!p && (p = prompt_load(name, dir, status, err))) {
        p->next = c->head;
        c->head = p;
    }
    pthread_mutex_unlock(&c->lock);
    if (p)
        *status = LLMR_OK;
    return p;
}

const llmr_tokenizer *llmr_node_prompt_tokenizer(const llmr_node_prompt *p)
{
    return p->tok;
}

bool llmr_node_prompt_render(const llmr_node_prompt *p, const json_t *messages, const json_t *tools,
                             const json_t *kwargs, llmr_strbuf *out, llmr_strbuf *err)
{
    json_t *ctx = json_deep_copy(p->special);
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
    bool ok = llmr_template_render(p->tpl, ctx, NULL, out, terr, sizeof terr);
    if (!ok)
        llmr_strbuf_printf(err, "the chat template failed: %s", terr);
    json_decref(ctx);
    return ok;
}

llmr_status llmr_node_prompt_encode(const llmr_node_prompt *p, const char *text, size_t len,
                                    llmr_ids *out, llmr_strbuf *err)
{
    return llmr_tokenizer_encode(p->tok, text, len, LLMR_ENCODE_PARSE_SPECIAL, out, err);
}

void llmr_node_prompt_token_text(const llmr_node_prompt *p, int32_t id, llmr_strbuf *out)
{
    uint32_t u = (uint32_t)id;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    if (id >= 0)
        llmr_tokenizer_decode(p->tok, &u, 1, 0, out, NULL, &e);
    llmr_strbuf_free(&e);
}
