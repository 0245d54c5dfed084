/* ModelStorage tests: each problem `llmr inspect` must name, on a snapshot the test
 * generates, plus the format decision and GGUF file selection. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fs_util.h"
#include "fixture.h"
#include "gguf_builder.h"
#include "storage/model_storage.h"
#include "storage/st_index.h"

#define INDEX LLMR_ST_INDEX_FILE
#define SHARD1 "model-00001-of-00001.safetensors"

/* Does some kept problem name `file` (exactly) and mention `text`? */
static bool has_problem(const llmr_problems *p, const char *file, const char *text)
{
    for (size_t i = 0; i < p->count; i++) {
        bool file_ok = file ? p->items[i].file && strcmp(p->items[i].file, file) == 0
                            : p->items[i].file == NULL;
        if (file_ok && strstr(p->items[i].message, text))
            return true;
    }
    return false;
}

#define CHECK_PROBLEM(p, file, text)                                                             \
    do {                                                                                         \
        if (!has_problem(p, file, text))                                                         \
            llmr_test_fail(__FILE__, __LINE__, "no problem for %s mentioning \"%s\"",            \
                           (file) ? (file) : "(no file)", text);                                 \
    } while (0)

static llmr_model *open_ok(const char *dir, const char *format)
{
    llmr_model_options o;
    llmr_model_options_default(&o);
    o.map_weights = true;
    if (strcmp(format, "auto") != 0)
        llmr_model_format_parse(format, &o.format);
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_model *m = NULL;
    llmr_status st = llmr_model_open(dir, &o, &m, &p);
    CHECK_EQ_INT(st, LLMR_OK);
    for (size_t i = 0; i < p.count; i++)
        fprintf(stderr, "    unexpected problem: %s: %s\n", p.items[i].file ? p.items[i].file : "-",
                p.items[i].message);
    llmr_problems_free(&p);
    return m;
}

/* Rewrites one shard of a snapshot from its own header, with `drop` left out and
 * `change` (when its name matches) replaced; the index is left as it was. */
static void rewrite_shard(const char *dir, const char *shard, const char *drop,
                          const llmr_st_write_tensor *change)
{
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_file f;
    if (llmr_st_file_open(fx_path(dir, shard), shard, &f, &p) != LLMR_OK)
        abort();
    llmr_st_write_tensor *t = calloc(f.header.count, sizeof *t);
    size_t n = 0;
    for (size_t i = 0; i < f.header.count; i++) {
        const llmr_st_tensor *src = &f.header.tensors[i];
        if (drop && strcmp(src->name, drop) == 0)
            continue;
        if (change && strcmp(src->name, change->name) == 0) {
            t[n++] = *change;
            continue;
        }
        t[n].name = src->name;
        t[n].dtype = src->dtype;
        t[n].rank = src->rank;
        memcpy(t[n].shape, src->shape, sizeof src->shape);
        n++;
    }
    unlink(fx_path(dir, shard));
    fx_write_st(dir, shard, t, n);
    free(t);
    llmr_st_file_close(&f);
    llmr_problems_free(&p);
}

static void index_remove(const char *dir, const char *tensor)
{
    json_error_t e;
    json_t *ix = json_load_file(fx_path(dir, INDEX), 0, &e);
    json_object_del(json_object_get(ix, "weight_map"), tensor);
    fx_write_json(dir, INDEX, ix);
    json_decref(ix);
}

