/* Tests of engine plugin manifests: every field rule (the bad field named in the
 * error, with what is allowed), both failure codes, unknown-field warnings, loading
 * from a plugin directory with the library's identity, and the GPU target and
 * semantic-version helpers the rules rest on. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "common/fs_util.h"
#include "engine_host/plugin_manifest.h"
#include "fixture.h"
#include "llmr/engine.h"

static const char GOOD[] =
    "{\n"
    "  \"id\": \"gpt-oss-cuda\",\n"
    "  \"version\": \"0.1.0\",\n"
    "  \"abi_version\": \"1.0\",\n"
    "  \"runtimes\": [\"gpt_oss\"],\n"
    "  \"formats\": [\"safetensors\"],\n"
    "  \"architectures\": [\"GptOssForCausalLM\"],\n"
    "  \"gpu_targets\": [\"sm_90a\", \"sm_80\", \"compute_80\"],\n"
    "  \"library\": \"libllmr_engine_gpt_oss.so\",\n"
    "  \"priority\": 0,\n"
    "  \"description\": \"gpt-oss on NVIDIA GPUs\"\n"
    "}\n";

static char why[16384];

/* Parses text without a directory; keeps the error text in `why`. */
static llmr_status parse_text(const char *text, size_t len)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = (llmr_plugin_manifest *)1;
    llmr_status st = llmr_plugin_manifest_parse(text, len, NULL, &m, &err);
    snprintf(why, sizeof why, "%s", llmr_strbuf_cstr(&err));
    if (st == LLMR_OK) {
        CHECK(m != NULL);
        CHECK_EQ_INT(err.len, 0);
        llmr_plugin_manifest_free(m);
    } else {
        CHECK(m == NULL);
        CHECK(err.len > 0);
    }
    llmr_strbuf_free(&err);
    return st;
}

/* GOOD with one field replaced (value NULL: removed), parsed. */
static llmr_status parse_with(const char *field, json_t *value)
{
    json_t *root = json_loads(GOOD, 0, NULL);
    if (value)
        json_object_set_new(root, field, value);
    else
        json_object_del(root, field);
    char *text = json_dumps(root, 0);
    llmr_status st = parse_text(text, strlen(text));
    free(text);
    json_decref(root);
    return st;
}

static json_t *strings(int n, const char *const *v)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}
#define STRINGS(...) \
    strings((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
            (const char *[]){__VA_ARGS__})

TEST(a_good_manifest_gives_every_field)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = NULL;
    CHECK_EQ_INT(llmr_plugin_manifest_parse(GOOD, strlen(GOOD), "/plugins/gpt-oss", &m, &err),
                 LLMR_OK);
    CHECK_EQ_STR(llmr_strbuf_cstr(&err), "");
    if (!m)
        return;
    CHECK_EQ_STR(m->id, "gpt-oss-cuda");
    CHECK_EQ_STR(m->version, "0.1.0");
    CHECK_EQ_INT(m->abi_major, 1);
    CHECK_EQ_INT(m->abi_minor, 0);
    CHECK_EQ_INT(m->runtime_count, 1);
    CHECK_EQ_STR(m->runtimes[0], "gpt_oss");
    CHECK_EQ_INT(m->format_count, 1);
    CHECK_EQ_STR(m->formats[0], "safetensors");
    CHECK_EQ_INT(m->architecture_count, 1);
    CHECK_EQ_STR(m->architectures[0], "GptOssForCausalLM");
    CHECK_EQ_INT(m->gpu_target_count, 3);
    CHECK_EQ_INT(m->gpu_targets[0].kind, LLMR_GPU_TARGET_SM_ARCH);
    CHECK_EQ_INT(m->gpu_targets[0].major, 9);
    CHECK_EQ_INT(m->gpu_targets[1].kind, LLMR_GPU_TARGET_SM);
    CHECK_EQ_INT(m->gpu_targets[1].major, 8);
    CHECK_EQ_INT(m->gpu_targets[2].kind, LLMR_GPU_TARGET_PTX);
    CHECK_EQ_STR(m->library, "libllmr_engine_gpt_oss.so");
    CHECK_EQ_STR(m->dir, "/plugins/gpt-oss");
    CHECK_EQ_STR(m->library_path, "/plugins/gpt-oss/libllmr_engine_gpt_oss.so");
    CHECK_EQ_INT(m->priority, 0);
    CHECK_EQ_STR(m->description, "gpt-oss on NVIDIA GPUs");
    CHECK_EQ_INT(m->warning_count, 0);
    CHECK(!m->has_lib_identity);
    /* parsed from text, its library's identity is unknown: never "the same build" */
    CHECK(!llmr_plugin_manifest_same_build(m, m));

    json_t *j = llmr_plugin_manifest_json(m);
    CHECK(j != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(j, "id")), "gpt-oss-cuda");
    CHECK_EQ_STR(json_string_value(json_object_get(j, "abi_version")), "1.0");
    CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(j, "gpu_targets"), 0)),
                 "sm_90a");
    CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(j, "gpu_targets"), 2)),
                 "compute_80");
    CHECK_EQ_STR(json_string_value(json_object_get(j, "library_path")),
                 "/plugins/gpt-oss/libllmr_engine_gpt_oss.so");
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "priority")), 0);
    CHECK(json_object_get(j, "warnings") == NULL);
    json_decref(j);
    llmr_plugin_manifest_free(m);
    llmr_strbuf_free(&err);
}

