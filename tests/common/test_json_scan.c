/* Tests of the streaming JSON reader: walking objects and arrays, string escapes,
 * strictness (UTF-8, surrogates, control characters, trailing commas, depth), and
 * errors that give line and column. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/json_scan.h"

static llmr_jscan scan(const char *text)
{
    llmr_jscan s;
    llmr_jscan_init(&s, text, strlen(text));
    return s;
}

TEST(walks_objects_and_arrays)
{
    llmr_jscan s = scan(" { \"a\" : [1, -2, 3], \"b\": {\"c\": true, \"d\": null}, \"e\": \"x\" } ");
    llmr_strbuf key = LLMR_STRBUF_INIT, str = LLMR_STRBUF_INIT;
    CHECK(llmr_jscan_object_begin(&s));
    CHECK(llmr_jscan_object_next(&s, &key));
    CHECK_EQ_STR(key.data, "a");
    CHECK(llmr_jscan_array_begin(&s));
    int64_t sum = 0, v;
    while (llmr_jscan_array_next(&s)) {
        CHECK(llmr_jscan_int(&s, &v));
        sum += v;
    }
    CHECK_EQ_INT(sum, 2);
    CHECK(llmr_jscan_object_next(&s, &key));
    CHECK_EQ_STR(key.data, "b");
    CHECK(llmr_jscan_skip(&s));
    CHECK(llmr_jscan_object_next(&s, &key));
    CHECK_EQ_STR(key.data, "e");
    CHECK(llmr_jscan_string(&s, &str));
    CHECK_EQ_STR(str.data, "x");
    CHECK(!llmr_jscan_object_next(&s, &key));
    CHECK(!s.failed);
    CHECK(llmr_jscan_at_end(&s));
    llmr_strbuf_free(&key);
    llmr_strbuf_free(&str);
}

TEST(decodes_every_escape)
{
    llmr_jscan s = scan("\"q\\\" s\\\\ sl\\/ \\b\\f\\n\\r\\t \\u00e9 \\ud83e\\udd99 \\u20AC raw\xc3\xa9\"");
    llmr_strbuf str = LLMR_STRBUF_INIT;
    CHECK(llmr_jscan_string(&s, &str));
    CHECK_EQ_STR(str.data, "q\" s\\ sl/ \b\f\n\r\t \xc3\xa9 \xf0\x9f\xa6\x99 \xe2\x82\xac raw\xc3\xa9");
    llmr_strbuf_free(&str);
}

static void check_bad_string(const char *text, const char *why)
{
    llmr_jscan s = scan(text);
    llmr_strbuf str = LLMR_STRBUF_INIT;
    CHECK(!llmr_jscan_string(&s, &str));
    CHECK(s.failed);
    CHECK_CONTAINS(s.error, why);
    llmr_strbuf_free(&str);
}

TEST(strings_are_strict)
{
    check_bad_string("\"a\\ud83e\"", "lone surrogate");
    check_bad_string("\"\\udd99\"", "lone surrogate");
    check_bad_string("\"\\u0000\"", "\\u0000");
    check_bad_string("\"tab\there\"", "control character");
    check_bad_string("\"bad \xff byte\"", "invalid UTF-8");
    check_bad_string("\"overlong \xc0\xaf\"", "invalid UTF-8");
    check_bad_string("\"\\x41\"", "invalid escape");
    check_bad_string("\"\\u12\"", "invalid escape");
    check_bad_string("\"unterminated", "unterminated");
}

TEST(numbers_and_literals)
{
    int64_t v;
    llmr_jscan s = scan("9223372036854775807");
    CHECK(llmr_jscan_int(&s, &v) && v == INT64_MAX);
    s = scan("-9223372036854775808");
    CHECK(llmr_jscan_int(&s, &v) && v == INT64_MIN);
    s = scan("9223372036854775808");
    CHECK(!llmr_jscan_int(&s, &v));
    CHECK_CONTAINS(s.error, "out of range");
    s = scan("1.5");
    CHECK(!llmr_jscan_int(&s, &v));
    s = scan("01");
    CHECK(llmr_jscan_int(&s, &v) && v == 0);
    CHECK(!llmr_jscan_at_end(&s)); /* "1" is left: a leading zero ends the number */
    s = scan("[1e5, -0.5E-3, 2.0, true, false, null]");
    CHECK(llmr_jscan_skip(&s) && llmr_jscan_at_end(&s));
    s = scan("[1., 2]");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "malformed number");
    bool b;
    s = scan("tru");
    CHECK(!llmr_jscan_bool(&s, &b));
}

