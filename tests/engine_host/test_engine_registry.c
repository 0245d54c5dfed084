/* Tests of the EngineRegistry: the selection rule (GPU over CPU, score, priority,
 * version, id), the sentences that say why nothing fits, and scanning plugin
 * directories with good, bad and duplicate plugins. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "common/fs_util.h"
#include "engine_host/engine_registry.h"
#include "fixture.h"

/* A manifest from its parts; lists are JSON array text ("[\"sm_80\"]"). */
static llmr_plugin_manifest *make(const char *id, const char *version, const char *runtimes,
                                  const char *formats, const char *architectures,
                                  const char *targets, int priority)
{
    char text[2048], dir[256];
    snprintf(text, sizeof text,
             "{\"id\":\"%s\",\"version\":\"%s\",\"abi_version\":\"1.0\",\"runtimes\":%s,"
             "\"formats\":%s,\"architectures\":%s,\"gpu_targets\":%s,\"library\":\"lib%s.so\","
             "\"priority\":%d}",
             id, version, runtimes, formats, architectures, targets, id, priority);
    snprintf(dir, sizeof dir, "/plugins/%s", id);
    llmr_plugin_manifest *m = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_plugin_manifest_parse(text, strlen(text), dir, &m, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "manifest of %s: %s", id, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return m;
}

static void add(llmr_engine_registry *r, llmr_plugin_manifest *m)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (!m || llmr_engine_registry_add(r, m, &err) != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "add: %s", llmr_strbuf_cstr(&err));
        llmr_plugin_manifest_free(m);
    }
    llmr_strbuf_free(&err);
}

#define GPT_OSS "[\"gpt_oss\"]"
#define ST "[\"safetensors\"]"
#define GPT_ARCH "[\"GptOssForCausalLM\"]"

static llmr_plugin_manifest *cuda(const char *id, int priority)
{
    return make(id, "0.1.0", GPT_OSS, ST, GPT_ARCH, "[\"sm_90a\",\"sm_80\"]", priority);
}

static llmr_plugin_manifest *cpu(const char *id, int priority)
{
    return make(id, "1.0.0", GPT_OSS, ST, "[\"*\"]", "[\"cpu\"]", priority);
}

static char why[8192];

/* The id of the selected plugin ("" when none) with the score and why_not kept. */
static const char *pick(const llmr_engine_registry *r, const char *format, const char *runtime,
                        const char *arch, int cc_major, int cc_minor, int *score)
{
    llmr_engine_query q = {format, runtime, arch, cc_major, cc_minor};
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    const llmr_plugin_manifest *m = llmr_engine_registry_select(r, &q, score, &sb);
    snprintf(why, sizeof why, "%s", llmr_strbuf_cstr(&sb));
    if (m)
        CHECK_EQ_INT(sb.len, 0);
    else
        CHECK(sb.len > 0 && *score == 0);
    llmr_strbuf_free(&sb);
    return m ? m->id : "";
}

TEST(nothing_installed_says_so)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    int score = -1;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 0, &score), "");
    CHECK_EQ_INT(score, 0);
    CHECK_CONTAINS(why, "no engine plugins are installed");
    CHECK_CONTAINS(why, "a safetensors model of runtime gpt_oss and architecture "
                        "GptOssForCausalLM on a GPU of compute capability 9.0");
    CHECK_EQ_INT(llmr_engine_registry_count(r), 0);
    CHECK(llmr_engine_registry_get(r, 0) == NULL);
    CHECK(llmr_engine_registry_find(r, "x") == NULL);
    llmr_engine_registry_free(r);
}

TEST(a_gpu_target_beats_the_cpu_whatever_the_priority)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, cpu("gpt-oss-cpu", 1000));
    add(r, cuda("gpt-oss-cuda", -1000));
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 0, &score),
                 "gpt-oss-cuda");
    CHECK_EQ_INT(score, 4);
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 8, 6, &score),
                 "gpt-oss-cuda");
    CHECK_EQ_INT(score, 3);
    /* no GPU, or one the cubins do not run on: the CPU engine */
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", -1, 0, &score),
                 "gpt-oss-cpu");
    CHECK_EQ_INT(score, 1);
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 7, 5, &score),
                 "gpt-oss-cpu");
    CHECK_EQ_INT(score, 1);
    CHECK_EQ_INT(llmr_engine_registry_count(r), 2);
    CHECK_EQ_STR(llmr_engine_registry_get(r, 1)->id, "gpt-oss-cuda");
    CHECK_EQ_STR(llmr_engine_registry_find(r, "gpt-oss-cpu")->version, "1.0.0");
    llmr_engine_registry_free(r);
}

