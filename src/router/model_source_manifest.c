/* Model sources: the checks of a registration and the manifest for nodes (see
 * model_source.h and docs/node-router-protocol.md).
 *
 * Both start from one plan of the weights: for safetensors the index and the shards it
 * names (or the one .safetensors file), for gguf the chosen file (or the only one, or
 * every part of a split model).  The check reports every problem of the plan in one
 * sentence; the manifest takes the plan's files as required, adds the metadata files a
 * node needs, and for an allow-listed publisher its official GPU artifacts as optional
 * files under flat names.
 *
 * The shard list of an index read by a check is kept, by the index's digest, in a
 * small table, so that the manifest (which has no Hub options) need not fetch it
 * again. */
#include "router/model_source.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/fs_util.h"
#include "common/log.h"
#include "common/problems.h"
#include "common/sha256.h"
#include "common/strmap.h"
#include "storage/st_index.h"

#define COMPONENT "source"
#define INDEX_NAME LLMR_ST_INDEX_FILE
#define LISTED_NAMES 8       /* names shown in one sentence before "and N more" */
#define INDEX_CACHE_SLOTS 16

/* ---- the index's shard lists, by digest --------------------------------------------- */

typedef struct cached_index {
    char sha[65];
    json_t *shards; /* array of names */
} cached_index;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached_index cache[INDEX_CACHE_SLOTS];
static size_t cache_next;

static void cache_put(const char sha[65], const json_t *shards)
{
    json_t *copy = json_deep_copy(shards);
    if (!copy)
        return;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < INDEX_CACHE_SLOTS; i++) {
        if (cache[i].shards && strcmp(cache[i].sha, sha) == 0) {
            json_decref(copy);
            pthread_mutex_unlock(&cache_lock);
            return;
        }
    }
    cached_index *slot = &cache[cache_next];
    cache_next = (cache_next + 1) % INDEX_CACHE_SLOTS;
    json_decref(slot->shards);
    memcpy(slot->sha, sha, 65);
    slot->shards = copy;
    pthread_mutex_unlock(&cache_lock);
}

/* A copy of the shard list of the index of that digest, or NULL. */
static json_t *cache_get(const char *sha)
{
    json_t *out = NULL;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < INDEX_CACHE_SLOTS && !out; i++)
        if (cache[i].shards && strcmp(cache[i].sha, sha) == 0)
            out = json_deep_copy(cache[i].shards);
    pthread_mutex_unlock(&cache_lock);
    return out;
}

/* ---- helpers ------------------------------------------------------------------------- */

static const char *where(const llmr_source *s)
{
    return s->dir ? "the directory" : "the repository";
}

static bool top_level(const char *path)
{
    return !strchr(path, '/');
}

static bool has(const llmr_source *s, const char *path)
{
    return llmr_source_find(s, path) != NULL;
}

static void add_name(json_t *arr, const char *name)
{
    json_array_append_new(arr, json_string(name));
}

/* Appends "a, b, c" (at most LISTED_NAMES, then ", and N more"). */
static void put_names(llmr_strbuf *sb, const json_t *names)
{
    size_t n = json_array_size(names);
    for (size_t i = 0; i < n && i < LISTED_NAMES; i++) {
        const char *name = json_string_value(json_array_get(names, i));
        if (i)
            llmr_strbuf_puts(sb, ", ");
        llmr_strbuf_put_display(sb, name, strlen(name));
    }
    if (n > LISTED_NAMES)
        llmr_strbuf_printf(sb, ", and %zu more", n - LISTED_NAMES);
}

/* Starts one more sentence of a check's message. */
static void next_sentence(llmr_strbuf *msg)
{
    if (msg->len)
        llmr_strbuf_puts(msg, "; ");
}

static void hex_digest(const char *data, size_t len, char out[65])
{
    llmr_sha256 sha;
    uint8_t digest[32];
    llmr_sha256_init(&sha);
    llmr_sha256_update(&sha, data, len);
    llmr_sha256_final(&sha, digest);
    llmr_sha256_hex(digest, out);
}

