/* Tests of model sync's parts that need no server: SHA-256 against the FIPS 180-4
 * examples and split updates, the manifest checks (each bad shape refused with the
 * problem named), the origin allowlist, and syncs that end before any download (a
 * model already in place, too little disk space, a router that does not answer), and
 * a local directory's files used in place (hard links, the node's allowed roots), and a
 * Hub model's from the Hugging Face cache.
 * The sync against a real server is tests/node/test_sync_e2e.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "fixture.h"
#include "llmr/status.h"
#include "net/http_fetch.h"
#include "node/model_check.h"
#include "node/model_hasher.h"
#include "node/model_in_place.h"
#include "node/model_sync.h"
#include "storage/hf_cache.h"

static void hex_of(const void *data, size_t len, char out[65])
{
    llmr_sha256 c;
    uint8_t d[32];
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, data, len);
    llmr_sha256_final(&c, d);
    llmr_sha256_hex(d, out);
}

TEST(sha256_matches_the_standard_examples)
{
    char hex[65];
    hex_of("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), hex);
    CHECK_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    CHECK_EQ_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* One million 'a', fed in uneven pieces. */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    llmr_sha256 c;
    llmr_sha256_init(&c);
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        llmr_sha256_update(&c, chunk, n);
        left -= n;
    }
    uint8_t d[32];
    llmr_sha256_final(&c, d);
    llmr_sha256_hex(d, hex);
    CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256_incremental_updates_equal_one_shot)
{
    uint8_t msg[200];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 37 + 11);
    char want[65], got[65];
    hex_of(msg, sizeof msg, want);
    for (size_t k = 0; k <= sizeof msg; k++) {
        llmr_sha256 c;
        uint8_t d[32];
        llmr_sha256_init(&c);
        llmr_sha256_update(&c, msg, k);
        llmr_sha256_update(&c, msg + k, sizeof msg - k);
        llmr_sha256_final(&c, d);
        llmr_sha256_hex(d, got);
        if (strcmp(got, want) != 0)
            llmr_test_fail(__FILE__, __LINE__, "split at %zu: %s != %s", k, got, want);
    }
    /* Byte by byte, and every length around the padding boundary (55, 56, 64). */
    llmr_sha256 c;
    uint8_t d[32];
    llmr_sha256_init(&c);
    for (size_t i = 0; i < sizeof msg; i++)
        llmr_sha256_update(&c, msg + i, 1);
    llmr_sha256_final(&c, d);
    llmr_sha256_hex(d, got);
    CHECK_EQ_STR(got, want);
    for (size_t n = 50; n <= 130; n++) {
        char a[65], b[65];
        hex_of(msg, n, a);
        llmr_sha256_init(&c);
        llmr_sha256_update(&c, msg, n / 3);
        llmr_sha256_update(&c, msg + n / 3, n - n / 3);
        llmr_sha256_final(&c, d);
        llmr_sha256_hex(d, b);
        CHECK_EQ_STR(a, b);
    }
}

TEST(sha256_of_a_file)
{
    const char *dir = fx_tmpdir();
    fx_write_text(dir, "abc.txt", "abc");
    char hex[65];
    CHECK_EQ_INT(llmr_sha256_file(fx_path(dir, "abc.txt"), hex), 0);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_EQ_INT(llmr_sha256_file(fx_path(dir, "missing"), hex), -1);
}

/* ---- manifests --------------------------------------------------------------------- */

#define SHA_A "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &e);
    if (!v)
        llmr_test_fail(__FILE__, __LINE__, "bad test JSON: %s: %s", e.text, text);
    return v;
}

/* A manifest with one file entry written as the text `file`. */
static json_t *with_file(const char *file)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"tiny\", \"format\": \"safetensors\", \"files\": ["
             "{\"path\": \"config.json\", \"size\": 3, \"url\": \"/v0/models/tiny/files/config.json\"},"
             "%s]}",
             file);
    return parse(text);
}

