/* Tests of the common layer: status codes, strings, UTF-8, the string map, problem
 * lists, JSON helpers, logging and file helpers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/list_item.h"
#include "common/log.h"
#include "common/problems.h"
#include "common/sha1.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/utf8.h"
#include "fixture.h"
#include "llmr/status.h"

TEST(status_names_and_messages_come_from_one_list)
{
    CHECK_EQ_STR(llmr_status_name(LLMR_OK), "OK");
    CHECK_EQ_STR(llmr_status_name(LLMR_MODEL_CORRUPT), "MODEL_CORRUPT");
    CHECK_EQ_STR(llmr_status_name(LLMR_LOAD_FAILED), "LOAD_FAILED");
    CHECK_EQ_STR(llmr_status_name((llmr_status)999), "UNKNOWN");
    CHECK_EQ_STR(llmr_status_message((llmr_status)-1), "unknown status");
    /* Every code keeps its number (the first ten cross the engine ABI and the wire). */
    CHECK_EQ_INT(LLMR_OK, 0);
    CHECK_EQ_INT(LLMR_OOM_VRAM, 1);
    CHECK_EQ_INT(LLMR_OOM_RAM, 2);
    CHECK_EQ_INT(LLMR_MODEL_CORRUPT, 3);
    CHECK_EQ_INT(LLMR_TIMEOUT, 4);
    CHECK_EQ_INT(LLMR_CANCELLED, 5);
    CHECK_EQ_INT(LLMR_UNSUPPORTED, 6);
    CHECK_EQ_INT(LLMR_INTERNAL, 7);
    CHECK_EQ_INT(LLMR_ABI_MISMATCH, 8);
    CHECK_EQ_INT(LLMR_LOAD_FAILED, 9);
    CHECK_EQ_INT(LLMR_INVALID_ARGUMENT, 10);
    CHECK_EQ_INT(LLMR_NOT_FOUND, 11);
    CHECK_EQ_INT(LLMR_IO, 12);
    CHECK_EQ_INT(LLMR_LIMIT_EXCEEDED, 13);
    for (int s = 0; s < LLMR_STATUS_COUNT; s++) {
        CHECK(strlen(llmr_status_name((llmr_status)s)) > 0);
        CHECK(strlen(llmr_status_message((llmr_status)s)) > 0);
    }
}

TEST(strbuf_grows_formats_and_escapes)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "");
    for (int i = 0; i < 1000; i++)
        llmr_strbuf_printf(&sb, "%d,", i);
    CHECK(sb.len > 3000);
    CHECK(strncmp(sb.data, "0,1,2,", 6) == 0);
    llmr_strbuf_reset(&sb);
    llmr_strbuf_put_display(&sb, "a\nb\\c\x01\xff\xc3\xa9", 9);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "a\\nb\\\\c\\x01\\xff\xc3\xa9");
    char *taken = llmr_strbuf_take(&sb);
    CHECK(taken != NULL);
    CHECK_EQ_INT(sb.len, 0);
    free(taken);
    llmr_strbuf_free(&sb);
}

TEST(utf8_validation_rejects_overlongs_surrogates_and_truncation)
{
    size_t bad = 0;
    CHECK(llmr_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15, NULL));
    CHECK(!llmr_utf8_valid("ab\xc0\xaf", 4, &bad)); /* overlong '/' */
    CHECK_EQ_INT(bad, 2);
    CHECK(!llmr_utf8_valid("\xed\xa0\x80", 3, &bad)); /* surrogate U+D800 */
    CHECK_EQ_INT(bad, 0);
    CHECK(!llmr_utf8_valid("x\xe2\x82", 3, &bad)); /* cut short */
    CHECK_EQ_INT(bad, 1);
    CHECK(!llmr_utf8_valid("\xf4\x90\x80\x80", 4, NULL)); /* above U+10FFFF */
}