/* ---- safetensors --------------------------------------------------------------------- */

/* The shard names of the source's index.  With o (a check) the index is read afresh;
 * without (a manifest) the table of digests is tried first.  INVALID_ARGUMENT for an
 * index that does not parse (msg says why), or the read's status. */
static llmr_status index_shards(const llmr_source_options *o, bool fresh, const llmr_source *s,
                                json_t **shards, llmr_strbuf *msg)
{
    *shards = NULL;
    const llmr_source_file *f = llmr_source_find(s, INDEX_NAME);
    if (!fresh && f->sha256) {
        *shards = cache_get(f->sha256);
        if (*shards)
            return LLMR_OK;
    }
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_st_index ix;
    memset(&ix, 0, sizeof ix);
    bool parsed = false;
    llmr_status status = llmr_source_read(o, s, INDEX_NAME, LLMR_ST_INDEX_MAX_BYTES, &text, &len, &why);
    if (status != LLMR_OK) {
        llmr_strbuf_puts(msg, "cannot read " INDEX_NAME ": ");
        llmr_strbuf_puts(msg, llmr_strbuf_cstr(&why));
        goto done;
    }
    char sha[65];
    hex_digest(text, len, sha);
    if (f->sha256 && strcmp(f->sha256, sha) != 0) {
        llmr_strbuf_printf(msg, INDEX_NAME " changed since %s was listed (its sha256 is not the "
                                "listed one): list it again", where(s));
        status = LLMR_IO;
        goto done;
    }
    status = llmr_st_index_parse(text, len, INDEX_NAME, &ix, &problems);
    if (status != LLMR_OK) {
        llmr_strbuf_puts(msg, INDEX_NAME " is not a valid index: ");
        llmr_strbuf_puts(msg, problems.count ? problems.items[0].message : "it does not parse");
        status = status == LLMR_OOM_RAM ? status : LLMR_INVALID_ARGUMENT;
        goto done;
    }
    parsed = true;
    *shards = json_array();
    for (size_t i = 0; *shards && i < ix.shard_count; i++)
        if (json_array_append_new(*shards, json_string(ix.shards[i])) != 0) {
            json_decref(*shards);
            *shards = NULL;
        }
    if (!*shards) {
        llmr_strbuf_puts(msg, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    cache_put(sha, *shards);
done:
    if (parsed)
        llmr_st_index_free(&ix);
    llmr_problems_free(&problems);
    llmr_strbuf_free(&why);
    free(text);
    return status;
}

/* The weights of a safetensors model into `weights` (the index first, when there is
 * one).  Problems: INVALID_ARGUMENT, their files in `fault`, sentences in msg. */
static llmr_status plan_safetensors(const llmr_source_options *o, bool fresh, const llmr_source *s,
                                    json_t *weights, json_t *fault, llmr_strbuf *msg)
{
    llmr_status status = LLMR_OK;
    bool no_config = !has(s, "config.json"), no_tokenizer = !has(s, "tokenizer.json");
    if (no_config && no_tokenizer) {
        llmr_strbuf_puts(msg, "config.json and tokenizer.json are missing: a safetensors model "
                              "needs both");
    } else if (no_config || no_tokenizer) {
        llmr_strbuf_printf(msg, "%s is missing: a safetensors model needs config.json and "
                                "tokenizer.json", no_config ? "config.json" : "tokenizer.json");
    }
    if (no_config)
        add_name(fault, "config.json");
    if (no_tokenizer)
        add_name(fault, "tokenizer.json");
    if (no_config || no_tokenizer)
        status = LLMR_INVALID_ARGUMENT;

    if (has(s, INDEX_NAME)) {
        json_t *shards = NULL;
        llmr_strbuf why = LLMR_STRBUF_INIT;
        llmr_status st = index_shards(o, fresh, s, &shards, &why);
        if (st != LLMR_OK) {
            next_sentence(msg);
            llmr_strbuf_puts(msg, llmr_strbuf_cstr(&why));
            llmr_strbuf_free(&why);
            add_name(fault, INDEX_NAME);
            return st;
        }
        llmr_strbuf_free(&why);
        json_t *missing = json_array();
        add_name(weights, INDEX_NAME);
        size_t i;
        json_t *v;
        json_array_foreach(shards, i, v) {
            const char *name = json_string_value(v);
            add_name(has(s, name) ? weights : missing, name);
        }
        if (json_array_size(missing) > 0) {
            next_sentence(msg);
            llmr_strbuf_puts(msg, INDEX_NAME " names files that are not there: ");
            put_names(msg, missing);
            json_array_extend(fault, missing);
            status = LLMR_INVALID_ARGUMENT;
        }
        json_decref(missing);
        json_decref(shards);
        return status;
    }

    json_t *found = json_array();
    for (size_t i = 0; i < s->count; i++) {
        const char *p = s->files[i].path;
        if (top_level(p) && llmr_name_has_suffix(p, ".safetensors"))
            add_name(found, p);
    }
    size_t n = json_array_size(found);
    if (n == 1) {
        json_array_extend(weights, found);
    } else if (n == 0) {
        next_sentence(msg);
        llmr_strbuf_printf(msg, "no .safetensors file at the top of %s: a safetensors model needs "
                                "its weights (model.safetensors, or shards and " INDEX_NAME ")",
                           where(s));
        add_name(fault, "model.safetensors");
        status = LLMR_INVALID_ARGUMENT;
    } else {
        next_sentence(msg);
        llmr_strbuf_printf(msg, "%zu .safetensors files but no " INDEX_NAME ": which ones form "
                                "the model is ambiguous (", n);
        put_names(msg, found);
        llmr_strbuf_puts(msg, ")");
        json_array_extend(fault, found);
        status = LLMR_INVALID_ARGUMENT;
    }
    json_decref(found);
    return status;
}

/* ---- gguf ---------------------------------------------------------------------------- */

/* "prefix-NNNNN-of-MMMMM.gguf": the prefix's length, the part and the total. */
static bool split_name(const char *name, size_t *prefix_len, unsigned *part, unsigned *total)
{
    static const char tail_example[] = "-00001-of-00003.gguf";
    size_t n = strlen(name), tail = sizeof tail_example - 1;
    if (n <= tail || !llmr_name_has_suffix(name, ".gguf"))
        return false;
    const char *t = name + n - tail;
    if (t[0] != '-' || strncmp(t + 6, "-of-", 4) != 0)
        return false;
    unsigned a = 0, b = 0;
    for (size_t i = 1; i <= 5; i++) {
        if (t[i] < '0' || t[i] > '9' || t[i + 9] < '0' || t[i + 9] > '9')
            return false;
        a = a * 10 + (unsigned)(t[i] - '0');
        b = b * 10 + (unsigned)(t[i + 9] - '0');
    }
    if (a < 1 || a > b)
        return false;
    *prefix_len = n - tail;
    *part = a;
    *total = b;
    return true;
}

/* The parts of the split model that `first` (part 1) begins, in order, into weights;
 * the missing ones into missing. */
static void split_parts(const llmr_source *s, const char *first, size_t prefix_len, unsigned total,
                        json_t *weights, json_t *missing)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (unsigned k = 1; k <= total; k++) {
        llmr_strbuf_reset(&sb);
        llmr_strbuf_append(&sb, first, prefix_len);
        llmr_strbuf_printf(&sb, "-%05u-of-%05u.gguf", k, total);
        const char *name = llmr_strbuf_cstr(&sb);
        add_name(has(s, name) ? weights : missing, name);
    }
    llmr_strbuf_free(&sb);
}

static llmr_status plan_gguf(const llmr_source *s, const char *filename, json_t *weights,
                             json_t *fault, llmr_strbuf *msg)
{
    llmr_status status = LLMR_OK;
    json_t *top = json_array(), *deeper = json_array(), *missing = json_array();
    for (size_t i = 0; i < s->count; i++) {
        const char *p = s->files[i].path;
        if (llmr_name_has_suffix(p, ".gguf"))
            add_name(top_level(p) ? top : deeper, p);
    }
    size_t prefix_len;
    unsigned part, total;
    if (filename) {
        if (!has(s, filename)) {
            llmr_strbuf_puts(msg, "filename ");
            llmr_strbuf_put_display(msg, filename, strlen(filename));
            llmr_strbuf_printf(msg, " is not in %s", where(s));
            if (json_array_size(top)) {
                llmr_strbuf_puts(msg, " (its .gguf files: ");
                put_names(msg, top);
                llmr_strbuf_puts(msg, ")");
            }
            add_name(fault, filename);
            status = LLMR_INVALID_ARGUMENT;
        } else if (!llmr_name_has_suffix(filename, ".gguf")) {
            llmr_strbuf_puts(msg, "filename ");
            llmr_strbuf_put_display(msg, filename, strlen(filename));
            llmr_strbuf_puts(msg, " is not a .gguf file");
            add_name(fault, filename);
            status = LLMR_INVALID_ARGUMENT;
        } else if (!top_level(filename)) {
            llmr_strbuf_puts(msg, "filename ");
            llmr_strbuf_put_display(msg, filename, strlen(filename));
            llmr_strbuf_printf(msg, " is in a subdirectory: nodes load a .gguf model from the top "
                                    "of %s", where(s));
            add_name(fault, filename);
            status = LLMR_INVALID_ARGUMENT;
        } else if (split_name(filename, &prefix_len, &part, &total) && total > 1) {
            if (part != 1) {
                llmr_strbuf_puts(msg, "filename ");
                llmr_strbuf_put_display(msg, filename, strlen(filename));
                llmr_strbuf_printf(msg, " is part %u of %u of a split model: name part 1, which "
                                        "brings the others", part, total);
                add_name(fault, filename);
                status = LLMR_INVALID_ARGUMENT;
            } else {
                split_parts(s, filename, prefix_len, total, weights, missing);
            }
        } else {
            add_name(weights, filename);
        }
    } else {
        size_t n = json_array_size(top);
        const char *first = n ? json_string_value(json_array_get(top, 0)) : NULL;
        bool one_split = false;
        if (n > 1 && split_name(first, &prefix_len, &part, &total) && part == 1) {
            /* Every top-level .gguf a part of the set that the first begins? */
            one_split = n <= total;
            for (size_t i = 1; i < n && one_split; i++) {
                const char *name = json_string_value(json_array_get(top, i));
                size_t pl;
                unsigned pt, tt;
                one_split = split_name(name, &pl, &pt, &tt) && tt == total && pl == prefix_len &&
                            strncmp(name, first, pl) == 0;
            }
        }
        if (n == 1) {
            add_name(weights, first);
        } else if (one_split) {
            split_parts(s, first, prefix_len, total, weights, missing);
        } else if (n == 0) {
            llmr_strbuf_printf(msg, "no .gguf file at the top of %s: a gguf model needs one "
                                    "there, where nodes load it from", where(s));
            if (json_array_size(deeper)) {
                llmr_strbuf_puts(msg, " (in subdirectories: ");
                put_names(msg, deeper);
                llmr_strbuf_puts(msg, ")");
            }
            status = LLMR_INVALID_ARGUMENT;
        } else {
            llmr_strbuf_printf(msg, "%zu .gguf files: say which with filename (", n);
            put_names(msg, top);
            llmr_strbuf_puts(msg, ")");
            json_array_extend(fault, top);
            status = LLMR_INVALID_ARGUMENT;
        }
    }
    if (json_array_size(missing)) {
        llmr_strbuf_puts(msg, "parts of the split model are missing: ");
        put_names(msg, missing);
        json_array_extend(fault, missing);
        status = LLMR_INVALID_ARGUMENT;
    }
    json_decref(top);
    json_decref(deeper);
    json_decref(missing);
    return status;
}

/* ---- the check ----------------------------------------------------------------------- */

static llmr_status plan(const llmr_source_options *o, bool fresh, const llmr_source *s,
                        const char *format, const char *filename, json_t *weights, json_t *fault,
                        llmr_strbuf *msg)
{
    if (filename && !filename[0])
        filename = NULL;
    if (format && strcmp(format, "safetensors") == 0) {
        if (filename) {
            llmr_strbuf_puts(msg, "filename ");
            llmr_strbuf_put_display(msg, filename, strlen(filename));
            llmr_strbuf_puts(msg, " is for gguf models: a safetensors model is the files its "
                                  "index names (or its one .safetensors file)");
            add_name(fault, filename);
            return LLMR_INVALID_ARGUMENT;
        }
        return plan_safetensors(o, fresh, s, weights, fault, msg);
    }
    if (format && strcmp(format, "gguf") == 0)
        return plan_gguf(s, filename, weights, fault, msg);
    llmr_strbuf_puts(msg, "format must be \"safetensors\" or \"gguf\", not ");
    if (format) {
        llmr_strbuf_putc(msg, '"');
        llmr_strbuf_put_display(msg, format, strlen(format));
        llmr_strbuf_putc(msg, '"');
    } else {
        llmr_strbuf_puts(msg, "none");
    }
    return LLMR_INVALID_ARGUMENT;
}

llmr_status llmr_source_check(const llmr_source_options *o, const llmr_source *s, const char *format,
                              const char *filename, json_t **files, llmr_strbuf *err)
{
    if (files)
        *files = NULL;
    json_t *weights = json_array(), *fault = json_array();
    llmr_strbuf msg = LLMR_STRBUF_INIT;
    llmr_status status;
    if (!weights || !fault) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    status = plan(o, true, s, format, filename, weights, fault, &msg);
    if (status == LLMR_OK && llmr_strbuf_failed(&msg))
        status = LLMR_OOM_RAM;
    if (status != LLMR_OK) {
        llmr_strbuf_puts(err, llmr_strbuf_cstr(&msg));
        if (files) {
            *files = fault;
            fault = NULL;
        }
    }
done:
    json_decref(weights);
    json_decref(fault);
    llmr_strbuf_free(&msg);
    return status;
}

/* ---- artifacts ----------------------------------------------------------------------- */

/* One pattern (n bytes) against "org/name". */
static bool pattern_matches(const char *pat, size_t n, const char *repo)
{
    if (n == 1 && pat[0] == '*')
        return true;
    const char *slash = strchr(repo, '/');
    size_t org_len = slash ? (size_t)(slash - repo) : strlen(repo);
    if (n >= 2 && pat[n - 2] == '/' && pat[n - 1] == '*')
        return n - 2 == org_len && strncasecmp(pat, repo, org_len) == 0;
    if (!memchr(pat, '/', n)) /* "org" alone: the whole publisher */
        return n == org_len && strncasecmp(pat, repo, org_len) == 0;
    return n == strlen(repo) && strncasecmp(pat, repo, n) == 0;
}

bool llmr_source_artifact_allowed(const char *repo, const char *allowlist)
{
    if (!repo)
        return false;
    if (!allowlist)
        allowlist = LLMR_SOURCE_DEFAULT_ARTIFACTS;
    for (const char *p = allowlist; *p;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        p = *end ? end + 1 : end;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a && pattern_matches(a, (size_t)(b - a), repo))
            return true;
    }
    return false;
}