static void expect_refused(json_t *m, const char *needle, int line)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_manifest_check(m, &err);
    if (st != LLMR_INVALID_ARGUMENT)
        llmr_test_fail(__FILE__, line, "wanted INVALID_ARGUMENT, got %s (%s)",
                       llmr_status_name(st), llmr_strbuf_cstr(&err));
    else if (!strstr(llmr_strbuf_cstr(&err), needle))
        llmr_test_fail(__FILE__, line, "no \"%s\" in: %s", needle, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    json_decref(m);
}

#define REFUSED_FILE(entry, needle) expect_refused(with_file(entry), needle, __LINE__)
#define REFUSED(text, needle) expect_refused(parse(text), needle, __LINE__)

TEST(manifest_check_accepts_a_good_manifest)
{
    json_t *m = parse("{\"name\": \"tiny\", \"format\": \"safetensors\", \"files\": ["
                      "{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A "\","
                      " \"required\": true, \"url\": \"/v0/models/tiny/files/config.json\","
                      " \"origin_url\": \"https://huggingface.co/org/tiny/resolve/main/config.json\"},"
                      "{\"path\": \"sub/dir/model.safetensors\", \"size\": 0, \"url\": \"/f/m\"},"
                      "{\"path\": \"README.md\", \"size\": 10, \"required\": false,"
                      " \"sha256\": null, \"url\": \"/f/r\", \"extra\": 1}]}");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_manifest_check(m, &err), LLMR_OK);
    CHECK_EQ_STR(llmr_strbuf_cstr(&err), "");
    llmr_strbuf_free(&err);
    json_decref(m);
    /* Upper-case digests are digests too. */
    m = with_file("{\"path\": \"a\", \"size\": 1, \"url\": \"/a\", \"sha256\": "
                  "\"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\"}");
    CHECK_EQ_INT(llmr_manifest_check(m, &err), LLMR_OK);
    llmr_strbuf_free(&err);
    json_decref(m);
}

TEST(manifest_check_refuses_paths_that_leave_the_model_directory)
{
    REFUSED_FILE("{\"path\": \"../x\", \"size\": 1, \"url\": \"/x\"}", "\"..\" component");
    REFUSED_FILE("{\"path\": \"a/../../x\", \"size\": 1, \"url\": \"/x\"}", "\"..\" component");
    REFUSED_FILE("{\"path\": \"..\", \"size\": 1, \"url\": \"/x\"}", "\"..\" component");
    REFUSED_FILE("{\"path\": \"/etc/passwd\", \"size\": 1, \"url\": \"/x\"}", "absolute");
    REFUSED_FILE("{\"path\": \"a//b\", \"size\": 1, \"url\": \"/x\"}", "empty component");
    REFUSED_FILE("{\"path\": \"a/\", \"size\": 1, \"url\": \"/x\"}", "empty component");
    REFUSED_FILE("{\"path\": \"\", \"size\": 1, \"url\": \"/x\"}", "is empty");
    REFUSED_FILE("{\"path\": \"a/./b\", \"size\": 1, \"url\": \"/x\"}", "\".\" component");
    REFUSED_FILE("{\"path\": \"./b\", \"size\": 1, \"url\": \"/x\"}", "\".\" component");
    REFUSED_FILE("{\"path\": \"a\\\\b\", \"size\": 1, \"url\": \"/x\"}", "backslash");
    REFUSED_FILE("{\"path\": \"a\\nb\", \"size\": 1, \"url\": \"/x\"}", "control character");
    REFUSED_FILE("{\"path\": \"a\\u0000b\", \"size\": 1, \"url\": \"/x\"}", "files[1].path");
    REFUSED_FILE("{\"path\": \".llmr-manifest.json\", \"size\": 1, \"url\": \"/x\"}", "record");
    REFUSED_FILE("{\"path\": 7, \"size\": 1, \"url\": \"/x\"}", "files[1].path");
    REFUSED_FILE("{\"size\": 1, \"url\": \"/x\"}", "files[1].path is missing");
}

