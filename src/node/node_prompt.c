/* The node's per-model prompt context: see node_prompt.h. */
#include "node/node_prompt.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/log.h"
#include "template/chat_format.h"
#include "template/chat_text.h"
#include "template/template.h"

struct llmr_node_prompt {
    llmr_node_prompt *next;
    char *name, *dir;
    llmr_tokenizer *tok;
    llmr_template *tpl;
    json_t *special;    /* {"bos_token": ..., "eos_token": ...} for the template */
    const char *origin; /* LLMR_CHAT_ORIGIN_*: a constant, not owned */
    bool harmony;       /* the tokenizer has harmony's special tokens: ids */
    llmr_harmony_ids ids;
    bool harmony_template;
    llmr_chat_guard *guard;   /* the tokenizer's special tokens, kept text in request strings */
    bool special_in_content;  /* the model's opt-out: no guard */
    bool stale;               /* forgotten: kept for the references handed out */
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
    llmr_chat_guard_free(p->guard);
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

/* Reads dir/file into *text (NULL when the file does not exist). */
static llmr_status read_optional(const char *dir, const char *file, size_t max, char **text, size_t *len,
                                 llmr_strbuf *err)
{
    *text = NULL;
    *len = 0;
    char *path = llmr_path_join(dir, file);
    if (!path)
        return LLMR_OOM_RAM;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    llmr_status st = llmr_read_file(path, max, text, len, &e);
    free(path);
    if (st == LLMR_NOT_FOUND) {
        st = LLMR_OK;
        *text = NULL;
    } else if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "%s: %s", file, llmr_strbuf_cstr(&e));
    }
    llmr_strbuf_free(&e);
    return st;
}

/* The model's chat format from its files (template/chat_format.h). */
static llmr_status load_format(const char *dir, llmr_chat_format *f, llmr_strbuf *err)
{
    char *jinja = NULL, *tjson = NULL, *tcfg = NULL;
    llmr_chat_files files = {0};
    llmr_status st = read_optional(dir, LLMR_CHAT_ORIGIN_JINJA, LLMR_CHAT_MAX_TEMPLATE_BYTES, &jinja,
                                   &files.jinja_len, err);
    if (st == LLMR_OK)
        st = read_optional(dir, LLMR_CHAT_ORIGIN_JSON, LLMR_CHAT_MAX_TEMPLATE_BYTES, &tjson,
                           &files.template_json_len, err);
    if (st == LLMR_OK)
        st = read_optional(dir, LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG, LLMR_CHAT_MAX_CONFIG_BYTES, &tcfg,
                           &files.tokenizer_config_len, err);
    if (st == LLMR_OK) {
        files.jinja = jinja;
        files.template_json = tjson;
        files.tokenizer_config = tcfg;
        st = llmr_chat_format_choose(&files, f, err);
    }
    free(jinja);
    free(tjson);
    free(tcfg);
    return st;
}

/* Whether dir holds a .gguf file. */
static bool has_gguf(const char *dir)
{
    bool found = false;
    DIR *d = opendir(dir);
    for (struct dirent *ent; d && !found && (ent = readdir(d));)
        found = llmr_name_has_suffix(ent->d_name, ".gguf");
    if (d)
        closedir(d);
    return found;
}

/* The tokenizer's ids of the harmony special tokens; true when it has the ones that
 * make a harmony model. */
static bool find_harmony(const llmr_tokenizer *tok, llmr_harmony_ids *ids)
{
    const struct {
        const char *text;
        int32_t *id;
    } all[] = {{"<|start|>", &ids->start},     {"<|end|>", &ids->end},
               {"<|message|>", &ids->message}, {"<|channel|>", &ids->channel},
               {"<|constrain|>", &ids->constrain}, {"<|return|>", &ids->ret},
               {"<|call|>", &ids->call}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int64_t id = llmr_tokenizer_token_to_id(tok, all[i].text, strlen(all[i].text));
        *all[i].id = id >= 0 && id <= INT32_MAX ? (int32_t)id : -1;
    }
    return ids->channel >= 0 && ids->message >= 0 && ids->call >= 0 && ids->ret >= 0;
}

bool llmr_model_dir_special_in_content(const char *name, const char *dir, bool log)
{
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    bool on = false;
    if (read_optional(dir, "config.json", 16u << 20, &text, &len, &e) == LLMR_OK && text) {
        json_t *c = json_loadb(text, len, 0, NULL);
        on = json_is_true(json_object_get(c, LLMR_SPECIAL_IN_CONTENT_KEY));
        json_decref(c);
    }
    free(text);
    llmr_strbuf_free(&e);
    if (on && log)
        llmr_log_warn("node", "model %s: special tokens written in request text (message contents, "
                              "tool results and arguments, names) are read as special tokens: its "
                              "config.json sets \"%s\": true", name, LLMR_SPECIAL_IN_CONTENT_KEY);
    return on;
}

