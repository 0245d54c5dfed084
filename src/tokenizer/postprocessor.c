/* Post-processors: see postprocessor.h.  Every supported kind reduces to ids before
 * the sequence and ids after it. */
#include "tokenizer/postprocessor.h"

#include <stdlib.h>
#include <string.h>

struct llmr_postprocessor {
    llmr_ids before, after; /* for Template/Bert/Roberta; both empty for ByteLevel */
    llmr_postprocessor **steps;
    size_t n_steps;
};

void llmr_postprocessor_free(llmr_postprocessor *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_steps; i++)
        llmr_postprocessor_free(p->steps[i]);
    free(p->steps);
    llmr_ids_free(&p->before);
    llmr_ids_free(&p->after);
    free(p);
}

/* ["[CLS]", 101] -> 101 */
static bool token_pair(const json_t *v, uint32_t *id)
{
    const json_t *n = json_array_get(v, 1);
    if (!json_is_array(v) || !json_is_integer(n) || json_integer_value(n) < 0 ||
        json_integer_value(n) > UINT32_MAX)
        return false;
    *id = (uint32_t)json_integer_value(n);
    return true;
}

static llmr_status build_template(const json_t *spec, llmr_postprocessor *p, llmr_strbuf *err)
{
    const json_t *single = json_object_get(spec, "single");
    const json_t *specials = json_object_get(spec, "special_tokens");
    if (!json_is_array(single)) {
        llmr_strbuf_puts(err, "post_processor TemplateProcessing: \"single\" must be an array");
        return LLMR_MODEL_CORRUPT;
    }
    bool seen_sequence = false;
    size_t i;
    const json_t *item;
    json_array_foreach(single, i, item) {
        const json_t *seq = json_object_get(item, "Sequence");
        const json_t *sp = json_object_get(item, "SpecialToken");
        if (seq) {
            const char *which = json_string_value(json_object_get(seq, "id"));
            if (which && strcmp(which, "A") != 0) {
                llmr_strbuf_puts(err, "post_processor TemplateProcessing: the single template "
                                      "may only hold sequence A");
                return LLMR_MODEL_CORRUPT;
            }
            if (seen_sequence) {
                llmr_strbuf_puts(err, "post_processor TemplateProcessing: sequence A appears twice");
                return LLMR_UNSUPPORTED;
            }
            seen_sequence = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        const json_t *entry = name ? json_object_get(specials, name) : NULL;
        const json_t *ids = json_object_get(entry, "ids");
        if (!json_is_array(ids)) {
            llmr_strbuf_printf(err, "post_processor TemplateProcessing: special token %s%s%s "
                                    "has no ids in \"special_tokens\"",
                               name ? "\"" : "", name ? name : "(unnamed)", name ? "\"" : "");
            return LLMR_MODEL_CORRUPT;
        }
        size_t k;
        const json_t *id;
        json_array_foreach(ids, k, id) {
            if (!json_is_integer(id) || json_integer_value(id) < 0 ||
                json_integer_value(id) > UINT32_MAX) {
                llmr_strbuf_puts(err, "post_processor TemplateProcessing: a special token id is "
                                      "not a non-negative integer");
                return LLMR_MODEL_CORRUPT;
            }
            if (!llmr_ids_push(seen_sequence ? &p->after : &p->before, (uint32_t)json_integer_value(id)))
                return LLMR_OOM_RAM;
        }
    }
    return LLMR_OK;
}

llmr_status llmr_postprocessor_build(const json_t *spec, llmr_postprocessor **out,
                                     llmr_strbuf *err)
{
    *out = NULL;
    if (!spec || json_is_null(spec))
        return LLMR_OK;
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        llmr_strbuf_puts(err, "post_processor has no \"type\"");
        return LLMR_MODEL_CORRUPT;
    }
    llmr_postprocessor *p = calloc(1, sizeof *p);
    if (!p) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    if (strcmp(type, "TemplateProcessing") == 0) {
        st = build_template(spec, p, err);
    } else if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        uint32_t cls, sep;
        if (!token_pair(json_object_get(spec, "cls"), &cls) ||
            !token_pair(json_object_get(spec, "sep"), &sep)) {
            llmr_strbuf_printf(err, "post_processor %s: \"cls\" and \"sep\" must be [token, id]", type);
            st = LLMR_MODEL_CORRUPT;
        } else if (!llmr_ids_push(&p->before, cls) || !llmr_ids_push(&p->after, sep)) {
            st = LLMR_OOM_RAM;
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        /* Offsets only: ids are unchanged. */
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "processors");
        if (!json_is_array(list)) {
            llmr_strbuf_puts(err, "post_processor Sequence: \"processors\" must be an array");
            st = LLMR_MODEL_CORRUPT;
        } else if (json_array_size(list) &&
                   !(p->steps = calloc(json_array_size(list), sizeof *p->steps))) {
            st = LLMR_OOM_RAM;
        }
        for (size_t i = 0; st == LLMR_OK && i < json_array_size(list); i++) {
            st = llmr_postprocessor_build(json_array_get(list, i), &p->steps[p->n_steps], err);
            if (p->steps[p->n_steps])
                p->n_steps++;
        }
    } else {
        llmr_strbuf_printf(err, "post_processor type \"%s\" is not supported (supported: "
                                "TemplateProcessing, BertProcessing, RobertaProcessing, "
                                "ByteLevel, Sequence)",
                           type);
        st = LLMR_UNSUPPORTED;
    }
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    if (st != LLMR_OK) {
        llmr_postprocessor_free(p);
        return st;
    }
    *out = p;
    return LLMR_OK;
}

bool llmr_postprocessor_apply(const llmr_postprocessor *p, llmr_ids *ids)
{
    for (size_t i = 0; i < p->n_steps; i++)
        if (!llmr_postprocessor_apply(p->steps[i], ids))
            return false;
    if (!p->before.count && !p->after.count)
        return true;
    if (!llmr_ids_reserve(ids, p->before.count + p->after.count))
        return false;
    memmove(ids->data + p->before.count, ids->data, ids->count * sizeof *ids->data);
    if (p->before.count)
        memcpy(ids->data, p->before.data, p->before.count * sizeof *ids->data);
    ids->count += p->before.count;
    if (p->after.count)
        memcpy(ids->data + ids->count, p->after.data, p->after.count * sizeof *ids->data);
    ids->count += p->after.count;
    return true;
}