TEST(manifest_check_refuses_bad_fields)
{
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"/x\", \"sha256\": \"abc\"}",
                 "files[1].sha256");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"/x\", \"sha256\": \"" SHA_A "0\"}",
                 "64 hex digits");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"/x\", \"sha256\": "
                 "\"zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}",
                 "64 hex digits");
    REFUSED_FILE("{\"path\": \"a\", \"size\": -1, \"url\": \"/x\"}", "files[1].size");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1.5, \"url\": \"/x\"}", "whole number >= 0");
    REFUSED_FILE("{\"path\": \"a\", \"size\": \"1\", \"url\": \"/x\"}", "files[1].size");
    REFUSED_FILE("{\"path\": \"a\", \"url\": \"/x\"}", "files[1].size");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"/x\", \"required\": \"yes\"}",
                 "files[1].required");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1}", "files[1].url");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"http://elsewhere/a\"}",
                 "path on the router");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 1, \"url\": \"/x\", \"origin_url\": 3}",
                 "files[1].origin_url");
    REFUSED_FILE("{\"path\": \"config.json\", \"size\": 3, \"url\": \"/x\"}", "duplicate");
    REFUSED_FILE("{\"path\": \"config.json/x\", \"size\": 3, \"url\": \"/x\"}",
                 "to be a directory");
    REFUSED_FILE("[]", "files[1] is not an object");
    REFUSED_FILE("{\"path\": \"a\", \"size\": 9223372036854775807, \"url\": \"/x\"},"
                 "{\"path\": \"b\", \"size\": 9223372036854775807, \"url\": \"/x\"},"
                 "{\"path\": \"c\", \"size\": 9223372036854775807, \"url\": \"/x\"}",
                 "add up");
}

TEST(manifest_check_refuses_bad_names_and_shapes)
{
    REFUSED("{\"name\": \"../up\", \"files\": [{\"path\": \"a\", \"size\": 1, \"url\": \"/a\"}]}",
            "\"name\"");
    REFUSED("{\"name\": \"a/b\", \"files\": [{\"path\": \"a\", \"size\": 1, \"url\": \"/a\"}]}",
            "\"name\"");
    REFUSED("{\"name\": \".partial\", \"files\": [{\"path\": \"a\", \"size\": 1, \"url\": \"/a\"}]}",
            "\"name\"");
    REFUSED("{\"name\": \"\", \"files\": [{\"path\": \"a\", \"size\": 1, \"url\": \"/a\"}]}",
            "\"name\"");
    REFUSED("{\"files\": [{\"path\": \"a\", \"size\": 1, \"url\": \"/a\"}]}", "\"name\"");
    REFUSED("{\"name\": \"x\"}", "\"files\" must be an array");
    REFUSED("{\"name\": \"x\", \"files\": {}}", "\"files\" must be an array");
    REFUSED("{\"name\": \"x\", \"files\": []}", "empty");
    REFUSED("{\"name\": \"x\", \"format\": 3, \"files\": []}", "\"format\"");
    REFUSED("[1]", "not a JSON object");
}