TEST(a_better_target_beats_priority_then_priority_decides)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, make("ptx", "9.0.0", GPT_OSS, ST, GPT_ARCH, "[\"compute_80\"]", 1000));
    add(r, make("arch", "0.1.0", GPT_OSS, ST, GPT_ARCH, "[\"sm_90a\"]", 0));
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 0, &score), "arch");
    CHECK_EQ_INT(score, 4);
    /* on 9.1 the arch-specific cubin cannot run; PTX can */
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 1, &score), "ptx");
    CHECK_EQ_INT(score, 2);
    llmr_engine_registry_free(r);

    r = llmr_engine_registry_create();
    add(r, cuda("low", 1));
    add(r, cuda("high", 5));
    add(r, cuda("mid", 3));
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", NULL, 9, 0, &score), "high");
    llmr_engine_registry_free(r);
}

TEST(version_then_id_break_ties)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, make("b-engine", "0.10.0", GPT_OSS, ST, GPT_ARCH, "[\"sm_80\"]", 0));
    add(r, make("a-engine", "0.2.0", GPT_OSS, ST, GPT_ARCH, "[\"sm_80\"]", 0));
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", NULL, 8, 0, &score), "b-engine");
    llmr_engine_registry_free(r);

    r = llmr_engine_registry_create();
    add(r, make("final", "1.0.0", GPT_OSS, ST, GPT_ARCH, "[\"sm_80\"]", 0));
    add(r, make("candidate", "1.0.0-rc.1", GPT_OSS, ST, GPT_ARCH, "[\"sm_80\"]", 0));
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", NULL, 8, 0, &score), "final");
    llmr_engine_registry_free(r);

    /* everything equal: the smaller id, whatever the order of adding */
    for (int order = 0; order < 2; order++) {
        r = llmr_engine_registry_create();
        add(r, make(order ? "b-engine" : "a-engine", "1.0.0", GPT_OSS, ST, GPT_ARCH,
                    "[\"sm_80\"]", 0));
        add(r, make(order ? "a-engine" : "b-engine", "1.0.0", GPT_OSS, ST, GPT_ARCH,
                    "[\"sm_80\"]", 0));
        CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", NULL, 8, 0, &score), "a-engine");
        llmr_engine_registry_free(r);
    }
}

TEST(architecture_star_matches_any)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, make("specific", "1.0.0", "[\"llama_cpp\"]", "[\"gguf\"]", "[\"llama\",\"qwen2\"]",
                "[\"cpu\"]", 100));
    add(r, make("any", "1.0.0", "[\"llama_cpp\"]", "[\"gguf\"]", "[\"*\"]", "[\"cpu\"]", 0));
    int score;
    CHECK_EQ_STR(pick(r, "gguf", "llama_cpp", "qwen2", -1, 0, &score), "specific");
    CHECK_EQ_STR(pick(r, "gguf", "llama_cpp", "mamba", -1, 0, &score), "any");
    /* no architecture given: not checked */
    CHECK_EQ_STR(pick(r, "gguf", "llama_cpp", NULL, -1, 0, &score), "specific");
    llmr_engine_registry_free(r);
}

TEST(why_not_names_each_plugins_reason)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, make("llama-cpu", "1.0.0", "[\"llama_cpp\"]", "[\"gguf\",\"safetensors\"]", "[\"*\"]",
                "[\"cpu\"]", 0));
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 0, &score), "");
    CHECK_CONTAINS(why, "no engine plugin fits a safetensors model of runtime gpt_oss and "
                        "architecture GptOssForCausalLM on a GPU of compute capability 9.0: ");
    CHECK_CONTAINS(why, "llama-cpu 1.0.0 runs llama_cpp, not gpt_oss");

    add(r, cuda("gpt-oss-cuda", 0));
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", -1, 0, &score), "");
    CHECK_CONTAINS(why, "on a machine with no GPU: llama-cpu 1.0.0 runs llama_cpp, not gpt_oss; "
                        "gpt-oss-cuda 0.1.0 needs sm_90a or sm_80 and this machine has no GPU");
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 7, 5, &score), "");
    CHECK_CONTAINS(why, "gpt-oss-cuda 0.1.0 needs sm_90a or sm_80 and the GPU is compute "
                        "capability 7.5");
    CHECK_EQ_STR(pick(r, "gguf", "gpt_oss", "GptOssForCausalLM", 9, 0, &score), "");
    CHECK_CONTAINS(why, "gpt-oss-cuda 0.1.0 reads safetensors, not gguf");
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "Other\nArch", 9, 0, &score), "");
    CHECK_CONTAINS(why, "gpt-oss-cuda 0.1.0 does not list architecture Other\\nArch");
    /* a model without a runtime: nothing matches, and the sentence says why */
    CHECK_EQ_STR(pick(r, "safetensors", NULL, "GptOssForCausalLM", 9, 0, &score), "");
    CHECK_CONTAINS(why, "the model has no runtime");
    /* a NULL why_not is fine */
    llmr_engine_query q = {"safetensors", "nope", NULL, 9, 0};
    CHECK(llmr_engine_registry_select(r, &q, NULL, NULL) == NULL);
    llmr_engine_registry_free(r);
}

