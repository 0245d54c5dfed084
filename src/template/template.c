/* The public face of the chat-template renderer (template.h): compile (lex + parse into
 * the template's own arena), render (tpl_eval.c), free, the defaults and the default
 * template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "template/tpl_internal.h"

struct llmr_template {
    tpl_arena arena;
    tpl_node *root;
};

llmr_template_options llmr_template_default_options(void)
{
    llmr_template_options o;
    memset(&o, 0, sizeof o);
    o.limits.max_depth = 256;
    o.limits.max_iterations = 10000000;
    o.limits.max_output = (size_t)64 << 20;
    return o;
}

llmr_template *llmr_template_compile(const char *src, size_t len, char *err, size_t err_size)
{
    size_t bad;
    if (!src && len) {
        snprintf(err, err_size, "no template source");
        return NULL;
    }
    if (!llmr_utf8_valid(src ? src : "", len, &bad)) {
        snprintf(err, err_size, "the template is not valid UTF-8 (byte offset %zu)", bad);
        return NULL;
    }
    llmr_template *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    tpl_arena_init(&t->arena);
    tpl_tokens toks;
    if (!tpl_lex(&t->arena, src ? src : "", len, &toks, err, err_size) ||
        !(t->root = tpl_parse(&t->arena, &toks, err, err_size))) {
        llmr_template_free(t);
        return NULL;
    }
    return t;
}

void llmr_template_free(llmr_template *t)
{
    if (!t)
        return;
    tpl_arena_free(&t->arena);
    free(t);
}

bool llmr_template_render(const llmr_template *t, const json_t *context,
                          const llmr_template_options *opt, llmr_strbuf *out, char *err,
                          size_t err_size)
{
    return tpl_render_tree(t->root, context, opt, out, err, err_size);
}

const char *llmr_template_default_source(void)
{
    return "{% for message in messages %}"
           "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
           "{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}
