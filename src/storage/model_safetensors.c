/* ModelStorage for format safetensors: required metadata files, the shard set (from
 * the index, or the single file), every shard header, index/shard agreement,
 * config.json, the runtime, and the tensors the config implies. */
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "storage/model_internal.h"
#include "storage/st_index.h"

/* Metadata files a node fetches with the weights, by role. */
static const struct {
    const char *name;
    const char *role;
} metadata_files[] = {
    {"config.json", "config"},
    {"generation_config.json", "generation_config"},
    {"tokenizer.json", "tokenizer"},
    {"tokenizer_config.json", "tokenizer_config"},
    {"special_tokens_map.json", "special_tokens_map"},
    {"chat_template.jinja", "chat_template"},
    {"chat_template.json", "chat_template"},
};

#define N_METADATA (sizeof metadata_files / sizeof metadata_files[0])
/* How many names a warning about unused tensors quotes. */
#define UNUSED_NAMES_SHOWN 5

typedef struct shard_set {
    char **names;
    size_t count;
    bool from_index;
    llmr_st_index index;
} shard_set;

static void shard_set_free(shard_set *s)
{
    if (s->from_index) {
        llmr_st_index_free(&s->index); /* owns the names */
    } else {
        for (size_t i = 0; i < s->count; i++)
            free(s->names[i]);
        free(s->names);
    }
    memset(s, 0, sizeof *s);
}

static void oom(llmr_problems *p)
{
    llmr_problems_add(p, LLMR_OOM_RAM, NULL, "out of memory");
}

/* Which files hold the weights: the index's shards, or the one .safetensors. */
static bool find_shards(llmr_model *m, const llmr_dir_listing *l, shard_set *set,
                        llmr_problems *p)
{
    memset(set, 0, sizeof *set);
    if (llmr_dir_find(l, LLMR_ST_INDEX_FILE)) {
        const llmr_dir_entry *e = llmr_model_need_file(l, LLMR_ST_INDEX_FILE, LLMR_NOT_FOUND,
                                                       "it says which shard holds each tensor", p);
        if (!e)
            return false;
        char *path = llmr_path_join(m->dir, LLMR_ST_INDEX_FILE);
        char *text = NULL;
        size_t len;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        llmr_status st = path ? llmr_read_file(path, LLMR_ST_INDEX_MAX_BYTES, &text, &len, &err)
                              : LLMR_OOM_RAM;
        if (st != LLMR_OK)
            llmr_problems_add(p, st, LLMR_ST_INDEX_FILE, "%s", llmr_strbuf_cstr(&err));
        else
            st = llmr_st_index_parse(text, len, LLMR_ST_INDEX_FILE, &set->index, p);
        free(path);
        free(text);
        llmr_strbuf_free(&err);
        if (st != LLMR_OK)
            return false;
        set->from_index = true;
        set->names = set->index.shards;
        set->count = set->index.shard_count;
        if (!llmr_model_add_file(m, LLMR_ST_INDEX_FILE, e->size, "index") ||
            !(m->primary_file = strdup(LLMR_ST_INDEX_FILE))) {
            oom(p);
            return false;
        }
        /* A .safetensors beside the shards that the index does not name is not loaded. */
        for (size_t i = 0; i < l->count; i++) {
            const char *name = l->entries[i].name;
            bool named = false;
            for (size_t j = 0; j < set->count && !named; j++)
                named = strcmp(set->names[j], name) == 0;
            if (!named && l->entries[i].name_ok && llmr_name_has_suffix(name, ".safetensors"))
                llmr_json_append_text(m->warnings, "%s is not named by %s and is ignored", name,
                                      LLMR_ST_INDEX_FILE);
        }
        return true;
    }

    llmr_strbuf names = LLMR_STRBUF_INIT;
    size_t n = 0;
    for (size_t i = 0; i < l->count; i++) {
        const llmr_dir_entry *e = &l->entries[i];
        if (e->kind == LLMR_DIR_OTHER || !llmr_name_has_suffix(e->name, ".safetensors"))
            continue;
        if (!e->name_ok) {
            llmr_model_bad_name(e->name, p);
            continue;
        }
        if (n < 8)
            llmr_strbuf_printf(&names, n ? ", %s" : "%s", e->name);
        else if (n == 8)
            llmr_strbuf_puts(&names, ", ...");
        n++;
    }
    bool ok = false;
    if (n > 1) {
        llmr_problems_add(p, LLMR_INVALID_ARGUMENT, LLMR_ST_INDEX_FILE,
                          "missing, and the directory holds %zu .safetensors files (%s): "
                          "without the index it is ambiguous which of them hold the model; add "
                          "the index or remove the extra files",
                          n, llmr_strbuf_cstr(&names));
    } else if (n == 1) {
        set->names = calloc(1, sizeof *set->names);
        if (set->names && (set->names[0] = strdup(llmr_strbuf_cstr(&names))))
            set->count = 1; /* from here shard_set_free owns the name */
        if (set->count == 1 && (m->primary_file = strdup(set->names[0])))
            ok = true;
        else
            oom(p);
    }
    /* n == 0: every .safetensors had a bad name, already reported. */
    llmr_strbuf_free(&names);
    return ok;
}