TEST(origin_allowlist_matches_hosts_and_their_subdomains)
{
    const char *list = "huggingface.co, hf.co";
    CHECK(llmr_sync_origin_allowed("https://huggingface.co/org/m/resolve/main/a", list));
    CHECK(llmr_sync_origin_allowed("https://HuggingFace.CO/a", list));
    CHECK(llmr_sync_origin_allowed("http://cdn-lfs.huggingface.co/a", list));
    CHECK(llmr_sync_origin_allowed("https://hf.co:443/a", list));
    CHECK(llmr_sync_origin_allowed("https://a.b.hf.co/a", list));
    CHECK(llmr_sync_origin_allowed("https://hf.co./a", list));
    CHECK(!llmr_sync_origin_allowed("https://evilhf.co/a", list));
    CHECK(!llmr_sync_origin_allowed("https://huggingface.co.evil.com/a", list));
    CHECK(!llmr_sync_origin_allowed("https://huggingface.co@evil.com/a", list));
    CHECK(!llmr_sync_origin_allowed("https://evil.com/huggingface.co", list));
    CHECK(!llmr_sync_origin_allowed("https://evil.com?huggingface.co", list));
    CHECK(!llmr_sync_origin_allowed("ftp://huggingface.co/a", list));
    CHECK(!llmr_sync_origin_allowed("file:///etc/passwd", list));
    CHECK(!llmr_sync_origin_allowed("huggingface.co/a", list));
    CHECK(!llmr_sync_origin_allowed("https://huggingface.co/a", ""));
    CHECK(!llmr_sync_origin_allowed("https://huggingface.co/a", NULL));
    CHECK(!llmr_sync_origin_allowed("https://huggingface.co/a", " , ,"));
    CHECK(llmr_sync_origin_allowed("http://127.0.0.1:8080/a", "127.0.0.1"));
    CHECK(llmr_sync_origin_allowed("http://[::1]:8080/a", "::1"));
    CHECK(llmr_sync_origin_allowed("https://x.hf.co/a", "*.hf.co"));

    char host[64];
    CHECK(llmr_url_http_host("HTTPS://User:pw@Example.COM:8443/p?q#f", host, sizeof host));
    CHECK_EQ_STR(host, "example.com");
    CHECK(!llmr_url_http_host("https://example.com/", host, 5));
}

/* ---- syncs that end before any download --------------------------------------------- */

static void sync_opts(llmr_sync_options *o, const char *data_dir)
{
    llmr_sync_options_default(o);
    o->data_dir = data_dir;
    o->router_url = "http://127.0.0.1:1"; /* nothing listens: any fetch fails */
    o->retries = 0;
}

typedef struct seen {
    int calls;
    bool ready, failed, checking;
} seen;

static bool note(void *user, const llmr_sync_progress *p)
{
    seen *s = user;
    s->calls++;
    s->ready |= strcmp(p->state, "ready") == 0;
    s->failed |= strcmp(p->state, "failed") == 0;
    s->checking |= strcmp(p->state, "checking") == 0;
    return true;
}

TEST(a_model_already_in_place_needs_no_server)
{
    const char *data = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(data, "models/tiny/sub"), &err), LLMR_OK);
    fx_write_text(data, "models/tiny/config.json", "abc");
    fx_write_text(data, "models/tiny/sub/w.bin", "0123456789");
    json_t *m = parse("{\"name\": \"tiny\", \"files\": ["
                      "{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A "\", \"url\": \"/c\"},"
                      "{\"path\": \"sub/w.bin\", \"size\": 10, \"url\": \"/w\"}]}");
    llmr_sync_options o;
    sync_opts(&o, data);
    seen s = {0};
    o.progress = note;
    o.user = &s;
    json_t *skipped = NULL;
    CHECK_EQ_INT(llmr_model_sync(&o, m, &skipped, &err), LLMR_OK);
    CHECK_EQ_STR(llmr_strbuf_cstr(&err), "");
    CHECK(json_is_array(skipped) && json_array_size(skipped) == 0);
    CHECK(s.ready && s.checking && !s.failed);
    struct stat st;
    CHECK(stat(fx_path(data, "models/tiny/.llmr-manifest.json"), &st) == 0);
    json_decref(skipped);

    /* Again: the marker vouches for the digest; still no server needed. */
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);

    /* A file whose bytes changed is fetched again: here that fails, naming it. */
    fx_write_text(data, "models/tiny/config.json", "abd");
    unlink(fx_path(data, "models/tiny/.llmr-manifest.json"));
    s = (seen){0};
    llmr_status st2 = llmr_model_sync(&o, m, NULL, &err);
    CHECK_EQ_INT(st2, LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "config.json");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "http://127.0.0.1:1/c");
    CHECK(s.failed);
    llmr_strbuf_free(&err);
    json_decref(m);
}