TEST(tiny_snapshot_opens_with_a_full_descriptor)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    llmr_model *m = open_ok(dir, "auto");
    if (!m)
        return;
    CHECK_EQ_INT(m->format, LLMR_FORMAT_SAFETENSORS);
    CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_GPT_OSS);
    CHECK_EQ_STR(m->architecture, "GptOssForCausalLM");
    CHECK_EQ_STR(m->primary_file, INDEX);
    CHECK_EQ_INT(m->tensor_count, 2 * 19 + 3);
    uint64_t sum = 0;
    bool saw_shard = false, saw_tokenizer = false;
    for (size_t i = 0; i < m->file_count; i++) {
        struct stat st;
        CHECK(stat(fx_path(dir, m->files[i].name), &st) == 0);
        CHECK_EQ_INT(m->files[i].size, st.st_size);
        sum += m->files[i].size;
        saw_shard |= strcmp(m->files[i].name, SHARD1) == 0 && strcmp(m->files[i].role, "weights") == 0;
        saw_tokenizer |= strcmp(m->files[i].role, "tokenizer") == 0;
    }
    CHECK(saw_shard && saw_tokenizer);
    CHECK_EQ_INT(m->total_bytes, sum);
    CHECK_EQ_INT(json_integer_value(json_object_get(m->engine_config, "hidden_size")), 64);
    const llmr_model_tensor *t = llmr_model_tensor_find(m, "model.layers.1.self_attn.sinks");
    CHECK(t && m->mapped && llmr_model_tensor_data(m, t) != NULL);

    json_t *d = llmr_model_descriptor_json(m);
    CHECK_EQ_STR(json_string_value(json_object_get(d, "format")), "safetensors");
    CHECK_EQ_STR(json_string_value(json_object_get(d, "runtime")), "gpt_oss");
    CHECK_EQ_INT(json_integer_value(json_object_get(d, "total_bytes")), sum);
    CHECK_EQ_INT(json_array_size(json_object_get(d, "files")), m->file_count);
    CHECK_EQ_INT(json_array_size(json_object_get(d, "warnings")), 0);
    json_decref(d);
    llmr_model_close(m);
}

TEST(missing_config_and_tokenizer_are_both_named)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    unlink(fx_path(dir, "config.json"));
    unlink(fx_path(dir, "tokenizer.json"));
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "safetensors", &p), LLMR_NOT_FOUND);
    CHECK_PROBLEM(&p, "config.json", "missing");
    CHECK_PROBLEM(&p, "tokenizer.json", "missing");
    llmr_problems_free(&p);
}

TEST(a_shard_the_index_names_must_exist)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny_sharded(dir, 1 << 20);
    const char *gone = "model-00002-of-00003.safetensors";
    CHECK_EQ_INT(unlink(fx_path(dir, gone)), 0);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, gone, "missing (model.safetensors.index.json names it as a shard)");
    llmr_problems_free(&p);
}

TEST(a_broken_link_is_an_interrupted_download)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny_sharded(dir, 1 << 20);
    const char *shard = "model-00003-of-00003.safetensors";
    unlink(fx_path(dir, shard));
    CHECK_EQ_INT(symlink("../blobs/0123456789abcdef", fx_path(dir, shard)), 0);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, shard, "symbolic link whose target does not exist");
    llmr_problems_free(&p);
}

TEST(links_to_real_files_are_followed)
{
    const char *blobs = fx_tmpdir(), *dir = fx_tmpdir();
    fx_gpt_oss_tiny(blobs);
    const char *names[] = {"config.json", "tokenizer.json", INDEX, SHARD1};
    for (size_t i = 0; i < 4; i++)
        CHECK_EQ_INT(symlink(fx_path(blobs, names[i]), fx_path(dir, names[i])), 0);
    llmr_model *m = open_ok(dir, "auto");
    CHECK(m && m->total_bytes > 50000000);
    llmr_model_close(m);
}

TEST(several_safetensors_without_an_index_are_ambiguous)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny_sharded(dir, 1 << 20);
    unlink(fx_path(dir, INDEX));
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_INVALID_ARGUMENT);
    CHECK_PROBLEM(&p, INDEX, "missing, and the directory holds 3 .safetensors files");
    CHECK_PROBLEM(&p, INDEX, "model-00001-of-00003.safetensors, model-00002-of-00003.safetensors");
    llmr_problems_free(&p);
}

TEST(one_safetensors_without_an_index_is_the_model)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    unlink(fx_path(dir, INDEX));
    CHECK_EQ_INT(rename(fx_path(dir, SHARD1), fx_path(dir, "model.safetensors")), 0);
    llmr_model *m = open_ok(dir, "auto");
    if (m)
        CHECK_EQ_STR(m->primary_file, "model.safetensors");
    llmr_model_close(m);
}

