/* ModelStorage for format gguf: which .gguf file is the model (the only one, the one
 * named, or every part of a split model "name-00001-of-00003.gguf"), its header, and
 * the descriptor fields from its metadata.  The runtime is llama.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "storage/model_internal.h"

/* Parses "prefix-NNNNN-of-MMMMM.gguf"; the prefix length goes to *prefix_len. */
static bool split_name(const char *name, size_t *prefix_len, unsigned *part, unsigned *total)
{
    size_t n = strlen(name);
    const size_t tail = strlen("-00001-of-00003.gguf");
    if (n <= tail || !llmr_name_has_suffix(name, ".gguf"))
        return false;
    const char *t = name + n - tail;
    char extra;
    if (sscanf(t, "-%5u-of-%5u.gguf%c", part, total, &extra) != 2)
        return false;
    for (size_t i = 1; i <= 5; i++)
        if (t[i] < '0' || t[i] > '9' || t[i + 9] < '0' || t[i + 9] > '9')
            return false;
    if (*part < 1 || *part > *total)
        return false;
    *prefix_len = n - tail;
    return true;
}

typedef struct gguf_choice {
    const char **names; /* into the listing */
    size_t count;
} gguf_choice;

/* If `names` are all the parts of one split model, true with them in part order.
 * Parts that are missing are problems. */
static bool as_split_set(const char **names, size_t n, gguf_choice *out, llmr_problems *p)
{
    size_t prefix_len0;
    unsigned part, total0;
    if (!split_name(names[0], &prefix_len0, &part, &total0))
        return false;
    for (size_t i = 1; i < n; i++) {
        size_t prefix_len;
        unsigned total;
        if (!split_name(names[i], &prefix_len, &part, &total) || total != total0 ||
            prefix_len != prefix_len0 || memcmp(names[i], names[0], prefix_len) != 0)
            return false;
    }
    out->names = calloc(total0, sizeof *out->names);
    if (!out->names) {
        llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        size_t prefix_len;
        unsigned total;
        split_name(names[i], &prefix_len, &part, &total);
        out->names[part - 1] = names[i];
    }
    out->count = total0;
    for (unsigned i = 0; i < total0; i++) {
        if (out->names[i])
            continue;
        char missing[64];
        snprintf(missing, sizeof missing, "-%05u-of-%05u.gguf", i + 1, total0);
        llmr_problems_add(p, LLMR_NOT_FOUND, NULL, "%.*s%s is missing: it is part %u of a split model",
                          (int)prefix_len0, names[0], missing, i + 1);
    }
    return true;
}

/* Settles which files are the model; false with problems when it cannot. */
static bool choose_files(const llmr_dir_listing *l, const llmr_model_options *o,
                         gguf_choice *choice, llmr_problems *p)
{
    memset(choice, 0, sizeof *choice);
    const char **names = calloc(l->count ? l->count : 1, sizeof *names);
    if (!names) {
        llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
        return false;
    }
    size_t n = 0, bad = 0;
    for (size_t i = 0; i < l->count; i++) {
        const llmr_dir_entry *e = &l->entries[i];
        if (e->kind == LLMR_DIR_OTHER || !llmr_name_has_suffix(e->name, ".gguf"))
            continue;
        if (e->name_ok)
            names[n++] = e->name;
        else
            bad++;
    }
    if (o->gguf_file) {
        const llmr_dir_entry *e = llmr_file_name_is_safe(o->gguf_file) ? llmr_dir_find(l, o->gguf_file) : NULL;
        if (!e || !llmr_name_has_suffix(e->name, ".gguf")) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            llmr_strbuf_put_display(&sb, o->gguf_file, strlen(o->gguf_file));
            llmr_problems_add(p, LLMR_NOT_FOUND, NULL,
                              "the chosen file \"%s\" is not a .gguf file of this directory",
                              llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
            free(names);
            return false;
        }
        /* The first part of a split model brings its other parts. */
        size_t prefix_len;
        unsigned part, total;
        if (split_name(e->name, &prefix_len, &part, &total) && part == 1) {
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                size_t pl;
                unsigned pt, tt;
                if (split_name(names[i], &pl, &pt, &tt) && tt == total && pl == prefix_len &&
                    memcmp(names[i], e->name, pl) == 0)
                    names[k++] = names[i];
            }
            bool ok = as_split_set(names, k, choice, p);
            free(names);
            return ok && choice->count > 0;
        }
        names[0] = e->name;
        n = 1;
        bad = 0;
    }
    if (bad) {
        /* Unusable names matter only when no file was chosen: they might be the model. */
        for (size_t i = 0; i < l->count; i++)
            if (!l->entries[i].name_ok && llmr_name_has_suffix(l->entries[i].name, ".gguf"))
                llmr_model_bad_name(l->entries[i].name, p);
        free(names);
        return false;
    }
    if (n == 1) {
        choice->names = names;
        choice->count = 1;
        return true;
    }
    if (n > 1 && as_split_set(names, n, choice, p)) {
        free(names);
        return choice->count > 0;
    }
    if (n > 1) {
        llmr_strbuf list = LLMR_STRBUF_INIT;
        for (size_t i = 0; i < n && i < 8; i++)
            llmr_strbuf_printf(&list, i ? ", %s" : "%s", names[i]);
        llmr_problems_add(p, LLMR_INVALID_ARGUMENT, NULL,
                          "the directory holds %zu .gguf files (%s%s); name the one to use "
                          "(--file)",
                          n, llmr_strbuf_cstr(&list), n > 8 ? ", ..." : "");
        llmr_strbuf_free(&list);
    }
    free(names);
    return false;
}