TEST(an_optional_file_that_fails_is_skipped)
{
    const char *data = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(data, "models/tiny"), &err), LLMR_OK);
    fx_write_text(data, "models/tiny/config.json", "abc");
    json_t *m = parse("{\"name\": \"tiny\", \"files\": ["
                      "{\"path\": \"config.json\", \"size\": 3, \"url\": \"/c\"},"
                      "{\"path\": \"extra/README.md\", \"size\": 5, \"required\": false, \"url\": \"/r\"}]}");
    llmr_sync_options o;
    sync_opts(&o, data);
    json_t *skipped = NULL;
    CHECK_EQ_INT(llmr_model_sync(&o, m, &skipped, &err), LLMR_OK);
    CHECK_EQ_INT(json_array_size(skipped), 1);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(skipped, 0), "path")),
                 "extra/README.md");
    CHECK_CONTAINS(json_string_value(json_object_get(json_array_get(skipped, 0), "error")),
                   "127.0.0.1:1/r");
    struct stat st;
    CHECK(stat(fx_path(data, "models/.partial/tiny"), &st) != 0);
    json_decref(skipped);
    llmr_strbuf_free(&err);
    json_decref(m);
}

TEST(too_little_disk_space_is_refused_before_any_byte)
{
    const char *data = fx_tmpdir();
    json_t *m = parse("{\"name\": \"huge\", \"files\": ["
                      "{\"path\": \"w.bin\", \"size\": 4611686018427387904, \"url\": \"/w\"}]}");
    llmr_sync_options o;
    sync_opts(&o, data);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "4.0 EiB more are needed");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "free");
    struct stat st;
    CHECK(stat(fx_path(data, "models/.partial/huge/w.bin.part"), &st) != 0);
    llmr_strbuf_free(&err);
    json_decref(m);

    /* A bad manifest is INVALID_ARGUMENT from the sync too, and touches nothing. */
    m = parse("{\"name\": \"bad\", \"files\": [{\"path\": \"../x\", \"size\": 1, \"url\": \"/x\"}]}");
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "\"..\"");
    llmr_strbuf_free(&err);
    json_decref(m);
}

TEST(fetch_reports_the_url_of_a_failure)
{
    const char *dir = fx_tmpdir();
    llmr_fetch_options o;
    llmr_fetch_options_default(&o);
    CHECK_EQ_INT(o.retries, 3);
    CHECK_EQ_INT(o.stall_timeout_s, 30);
    o.url = "http://127.0.0.1:1/file";
    o.part_path = fx_path(dir, "file.part");
    o.retries = 1;
    char hex[65];
    uint64_t size = 1;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_fetch(&o, hex, &size, &err), LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "GET http://127.0.0.1:1/file");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "after 2 tries");
    CHECK_EQ_STR(hex, "");
    llmr_strbuf_reset(&err);
    o.url = "ftp://127.0.0.1:1/file";
    o.retries = 0;
    CHECK(llmr_fetch(&o, hex, &size, &err) != LLMR_OK);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "ftp://127.0.0.1:1/file");
    llmr_strbuf_free(&err);
}

/* ---- files of a local directory, used in place --------------------------------------- */

/* A manifest of a local source in dir: config.json (sha256 of "abc") and w.bin
 * (sample, the sampled digest of its 10 bytes, or a wrong one). */
static json_t *local_manifest(const char *dir, const char *sample)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"loc\", \"source\": {\"kind\": \"local\", \"dir\": \"%s\"}, \"files\": ["
             "{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A "\", \"url\": \"/c\"},"
             "{\"path\": \"w.bin\", \"size\": 10, \"sample_sha256\": \"%s\", \"url\": \"/w\"}]}",
             dir, sample);
    return parse(text);
}

static ino_t inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

