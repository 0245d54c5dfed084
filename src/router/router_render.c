/* Chat templates on the router: the chat format a model is registered with (read from
 * its source's files: template/chat_format.h), the compiled templates kept per model,
 * the render of each chat request before it goes to a node (which then receives the
 * prompt in the "llmr_prompt" extension field, and in "llmr_prompt_text" the ranges of
 * it that hold request text, tokenized as ordinary text: template/chat_text.h), and
 * POST /v0/models/{name}/render, which shows a chat's prompt without running it.  A
 * template that writes harmony is given the messages in its shape
 * (llmr_oai_template_input), as the node gives them when it renders.
 *
 * A gguf model carries its template inside the weights file, which the router does not
 * read: unless its registration gave a template, its node renders.  So do models
 * registered before the router kept chat formats (no chat_format in the store). */
#include "router/router_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "openai/openai_api.h"
#include "template/chat_format.h"
#include "template/chat_text.h"
#include "tokenizer/tokenizer.h"

#define COMPONENT "router"

/* ---- at registration ------------------------------------------------------------------- */

/* One file of the source into *text when it is listed; NULL when it is not. */
static llmr_status read_listed(const llmr_source_options *so, const llmr_source *src, const char *path,
                               size_t max, char **text, size_t *len, llmr_strbuf *err)
{
    *text = NULL;
    *len = 0;
    if (!llmr_source_find(src, path))
        return LLMR_OK;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    llmr_status st = llmr_source_read(so, src, path, max, text, len, &e);
    if (st != LLMR_OK)
        llmr_strbuf_printf(err, "%s: %s", path, llmr_strbuf_cstr(&e));
    llmr_strbuf_free(&e);
    return st;
}

/* The most bytes of a tokenizer.json the router reads at registration (the largest
 * real ones are tens of MB). */
#define ROUTER_MAX_TOKENIZER_BYTES ((size_t)128 << 20)

/* The special tokens' texts from the source's tokenizer.json, for a chat format whose
 * tokenizer_config.json lists none (one larger than the bound above counts as none).  NULL when the source has no tokenizer.json or one
 * that cannot be read or loaded: then the model's node renders (router_chat_renders),
 * and says what is wrong with its tokenizer when it loads it. */