/* "metal/model.bin" -> "model.metal.bin"; "metal/weights" -> "weights.metal".  The
 * publisher's converted weights for Apple's Metal (gpt-oss ships them), which keep their
 * own name on a node beside the checkpoint they come from.  NULL for anything else. */
static char *artifact_name(const char *path)
{
    if (strncmp(path, "metal/", 6) != 0 || !path[6] || strchr(path + 6, '/'))
        return NULL;
    const char *base = path + 6;
    const char *dot = strrchr(base, '.');
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (dot && dot != base) {
        llmr_strbuf_append(&sb, base, (size_t)(dot - base));
        llmr_strbuf_puts(&sb, ".metal");
        llmr_strbuf_puts(&sb, dot);
    } else {
        llmr_strbuf_puts(&sb, base);
        llmr_strbuf_puts(&sb, ".metal");
    }
    return llmr_strbuf_take(&sb);
}

/* ---- the manifest -------------------------------------------------------------------- */

static json_t *entry(const char *name, const llmr_source_file *f, const char *path, bool required)
{
    llmr_strbuf url = LLMR_STRBUF_INIT;
    static const char hex[] = "0123456789ABCDEF";
    llmr_strbuf_puts(&url, "/v0/models/");
    for (int part = 0; part < 2; part++) {
        const char *text = part == 0 ? name : path;
        for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
            bool plain = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                         (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' || *c == '_' ||
                         *c == '~' || (part == 1 && *c == '/');
            if (plain) {
                llmr_strbuf_putc(&url, (char)*c);
            } else {
                llmr_strbuf_putc(&url, '%');
                llmr_strbuf_putc(&url, hex[*c >> 4]);
                llmr_strbuf_putc(&url, hex[*c & 15]);
            }
        }
        if (part == 0)
            llmr_strbuf_puts(&url, "/files/");
    }
    json_t *e = json_object();
    if (!e || llmr_strbuf_failed(&url))
        goto fail;
    if (json_object_set_new(e, "path", json_string(path)) != 0 ||
        json_object_set_new(e, "size", json_integer((json_int_t)f->size)) != 0 ||
        (f->sha256 && json_object_set_new(e, "sha256", json_string(f->sha256)) != 0) ||
        (f->sample_sha256 && json_object_set_new(e, "sample_sha256", json_string(f->sample_sha256)) != 0) ||
        json_object_set_new(e, "required", json_boolean(required)) != 0 ||
        json_object_set_new(e, "url", json_string(llmr_strbuf_cstr(&url))) != 0 ||
        (f->origin_url && json_object_set_new(e, "origin_url", json_string(f->origin_url)) != 0) ||
        (strcmp(path, f->path) != 0 &&
         json_object_set_new(e, "source_path", json_string(f->path)) != 0))
        goto fail;
    llmr_strbuf_free(&url);
    return e;
fail:
    json_decref(e);
    llmr_strbuf_free(&url);
    return NULL;
}