/* Opens every shard; false when any is missing or unsound. */
static bool open_shards(llmr_model *m, const llmr_dir_listing *l, const shard_set *set,
                        llmr_problems *p)
{
    m->shards = calloc(set->count ? set->count : 1, sizeof *m->shards);
    if (!m->shards) {
        oom(p);
        return false;
    }
    for (size_t i = 0; i < set->count; i++)
        m->shards[i].fd = -1;
    m->shard_count = set->count;
    bool ok = true;
    for (size_t i = 0; i < set->count; i++) {
        const char *name = set->names[i];
        const llmr_dir_entry *e = llmr_model_need_file(
            l, name, set->from_index ? LLMR_MODEL_CORRUPT : LLMR_NOT_FOUND,
            set->from_index ? "model.safetensors.index.json names it as a shard"
                            : "it holds the weights",
            p);
        if (!e) {
            ok = false;
            continue;
        }
        char *path = llmr_path_join(m->dir, name);
        if (!path) {
            oom(p);
            return false;
        }
        if (llmr_st_file_open(path, name, &m->shards[i], p) != LLMR_OK ||
            !llmr_model_add_file(m, name, e->size, "weights"))
            ok = false;
        else
            llmr_log_debug("storage", "%s: %zu tensors, %llu-byte header", name,
                           m->shards[i].header.count,
                           (unsigned long long)m->shards[i].data_offset - 8);
        free(path);
    }
    return ok;
}

/* One table of every tensor in every shard; checks it against the index. */
static bool build_tensor_table(llmr_model *m, const shard_set *set, llmr_problems *p)
{
    size_t total = 0;
    for (size_t s = 0; s < m->shard_count; s++)
        total += m->shards[s].header.count;
    m->tensors = calloc(total ? total : 1, sizeof *m->tensors);
    m->tensor_by_name = llmr_strmap_create(total);
    if (!m->tensors || !m->tensor_by_name) {
        oom(p);
        return false;
    }
    bool ok = true;
    for (size_t s = 0; s < m->shard_count; s++) {
        const llmr_st_header *h = &m->shards[s].header;
        for (size_t i = 0; i < h->count; i++) {
            const char *name = h->tensors[i].name;
            size_t prev;
            llmr_strmap_put_result r = llmr_strmap_put(m->tensor_by_name, name, m->tensor_count);
            if (r == LLMR_STRMAP_NOMEM) {
                oom(p);
                return false;
            }
            if (r == LLMR_STRMAP_EXISTS) {
                llmr_strmap_get(m->tensor_by_name, name, &prev);
                llmr_problems_add(p, LLMR_MODEL_CORRUPT, set->names[s],
                                  "tensor %s is also in %s: which copy is the model's is ambiguous",
                                  name, set->names[m->tensors[prev].shard]);
                ok = false;
                continue;
            }
            m->tensors[m->tensor_count++] = (llmr_model_tensor){&h->tensors[i], s};
        }
    }
    if (!set->from_index)
        return ok;

    const llmr_st_index *ix = &set->index;
    for (size_t i = 0; i < ix->tensor_count; i++) {
        const llmr_model_tensor *t = llmr_model_tensor_find(m, ix->tensors[i]);
        const char *want = ix->shards[ix->tensor_shard[i]];
        if (!t) {
            llmr_problems_add(p, LLMR_MODEL_CORRUPT, LLMR_ST_INDEX_FILE,
                              "lists tensor %s in %s, but no shard holds it", ix->tensors[i], want);
            ok = false;
        } else if (t->shard != ix->tensor_shard[i]) {
            llmr_problems_add(p, LLMR_MODEL_CORRUPT, LLMR_ST_INDEX_FILE,
                              "lists tensor %s in %s, but it is in %s", ix->tensors[i], want,
                              set->names[t->shard]);
            ok = false;
        }
    }
    for (size_t i = 0; i < m->tensor_count; i++) {
        size_t shard;
        const char *name = m->tensors[i].info->name;
        if (!llmr_st_index_find(ix, name, &shard)) {
            llmr_problems_add(p, LLMR_MODEL_CORRUPT, set->names[m->tensors[i].shard],
                              "tensor %s is here, but %s does not list it", name, LLMR_ST_INDEX_FILE);
            ok = false;
        }
    }
    uint64_t bytes = 0;
    for (size_t s = 0; s < m->shard_count; s++)
        bytes += m->shards[s].header.data_bytes;
    if (ix->has_total_size && ix->total_size != bytes)
        llmr_json_append_text(m->warnings,
                              "%s gives metadata.total_size %llu, but the shards hold %llu bytes "
                              "of tensors",
                              LLMR_ST_INDEX_FILE, (unsigned long long)ix->total_size,
                              (unsigned long long)bytes);
    return ok;
}