TEST(a_local_directory_is_used_in_place_where_the_node_allows_it)
{
    const char *src = fx_tmpdir(), *data = fx_tmpdir(), *other = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    fx_write_text(src, "config.json", "abc");
    fx_write_text(src, "w.bin", "0123456789");
    char sample[65], wrong[65];
    uint64_t size = 0;
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(src, "w.bin"), &size, sample), 0);
    memcpy(wrong, sample, 65);
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    llmr_sync_options o;
    sync_opts(&o, data);

    /* a node that allows no directory fetches (here: fails, nothing listens) */
    json_t *m = local_manifest(src, sample);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    /* nor one whose roots do not hold it ("/x" does not hold "/xy") */
    char root[4200];
    snprintf(root, sizeof root, "%s,%.*s", other, (int)(strlen(src) - 1), src);
    o.local_dirs = root;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    CHECK(!llmr_in_place_allowed(src, root));
    CHECK(llmr_in_place_allowed(src, "/"));
    CHECK(!llmr_in_place_allowed(src, ""));

    /* allowed: both files are hard links to the source's, nothing fetched */
    o.local_dirs = src;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);
    CHECK_EQ_STR(llmr_strbuf_cstr(&err), "");
    CHECK(inode_of(fx_path(data, "models/loc/w.bin")) == inode_of(fx_path(src, "w.bin")));
    CHECK(inode_of(fx_path(data, "models/loc/config.json")) == inode_of(fx_path(src, "config.json")));
    /* removing the model removes the links, never the source */
    CHECK(llmr_sync_remove_model(data, "loc"));
    struct stat st;
    CHECK(stat(fx_path(src, "w.bin"), &st) == 0 && st.st_size == 10);
    json_decref(m);

    /* a file that is not the registered one (its sampled digest differs) is not used */
    m = local_manifest(src, wrong);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    CHECK(inode_of(fx_path(data, "models/loc/w.bin")) == 0);
    json_decref(m);

    /* a link in the directory that leads outside the allowed roots is not followed there */
    fx_write_text(other, "w.bin", "0123456789");
    unlink(fx_path(src, "w.bin"));
    CHECK_EQ_INT(symlink(fx_path(other, "w.bin"), fx_path(src, "w.bin")), 0);
    m = local_manifest(src, sample);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    CHECK(inode_of(fx_path(data, "models/loc/w.bin")) == 0);
    /* ... and is when the node allows where it leads (a Hugging Face cache's blobs) */
    snprintf(root, sizeof root, "%s,%s", src, other);
    o.local_dirs = root;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);
    CHECK(inode_of(fx_path(data, "models/loc/w.bin")) == inode_of(fx_path(other, "w.bin")));
    /* a later sync checks the sampled digest of what is there: a changed file is noticed */
    FILE *f = fopen(fx_path(other, "w.bin"), "r+");
    CHECK(f != NULL);
    fputs("9", f);
    fclose(f);
    o.local_dirs = NULL;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "w.bin");
    json_decref(m);
    llmr_strbuf_free(&err);
}

TEST(a_hub_model_in_the_hugging_face_cache_is_linked_from_there)
{
    const char *hub = fx_tmpdir(), *data = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    /* the cache holds config.json ("abc") as the blob named by its sha256 */
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(hub, "models--org--m/blobs"), &err), LLMR_OK);
    fx_write_text(hub, "models--org--m/blobs/" SHA_A, "abd"); /* not what its name says */
    setenv("HF_HUB_CACHE", hub, 1);
    json_t *m = parse("{\"name\": \"m\", \"source\": {\"kind\": \"hf\", \"repo\": \"org/m\", \"revision\": "
                      "\"main\"}, \"files\": [{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A
                      "\", \"url\": \"/c\"}]}");
    llmr_sync_options o;
    sync_opts(&o, data);
    /* a blob whose bytes are not its name's is not used: fetched (here: nothing answers) */
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_IO);
    CHECK(inode_of(fx_path(data, "models/m/config.json")) == 0);
    /* the right bytes: linked, no server needed */
    fx_write_text(hub, "models--org--m/blobs/" SHA_A, "abc");
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);
    CHECK(inode_of(fx_path(data, "models/m/config.json")) ==
          inode_of(fx_path(hub, "models--org--m/blobs/" SHA_A)));
    /* the cache's place: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub */
    char *dir = llmr_hf_cache_dir();
    CHECK_EQ_STR(dir, hub);
    free(dir);
    unsetenv("HF_HUB_CACHE");
    setenv("HF_HOME", "/x/hf", 1);
    dir = llmr_hf_cache_dir();
    CHECK_EQ_STR(dir, "/x/hf/hub");
    free(dir);
    unsetenv("HF_HOME");
    json_decref(m);
    llmr_strbuf_free(&err);
}