TEST(strmap_holds_many_keys)
{
    llmr_strmap *m = llmr_strmap_create(0);
    char key[32];
    for (size_t i = 0; i < 20000; i++) {
        snprintf(key, sizeof key, "tensor.%zu", i);
        CHECK_EQ_INT(llmr_strmap_put(m, key, i), LLMR_STRMAP_ADDED);
    }
    CHECK_EQ_INT(llmr_strmap_put(m, "tensor.5", 99), LLMR_STRMAP_EXISTS);
    size_t v = 0;
    CHECK(llmr_strmap_get(m, "tensor.12345", &v));
    CHECK_EQ_INT(v, 12345);
    CHECK(llmr_strmap_get(m, "tensor.5", &v));
    CHECK_EQ_INT(v, 5);
    CHECK(!llmr_strmap_get(m, "tensor.20000", NULL));
    CHECK_EQ_INT(llmr_strmap_count(m), 20000);
    llmr_strmap_free(m);
}

TEST(problems_are_capped_and_remember_codes)
{
    llmr_problems p;
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_problems_first_code(&p), LLMR_OK);
    llmr_problems_add(&p, LLMR_NOT_FOUND, "config.json", "missing (%s)", "needed");
    size_t mark = llmr_problems_total(&p);
    CHECK_EQ_INT(llmr_problems_code_since(&p, mark), LLMR_OK);
    for (int i = 0; i < LLMR_PROBLEMS_MAX + 50; i++)
        llmr_problems_add(&p, LLMR_MODEL_CORRUPT, NULL, "problem %d", i);
    CHECK_EQ_INT(p.count, LLMR_PROBLEMS_MAX);
    CHECK_EQ_INT(llmr_problems_total(&p), LLMR_PROBLEMS_MAX + 51);
    CHECK_EQ_INT(llmr_problems_first_code(&p), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_problems_code_since(&p, mark), LLMR_MODEL_CORRUPT);
    CHECK_EQ_INT(llmr_problems_code_since(&p, llmr_problems_total(&p) - 1), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "config.json"));
    CHECK(llmr_problems_mention(&p, "problem 7"));
    llmr_problems_free(&p);
}

TEST(json_rejects_duplicates_and_reports_position)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const char *dup = "{\"a\": 1,\n \"a\": 2}";
    CHECK(llmr_json_parse(dup, strlen(dup), &err) == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "line 2");
    llmr_strbuf_reset(&err);
    const char *bad_utf8 = "{\"a\": \"\xff\"}";
    CHECK(llmr_json_parse(bad_utf8, strlen(bad_utf8), &err) == NULL);
    llmr_strbuf_free(&err);

    uint64_t v = 0;
    json_t *n = json_real(4096.0);
    CHECK(llmr_json_as_u64(n, &v));
    CHECK_EQ_INT(v, 4096);
    json_decref(n);
    n = json_real(1.5);
    CHECK(!llmr_json_as_u64(n, &v));
    json_decref(n);
    n = json_integer(-1);
    CHECK(!llmr_json_as_u64(n, &v));
    json_decref(n);
}

static char last_line[4096];
static int lines;

static void capture(void *ctx, llmr_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    snprintf(last_line, sizeof last_line, "%s", line);
    lines++;
}

TEST(log_filters_by_level_and_carries_request_id)
{
    llmr_log_set_sink(capture, NULL);
    llmr_log_set_level(LLMR_LOG_WARN);
    llmr_log_info("storage", "not shown");
    CHECK_EQ_INT(lines, 0);
    llmr_log_set_request_id("req-42");
    llmr_log_warn("storage", "shard %d is short", 3);
    CHECK_EQ_INT(lines, 1);
    CHECK_CONTAINS(last_line, "WARN");
    CHECK_CONTAINS(last_line, "storage");
    CHECK_CONTAINS(last_line, "[req=req-42]");
    CHECK_CONTAINS(last_line, "shard 3 is short");
    llmr_log_set_request_id(NULL);
    llmr_log_error("node", "x");
    CHECK(strstr(last_line, "req=") == NULL);
    /* text a client chose cannot forge a line: control bytes are escaped */
    llmr_log_warn("router", "no node for model %s", "m\n2026-01-01T00:00:00.000Z ERROR x\r\x1b[31m");
    CHECK(strchr(last_line, '\n') == NULL && strchr(last_line, '\r') == NULL && strchr(last_line, 0x1b) == NULL);
    CHECK_CONTAINS(last_line, "model m\\n2026-01-01");
    CHECK_CONTAINS(last_line, "\\r\\x1b[31m");
    llmr_log_level l;
    CHECK(llmr_log_level_parse("DEBUG", &l) && l == LLMR_LOG_DEBUG);
    CHECK(llmr_log_level_parse("warning", &l) && l == LLMR_LOG_WARN);
    CHECK(!llmr_log_level_parse("loud", &l));
    llmr_log_set_sink(NULL, NULL);
    llmr_log_set_level(LLMR_LOG_INFO);
}