TEST(a_shard_whose_header_lies_is_named_with_the_tensor)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    /* Same bytes, but the header claims half the shape for one tensor. */
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_file f;
    CHECK_EQ_INT(llmr_st_file_open(fx_path(dir, SHARD1), SHARD1, &f, &p), LLMR_OK);
    char *text = malloc(f.data_offset);
    FILE *in = fopen(fx_path(dir, SHARD1), "rb");
    CHECK(fread(text, 1, f.data_offset, in) == f.data_offset);
    fclose(in);
    json_t *h = json_loadb(text + 8, f.data_offset - 8, 0, NULL);
    json_object_set_new(json_object_get(h, "model.norm.weight"), "shape", json_pack("[i]", 32));
    char *lie = json_dumps(h, JSON_COMPACT);
    uint64_t data = f.file_size - f.data_offset;
    llmr_st_file_close(&f);
    fx_write_st_raw(dir, SHARD1, lie, data);
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, SHARD1, "tensor model.norm.weight: header says BF16 [32], which is 64 bytes");
    free(lie);
    free(text);
    json_decref(h);
    llmr_problems_free(&p);
}

TEST(a_truncated_shard_says_bytes_are_missing)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    struct stat st;
    stat(fx_path(dir, SHARD1), &st);
    CHECK_EQ_INT(truncate(fx_path(dir, SHARD1), st.st_size - 1000), 0);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, SHARD1, "truncated");
    CHECK_PROBLEM(&p, SHARD1, "1000 bytes missing");
    llmr_problems_free(&p);
}

TEST(a_tensor_the_config_needs_must_be_there)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    const char *name = "model.layers.1.mlp.router.bias";
    rewrite_shard(dir, SHARD1, name, NULL);
    index_remove(dir, name);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, INDEX, "tensor model.layers.1.mlp.router.bias is required by config.json "
                             "(gpt_oss, 2 layers) but no shard holds it");
    llmr_problems_free(&p);
}

TEST(wrong_shapes_and_dtypes_are_named_with_what_the_config_implies)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    llmr_st_write_tensor router = {"model.layers.0.mlp.router.weight", LLMR_DTYPE_BF16, 2, {5, 64}};
    rewrite_shard(dir, SHARD1, NULL, &router);
    llmr_st_write_tensor sinks = {"model.layers.1.self_attn.sinks", LLMR_DTYPE_F32, 1, {4}};
    rewrite_shard(dir, SHARD1, NULL, &sinks);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, SHARD1, "tensor model.layers.0.mlp.router.weight has shape [5, 64], but "
                              "config.json (gpt_oss, 2 layers) implies [4, 64]");
    CHECK_PROBLEM(&p, SHARD1, "tensor model.layers.1.self_attn.sinks is F32, expected BF16");
    llmr_problems_free(&p);
}

TEST(an_unknown_dtype_is_named)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    unlink(fx_path(dir, INDEX));
    unlink(fx_path(dir, SHARD1));
    fx_write_st_raw(dir, "model.safetensors",
                    "{\"model.embed_tokens.weight\":{\"dtype\":\"I4\",\"shape\":[2],\"data_offsets\":[0,1]}}",
                    1);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_UNSUPPORTED);
    CHECK_PROBLEM(&p, "model.safetensors", "tensor model.embed_tokens.weight: unknown dtype \"I4\"");
    llmr_problems_free(&p);
}

TEST(index_and_shards_must_agree)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny_sharded(dir, 1 << 20);
    json_error_t e;
    json_t *ix = json_load_file(fx_path(dir, INDEX), 0, &e);
    json_t *map = json_object_get(ix, "weight_map");
    /* Claim the final norm lives in shard 1 (it is in shard 2), forget the embeddings,
     * and list a tensor nobody holds. */
    json_object_set_new(map, "model.norm.weight", json_string("model-00001-of-00003.safetensors"));
    json_object_del(map, "model.embed_tokens.weight");
    json_object_set_new(map, "ghost.weight", json_string("model-00002-of-00003.safetensors"));
    fx_write_json(dir, INDEX, ix);
    json_decref(ix);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, INDEX, "lists tensor model.norm.weight in model-00001-of-00003.safetensors, "
                             "but it is in model-00002-of-00003.safetensors");
    CHECK_PROBLEM(&p, INDEX, "lists tensor ghost.weight in model-00002-of-00003.safetensors, but "
                             "no shard holds it");
    CHECK_PROBLEM(&p, "model-00001-of-00003.safetensors",
                  "tensor model.embed_tokens.weight is here, but model.safetensors.index.json "
                  "does not list it");
    llmr_problems_free(&p);
}