TEST(a_load_checks_that_the_synced_files_did_not_change)
{
    const char *hub = fx_tmpdir(), *data = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    /* a Hub model of a small file and one past 64 MiB (sparse), both in the cache */
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(hub, "models--org--big/blobs"), &err), LLMR_OK);
    fx_write_text(hub, "models--org--big/blobs/" SHA_A, "abc");
    const char *tmp_big = fx_path(hub, "big.tmp");
    FILE *f = fopen(tmp_big, "wb");
    CHECK(f != NULL && ftruncate(fileno(f), (65 << 20)) == 0);
    fclose(f);
    char big_sha[65], text[2048];
    CHECK_EQ_INT(llmr_sha256_file(tmp_big, big_sha), 0);
    char blob[4200];
    snprintf(blob, sizeof blob, "%s/models--org--big/blobs/%s", hub, big_sha);
    CHECK_EQ_INT(rename(tmp_big, blob), 0);
    snprintf(text, sizeof text,
             "{\"name\": \"big\", \"source\": {\"kind\": \"hf\", \"repo\": \"org/big\", \"revision\": \"main\"},"
             " \"files\": [{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A "\", \"url\": \"/c\"},"
             "{\"path\": \"w.bin\", \"size\": %d, \"sha256\": \"%s\", \"url\": \"/w\"}]}",
             65 << 20, big_sha);
    json_t *m = parse(text);
    setenv("HF_HUB_CACHE", hub, 1);
    llmr_sync_options o;
    sync_opts(&o, data);
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);
    unsetenv("HF_HUB_CACHE");
    /* the marker records the large file's sampled digest, taken after its full check */
    char *marker = NULL;
    size_t len = 0;
    CHECK_EQ_INT(llmr_read_file(fx_path(data, "models/big/.llmr-manifest.json"), 1 << 20, &marker, &len, &err),
                 LLMR_OK);
    CHECK_CONTAINS(marker, "sample_sha256");
    free(marker);
    const char *dir = fx_path(data, "models/big");
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_files_check(dir, &err), LLMR_OK);
    /* a byte rewritten where a piece lies (the first one), and the load refuses it */
    f = fopen(blob, "r+b");
    CHECK(f != NULL);
    fputc(1, f);
    fclose(f);
    CHECK_EQ_INT(llmr_model_files_check(dir, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "w.bin changed on disk");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "pull it again");
    /* a small file is hashed whole; one cut short is seen by its size */
    llmr_strbuf_reset(&err);
    fx_write_text(dir, "config.json", "abd");
    CHECK_EQ_INT(llmr_model_files_check(dir, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "config.json changed on disk");
    /* a directory without a marker (put there by hand) has nothing to be checked against */
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_files_check(hub, &err), LLMR_OK);
    json_decref(m);
    llmr_strbuf_free(&err);
}

typedef struct hash_report {
    atomic_bool called;
    char name[64], why[1024];
} hash_report;

static void on_hash_fail(void *user, const char *name, const char *why)
{
    hash_report *r = user;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->why, sizeof r->why, "%s", why);
    atomic_store(&r->called, true);
}