static bool lookup_tensor(void *ctx, const char *name, llmr_found_tensor *out)
{
    const llmr_model *m = ctx;
    const llmr_model_tensor *t = llmr_model_tensor_find(m, name);
    if (!t)
        return false;
    out->dtype = t->info->dtype;
    out->rank = t->info->rank;
    out->shape = t->info->shape;
    out->file = m->shards[t->shard].label;
    return true;
}

/* Lists tensors the files hold that the architecture does not use. */
static void warn_unused(llmr_model *m, llmr_tensor_specs *specs)
{
    llmr_strbuf names = LLMR_STRBUF_INIT;
    size_t unused = 0;
    for (size_t i = 0; i < m->tensor_count; i++) {
        const char *name = m->tensors[i].info->name;
        if (llmr_tensor_specs_contains(specs, name))
            continue;
        if (unused < UNUSED_NAMES_SHOWN)
            llmr_strbuf_printf(&names, unused ? ", %s" : "%s", name);
        unused++;
    }
    if (unused)
        llmr_json_append_text(m->warnings, "%zu tensors are not used by %s: %s%s", unused,
                              llmr_runtime_name(m->runtime), llmr_strbuf_cstr(&names),
                              unused > UNUSED_NAMES_SHOWN ? ", ..." : "");
    llmr_strbuf_free(&names);
}

/* Parses the runtime's config section; checks the tensors when the shards are sound. */
static void check_architecture(llmr_model *m, bool shards_ok, const char *missing_file,
                               llmr_problems *p)
{
    llmr_strbuf unsupported = LLMR_STRBUF_INIT, why = LLMR_STRBUF_INIT;
    llmr_tensor_specs specs;
    llmr_tensor_specs_init(&specs);
    llmr_status st = LLMR_OK;
    if (m->runtime == LLMR_RUNTIME_GPT_OSS) {
        st = llmr_gpt_oss_config_parse(m->config, "config.json", &m->gpt_oss, &unsupported, p);
        if (st == LLMR_OK) {
            m->engine_config = llmr_gpt_oss_config_to_json(&m->gpt_oss);
            llmr_gpt_oss_expected_tensors(&m->gpt_oss, &specs);
            llmr_strbuf_printf(&why, "config.json (gpt_oss, %llu layers)",
                               (unsigned long long)m->gpt_oss.num_hidden_layers);
        }
    } else if (m->runtime == LLMR_RUNTIME_NEMOTRON_H) {
        st = llmr_nemotron_h_config_parse(m->config, "config.json", &m->nemotron_h, &unsupported, p);
        if (st == LLMR_OK) {
            m->engine_config = llmr_nemotron_h_config_to_json(&m->nemotron_h);
            llmr_nemotron_h_expected_tensors(&m->nemotron_h, &specs);
            llmr_strbuf_printf(&why, "config.json (nemotron_h, layers %s)", m->nemotron_h.layers);
            llmr_json_append_text(m->notes, "%s", llmr_runtime_limitation("nemotron_h"));
        }
    } else if (m->runtime == LLMR_RUNTIME_LOOPBACK) {
        st = llmr_loopback_config_parse(m->config, "config.json", &m->loopback, p);
        if (st == LLMR_OK) {
            m->engine_config = llmr_loopback_config_to_json(&m->loopback);
            llmr_loopback_expected_tensors(&m->loopback, &specs);
            llmr_strbuf_puts(&why, "config.json (llmr_loopback)");
            llmr_json_append_text(m->notes, "a loopback test model: its engine repeats a "
                                            "lookup table, it does not understand text");
        }
    }
    if (st == LLMR_UNSUPPORTED) {
        m->runtime = LLMR_RUNTIME_NONE;
        m->unsupported_reason = llmr_strbuf_take(&unsupported);
    }
    if (specs.failed)
        oom(p);
    else if (st == LLMR_OK && specs.count && shards_ok) {
        llmr_tensor_specs_check(&specs, lookup_tensor, m, missing_file, llmr_strbuf_cstr(&why), p);
        warn_unused(m, &specs);
    }
    llmr_tensor_specs_free(&specs);
    llmr_strbuf_free(&unsupported);
    llmr_strbuf_free(&why);
}