TEST(the_index_cannot_reach_outside_the_directory)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    fx_write_text(dir, INDEX, "{\"weight_map\": {\"model.embed_tokens.weight\": "
                              "\"../../../etc/shadow.safetensors\"}}");
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, INDEX, "not a plain file name inside the model directory");
    llmr_problems_free(&p);
}

TEST(a_tensor_in_two_shards_is_ambiguous)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny_sharded(dir, 1 << 20);
    llmr_st_write_tensor extra[] = {{"model.norm.weight", LLMR_DTYPE_BF16, 1, {64}}};
    unlink(fx_path(dir, "model-00001-of-00003.safetensors"));
    /* Shard 1 held only the embeddings; give it the final norm too. */
    llmr_st_write_tensor both[] = {{"model.embed_tokens.weight", LLMR_DTYPE_BF16, 2, {201088, 64}},
                                   extra[0]};
    fx_write_st(dir, "model-00001-of-00003.safetensors", both, 2);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "tensor model.norm.weight is also in"));
    llmr_problems_free(&p);
}

TEST(config_problems_name_the_field)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    json_error_t e;
    json_t *cfg = json_load_file(fx_path(dir, "config.json"), 0, &e);
    json_object_set_new(cfg, "hidden_size", json_string("64"));
    json_object_set_new(cfg, "num_key_value_heads", json_integer(3));
    json_object_del(cfg, "vocab_size");
    fx_write_json(dir, "config.json", cfg);
    json_decref(cfg);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, "config.json", "hidden_size must be a whole number from 32 to 65536, got \"64\"");
    CHECK_PROBLEM(&p, "config.json", "vocab_size is missing (gpt_oss needs it)");
    llmr_problems_free(&p);

    fx_write_text(dir, "config.json", "{\"model_type\": \"gpt_oss\",\n  \"hidden_size\": }");
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, "config.json", "not valid JSON: line 2");
    llmr_problems_free(&p);

    fx_write_text(dir, "config.json", "{\"hidden_size\": 64}");
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_PROBLEM(&p, "config.json", "no model_type string and no architectures list");
    llmr_problems_free(&p);
}

TEST(a_model_no_engine_runs_opens_with_the_reason)
{
    const char *dir = fx_tmpdir();
    fx_write_text(dir, "config.json", "{\"model_type\": \"llama\", \"architectures\": "
                                      "[\"LlamaForCausalLM\"], \"hidden_size\": 8}");
    fx_write_text(dir, "tokenizer.json", "{}");
    llmr_st_write_tensor t[] = {{"model.embed_tokens.weight", LLMR_DTYPE_BF16, 2, {16, 8}}};
    fx_write_st(dir, "model.safetensors", t, 1);
    llmr_model *m = open_ok(dir, "safetensors");
    if (!m)
        return;
    CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_NONE);
    CHECK_CONTAINS(m->unsupported_reason, "model_type \"llama\" (LlamaForCausalLM)");
    json_t *d = llmr_model_descriptor_json(m);
    CHECK(json_is_null(json_object_get(d, "runtime")));
    CHECK(json_is_string(json_object_get(d, "unsupported_reason")));
    json_decref(d);
    llmr_model_close(m);
}

TEST(dequantized_gpt_oss_is_unsupported_not_corrupt)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    json_error_t e;
    json_t *cfg = json_load_file(fx_path(dir, "config.json"), 0, &e);
    json_object_del(cfg, "quantization_config");
    fx_write_json(dir, "config.json", cfg);
    json_decref(cfg);
    llmr_model *m = open_ok(dir, "auto");
    if (m) {
        CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_NONE);
        CHECK_CONTAINS(m->unsupported_reason, "no quantization_config");
    }
    llmr_model_close(m);
}