TEST(lists_give_their_items_trimmed)
{
    const char *rest = " a ,b,\tc d ,", *item;
    size_t n;
    const char *want[] = {"a", "b", "c d", ""};
    for (int i = 0; i < 4; i++) {
        CHECK(llmr_list_next(&rest, &item, &n));
        CHECK_EQ_INT(n, strlen(want[i]));
        CHECK(strncmp(item, want[i], n) == 0);
    }
    CHECK(!llmr_list_next(&rest, &item, &n)); /* the empty item after the last comma ended it */
    rest = "";
    CHECK(llmr_list_next(&rest, &item, &n) && n == 0);
    CHECK(!llmr_list_next(&rest, &item, &n));
}

TEST(request_ids_are_checked_and_made)
{
    CHECK(llmr_request_id_valid("client-id.42"));
    CHECK(llmr_request_id_valid("a:b/c_d~e"));
    CHECK(!llmr_request_id_valid(NULL));
    CHECK(!llmr_request_id_valid(""));
    CHECK(!llmr_request_id_valid("has space"));
    CHECK(!llmr_request_id_valid("quo\"te"));
    CHECK(!llmr_request_id_valid("back\\slash"));
    CHECK(!llmr_request_id_valid("tab\there"));
    CHECK(!llmr_request_id_valid("caf\xc3\xa9"));
    char id[LLMR_REQUEST_ID_MAX + 2];
    memset(id, 'x', LLMR_REQUEST_ID_MAX);
    id[LLMR_REQUEST_ID_MAX] = '\0';
    CHECK(llmr_request_id_valid(id)); /* the longest */
    id[LLMR_REQUEST_ID_MAX] = 'x';
    id[LLMR_REQUEST_ID_MAX + 1] = '\0';
    CHECK(!llmr_request_id_valid(id));
    char a[33], b[33];
    llmr_request_id_new(a, sizeof a);
    llmr_request_id_new(b, sizeof b);
    CHECK_EQ_INT(strlen(a), 32);
    CHECK(strspn(a, "0123456789abcdef") == 32);
    CHECK(strcmp(a, b) != 0);
    CHECK(llmr_request_id_valid(a));
}

TEST(json_log_lines_are_json_objects_with_the_text_escaped)
{
    llmr_log_format f;
    CHECK(llmr_log_format_parse("JSON", &f) && f == LLMR_LOG_FORMAT_JSON);
    CHECK(llmr_log_format_parse("text", &f) && f == LLMR_LOG_FORMAT_TEXT);
    CHECK(!llmr_log_format_parse("xml", &f));
    llmr_log_set_sink(capture, NULL);
    llmr_log_set_format(LLMR_LOG_FORMAT_JSON);
    llmr_log_set_request_id("r-1");
    llmr_log_warn("store", "a \"quoted\" path\\x with a\nnewline and \x01");
    json_error_t e;
    json_t *o = json_loads(last_line, 0, &e);
    CHECK(o != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "level")), "warn");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "component")), "store");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "request_id")), "r-1");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "message")),
                 "a \"quoted\" path\\x with a\nnewline and \x01");
    CHECK(json_string_value(json_object_get(o, "time")) != NULL);
    json_decref(o);
    /* a message longer than a line is cut, and the line still parses */
    char big[5000];
    memset(big, '"', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    llmr_log_warn("store", "%s", big);
    o = json_loads(last_line, 0, &e);
    CHECK(o != NULL);
    CHECK(strlen(json_string_value(json_object_get(o, "message"))) < sizeof big);
    json_decref(o);

    llmr_log_access_entry acc = {"router", "r-2", "POST", "/v1/chat/completions", 200, "m", "n-1", NULL,
                                 5, 7, 12.5, 40.25, false};
    llmr_log_access(&acc);
    o = json_loads(last_line, 0, &e);
    CHECK(o != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "component")), "access");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "request_id")), "r-2");
    CHECK_EQ_STR(json_string_value(json_object_get(o, "path")), "/v1/chat/completions");
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "status")), 200);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "completion_tokens")), 7);
    CHECK(json_real_value(json_object_get(o, "ttft_ms")) == 12.5);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "node")), "n-1");
    json_decref(o);

    /* bytes that are not UTF-8 (a decoded path may hold any) keep the line JSON */
    acc.path = "/caf\xc3\xa9/\xff\xfe";
    llmr_log_access(&acc);
    CHECK(llmr_utf8_valid(last_line, strlen(last_line), NULL));
    o = json_loads(last_line, 0, &e);
    CHECK(o != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(o, "path")), "/caf\xc3\xa9/\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(o);

    llmr_log_set_format(LLMR_LOG_FORMAT_TEXT);
    acc.ttft_ms = -1;
    acc.path = "/a b";
    llmr_log_access(&acc);
    CHECK_CONTAINS(last_line, "access [req=r-2] router POST /a%20b 200 model=m node=n-1");
    CHECK_CONTAINS(last_line, "prompt_tokens=5 completion_tokens=7 ttft_ms=- duration_ms=40.2");
    acc.model = "two\nlines";
    llmr_log_access(&acc);
    CHECK_CONTAINS(last_line, "model=two%0Alines");
    CHECK(strchr(last_line, '\n') == NULL);
    /* a huge model name is cut, and the JSON line keeps its other fields */
    char huge[3000];
    memset(huge, 'm', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    acc.model = huge;
    llmr_log_set_format(LLMR_LOG_FORMAT_JSON);
    llmr_log_access(&acc);
    o = json_loads(last_line, 0, &e);
    CHECK(o != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "completion_tokens")), 7);
    json_decref(o);
    llmr_log_set_format(LLMR_LOG_FORMAT_TEXT);
    /* a routine one is a debug line */
    int before = lines;
    acc.quiet = true;
    llmr_log_access(&acc);
    CHECK_EQ_INT(lines, before);
    llmr_log_set_request_id(NULL);
    llmr_log_set_sink(NULL, NULL);
}