TEST(optional_fields_take_their_defaults)
{
    json_t *root = json_loads(GOOD, 0, NULL);
    json_object_del(root, "priority");
    json_object_del(root, "description");
    char *text = json_dumps(root, 0);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = NULL;
    CHECK_EQ_INT(llmr_plugin_manifest_parse(text, strlen(text), NULL, &m, &err), LLMR_OK);
    if (m) {
        CHECK_EQ_INT(m->priority, 0);
        CHECK_EQ_STR(m->description, "");
        CHECK(m->dir == NULL && m->library_path == NULL);
        json_t *j = llmr_plugin_manifest_json(m);
        CHECK(j && json_object_get(j, "dir") == NULL);
        json_decref(j);
    }
    llmr_plugin_manifest_free(m);
    llmr_strbuf_free(&err);
    free(text);
    json_decref(root);
    CHECK_EQ_INT(parse_with("priority", json_integer(-1000)), LLMR_OK);
    CHECK_EQ_INT(parse_with("priority", json_integer(1000)), LLMR_OK);
}

TEST(every_required_field_missing_is_named)
{
    const char *required[] = {"id",      "version",     "abi_version", "runtimes",
                              "formats", "architectures", "gpu_targets", "library"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        CHECK_EQ_INT(parse_with(required[i], NULL), LLMR_LOAD_FAILED);
        char expect[64];
        snprintf(expect, sizeof expect, "manifest.json: \"%s\" is required", required[i]);
        CHECK_CONTAINS(why, expect);
    }
    CHECK_EQ_INT(parse_with("abi_version", NULL), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"MAJOR.MINOR\"");
}