TEST(structure_errors_say_where)
{
    llmr_jscan s = scan("{\n  \"a\": 1,\n  \"b\": 2,\n}");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "line 4, column 1: trailing comma");
    s = scan("[1 2]");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "expected ',' or ']'");
    s = scan("{\"a\" 1}");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "expected ':'");
    s = scan("{1: 2}");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "member name");
    s = scan("[");
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "end of input");
}

TEST(nesting_is_capped_without_recursion)
{
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    llmr_jscan s;
    llmr_jscan_init(&s, deep, 2 * n);
    CHECK(!llmr_jscan_skip(&s));
    CHECK_CONTAINS(s.error, "nesting deeper than");
    free(deep);
    /* Just under the cap is fine. */
    char ok[2 * 200 + 1];
    memset(ok, '[', 200);
    memset(ok + 200, ']', 200);
    ok[400] = '\0';
    s = scan(ok);
    CHECK(llmr_jscan_skip(&s) && llmr_jscan_at_end(&s));
}

TEST(raw_returns_the_exact_span)
{
    llmr_jscan s = scan("{\"n\": {\"type\": \"NFC\"} , \"m\": 1}");
    llmr_strbuf key = LLMR_STRBUF_INIT;
    const char *raw;
    size_t len;
    CHECK(llmr_jscan_object_begin(&s) && llmr_jscan_object_next(&s, &key));
    CHECK(llmr_jscan_raw(&s, &raw, &len));
    CHECK(len == strlen("{\"type\": \"NFC\"}") && memcmp(raw, "{\"type\": \"NFC\"}", len) == 0);
    CHECK(llmr_jscan_object_next(&s, &key));
    CHECK_EQ_STR(key.data, "m");
    llmr_strbuf_free(&key);
}

TEST(whitespace_runs_of_every_length_are_skipped)
{
    /* The vectorised skip must stop exactly at the token whatever the run length. */
    for (size_t run = 0; run < 40; run++) {
        char text[64];
        text[0] = '[';
        for (size_t i = 0; i < run; i++)
            text[1 + i] = " \n\t\r"[i % 4];
        strcpy(text + 1 + run, "7]");
        llmr_jscan s = scan(text);
        int64_t v = 0;
        CHECK(llmr_jscan_array_begin(&s) && llmr_jscan_array_next(&s) && llmr_jscan_int(&s, &v));
        CHECK_EQ_INT(v, 7);
    }
    /* Long strings around the vector width, with an escape at every position. */
    for (size_t n = 1; n < 40; n++) {
        char text[64];
        text[0] = '"';
        memset(text + 1, 'x', n);
        text[1 + n] = '"';
        text[2 + n] = '\0';
        llmr_jscan s = scan(text);
        llmr_strbuf out = LLMR_STRBUF_INIT;
        CHECK(llmr_jscan_string(&s, &out));
        CHECK_EQ_INT(out.len, n);
        llmr_strbuf_free(&out);
    }
}

int main(void)
{
    RUN(walks_objects_and_arrays);
    RUN(decodes_every_escape);
    RUN(strings_are_strict);
    RUN(numbers_and_literals);
    RUN(structure_errors_say_where);
    RUN(nesting_is_capped_without_recursion);
    RUN(raw_returns_the_exact_span);
    RUN(whitespace_runs_of_every_length_are_skipped);
    return llmr_test_finish();
}