TEST(why_not_names_at_most_eight)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    for (int i = 0; i < 11; i++) {
        char id[16];
        snprintf(id, sizeof id, "engine-%02d", i);
        add(r, make(id, "1.0.0", "[\"other\"]", ST, "[\"*\"]", "[\"cpu\"]", 0));
    }
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", NULL, -1, 0, &score), "");
    CHECK_CONTAINS(why, "engine-07 1.0.0 runs other, not gpt_oss; and 3 more");
    CHECK(strstr(why, "engine-08") == NULL);
    llmr_engine_registry_free(r);
}

TEST(a_second_plugin_of_an_id_is_refused)
{
    llmr_engine_registry *r = llmr_engine_registry_create();
    add(r, cuda("gpt-oss-cuda", 0));
    llmr_plugin_manifest *again = make("gpt-oss-cuda", "0.2.0", GPT_OSS, ST, GPT_ARCH,
                                       "[\"cpu\"]", 0);
    free(again->dir);
    again->dir = strdup("/other/gpt-oss-cuda");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_registry_add(r, again, &err), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "plugin id \"gpt-oss-cuda\" of /other/gpt-oss-cuda is "
                                           "already provided by /plugins/gpt-oss-cuda");
    CHECK_EQ_INT(llmr_engine_registry_count(r), 1);
    CHECK_EQ_STR(llmr_engine_registry_find(r, "gpt-oss-cuda")->version, "0.1.0");
    llmr_plugin_manifest_free(again);
    llmr_strbuf_free(&err);
    llmr_engine_registry_free(r);
}

/* ---- scanning ------------------------------------------------------------------ */

static void plugin(const char *root, const char *name, const char *id, const char *targets)
{
    char *dir = llmr_path_join(root, name);
    mkdir(dir, 0755);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"id\":\"%s\",\"version\":\"0.1.0\",\"abi_version\":\"1.0\","
             "\"runtimes\":[\"gpt_oss\"],\"formats\":[\"safetensors\"],\"architectures\":[\"*\"],"
             "\"gpu_targets\":%s,\"library\":\"libengine.so\"}",
             id, targets);
    fx_write_text(dir, "manifest.json", text);
    fx_write_text(dir, "libengine.so", "not really a library");
    free(dir);
}

static const llmr_problem *problem_about(const llmr_problems *p, const char *file_suffix)
{
    for (size_t i = 0; i < p->count; i++)
        if (p->items[i].file && llmr_name_has_suffix(p->items[i].file, file_suffix))
            return &p->items[i];
    return NULL;
}