TEST(bad_scalar_fields_are_named_with_what_is_allowed)
{
    struct {
        const char *field;
        json_t *value;
        const char *expect;
    } cases[] = {
        {"id", json_string("Gpt"), "\"id\": \"Gpt\" is not a plugin id (1 to 64 characters"},
        {"id", json_string("-x"), "\"id\": \"-x\" is not a plugin id"},
        {"id", json_string(""), "\"id\": \"\" is not a plugin id"},
        {"id", json_string("a/b"), "\"id\": \"a/b\" is not a plugin id"},
        {"id", json_integer(5), "\"id\": 5 is not a plugin id"},
        {"id", json_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
         "is not a plugin id"},
        {"version", json_string("1.0"), "\"version\": \"1.0\" is not a semantic version (MAJOR"},
        {"version", json_string("01.0.0"), "\"version\": \"01.0.0\" is not a semantic version"},
        {"version", json_string("1.0.0-"), "\"version\": \"1.0.0-\" is not a semantic version"},
        {"version", json_string("1.0.0-01"), "\"version\": \"1.0.0-01\" is not"},
        {"version", json_string("1.0.0+build"), "\"version\": \"1.0.0+build\" is not"},
        {"version", json_string("v1.0.0"), "\"version\": \"v1.0.0\" is not"},
        {"abi_version", json_string("1"), "\"abi_version\": \"1\" is not an ABI version (\"MAJOR.MINOR\""},
        {"abi_version", json_string("1.0.0"), "\"abi_version\": \"1.0.0\" is not an ABI version"},
        {"abi_version", json_string("01.0"), "\"abi_version\": \"01.0\" is not an ABI version"},
        {"abi_version", json_real(1.0), "\"abi_version\": 1 is not an ABI version"},
        {"library", json_string("../evil.so"),
         "\"library\": \"../evil.so\" is not a plain file name (a file in the plugin directory, with no"},
        {"library", json_string("sub/lib.so"), "\"library\": \"sub/lib.so\" is not a plain file name"},
        {"library", json_string(".."), "\"library\": \"..\" is not a plain file name"},
        {"library", json_string(""), "\"library\": \"\" is not a plain file name"},
        {"library", json_string("lib\x01.so"), "\"library\": \"lib\\x01.so\" is not a plain"},
        {"priority", json_integer(1001),
         "\"priority\": 1001 is not a priority (an integer from -1000 to 1000)"},
        {"priority", json_integer(-1001), "\"priority\": -1001 is not a priority"},
        {"priority", json_real(1.5), "\"priority\": 1.5 is not a priority"},
        {"priority", json_string("5"), "\"priority\": \"5\" is not a priority"},
        {"description", json_integer(5),
         "\"description\": 5 is not a description (a UTF-8 string of at most 512 bytes)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(parse_with(cases[i].field, cases[i].value), LLMR_LOAD_FAILED);
        CHECK_CONTAINS(why, cases[i].expect);
        CHECK(strncmp(why, "manifest.json: ", 15) == 0);
    }
    char big[600];
    memset(big, 'd', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ_INT(parse_with("description", json_string(big)), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"description\" is 599 bytes, more than the limit of 512");
    big[512] = '\0';
    CHECK_EQ_INT(parse_with("description", json_string(big)), LLMR_OK);
    CHECK_EQ_INT(parse_with("description", json_string("caf\xc3\xa9 \xe2\x9c\x93")), LLMR_OK);
    /* the longest id and a version with a prerelease pass */
    CHECK_EQ_INT(parse_with("id", json_string("a234567890123456789012345678901234567890123456789"
                                              "012345678901234")),
                 LLMR_OK);
    CHECK_EQ_INT(parse_with("id", json_string("9.lib_x-y")), LLMR_OK);
    CHECK_EQ_INT(parse_with("version", json_string("10.20.30-rc.1.x-y")), LLMR_OK);
}

TEST(bad_array_fields_name_the_index)
{
    CHECK_EQ_INT(parse_with("gpu_targets", STRINGS("sm_90a", "sm_9x")), LLMR_LOAD_FAILED);
    CHECK_EQ_STR(why, "manifest.json: \"gpu_targets\"[1]: \"sm_9x\" is not a GPU target "
                      "(cpu, directml, sm_XY, sm_XYa, compute_XY)");
    CHECK_EQ_INT(parse_with("gpu_targets", STRINGS("sm_80", "cpu", "sm_80")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"gpu_targets\"[2]: \"sm_80\" is listed twice (also at [0])");
    CHECK_EQ_INT(parse_with("gpu_targets", json_array()), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"gpu_targets\" is empty (at least one GPU target: cpu, directml");
    CHECK_EQ_INT(parse_with("gpu_targets", json_string("sm_80")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"gpu_targets\": \"sm_80\" is not an array (a non-empty array of GPU "
                        "targets");

    CHECK_EQ_INT(parse_with("runtimes", STRINGS("gpt_oss", "Llama")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"runtimes\"[1]: \"Llama\" is not a runtime name (1 to 64 characters of "
                        "a-z, 0-9, '_')");
    CHECK_EQ_INT(parse_with("runtimes", STRINGS("gpt_oss", "gpt_oss")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"runtimes\"[1]: \"gpt_oss\" is listed twice (also at [0])");
    CHECK_EQ_INT(parse_with("runtimes", json_array()), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"runtimes\" is empty");
    json_t *nested = json_array();
    json_array_append_new(nested, json_integer(3));
    CHECK_EQ_INT(parse_with("runtimes", nested), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"runtimes\"[0]: 3 is not a runtime name");

    CHECK_EQ_INT(parse_with("formats", STRINGS("safetensors", "onnx")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"formats\"[1]: \"onnx\" is not a model format (safetensors, gguf, "
                        "directml)");
    CHECK_EQ_INT(parse_with("formats", STRINGS("gguf", "gguf")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"formats\"[1]: \"gguf\" is listed twice");
    CHECK_EQ_INT(parse_with("formats", STRINGS("gguf", "directml", "safetensors")), LLMR_OK);

    CHECK_EQ_INT(parse_with("architectures", STRINGS("*", "")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"architectures\"[1]: \"\" is not an architecture name (1 to 128 "
                        "printable ASCII characters, or \"*\" for any)");
    CHECK_EQ_INT(parse_with("architectures", STRINGS("Tab\tArch")), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"architectures\"[0]: \"Tab\\tArch\" is not an architecture name");
    char arch[130];
    memset(arch, 'A', 129);
    arch[129] = '\0';
    CHECK_EQ_INT(parse_with("architectures", STRINGS(arch)), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"architectures\"[0]: \"AAAA");
    arch[128] = '\0';
    CHECK_EQ_INT(parse_with("architectures", STRINGS(arch, "*", "Llama Arch (v2)")), LLMR_OK);

    json_t *many = json_array();
    for (int i = 0; i < LLMR_PLUGIN_LIST_MAX + 1; i++) {
        char name[16];
        snprintf(name, sizeof name, "rt_%d", i);
        json_array_append_new(many, json_string(name));
    }
    CHECK_EQ_INT(parse_with("runtimes", many), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"runtimes\" has 257 entries, more than the limit of 256");

    /* many bad entries: the first 16 reasons, then a count */
    json_t *bad = json_array();
    for (int i = 0; i < 20; i++)
        json_array_append_new(bad, json_integer(i));
    CHECK_EQ_INT(parse_with("gpu_targets", bad), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"gpu_targets\"[15]: 15 is not a GPU target");
    CHECK(strstr(why, "\"gpu_targets\"[16]") == NULL);
    CHECK_CONTAINS(why, "; and 4 more problems");
}

TEST(every_broken_rule_is_reported_at_once)
{
    const char *text = "{\"id\": \"Bad\", \"version\": \"1\", \"abi_version\": \"1.0\","
                       " \"runtimes\": [\"x\"], \"formats\": [\"gguf\"], \"architectures\": [\"*\"],"
                       " \"gpu_targets\": [\"cpu\", \"gpu\"], \"library\": \"../x\"}";
    CHECK_EQ_INT(parse_text(text, strlen(text)), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "manifest.json: \"id\": \"Bad\"");
    CHECK_CONTAINS(why, "; manifest.json: \"version\": \"1\"");
    CHECK_CONTAINS(why, "\"gpu_targets\"[1]: \"gpu\"");
    CHECK_CONTAINS(why, "\"library\": \"../x\"");
}

TEST(hostile_strings_are_escaped_and_cut)
{
    char id[200];
    id[0] = '\x1b';
    memset(id + 1, 'a', 150);
    id[151] = '\0';
    CHECK_EQ_INT(parse_with("id", json_string(id)), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"id\": \"\\x1baaaaaaaaa");
    CHECK_CONTAINS(why, "aaa...\" is not a plugin id");
    CHECK(strlen(why) < 300);
    for (const char *p = why; *p; p++)
        CHECK((unsigned char)*p >= 0x20);
    /* a long array entry is cut too */
    CHECK_EQ_INT(parse_with("gpu_targets", STRINGS(id)), LLMR_LOAD_FAILED);
    CHECK(strstr(why, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") == NULL);
}

TEST(abi_major_mismatch_is_its_own_code)
{
    CHECK_EQ_INT(parse_with("abi_version", json_string("2.0")), LLMR_ABI_MISMATCH);
    CHECK_CONTAINS(why, "\"abi_version\": the plugin was built for engine ABI 2.0; this llmr "
                        "speaks 1.x");
    CHECK_EQ_INT(parse_with("abi_version", json_string("0.9")), LLMR_ABI_MISMATCH);
    CHECK_CONTAINS(why, "built for engine ABI 0.9; this llmr speaks 1.x");
    /* a newer minor is accepted and kept */
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = NULL;
    const char *newer = "{\"id\":\"x\",\"version\":\"1.0.0\",\"abi_version\":\"1.7\","
                        "\"runtimes\":[\"r\"],\"formats\":[\"gguf\"],\"architectures\":[\"*\"],"
                        "\"gpu_targets\":[\"cpu\"],\"library\":\"x.so\"}";
    CHECK_EQ_INT(llmr_plugin_manifest_parse(newer, strlen(newer), NULL, &m, &err), LLMR_OK);
    CHECK(m && m->abi_major == LLMR_ENGINE_ABI_MAJOR && m->abi_minor == 7);
    llmr_plugin_manifest_free(m);
    llmr_strbuf_free(&err);
    /* another major wins over other faults: the rest may follow another schema */
    const char *v2 = "{\"id\":\"X\",\"abi_version\":\"2.3\",\"engines\":[]}";
    CHECK_EQ_INT(parse_text(v2, strlen(v2)), LLMR_ABI_MISMATCH);
    CHECK_CONTAINS(why, "ABI 2.3");
    CHECK(strstr(why, "\"id\"") == NULL);
}

TEST(text_that_is_not_a_json_object_fails_to_load)
{
    CHECK_EQ_INT(parse_text("{\"id\": ", 7), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "manifest.json: not valid JSON: line 1");
    CHECK_EQ_INT(parse_text("[1]", 3), LLMR_LOAD_FAILED);
    CHECK_EQ_STR(why, "manifest.json: not a JSON object");
    CHECK_EQ_INT(parse_text("", 0), LLMR_LOAD_FAILED);
    const char *dup = "{\"id\":\"a\",\"id\":\"b\"}";
    CHECK_EQ_INT(parse_text(dup, strlen(dup)), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "not valid JSON");
    CHECK_CONTAINS(why, "duplicate");
    /* a NUL inside the text ends nothing early: it is refused */
    char withnul[] = "{\"id\":\"a\0b\"}";
    CHECK_EQ_INT(parse_text(withnul, sizeof withnul - 1), LLMR_LOAD_FAILED);
    CHECK_EQ_INT(parse_text("{\"id\":\"a\\u0000b\"}", 17), LLMR_LOAD_FAILED);
}

TEST(size_limit_is_64_kib)
{
    size_t n = LLMR_PLUGIN_MANIFEST_MAX_BYTES;
    char *text = malloc(n + 2);
    size_t good = strlen(GOOD);
    memcpy(text, GOOD, good);
    memset(text + good, ' ', n + 1 - good);
    text[n + 1] = '\0';
    CHECK_EQ_INT(parse_text(text, n), LLMR_OK);
    CHECK_EQ_INT(parse_text(text, n + 1), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "manifest.json: 65537 bytes, more than the limit of 65536");
    free(text);
}

TEST(unknown_fields_are_warnings)
{
    json_t *root = json_loads(GOOD, 0, NULL);
    json_object_set_new(root, "homepage", json_string("x"));
    json_object_set_new(root, "future\x01key", json_object());
    char *text = json_dumps(root, 0);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = NULL;
    CHECK_EQ_INT(llmr_plugin_manifest_parse(text, strlen(text), NULL, &m, &err), LLMR_OK);
    if (m) {
        CHECK_EQ_INT(m->warning_count, 2);
        CHECK_EQ_STR(m->warnings[0], "unknown field \"homepage\" ignored");
        CHECK_EQ_STR(m->warnings[1], "unknown field \"future\\x01key\" ignored");
        json_t *j = llmr_plugin_manifest_json(m);
        CHECK_EQ_INT(json_array_size(json_object_get(j, "warnings")), 2);
        json_decref(j);
    }
    llmr_plugin_manifest_free(m);
    free(text);

    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "extra%d", i);
        json_object_set_new(root, key, json_true());
    }
    text = json_dumps(root, 0);
    m = NULL;
    CHECK_EQ_INT(llmr_plugin_manifest_parse(text, strlen(text), NULL, &m, &err), LLMR_OK);
    if (m) {
        CHECK_EQ_INT(m->warning_count, 17);
        CHECK_EQ_STR(m->warnings[16], "and 6 more unknown fields ignored");
    }
    llmr_plugin_manifest_free(m);
    free(text);
    json_decref(root);
    llmr_strbuf_free(&err);
}

/* ---- loading from a plugin directory ----------------------------------------- */

static const char *plugin_dir(const char *root, const char *name, const char *manifest,
                              const char *library, const char *lib_bytes)
{
    static char dirs[4][4096];
    static int next;
    char *dir = dirs[next++ % 4];
    snprintf(dir, sizeof dirs[0], "%s/%s", root, name);
    mkdir(dir, 0755);
    if (manifest)
        fx_write_text(dir, "manifest.json", manifest);
    if (library)
        fx_write_text(dir, library, lib_bytes);
    return dir;
}

static llmr_status load(const char *dir, llmr_plugin_manifest **m)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_plugin_manifest_load(dir, m, &err);
    snprintf(why, sizeof why, "%s", llmr_strbuf_cstr(&err));
    CHECK_EQ_INT(st == LLMR_OK, *m != NULL);
    llmr_strbuf_free(&err);
    return st;
}

TEST(loading_checks_the_library_and_records_its_identity)
{
    const char *root = fx_tmpdir();
    const char *dir = plugin_dir(root, "gpt-oss", GOOD, "libllmr_engine_gpt_oss.so", "ELF-ish");
    llmr_plugin_manifest *a = NULL, *b = NULL;
    CHECK_EQ_INT(load(dir, &a), LLMR_OK);
    CHECK_EQ_INT(load(dir, &b), LLMR_OK);
    if (!a || !b)
        goto out;
    CHECK(a->dir[0] == '/');
    CHECK(llmr_name_has_suffix(a->dir, "/gpt-oss"));
    CHECK(llmr_name_has_suffix(a->library_path, "/gpt-oss/libllmr_engine_gpt_oss.so"));
    CHECK(a->has_lib_identity);
    CHECK_EQ_INT(a->lib_size, 7);
    CHECK(a->lib_ino != 0);
    struct stat st;
    CHECK(stat(a->library_path, &st) == 0 && (uint64_t)st.st_ino == a->lib_ino);
    CHECK(llmr_plugin_manifest_same_build(a, b));

    /* a rebuilt library (another size) is another build */
    fx_write_text(dir, "libllmr_engine_gpt_oss.so", "ELF-ish, rebuilt");
    llmr_plugin_manifest_free(b);
    b = NULL;
    CHECK_EQ_INT(load(dir, &b), LLMR_OK);
    CHECK(b && !llmr_plugin_manifest_same_build(a, b));
    CHECK(b && b->lib_size == 16);

    /* the same library under a new version is another build too */
    llmr_plugin_manifest_free(b);
    b = NULL;
    json_t *root_json = json_loads(GOOD, 0, NULL);
    json_object_set_new(root_json, "version", json_string("0.2.0"));
    char *text = json_dumps(root_json, 0);
    fx_write_text(dir, "manifest.json", text);
    free(text);
    json_decref(root_json);
    llmr_plugin_manifest_free(a);
    a = NULL;
    CHECK_EQ_INT(load(dir, &a), LLMR_OK);
    CHECK_EQ_INT(load(dir, &b), LLMR_OK);
    if (a && b) {
        CHECK(llmr_plugin_manifest_same_build(a, b));
        free(b->version);
        b->version = strdup("0.1.0");
        CHECK(!llmr_plugin_manifest_same_build(a, b));
    }
out:
    llmr_plugin_manifest_free(a);
    llmr_plugin_manifest_free(b);
}

TEST(loading_reports_missing_and_broken_files)
{
    const char *root = fx_tmpdir();
    llmr_plugin_manifest *m = NULL;

    const char *nolib = plugin_dir(root, "nolib", GOOD, NULL, NULL);
    CHECK_EQ_INT(load(nolib, &m), LLMR_LOAD_FAILED);
    CHECK_EQ_STR(why, "manifest.json: \"library\": \"libllmr_engine_gpt_oss.so\" does not exist "
                      "in the plugin directory");

    const char *libdir = plugin_dir(root, "libdir", GOOD, NULL, NULL);
    mkdir(fx_path(libdir, "libllmr_engine_gpt_oss.so"), 0755);
    CHECK_EQ_INT(load(libdir, &m), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "\"library\": \"libllmr_engine_gpt_oss.so\" is not a regular file");

    const char *nomanifest = plugin_dir(root, "nomanifest", NULL, "lib.so", "x");
    CHECK_EQ_INT(load(nomanifest, &m), LLMR_NOT_FOUND);
    CHECK_CONTAINS(why, "manifest.json");

    CHECK_EQ_INT(load(fx_path(root, "does-not-exist"), &m), LLMR_NOT_FOUND);
    CHECK_CONTAINS(why, "does not exist");

    const char *abi = plugin_dir(root, "abi",
                                 "{\"id\":\"x\",\"abi_version\":\"3.1\"}", NULL, NULL);
    CHECK_EQ_INT(load(abi, &m), LLMR_ABI_MISMATCH);
    CHECK_CONTAINS(why, "built for engine ABI 3.1; this llmr speaks 1.x");

    const char *bad = plugin_dir(root, "bad", "{\"id\": 1", NULL, NULL);
    CHECK_EQ_INT(load(bad, &m), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "not valid JSON");

    char *huge = malloc(LLMR_PLUGIN_MANIFEST_MAX_BYTES + 2);
    memset(huge, ' ', LLMR_PLUGIN_MANIFEST_MAX_BYTES + 1);
    huge[LLMR_PLUGIN_MANIFEST_MAX_BYTES + 1] = '\0';
    huge[0] = '{';
    huge[LLMR_PLUGIN_MANIFEST_MAX_BYTES] = '}';
    const char *big = plugin_dir(root, "big", huge, NULL, NULL);
    free(huge);
    CHECK_EQ_INT(load(big, &m), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "more than the limit of 65536 bytes");

    /* a library name that escapes is refused before anything is looked up */
    json_t *j = json_loads(GOOD, 0, NULL);
    json_object_set_new(j, "library", json_string("../nolib/lib.so"));
    char *text = json_dumps(j, 0);
    const char *escape = plugin_dir(root, "escape", text, NULL, NULL);
    free(text);
    json_decref(j);
    CHECK_EQ_INT(load(escape, &m), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(why, "is not a plain file name");
}

/* ---- semantic versions ------------------------------------------------------- */

TEST(semver_orders_by_precedence)
{
    const char *order[] = {
        "0.0.0",        "0.9.0",        "1.0.0-0.3.7",  "1.0.0-alpha",  "1.0.0-alpha.1",
        "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",
        "1.0.0",        "1.0.1",        "1.2.0",        "1.10.0",       "2.0.0",
        "10.0.0",       "123456789012345678901234567890.0.0",
    };
    size_t n = sizeof order / sizeof order[0];
    for (size_t i = 0; i < n; i++) {
        CHECK(llmr_semver_is_valid(order[i]));
        for (size_t j = 0; j < n; j++) {
            int c = llmr_semver_compare(order[i], order[j]);
            if ((i < j && c >= 0) || (i > j && c <= 0) || (i == j && c != 0))
                llmr_test_fail(__FILE__, __LINE__, "compare(%s, %s) = %d", order[i], order[j], c);
        }
    }
    const char *invalid[] = {"",       "1",      "1.0",   "1.0.0.0", "01.0.0", "1.00.0",
                             "1.0.0-", "1.0.0-a..b", "1.0.0-01", "1.0.0+b", "-1.0.0", "1.0.x",
                             " 1.0.0", "1.0.0-a_b"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        if (llmr_semver_is_valid(invalid[i]))
            llmr_test_fail(__FILE__, __LINE__, "\"%s\" taken as a version", invalid[i]);
        CHECK(llmr_semver_compare(invalid[i], "0.0.0") < 0);
        CHECK(llmr_semver_compare("0.0.0", invalid[i]) > 0);
    }
    CHECK(llmr_semver_is_valid("1.0.0-0a"));
    CHECK(llmr_semver_is_valid("1.0.0-x-y.0"));
    CHECK(llmr_semver_compare("abc", "abd") < 0);
    CHECK(llmr_semver_compare(NULL, "1.0.0") < 0);
}

/* ---- GPU targets --------------------------------------------------------------- */

TEST(gpu_targets_parse_and_format)
{
    const char *valid[] = {"cpu", "directml", "sm_80", "sm_86", "sm_90a", "sm_100a", "sm_120",
                           "sm_10", "compute_80", "compute_120"};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        llmr_gpu_target t;
        CHECK(llmr_gpu_target_parse(valid[i], &t));
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        llmr_gpu_target_format(&t, &sb);
        CHECK_EQ_STR(llmr_strbuf_cstr(&sb), valid[i]);
        llmr_strbuf_free(&sb);
    }
    llmr_gpu_target t = {LLMR_GPU_TARGET_CPU, 0, 0};
    CHECK(llmr_gpu_target_parse("sm_100a", &t));
    CHECK(t.kind == LLMR_GPU_TARGET_SM_ARCH && t.major == 10 && t.minor == 0);
    CHECK(llmr_gpu_target_parse("sm_86", &t));
    CHECK(t.kind == LLMR_GPU_TARGET_SM && t.major == 8 && t.minor == 6);
    CHECK(llmr_gpu_target_parse("compute_75", &t));
    CHECK(t.kind == LLMR_GPU_TARGET_PTX && t.major == 7 && t.minor == 5);
    const char *invalid[] = {"", "sm_", "sm_9", "sm_9x", "sm_080", "sm_1000", "sm_80b", "sm_a",
                             "SM_80", "compute_90a", "compute_8", "gpu", "cuda", "Cpu",
                             "sm_80 ", "sm_-8", "sm_00"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        llmr_gpu_target u = {LLMR_GPU_TARGET_DIRECTML, 42, 42};
        if (llmr_gpu_target_parse(invalid[i], &u))
            llmr_test_fail(__FILE__, __LINE__, "\"%s\" taken as a GPU target", invalid[i]);
        CHECK(u.kind == LLMR_GPU_TARGET_DIRECTML && u.major == 42);
    }
    CHECK(!llmr_gpu_target_parse(NULL, &t));
}

static int score(const char *target, int major, int minor)
{
    llmr_gpu_target t;
    if (!llmr_gpu_target_parse(target, &t))
        return -1;
    return llmr_gpu_target_score(&t, major, minor);
}

TEST(gpu_target_scores)
{
    CHECK_EQ_INT(score("sm_90a", 9, 0), 4);
    CHECK_EQ_INT(score("sm_90a", 9, 1), 0);
    CHECK_EQ_INT(score("sm_90a", 10, 0), 0);
    CHECK_EQ_INT(score("sm_90", 9, 0), 3);
    CHECK_EQ_INT(score("sm_80", 8, 6), 3);
    CHECK_EQ_INT(score("sm_80", 8, 0), 3);
    CHECK_EQ_INT(score("sm_86", 8, 0), 0);
    CHECK_EQ_INT(score("sm_80", 9, 0), 0); /* a cubin does not run on the next major */
    CHECK_EQ_INT(score("compute_80", 9, 0), 2);
    CHECK_EQ_INT(score("compute_80", 8, 0), 2);
    CHECK_EQ_INT(score("compute_86", 8, 0), 0);
    CHECK_EQ_INT(score("compute_80", 7, 5), 0);
    CHECK_EQ_INT(score("compute_80", 12, 0), 2);
    CHECK_EQ_INT(score("sm_100a", 10, 0), 4);
    CHECK_EQ_INT(score("sm_120", 12, 1), 3);
    CHECK_EQ_INT(score("cpu", -1, 0), 1);
    CHECK_EQ_INT(score("cpu", 9, 0), 1);
    CHECK_EQ_INT(score("directml", -1, 0), 1);
    CHECK_EQ_INT(score("sm_80", -1, 0), 0);
    CHECK_EQ_INT(score("sm_90a", -1, 0), 0);
    CHECK_EQ_INT(score("compute_80", -1, 0), 0);
}

int main(void)
{
    RUN(a_good_manifest_gives_every_field);
    RUN(optional_fields_take_their_defaults);
    RUN(every_required_field_missing_is_named);
    RUN(bad_scalar_fields_are_named_with_what_is_allowed);
    RUN(bad_array_fields_name_the_index);
    RUN(every_broken_rule_is_reported_at_once);
    RUN(hostile_strings_are_escaped_and_cut);
    RUN(abi_major_mismatch_is_its_own_code);
    RUN(text_that_is_not_a_json_object_fails_to_load);
    RUN(size_limit_is_64_kib);
    RUN(unknown_fields_are_warnings);
    RUN(loading_checks_the_library_and_records_its_identity);
    RUN(loading_reports_missing_and_broken_files);
    RUN(semver_orders_by_precedence);
    RUN(gpu_targets_parse_and_format);
    RUN(gpu_target_scores);
    return llmr_test_finish();
}
