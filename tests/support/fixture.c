/* Test fixtures: see fixture.h. */
#define _GNU_SOURCE
#include "fixture.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fs_util.h"
#include "models/synth.h"
#include "storage/model_storage.h"

static char *dirs[256];
static size_t n_dirs;

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_dirs(void)
{
    for (size_t i = 0; i < n_dirs; i++) {
        nftw(dirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(dirs[i]);
    }
}

const char *fx_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/llmr-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpl) || n_dirs == sizeof dirs / sizeof dirs[0]) {
        perror("mkdtemp");
        abort();
    }
    if (n_dirs == 0)
        atexit(remove_dirs);
    dirs[n_dirs] = strdup(tmpl);
    return dirs[n_dirs++];
}

const char *fx_path(const char *dir, const char *name)
{
    static char buf[8][4096];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", dir, name);
    return out;
}

void fx_write(const char *dir, const char *name, const void *data, size_t len)
{
    FILE *f = fopen(fx_path(dir, name), "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(name);
        abort();
    }
}

void fx_write_text(const char *dir, const char *name, const char *text)
{
    fx_write(dir, name, text, strlen(text));
}

void fx_write_json(const char *dir, const char *name, const json_t *value)
{
    char *text = json_dumps(value, JSON_INDENT(2));
    fx_write_text(dir, name, text);
    free(text);
}

char *fx_read_fixture(const char *relative, size_t *len)
{
    const char *root = getenv("LLMR_TEST_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root ? root : "tests/fixtures", relative);
    char *data;
    size_t n;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_read_file(path, 64u << 20, &data, &n, &err) != LLMR_OK) {
        fprintf(stderr, "fixture %s: %s\n", path, llmr_strbuf_cstr(&err));
        abort();
    }
    llmr_strbuf_free(&err);
    if (len)
        *len = n;
    return data;
}

const char *fx_shared_dir(void)
{
    const char *d = getenv("LLMR_SHARED_DIR");
    struct stat st;
    return d && stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? d : NULL;
}

void fx_write_st(const char *dir, const char *name, const llmr_st_write_tensor *t, size_t n)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_st_write_file(fx_path(dir, name), t, n, NULL, NULL, NULL, &err) != LLMR_OK) {
        fprintf(stderr, "fx_write_st %s: %s\n", name, llmr_strbuf_cstr(&err));
        abort();
    }
    llmr_strbuf_free(&err);
}

void fx_write_st_raw(const char *dir, const char *name, const char *header, uint64_t data_len)
{
    size_t n = strlen(header);
    FILE *f = fopen(fx_path(dir, name), "wb");
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)n >> (8 * i));
    if (!f || fwrite(prefix, 1, 8, f) != 8 || fwrite(header, 1, n, f) != n ||
        ftruncate(fileno(f), (off_t)(8 + n + data_len)) != 0 || fclose(f) != 0) {
        perror(name);
        abort();
    }
}

typedef struct placed {
    llmr_st_write_tensor tensor;
    json_int_t begin;
} placed;

static int by_offset(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

size_t fx_tensors_of_header(const json_t *header, llmr_st_write_tensor **out)
{
    size_t n = json_object_size(header);
    placed *p = calloc(n ? n : 1, sizeof *p);
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)header, key, v) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        llmr_st_write_tensor *t = &p[k].tensor;
        t->name = key;
        if (!llmr_dtype_parse(json_string_value(json_object_get(v, "dtype")), &t->dtype))
            abort();
        json_t *shape = json_object_get(v, "shape");
        t->rank = (uint32_t)json_array_size(shape);
        for (uint32_t d = 0; d < t->rank; d++)
            t->shape[d] = (uint64_t)json_integer_value(json_array_get(shape, d));
        p[k].begin = json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 0));
        k++;
    }
    qsort(p, k, sizeof *p, by_offset);
    llmr_st_write_tensor *t = calloc(k ? k : 1, sizeof *t);
    for (size_t i = 0; i < k; i++)
        t[i] = p[i].tensor;
    free(p);
    *out = t;
    return k;
}

void fx_gpt_oss_tiny(const char *dir)
{
    fx_gpt_oss_tiny_sharded(dir, 0);
}

void fx_gpt_oss_tiny_sharded(const char *dir, uint64_t max_shard_bytes)
{
    const char *tok = fx_tmpdir();
    fx_write_text(tok, "tokenizer.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}");
    llmr_synth_options o = {.preset = "gpt-oss-tiny", .out_dir = dir, .tokenizer_from = tok,
                            .max_shard_bytes = max_shard_bytes};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_synth_snapshot(&o, &err) != LLMR_OK) {
        fprintf(stderr, "fx_gpt_oss_tiny: %s\n", llmr_strbuf_cstr(&err));
        abort();
    }
    llmr_strbuf_free(&err);
}

llmr_status fx_open(const char *dir, const char *format, llmr_problems *p)
{
    llmr_model_options o;
    llmr_model_options_default(&o);
    o.map_weights = true;
    if (strcmp(format, "auto") != 0 && !llmr_model_format_parse(format, &o.format))
        abort();
    llmr_problems_init(p);
    llmr_model *m = NULL;
    llmr_status st = llmr_model_open(dir, &o, &m, p);
    if ((st == LLMR_OK) != (m != NULL))
        llmr_test_fail(__FILE__, __LINE__, "llmr_model_open: status and model disagree");
    if (st != LLMR_OK)
        for (size_t i = 0; i < p->count; i++)
            fprintf(stderr, "    problem: %s: %s\n", p->items[i].file ? p->items[i].file : "-",
                    p->items[i].message);
    llmr_model_close(m);
    return st;
}