TEST(scanning_keeps_good_plugins_and_reports_the_rest)
{
    const char *root = fx_tmpdir();
    const char *root2 = fx_tmpdir();
    plugin(root, "a-good", "gpt-oss-cuda", "[\"sm_90a\"]");
    plugin(root, "b-bad", "broken", "[\"sm_9x\"]");
    plugin(root, "c-dup", "gpt-oss-cuda", "[\"cpu\"]");
    plugin(root, "e-abi", "future", "[\"cpu\"]");
    fx_write_text(fx_path(root, "e-abi"), "manifest.json",
                  "{\"id\":\"future\",\"abi_version\":\"2.0\"}");
    plugin(root, ".hidden", "hidden", "[\"cpu\"]");
    mkdir(fx_path(root, "d-not-a-plugin"), 0755);
    fx_write_text(root, "README", "plugins live in subdirectories");
    plugin(root2, "cpu", "gpt-oss-cpu", "[\"cpu\"]");
    const char *missing = fx_path(root, "missing");
    char missing_copy[4096];
    snprintf(missing_copy, sizeof missing_copy, "%s", missing);

    llmr_engine_registry *r = llmr_engine_registry_create();
    llmr_problems p;
    llmr_problems_init(&p);
    const char *dirs[] = {root, missing_copy, root2};
    CHECK_EQ_INT(llmr_engine_registry_scan(r, dirs, 3, &p), 2);
    CHECK_EQ_INT(llmr_engine_registry_count(r), 2);
    CHECK_EQ_STR(llmr_engine_registry_get(r, 0)->id, "gpt-oss-cuda");
    CHECK(llmr_name_has_suffix(llmr_engine_registry_get(r, 0)->dir, "/a-good"));
    CHECK(llmr_engine_registry_get(r, 0)->has_lib_identity);
    CHECK_EQ_STR(llmr_engine_registry_get(r, 1)->id, "gpt-oss-cpu");
    CHECK(llmr_engine_registry_find(r, "hidden") == NULL);
    CHECK_EQ_INT(p.count, 4);

    const llmr_problem *bad = problem_about(&p, "/b-bad/manifest.json");
    CHECK(bad != NULL);
    if (bad) {
        CHECK_EQ_INT(bad->code, LLMR_LOAD_FAILED);
        CHECK_CONTAINS(bad->message, "\"gpu_targets\"[0]: \"sm_9x\" is not a GPU target");
    }
    const llmr_problem *dup = problem_about(&p, "/c-dup/manifest.json");
    CHECK(dup != NULL);
    if (dup) {
        CHECK_EQ_INT(dup->code, LLMR_LOAD_FAILED);
        CHECK_CONTAINS(dup->message, "plugin id \"gpt-oss-cuda\" of ");
        CHECK_CONTAINS(dup->message, "/c-dup is already provided by ");
        CHECK_CONTAINS(dup->message, "/a-good");
    }
    const llmr_problem *abi = problem_about(&p, "/e-abi/manifest.json");
    CHECK(abi != NULL);
    if (abi) {
        CHECK_EQ_INT(abi->code, LLMR_ABI_MISMATCH);
        CHECK_CONTAINS(abi->message, "built for engine ABI 2.0; this llmr speaks 1.x");
    }
    const llmr_problem *gone = problem_about(&p, "/missing");
    CHECK(gone != NULL);
    if (gone) {
        CHECK_EQ_INT(gone->code, LLMR_NOT_FOUND);
        CHECK_CONTAINS(gone->message, "does not exist");
    }

    /* the scanned registry selects as any other */
    int score;
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 9, 0, &score),
                 "gpt-oss-cuda");
    CHECK_EQ_INT(score, 4);
    CHECK_EQ_STR(pick(r, "safetensors", "gpt_oss", "GptOssForCausalLM", 8, 0, &score),
                 "gpt-oss-cpu");

    /* scanning again adds nothing new: every id is taken */
    llmr_problems_free(&p);
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_engine_registry_scan(r, dirs, 1, &p), 0);
    CHECK(llmr_problems_mention(&p, "already provided by"));
    llmr_problems_free(&p);
    llmr_engine_registry_free(r);
}

TEST(scanning_an_empty_directory_finds_nothing_quietly)
{
    const char *root = fx_tmpdir();
    llmr_engine_registry *r = llmr_engine_registry_create();
    llmr_problems p;
    llmr_problems_init(&p);
    const char *dirs[] = {root};
    CHECK_EQ_INT(llmr_engine_registry_scan(r, dirs, 1, &p), 0);
    CHECK_EQ_INT(p.count, 0);
    fx_write_text(root, "file", "x");
    const char *not_dir[] = {fx_path(root, "file")};
    CHECK_EQ_INT(llmr_engine_registry_scan(r, not_dir, 1, &p), 0);
    CHECK_EQ_INT(p.count, 1);
    CHECK(llmr_problems_mention(&p, "is not a directory"));
    llmr_problems_free(&p);
    llmr_engine_registry_free(r);
}

int main(void)
{
    RUN(nothing_installed_says_so);
    RUN(a_gpu_target_beats_the_cpu_whatever_the_priority);
    RUN(a_better_target_beats_priority_then_priority_decides);
    RUN(version_then_id_break_ties);
    RUN(architecture_star_matches_any);
    RUN(why_not_names_each_plugins_reason);
    RUN(why_not_names_at_most_eight);
    RUN(a_second_plugin_of_an_id_is_refused);
    RUN(scanning_keeps_good_plugins_and_reports_the_rest);
    RUN(scanning_an_empty_directory_finds_nothing_quietly);
    return llmr_test_finish();
}