static int by_entry_path(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(json_string_value(json_object_get(x, "path")),
                  json_string_value(json_object_get(y, "path")));
}

enum { WANT_REQUIRED = 1, WANT_OPTIONAL = 2 };

static bool want(llmr_strmap *m, const char *path, size_t kind)
{
    return llmr_strmap_put(m, path, kind) != LLMR_STRMAP_NOMEM;
}

static const char *const st_required_if_present[] = {
    "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
    "chat_template.jinja",   "chat_template.json",
};
static const char *const gguf_optional[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
};

json_t *llmr_source_manifest(const llmr_source *s, const char *name, const char *format,
                             const char *filename, const char *artifact_allowlist)
{
    json_t *weights = json_array(), *fault = json_array(), *out = NULL, *files = NULL;
    json_t *source = NULL, **list = NULL;
    llmr_strmap *wanted = llmr_strmap_create(64);
    llmr_strbuf msg = LLMR_STRBUF_INIT;
    char *renamed = NULL;
    const char *what = s && s->repo ? s->repo : s && s->dir ? s->dir : "?";
    if (!weights || !fault || !wanted)
        goto oom;
    if (!s || !name || !llmr_file_name_is_safe(name) || name[0] == '.') {
        llmr_log_warn(COMPONENT, "%s: no manifest: the model name must be one plain file name "
                                 "not starting with '.'", what);
        goto done;
    }
    llmr_status status = plan(NULL, false, s, format, filename, weights, fault, &msg);
    if (status != LLMR_OK) {
        llmr_log_warn(COMPONENT, "%s: no manifest for %s: %s", what, name, llmr_strbuf_cstr(&msg));
        goto done;
    }
    bool st = strcmp(format, "safetensors") == 0;
    size_t i;
    json_t *v;
    json_array_foreach(weights, i, v)
        if (!want(wanted, json_string_value(v), WANT_REQUIRED))
            goto oom;
    if (st) {
        if (!want(wanted, "config.json", WANT_REQUIRED) ||
            !want(wanted, "tokenizer.json", WANT_REQUIRED))
            goto oom;
        for (i = 0; i < sizeof st_required_if_present / sizeof st_required_if_present[0]; i++)
            if (!want(wanted, st_required_if_present[i], WANT_REQUIRED))
                goto oom;
    } else {
        for (i = 0; i < sizeof gguf_optional / sizeof gguf_optional[0]; i++)
            if (!want(wanted, gguf_optional[i], WANT_OPTIONAL))
                goto oom;
    }

    list = calloc(s->count ? s->count : 1, sizeof *list);
    if (!list)
        goto oom;
    size_t n = 0;
    bool artifacts = st && s->kind && strcmp(s->kind, "hf") == 0 &&
                     llmr_source_artifact_allowed(s->repo, artifact_allowlist);
    for (i = 0; i < s->count; i++) {
        const llmr_source_file *f = &s->files[i];
        size_t kind = 0;
        const char *path = f->path;
        free(renamed);
        renamed = NULL;
        if (llmr_strmap_get(wanted, f->path, &kind)) {
            if (kind == 0)
                continue; /* a name reserved for an artifact (never listed itself) */
        } else if (artifacts && (renamed = artifact_name(f->path)) != NULL) {
            size_t other;
            if (has(s, renamed) || llmr_strmap_get(wanted, renamed, &other)) {
                llmr_log_warn(COMPONENT, "%s: artifact %s left out: its name on nodes, %s, is "
                                         "taken", what, f->path, renamed);
                continue;
            }
            if (!want(wanted, renamed, 0))
                goto oom;
            path = renamed;
            kind = WANT_OPTIONAL;
        } else {
            continue;
        }
        list[n] = entry(name, f, path, kind == WANT_REQUIRED);
        if (!list[n])
            goto oom;
        n++;
    }
    qsort(list, n, sizeof *list, by_entry_path);
    files = json_array();
    source = json_object();
    out = json_object();
    if (!files || !source || !out)
        goto oom;
    for (i = 0; i < n; i++) {
        int rc = json_array_append_new(files, list[i]);
        list[i] = NULL;
        if (rc != 0)
            goto oom;
    }
    bool hf = s->kind && strcmp(s->kind, "hf") == 0;
    if (json_object_set_new(source, "kind", json_string(hf ? "hf" : "local")) != 0 ||
        (hf && json_object_set_new(source, "repo", json_string(s->repo)) != 0) ||
        (hf && json_object_set_new(source, "revision", json_string(s->revision)) != 0) ||
        (!hf && s->dir && json_object_set_new(source, "dir", json_string(s->dir)) != 0))
        goto oom;
    if (json_object_set_new(out, "name", json_string(name)) != 0 ||
        json_object_set_new(out, "format", json_string(format)) != 0 ||
        json_object_set(out, "files", files) != 0 || json_object_set(out, "source", source) != 0)
        goto oom;
    goto done;
oom:
    llmr_log_error(COMPONENT, "%s: no manifest: out of memory", what);
    json_decref(out);
    out = NULL;
done:
    if (list)
        for (size_t k = 0; s && k < s->count; k++)
            json_decref(list[k]);
    free(list);
    free(renamed);
    json_decref(files);
    json_decref(source);
    json_decref(weights);
    json_decref(fault);
    llmr_strmap_free(wanted);
    llmr_strbuf_free(&msg);
    return out;
}