/* The metadata engines and operators look at, from the first file. */
static json_t *engine_config(const llmr_gguf_header *h)
{
    json_t *o = json_object();
    json_object_set_new(o, "gguf_version", json_integer(h->version));
    json_object_set_new(o, "tensor_count", json_integer((json_int_t)h->tensor_count));
    json_object_set_new(o, "architecture", json_string(h->architecture));
    static const char *const general[] = {"general.name", "general.file_type",
                                          "general.quantization_version"};
    static const char *const per_arch[] = {"context_length", "block_count", "embedding_length",
                                           "attention.head_count", "attention.head_count_kv",
                                           "expert_count", "expert_used_count"};
    char key[256];
    for (size_t i = 0; i < sizeof general / sizeof general[0] + sizeof per_arch / sizeof per_arch[0]; i++) {
        if (i < sizeof general / sizeof general[0])
            snprintf(key, sizeof key, "%s", general[i]);
        else
            snprintf(key, sizeof key, "%s.%s", h->architecture,
                     per_arch[i - sizeof general / sizeof general[0]]);
        const llmr_gguf_kv *kv = llmr_gguf_find(h, key);
        if (!kv)
            continue;
        json_t *v = NULL;
        switch (kv->type) {
        case LLMR_GGUF_STRING:
            v = json_stringn(kv->str, kv->str_len); /* NULL for invalid UTF-8: left out */
            break;
        case LLMR_GGUF_INT8:
        case LLMR_GGUF_INT16:
        case LLMR_GGUF_INT32:
        case LLMR_GGUF_INT64:
            v = json_integer(kv->num.i64);
            break;
        case LLMR_GGUF_UINT8:
        case LLMR_GGUF_UINT16:
        case LLMR_GGUF_UINT32:
        case LLMR_GGUF_UINT64:
            v = kv->num.u64 <= INT64_MAX ? json_integer((json_int_t)kv->num.u64) : NULL;
            break;
        case LLMR_GGUF_FLOAT32:
        case LLMR_GGUF_FLOAT64:
            v = json_real(kv->num.f64);
            break;
        case LLMR_GGUF_BOOL:
            v = json_boolean(kv->num.b);
            break;
        default:
            break;
        }
        if (v)
            json_object_set_new(o, key, v);
    }
    return o;
}

void llmr_model_open_gguf(llmr_model *m, const llmr_dir_listing *l,
                          const llmr_model_options *options, llmr_problems *p)
{
    size_t before = llmr_problems_total(p);
    gguf_choice choice;
    if (!choose_files(l, options, &choice, p) || llmr_problems_total(p) != before)
        goto done;
    m->gguf = calloc(choice.count, sizeof *m->gguf);
    if (!m->gguf || !(m->primary_file = strdup(choice.names[0]))) {
        llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < choice.count; i++)
        m->gguf[i].fd = -1;
    m->gguf_count = choice.count;
    for (size_t i = 0; i < choice.count; i++) {
        const llmr_dir_entry *e = llmr_model_need_file(l, choice.names[i], LLMR_NOT_FOUND, "it holds the weights", p);
        char *path = e ? llmr_path_join(m->dir, e->name) : NULL;
        if (path && llmr_gguf_file_open(path, e->name, &m->gguf[i], p) == LLMR_OK &&
            !llmr_model_add_file(m, e->name, e->size, "weights"))
            llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
        free(path);
    }
    if (llmr_problems_total(p) != before)
        goto done;
    const llmr_gguf_header *h = &m->gguf[0].header;
    m->runtime = LLMR_RUNTIME_LLAMA_CPP;
    m->model_type = strdup(h->architecture);
    m->architecture = strdup(h->architecture);
    m->engine_config = engine_config(h);
    if (!m->model_type || !m->architecture || !m->engine_config)
        llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
done:
    free(choice.names);
}