static llmr_status special_from_tokenizer(const llmr_source_options *so, const llmr_source *src, json_t **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    llmr_status st = read_listed(so, src, "tokenizer.json", ROUTER_MAX_TOKENIZER_BYTES, &text, &len, &e);
    llmr_tokenizer *tok = NULL;
    if (st == LLMR_OK && text)
        st = llmr_tokenizer_load(text, len, &tok, &e);
    free(text);
    llmr_strbuf_free(&e);
    if (st == LLMR_OOM_RAM)
        return st;
    if (!tok)
        return LLMR_OK;
    json_t *list = json_array();
    size_t n = llmr_tokenizer_special_count(tok);
    for (size_t i = 0; list && i < n; i++) {
        size_t tlen;
        const char *t = llmr_tokenizer_special_text(tok, i, &tlen);
        if (json_array_append_new(list, json_stringn(t, tlen)) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    llmr_tokenizer_free(tok);
    *out = list;
    return list ? LLMR_OK : LLMR_OOM_RAM;
}

unsigned router_chat_format_read(const llmr_source_options *so, const llmr_source *src, const char *format,
                                 const char *override, json_t **out, llmr_strbuf *msg)
{
    *out = NULL;
    if (strcmp(format, "safetensors") != 0 && !override)
        return 0; /* gguf: the template is in the weights; the node renders */
    char *jinja = NULL, *tjson = NULL, *tcfg = NULL;
    llmr_chat_files files = {0};
    llmr_chat_format f = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = LLMR_OK;
    files.override = override;
    if (strcmp(format, "safetensors") == 0) {
        if (!override)
            st = read_listed(so, src, LLMR_CHAT_ORIGIN_JINJA, LLMR_CHAT_MAX_TEMPLATE_BYTES, &jinja,
                             &files.jinja_len, &err);
        if (st == LLMR_OK && !override && !jinja)
            st = read_listed(so, src, LLMR_CHAT_ORIGIN_JSON, LLMR_CHAT_MAX_TEMPLATE_BYTES, &tjson,
                             &files.template_json_len, &err);
        if (st == LLMR_OK)
            st = read_listed(so, src, LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG, LLMR_CHAT_MAX_CONFIG_BYTES, &tcfg,
                             &files.tokenizer_config_len, &err);
    }
    files.jinja = jinja;
    files.template_json = tjson;
    files.tokenizer_config = tcfg;
    if (st == LLMR_OK)
        st = llmr_chat_format_choose(&files, &f, &err);
    if (st == LLMR_OK && !f.special_tokens)
        st = special_from_tokenizer(so, src, &f.special_tokens);
    /* A template of the registration's own is rendered here whatever the model's files
     * say; without the special tokens it would be rendered with no guard, and a user's
     * text could spell a control token. */
    if (st == LLMR_OK && !f.special_tokens && f.origin &&
        strcmp(f.origin, LLMR_CHAT_ORIGIN_REGISTRATION) == 0) {
        llmr_strbuf_free(&err);
        llmr_strbuf_puts(&err, "a chat_template given at registration needs the model's special tokens, "
                               "so that request text stays text, and the model has no list of them "
                               "(tokenizer_config.json's added_tokens_decoder, or tokenizer.json); add "
                               "one of those files to the model, or register it without chat_template");
        st = LLMR_INVALID_ARGUMENT;
    }
    unsigned status = 0;
    if (st == LLMR_OK) {
        if (!(*out = llmr_chat_format_to_json(&f))) {
            llmr_strbuf_puts(msg, "out of memory");
            status = 500;
        }
    } else if (st == LLMR_OOM_RAM) {
        llmr_strbuf_puts(msg, "out of memory");
        status = 500;
    } else {
        llmr_strbuf_printf(msg, "The model's chat format cannot be used: %s.", llmr_strbuf_cstr(&err));
        status = st == LLMR_IO ? 502 : 400;
    }
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
    free(jinja);
    free(tjson);
    free(tcfg);
    return status;
}

/* ---- the compiled templates ---------------------------------------------------------------- */

/* One model's compiled template, shared by the requests that render with it. */
typedef struct template_entry {
    struct template_entry *next;
    char *name;
    int64_t created;   /* the registration it belongs to */
    char *source;
    llmr_template *tpl;
    json_t *special;
    bool harmony;      /* the template writes harmony (llmr_chat_template_is_harmony) */
    llmr_chat_guard *guard; /* the special tokens request text may not form, or NULL */
    unsigned refs;     /* the cache's own, plus one per render in progress */
} template_entry;

struct router_templates {
    pthread_mutex_t lock;
    template_entry *head;
};

router_templates *router_templates_new(void)
{
    router_templates *t = calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->lock, NULL);
    return t;
}

static void entry_free(template_entry *e)
{
    free(e->name);
    free(e->source);
    llmr_template_free(e->tpl);
    json_decref(e->special);
    llmr_chat_guard_free(e->guard);
    free(e);
}

static void entry_release(router_templates *t, template_entry *e)
{
    pthread_mutex_lock(&t->lock);
    bool last = --e->refs == 0;
    pthread_mutex_unlock(&t->lock);
    if (last)
        entry_free(e);
}

void router_templates_free(router_templates *t)
{
    if (!t)
        return;
    for (template_entry *e = t->head, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The entry for this registration of the model (compiled on first use, replacing the
 * entry of an earlier registration of the same name), with a reference for the
 * caller; NULL with err when the stored format is unusable. */
static template_entry *entry_get(router_templates *t, const llmr_store_model *m, llmr_strbuf *err)
{
    llmr_chat_format f;
    if (!llmr_chat_format_from_json(m->chat_format, &f)) {
        llmr_strbuf_printf(err, "the stored chat format of model %s is damaged; register the model again",
                           m->name);
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    template_entry **link = &t->head, *e;
    while ((e = *link) && strcmp(e->name, m->name) != 0)
        link = &e->next;
    if (e && e->created == m->created && strcmp(e->source, f.source) == 0) {
        e->refs++;
        pthread_mutex_unlock(&t->lock);
        llmr_chat_format_free(&f);
        return e;
    }
    if (e) { /* an earlier registration's: out of the cache, freed by its last user */
        *link = e->next;
        if (--e->refs == 0)
            entry_free(e);
    }
    char terr[512];
    template_entry *n = calloc(1, sizeof *n);
    bool guard_ok = !f.special_tokens;
    if (n && f.special_tokens && !(guard_ok = (n->guard = llmr_chat_guard_from_json(f.special_tokens)) != NULL))
        snprintf(terr, sizeof terr, "out of memory");
    if (n && guard_ok && (n->name = strdup(m->name)) &&
        (n->tpl = llmr_template_compile(f.source, strlen(f.source), terr, sizeof terr))) {
        n->created = m->created;
        n->harmony = llmr_chat_template_is_harmony(f.source);
        n->source = f.source;
        n->special = json_incref(f.special);
        f.source = NULL;
        n->refs = 2;
        n->next = t->head;
        t->head = n;
    } else {
        if (n && n->name)
            llmr_strbuf_printf(err, "the chat template of model %s does not compile: %s", m->name, terr);
        else
            llmr_strbuf_puts(err, "out of memory");
        if (n)
            entry_free(n);
        n = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    llmr_chat_format_free(&f);
    return n;
}

/* ---- rendering ------------------------------------------------------------------------------ */

bool router_chat_renders(const llmr_store_model *m)
{
    if (!m->chat_format)
        return false;
    const char *origin = json_string_value(json_object_get(m->chat_format, "origin"));
    return json_is_array(json_object_get(m->chat_format, "special_tokens")) ||
           (origin && strcmp(origin, LLMR_CHAT_ORIGIN_REGISTRATION) == 0);
}

bool router_render_chat(llmr_router *r, const llmr_store_model *m, const llmr_oai_request *q, llmr_strbuf *out,
                        llmr_text_spans *spans, llmr_oai_error *e)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    template_entry *entry = entry_get(r->templates, m, &err);
    json_t *messages = NULL, *tools = NULL;
    bool input = entry && llmr_oai_template_input(q, entry->harmony, &messages, &tools, e);
    bool ok = input && llmr_chat_render_text(entry->tpl, entry->special, messages, tools, q->template_kwargs,
                                             entry->guard, out, spans, &err);
    json_decref(messages);
    json_decref(tools);
    if (!entry)
        llmr_oai_error_set(e, 500, "server_error", "template_error", NULL, "%s", llmr_strbuf_cstr(&err));
    else if (!input)
        ; /* e says why */
    else if (!ok)
        llmr_oai_error_set(e, 400, "invalid_request_error", "template_error", "messages", "%s",
                           llmr_strbuf_cstr(&err));
    if (entry)
        entry_release(r->templates, entry);
    llmr_strbuf_free(&err);
    return ok;
}

/* [[offset, length], ...] */
static json_t *spans_json(const llmr_text_spans *spans)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < spans->n; i++)
        if (json_array_append_new(a, json_pack("[I, I]", (json_int_t)spans->v[i].off,
                                                (json_int_t)spans->v[i].len)) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

bool router_render_body(const llmr_http_request *req, const char *prompt, size_t prompt_len,
                        const llmr_text_spans *spans, char **body, size_t *body_len)
{
    *body = NULL;
    json_t *b = json_loadb(req->body, req->body_len, JSON_ALLOW_NUL, NULL);
    json_object_del(b, LLMR_OAI_RENDERED_TEXT);
    if (!b || json_object_set_new(b, LLMR_OAI_RENDERED_PROMPT, json_stringn(prompt, prompt_len)) != 0 ||
        (spans && spans->n && json_object_set_new(b, LLMR_OAI_RENDERED_TEXT, spans_json(spans)) != 0)) {
        json_decref(b);
        return false;
    }
    *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (*body)
        *body_len = strlen(*body);
    return *body != NULL;
}

bool router_unrendered_body(const llmr_http_request *req, char **body, size_t *body_len)
{
    *body = NULL;
    json_t *b = json_loadb(req->body, req->body_len, JSON_ALLOW_NUL, NULL);
    bool had = json_object_del(b, LLMR_OAI_RENDERED_PROMPT) == 0;
    had |= json_object_del(b, LLMR_OAI_RENDERED_TEXT) == 0;
    if (b && had && (*body = json_dumps(b, JSON_COMPACT)))
        *body_len = strlen(*body);
    bool ok = !b || !had || *body;
    json_decref(b);
    return ok;
}

/* ---- POST /v0/models/{name}/render ------------------------------------------------------------ */

void router_render_endpoint(llmr_router *r, const llmr_store_model *m, const llmr_http_request *req,
                            llmr_http_reply *reply)
{
    llmr_strbuf text = LLMR_STRBUF_INIT;
    llmr_text_spans spans = LLMR_TEXT_SPANS_INIT;
    llmr_oai_request q;
    llmr_oai_error e;
    memset(&q, 0, sizeof q);
    memset(&e, 0, sizeof e);
    if (!router_chat_renders(m)) {
        router_error(reply, 409, "invalid_request_error", "rendered_by_node",
                     "Model %s is rendered by its node (%s), not by the router.", m->name,
                     m->chat_format ? "the router does not know its tokenizer's special tokens, which request "
                                      "text may not form; register the model again"
                     : strcmp(m->format, "gguf") == 0 ? "a gguf model carries its template in its weights"
                                                      : "it was registered before the router kept chat formats");
        goto done;
    }
    /* the body is a chat request whose "model" may be left out */
    json_t *b = json_loadb(req->body ? req->body : "", req->body_len, JSON_ALLOW_NUL, NULL);
    if (json_is_object(b) && !json_object_get(b, "model"))
        json_object_set_new(b, "model", json_string(m->name));
    char *body = json_is_object(b) ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    bool parsed = llmr_oai_parse(LLMR_OAI_CHAT, body ? body : req->body, body ? strlen(body) : req->body_len, &q, &e);
    free(body);
    if (!parsed) {
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        goto done;
    }
    if (!router_render_chat(r, m, &q, &text, &spans, &e)) {
        llmr_http_reply_json(reply, e.status, llmr_oai_error_json(&e));
        goto done;
    }
    json_t *origin = json_object_get(m->chat_format, "origin");
    json_t *answer = json_pack("{s:s%, s:O, s:o}", "prompt", llmr_strbuf_cstr(&text), text.len, "template_origin",
                               origin ? origin : json_null(), "text_spans", spans_json(&spans));
    if (answer)
        llmr_http_reply_json(reply, 200, answer);
    else
        router_error(reply, 500, "server_error", "template_error", "The rendered prompt is not valid UTF-8.");
done:
    llmr_oai_request_free(&q);
    llmr_strbuf_free(&text);
    llmr_text_spans_free(&spans);
}