TEST(unused_tensors_are_a_warning)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    unlink(fx_path(dir, INDEX));
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_file f;
    llmr_st_file_open(fx_path(dir, SHARD1), SHARD1, &f, &p);
    llmr_st_write_tensor *t = calloc(f.header.count + 1, sizeof *t);
    for (size_t i = 0; i < f.header.count; i++) {
        t[i].name = f.header.tensors[i].name;
        t[i].dtype = f.header.tensors[i].dtype;
        t[i].rank = f.header.tensors[i].rank;
        memcpy(t[i].shape, f.header.tensors[i].shape, sizeof t[i].shape);
    }
    t[f.header.count] = (llmr_st_write_tensor){"extra.bias", LLMR_DTYPE_F32, 1, {3}};
    unlink(fx_path(dir, SHARD1));
    fx_write_st(dir, "model.safetensors", t, f.header.count + 1);
    llmr_st_file_close(&f);
    free(t);
    llmr_problems_free(&p);
    llmr_model *m = open_ok(dir, "auto");
    if (m) {
        CHECK_EQ_INT(json_array_size(m->warnings), 1);
        CHECK_CONTAINS(json_string_value(json_array_get(m->warnings, 0)),
                       "1 tensors are not used by gpt_oss: extra.bias");
    }
    llmr_model_close(m);
}

TEST(both_formats_need_a_stated_format)
{
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    gb_write_simple(dir, "model-q4.gguf", "gpt-oss");
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_INVALID_ARGUMENT);
    CHECK_PROBLEM(&p, NULL, "both .safetensors (1: model-00001-of-00001.safetensors) and .gguf (1: model-q4.gguf) files");
    CHECK_PROBLEM(&p, NULL, "--format safetensors or --format gguf");
    llmr_problems_free(&p);
    llmr_model *m = open_ok(dir, "safetensors");
    CHECK(m && m->runtime == LLMR_RUNTIME_GPT_OSS);
    llmr_model_close(m);
    m = open_ok(dir, "gguf");
    if (m) {
        CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_LLAMA_CPP);
        CHECK_EQ_STR(m->architecture, "gpt-oss");
        CHECK_EQ_STR(m->primary_file, "model-q4.gguf");
        CHECK_EQ_INT(m->file_count, 1);
        json_t *d = llmr_model_descriptor_json(m);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(d, "config"),
                                                        "gpt-oss.context_length")),
                     4096);
        json_decref(d);
    }
    llmr_model_close(m);
}

TEST(a_stated_format_must_be_present)
{
    const char *dir = fx_tmpdir();
    gb_write_simple(dir, "m.gguf", "llama");
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "safetensors", &p), LLMR_NOT_FOUND);
    CHECK_PROBLEM(&p, NULL, "register it as format gguf");
    llmr_problems_free(&p);
    const char *empty = fx_tmpdir();
    CHECK_EQ_INT(fx_open(empty, "auto", &p), LLMR_NOT_FOUND);
    CHECK_PROBLEM(&p, NULL, "no model weights");
    llmr_problems_free(&p);
    CHECK_EQ_INT(fx_open(fx_path(empty, "nope"), "auto", &p), LLMR_NOT_FOUND);
    llmr_problems_free(&p);
    CHECK_EQ_INT(fx_open(fx_path(dir, "m.gguf"), "auto", &p), LLMR_INVALID_ARGUMENT);
    CHECK_PROBLEM(&p, NULL, "not a directory");
    llmr_problems_free(&p);
}

TEST(several_gguf_files_need_a_choice_unless_they_are_one_split_model)
{
    const char *dir = fx_tmpdir();
    gb_write_simple(dir, "m-Q4_K_M.gguf", "llama");
    gb_write_simple(dir, "m-Q8_0.gguf", "llama");
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_INVALID_ARGUMENT);
    CHECK_PROBLEM(&p, NULL, "2 .gguf files (m-Q4_K_M.gguf, m-Q8_0.gguf); name the one to use");
    llmr_problems_free(&p);

    llmr_model_options o;
    llmr_model_options_default(&o);
    o.gguf_file = "m-Q8_0.gguf";
    llmr_problems_init(&p);
    llmr_model *m = NULL;
    CHECK_EQ_INT(llmr_model_open(dir, &o, &m, &p), LLMR_OK);
    CHECK(m && strcmp(m->primary_file, "m-Q8_0.gguf") == 0);
    llmr_model_close(m);
    o.gguf_file = "../m-Q8_0.gguf";
    CHECK_EQ_INT(llmr_model_open(dir, &o, &m, &p), LLMR_NOT_FOUND);
    CHECK_PROBLEM(&p, NULL, "not a .gguf file of this directory");
    llmr_problems_free(&p);

    const char *split = fx_tmpdir();
    gb_write_simple(split, "big-00001-of-00003.gguf", "llama");
    gb_write_simple(split, "big-00002-of-00003.gguf", "llama");
    CHECK_EQ_INT(fx_open(split, "auto", &p), LLMR_NOT_FOUND);
    CHECK_PROBLEM(&p, NULL, "big-00003-of-00003.gguf is missing: it is part 3 of a split model");
    llmr_problems_free(&p);
    gb_write_simple(split, "big-00003-of-00003.gguf", "llama");
    m = open_ok(split, "gguf");
    if (m) {
        CHECK_EQ_STR(m->primary_file, "big-00001-of-00003.gguf");
        CHECK_EQ_INT(m->file_count, 3);
        CHECK_EQ_INT(m->gguf_count, 3);
    }
    llmr_model_close(m);
}