TEST(file_names_from_outside_are_checked)
{
    CHECK(llmr_file_name_is_safe("model-00001-of-00002.safetensors"));
    CHECK(llmr_file_name_is_safe("mod\xc3\xa8le.safetensors"));
    CHECK(!llmr_file_name_is_safe(""));
    CHECK(!llmr_file_name_is_safe("."));
    CHECK(!llmr_file_name_is_safe(".."));
    CHECK(!llmr_file_name_is_safe("../etc/passwd"));
    CHECK(!llmr_file_name_is_safe("a/b.safetensors"));
    CHECK(!llmr_file_name_is_safe("a\\b"));
    CHECK(!llmr_file_name_is_safe("new\nline"));
    CHECK(!llmr_file_name_is_safe("bad\xff.safetensors"));
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK(!llmr_file_name_is_safe(long_name));
}

TEST(read_file_enforces_its_limit_and_atomic_write_replaces)
{
    const char *dir = fx_tmpdir();
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_write_file_atomic(fx_path(dir, "a.txt"), "hello", 5, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_write_file_atomic(fx_path(dir, "a.txt"), "world!", 6, &err), LLMR_OK);
    char *data;
    size_t len;
    CHECK_EQ_INT(llmr_read_file(fx_path(dir, "a.txt"), 100, &data, &len, &err), LLMR_OK);
    CHECK_EQ_INT(len, 6);
    CHECK_EQ_STR(data, "world!");
    free(data);
    CHECK_EQ_INT(llmr_read_file(fx_path(dir, "a.txt"), 3, &data, &len, &err), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "limit");
    CHECK_EQ_INT(llmr_read_file(fx_path(dir, "none"), 3, &data, &len, &err), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_read_file(dir, 3, &data, &len, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(dir, "x/y/z"), &err), LLMR_OK);
    CHECK_EQ_INT(llmr_mkdir_p(fx_path(dir, "a.txt"), &err), LLMR_IO);
    llmr_strbuf_free(&err);
}

/* SHA-256 of the 8 little-endian size bytes then data[0..n) (the digest of a file
 * no larger than the pieces, by the definition in file_sample.h). */
static void whole_sample(const unsigned char *data, size_t n, char hex[65])
{
    llmr_sha256 c;
    llmr_sha256_init(&c);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)n >> (8 * i));
    llmr_sha256_update(&c, le, 8);
    llmr_sha256_update(&c, data, n);
    uint8_t d[32];
    llmr_sha256_final(&c, d);
    llmr_sha256_hex(d, hex);
}