static void read_config(llmr_model *m, llmr_problems *p)
{
    char *path = llmr_path_join(m->dir, "config.json");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = LLMR_OOM_RAM;
    m->config = path ? llmr_json_load_file(path, LLMR_CONFIG_JSON_MAX_BYTES, &st, &err) : NULL;
    free(path);
    if (!m->config) {
        llmr_problems_add(p, st, "config.json", "%s%s",
                          st == LLMR_MODEL_CORRUPT ? "not valid JSON: " : "",
                          llmr_strbuf_cstr(&err));
    } else if (!json_is_object(m->config)) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, "config.json", "not a JSON object");
        json_decref(m->config);
        m->config = NULL;
    }
    llmr_strbuf_free(&err);
}

/* model_type / architecture strings and the runtime, from config.json. */
static void decide_runtime(llmr_model *m, llmr_problems *p)
{
    const json_t *mt = json_object_get(m->config, "model_type");
    const json_t *archs = json_object_get(m->config, "architectures");
    const char *arch = json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;
    if (json_is_string(mt))
        m->model_type = strdup(json_string_value(mt));
    if (arch)
        m->architecture = strdup(arch);
    if (!json_is_string(mt) && !arch) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, "config.json",
                          "no model_type string and no architectures list: cannot tell which "
                          "model this is");
        return;
    }
    llmr_strbuf why = LLMR_STRBUF_INIT;
    m->runtime = llmr_runtime_for_config(m->config, &why);
    if (m->runtime == LLMR_RUNTIME_NONE)
        m->unsupported_reason = llmr_strbuf_take(&why);
    llmr_strbuf_free(&why);
}

void llmr_model_open_safetensors(llmr_model *m, const llmr_dir_listing *l,
                                 const llmr_model_options *options, llmr_problems *p)
{
    size_t before = llmr_problems_total(p);
    const llmr_dir_entry *config = llmr_model_need_file(
        l, "config.json", LLMR_NOT_FOUND,
        "a safetensors model needs it: it names the architecture and its sizes", p);
    llmr_model_need_file(l, "tokenizer.json", LLMR_NOT_FOUND,
                         "a safetensors model needs it to turn text into token ids", p);
    for (size_t i = 0; i < N_METADATA; i++) {
        const llmr_dir_entry *e = llmr_dir_find(l, metadata_files[i].name);
        if (e && e->kind == LLMR_DIR_FILE &&
            !llmr_model_add_file(m, e->name, e->size, metadata_files[i].role))
            oom(p);
    }

    shard_set set;
    bool shards_ok = find_shards(m, l, &set, p) && open_shards(m, l, &set, p) &&
                     build_tensor_table(m, &set, p);
    const char *missing_file = set.from_index ? LLMR_ST_INDEX_FILE
                               : set.count    ? set.names[0]
                                              : NULL;
    char *missing_copy = missing_file ? strdup(missing_file) : NULL;
    shard_set_free(&set);

    if (config) {
        read_config(m, p);
        if (m->config)
            decide_runtime(m, p);
        if (m->config && m->runtime != LLMR_RUNTIME_NONE)
            check_architecture(m, shards_ok, missing_copy, p);
    }
    free(missing_copy);

    if (options->map_weights && llmr_problems_total(p) == before) {
        for (size_t i = 0; i < m->shard_count; i++) {
            llmr_strbuf err = LLMR_STRBUF_INIT;
            llmr_status st = llmr_st_file_map(&m->shards[i], &err);
            if (st != LLMR_OK)
                llmr_problems_add(p, st, m->shards[i].label, "%s", llmr_strbuf_cstr(&err));
            llmr_strbuf_free(&err);
        }
        m->mapped = llmr_problems_total(p) == before;
    }
}