TEST(hostile_names_are_reported_escaped)
{
    const char *dir = fx_tmpdir();
    fx_write_text(dir, "config.json", "{\"model_type\": \"gpt_oss\"}");
    fx_write_text(dir, "tokenizer.json", "{}");
    fx_write_st_raw(dir, "bad\xff\n.safetensors", "{}", 0);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_INVALID_ARGUMENT);
    CHECK_PROBLEM(&p, NULL, "file name \"bad\\xff\\n.safetensors\" is not valid UTF-8");
    llmr_problems_free(&p);
}

/* The directory as text: each entry's name, size and modification time, sorted ("."
 * included; not "..", the temporary directories' parent, which other tests running at
 * the same time change). */
static char *dir_state(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (strcmp(names[i]->d_name, "..") != 0 && lstat(fx_path(dir, names[i]->d_name), &st) == 0)
            llmr_strbuf_printf(&sb, "%s %lld %lld.%09ld\n", names[i]->d_name, (long long)st.st_size,
                               (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        free(names[i]);
    }
    free(names);
    return llmr_strbuf_take(&sb);
}

TEST(checking_changes_nothing_on_disk)
{
    /* No metadata file of llmr's own is read or written: a check that fails and one
     * that succeeds (mapping the weights) leave the directory exactly as it was. */
    const char *dir = fx_tmpdir();
    fx_gpt_oss_tiny(dir);
    char *before = dir_state(dir);
    llmr_model *m = open_ok(dir, "auto");
    llmr_model_close(m);
    char *after = dir_state(dir);
    CHECK_EQ_STR(after, before);
    free(after);
    free(before);
    unlink(fx_path(dir, "tokenizer.json"));
    before = dir_state(dir);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_NOT_FOUND);
    llmr_problems_free(&p);
    after = dir_state(dir);
    CHECK_EQ_STR(after, before);
    CHECK(access(fx_path(dir, "tokenizer.json"), F_OK) != 0);
    free(after);
    free(before);
}

int main(void)
{
    RUN(tiny_snapshot_opens_with_a_full_descriptor);
    RUN(missing_config_and_tokenizer_are_both_named);
    RUN(a_shard_the_index_names_must_exist);
    RUN(a_broken_link_is_an_interrupted_download);
    RUN(links_to_real_files_are_followed);
    RUN(several_safetensors_without_an_index_are_ambiguous);
    RUN(one_safetensors_without_an_index_is_the_model);
    RUN(a_shard_whose_header_lies_is_named_with_the_tensor);
    RUN(a_truncated_shard_says_bytes_are_missing);
    RUN(a_tensor_the_config_needs_must_be_there);
    RUN(wrong_shapes_and_dtypes_are_named_with_what_the_config_implies);
    RUN(an_unknown_dtype_is_named);
    RUN(index_and_shards_must_agree);
    RUN(the_index_cannot_reach_outside_the_directory);
    RUN(a_tensor_in_two_shards_is_ambiguous);
    RUN(config_problems_name_the_field);
    RUN(a_model_no_engine_runs_opens_with_the_reason);
    RUN(dequantized_gpt_oss_is_unsupported_not_corrupt);
    RUN(unused_tensors_are_a_warning);
    RUN(both_formats_need_a_stated_format);
    RUN(a_stated_format_must_be_present);
    RUN(several_gguf_files_need_a_choice_unless_they_are_one_split_model);
    RUN(hostile_names_are_reported_escaped);
    RUN(checking_changes_nothing_on_disk);
    return llmr_test_finish();
}