TEST(sampled_digests_read_pieces_and_see_size_and_swaps)
{
    const char *dir = fx_tmpdir();
    char hex[65], want[65], again[65];
    uint64_t size = 0;
    /* small: the whole file after its size */
    fx_write(dir, "small", "hello", 5);
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "small"), &size, hex), 0);
    CHECK_EQ_INT(size, 5);
    whole_sample((const unsigned char *)"hello", 5, want);
    CHECK_EQ_STR(hex, want);
    /* large: 16 pieces of 64 KiB; the first and the last byte are in a piece, a byte
     * between two pieces is not (what only the full hash sees), the size always is */
    size_t n = 4u << 20;
    unsigned char *big = malloc(n);
    CHECK(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (unsigned char)(i * 2654435761u >> 13);
    fx_write(dir, "big", big, n);
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "big"), &size, hex), 0);
    CHECK_EQ_INT(size, n);
    whole_sample(big, n, want);
    CHECK(strcmp(hex, want) != 0); /* not the whole file's */
    uint64_t gap = (n - LLMR_SAMPLE_PIECE_BYTES) / (LLMR_SAMPLE_PIECES - 1); /* piece 1's start */
    big[LLMR_SAMPLE_PIECE_BYTES + (gap - LLMR_SAMPLE_PIECE_BYTES) / 2] ^= 1;
    fx_write(dir, "big", big, n);
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "big"), &size, again), 0);
    CHECK_EQ_STR(again, hex);
    big[n - 1] ^= 1;
    fx_write(dir, "big", big, n);
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "big"), &size, again), 0);
    CHECK(strcmp(again, hex) != 0);
    big[n - 1] ^= 1;
    fx_write(dir, "big", big, n - 1); /* one byte short */
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "big"), &size, again), 0);
    CHECK(strcmp(again, hex) != 0);
    /* a size larger than what the file holds is an error, not a digest */
    FILE *f = fopen(fx_path(dir, "big"), "rb");
    CHECK(f != NULL);
    errno = 0;
    CHECK_EQ_INT(llmr_file_sample_sha256_fd(fileno(f), n, again), -1);
    CHECK_EQ_INT(errno, EIO);
    fclose(f);
    free(big);
    /* a symlink is not followed; a directory is not a file */
    CHECK_EQ_INT(symlink(fx_path(dir, "small"), fx_path(dir, "link")), 0);
    CHECK_EQ_INT(llmr_file_sample_sha256(fx_path(dir, "link"), &size, hex), -1);
    CHECK_EQ_INT(llmr_file_sample_sha256(dir, &size, hex), -1);
}

TEST(sha1_and_git_blob_ids_match_known_values)
{
    char hex[41];
    llmr_sha1_hex("abc", 3, hex); /* FIPS 180-4's example */
    CHECK_EQ_STR(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    llmr_sha1_hex(m448, strlen(m448), hex);
    CHECK_EQ_STR(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    llmr_sha1_hex("", 0, hex);
    CHECK_EQ_STR(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    /* git's id of an empty blob, and of "hello world\n" (git hash-object) */
    llmr_git_blob_id("", 0, hex);
    CHECK_EQ_STR(hex, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    llmr_git_blob_id("hello world\n", 12, hex);
    CHECK_EQ_STR(hex, "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
}

int main(void)
{
    RUN(status_names_and_messages_come_from_one_list);
    RUN(strbuf_grows_formats_and_escapes);
    RUN(utf8_validation_rejects_overlongs_surrogates_and_truncation);
    RUN(strmap_holds_many_keys);
    RUN(problems_are_capped_and_remember_codes);
    RUN(json_rejects_duplicates_and_reports_position);
    RUN(log_filters_by_level_and_carries_request_id);
    RUN(lists_give_their_items_trimmed);
    RUN(request_ids_are_checked_and_made);
    RUN(json_log_lines_are_json_objects_with_the_text_escaped);
    RUN(file_names_from_outside_are_checked);
    RUN(read_file_enforces_its_limit_and_atomic_write_replaces);
    RUN(sampled_digests_read_pieces_and_see_size_and_swaps);
    RUN(sha1_and_git_blob_ids_match_known_values);
    return llmr_test_finish();
}