TEST(the_background_hash_sees_a_change_between_the_sampled_pieces)
{
    const char *src = fx_tmpdir(), *data = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    /* a local directory with a 65 MiB weight file (sparse), used in place */
    FILE *f = fopen(fx_path(src, "w.bin"), "wb");
    CHECK(f != NULL && ftruncate(fileno(f), (65 << 20)) == 0);
    fclose(f);
    fx_write_text(src, "config.json", "abc");
    char sample[65], text[2048];
    uint64_t size = 0;
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(src, "w.bin"), &size, sample), 0);
    snprintf(text, sizeof text,
             "{\"name\": \"loc\", \"source\": {\"kind\": \"local\", \"dir\": \"%s\"}, \"files\": ["
             "{\"path\": \"config.json\", \"size\": 3, \"sha256\": \"" SHA_A "\", \"url\": \"/c\"},"
             "{\"path\": \"w.bin\", \"size\": %d, \"sample_sha256\": \"%s\", \"url\": \"/w\"}]}",
             src, 65 << 20, sample);
    json_t *m = parse(text);
    llmr_sync_options o;
    sync_opts(&o, data);
    o.local_dirs = src;
    CHECK_EQ_INT(llmr_model_sync(&o, m, NULL, &err), LLMR_OK);
    const char *dir = fx_path(data, "models/loc");
    /* the first full hash is recorded */
    CHECK_EQ_INT(llmr_model_hash_check(dir, NULL, &err), LLMR_OK);
    char *marker = NULL;
    size_t len = 0;
    CHECK_EQ_INT(llmr_read_file(fx_path(dir, ".llmr-manifest.json"), 1 << 20, &marker, &len, &err), LLMR_OK);
    CHECK_CONTAINS(marker, "node_sha256");
    free(marker);
    /* a byte rewritten at 1 MiB, between the first two pieces: the check before a load
     * does not see it, the full hash does, and marks the record */
    f = fopen(fx_path(src, "w.bin"), "r+b");
    CHECK(f != NULL && fseek(f, 1 << 20, SEEK_SET) == 0);
    fputc(7, f);
    fclose(f);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_files_check(dir, &err), LLMR_OK);
    hash_report rep = {0};
    llmr_model_hasher *hz = llmr_model_hasher_start(on_hash_fail, &rep);
    CHECK(hz != NULL);
    llmr_model_hasher_add(hz, "loc", dir);
    for (int i = 0; i < 400 && !atomic_load(&rep.called); i++)
        nanosleep(&(struct timespec){0, 25000000}, NULL);
    llmr_model_hasher_stop(hz);
    CHECK(atomic_load(&rep.called));
    CHECK_EQ_STR(rep.name, "loc");
    CHECK_CONTAINS(rep.why, "w.bin changed on disk since it was first hashed");
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_model_files_check(dir, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "changed on disk since it was first hashed");
    json_decref(m);
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(sha256_matches_the_standard_examples);
    RUN(sha256_incremental_updates_equal_one_shot);
    RUN(sha256_of_a_file);
    RUN(manifest_check_accepts_a_good_manifest);
    RUN(manifest_check_refuses_paths_that_leave_the_model_directory);
    RUN(manifest_check_refuses_bad_fields);
    RUN(manifest_check_refuses_bad_names_and_shapes);
    RUN(origin_allowlist_matches_hosts_and_their_subdomains);
    RUN(a_model_already_in_place_needs_no_server);
    RUN(an_optional_file_that_fails_is_skipped);
    RUN(too_little_disk_space_is_refused_before_any_byte);
    RUN(fetch_reports_the_url_of_a_failure);
    RUN(a_local_directory_is_used_in_place_where_the_node_allows_it);
    RUN(a_hub_model_in_the_hugging_face_cache_is_linked_from_there);
    RUN(a_load_checks_that_the_synced_files_did_not_change);
    RUN(the_background_hash_sees_a_change_between_the_sampled_pieces);
    return llmr_test_finish();
}