/* The guard of the tokenizer's special tokens. */
static llmr_chat_guard *special_guard(const llmr_tokenizer *tok)
{
    json_t *list = json_array();
    size_t n = llmr_tokenizer_special_count(tok);
    for (size_t i = 0; list && i < n; i++) {
        size_t len;
        const char *t = llmr_tokenizer_special_text(tok, i, &len);
        if (json_array_append_new(list, json_stringn(t, len)) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    llmr_chat_guard *g = llmr_chat_guard_from_json(list);
    json_decref(list);
    return g;
}

static llmr_node_prompt *prompt_load(const char *name, const char *dir, llmr_status *status,
                                     llmr_strbuf *err)
{
    llmr_node_prompt *p = calloc(1, sizeof *p);
    char *tok_path = llmr_path_join(dir, "tokenizer.json");
    llmr_chat_format f = {0};
    llmr_strbuf e = LLMR_STRBUF_INIT;
    *status = LLMR_OOM_RAM;
    if (!p || !tok_path || !(p->name = strdup(name)) || !(p->dir = strdup(dir)))
        goto fail;
    if ((*status = llmr_tokenizer_load_file(tok_path, &p->tok, &e)) != LLMR_OK) {
        llmr_strbuf_printf(err, "the tokenizer of model %s: %s", name, llmr_strbuf_cstr(&e));
        if (*status == LLMR_NOT_FOUND && has_gguf(dir))
            llmr_strbuf_puts(err, " (the node tokenizes a GGUF model with the Hugging Face "
                                  "tokenizer.json of the same model, put beside the .gguf; "
                                  "see docs/llama-cpp.md)");
        goto fail;
    }
    if ((*status = load_format(dir, &f, &e)) != LLMR_OK) {
        llmr_strbuf_printf(err, "the chat template of model %s: %s", name, llmr_strbuf_cstr(&e));
        goto fail;
    }
    char terr[512];
    if (!(p->tpl = llmr_template_compile(f.source, strlen(f.source), terr, sizeof terr))) {
        *status = LLMR_MODEL_CORRUPT;
        llmr_strbuf_printf(err, "the chat template of model %s does not compile: %s", name, terr);
        goto fail;
    }
    p->special = json_incref(f.special);
    p->origin = f.origin;
    p->harmony_template = llmr_chat_template_is_harmony(f.source);
    p->harmony = find_harmony(p->tok, &p->ids);
    p->special_in_content = llmr_model_dir_special_in_content(name, dir, false);
    if (!p->special_in_content && !(p->guard = special_guard(p->tok))) {
        *status = LLMR_OOM_RAM;
        goto fail;
    }
    *status = LLMR_OK;
    goto done;
fail:
    if (*status == LLMR_OOM_RAM && !err->len)
        llmr_strbuf_puts(err, "out of memory");
    prompt_free(p);
    p = NULL;
done:
    free(tok_path);
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&e);
    return p;
}

const llmr_node_prompt *llmr_node_prompts_get(llmr_node_prompts *c, const char *name,
                                              const char *dir, llmr_status *status,
                                              llmr_strbuf *err)
{
    pthread_mutex_lock(&c->lock);
    llmr_node_prompt *p = c->head;
    while (p && !(!p->stale && strcmp(p->name, name) == 0 && strcmp(p->dir, dir) == 0))
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

void llmr_node_prompts_forget(llmr_node_prompts *c, const char *name)
{
    pthread_mutex_lock(&c->lock);
    for (llmr_node_prompt *p = c->head; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            p->stale = true;
    pthread_mutex_unlock(&c->lock);
}

const llmr_tokenizer *llmr_node_prompt_tokenizer(const llmr_node_prompt *p)
{
    return p->tok;
}

bool llmr_node_prompt_harmony(const llmr_node_prompt *p, llmr_harmony_ids *ids)
{
    if (p->harmony && ids)
        *ids = p->ids;
    return p->harmony;
}

bool llmr_node_prompt_harmony_template(const llmr_node_prompt *p)
{
    return p->harmony_template;
}

const char *llmr_node_prompt_template_origin(const llmr_node_prompt *p)
{
    return p->origin;
}

bool llmr_node_prompt_render(const llmr_node_prompt *p, const json_t *messages, const json_t *tools,
                             const json_t *kwargs, llmr_strbuf *out, llmr_text_spans *spans,
                             llmr_strbuf *err)
{
    if (!spans || p->special_in_content)
        return llmr_chat_render(p->tpl, p->special, messages, tools, kwargs, out, err);
    return llmr_chat_render_text(p->tpl, p->special, messages, tools, kwargs, p->guard, out, spans, err);
}

llmr_status llmr_node_prompt_encode(const llmr_node_prompt *p, const char *text, size_t len,
                                    const llmr_text_spans *plain, llmr_ids *out, llmr_strbuf *err)
{
    if (!plain || p->special_in_content)
        return llmr_tokenizer_encode(p->tok, text, len, LLMR_ENCODE_PARSE_SPECIAL, out, err);
    return llmr_tokenizer_encode_text(p->tok, text, len, LLMR_ENCODE_PARSE_SPECIAL, plain->v, plain->n, out,
                                      err);
}

bool llmr_node_prompt_special_in_content(const llmr_node_prompt *p)
{
    return p->special_in_content;
}

void llmr_node_prompt_token_text(const llmr_node_prompt *p, int32_t id, llmr_strbuf *out)
{
    uint32_t u = (uint32_t)id;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    if (id >= 0)
        llmr_tokenizer_decode(p->tok, &u, 1, 0, out, NULL, &e);
    llmr_strbuf_free(&e);
}
