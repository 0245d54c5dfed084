/* The CORS list (http/http_cors.h): what --cors-origins accepts and refuses, and which
 * origins it allows.  The headers and preflights are tested over HTTP
 * (tests/router/test_cors_models.sh). */
#include "check.h"
#include "http/http_cors.h"
#include "http/http_local.h"

static llmr_http_cors *parse(const char *list, llmr_status want, llmr_strbuf *err)
{
    llmr_http_cors *c = (llmr_http_cors *)1;
    llmr_strbuf_reset(err);
    CHECK_EQ_INT(llmr_http_cors_new(list, &c, err), want);
    if (want != LLMR_OK)
        CHECK(c == NULL);
    return c;
}

TEST(an_empty_list_is_no_cors)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK(parse(NULL, LLMR_OK, &err) == NULL);
    CHECK(parse("", LLMR_OK, &err) == NULL);
    CHECK(!llmr_http_cors_allows(NULL, "http://a.test"));
    llmr_strbuf_free(&err);
}

TEST(origins_are_matched_whole)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_http_cors *c = parse(" https://app.example.com/ , http://localhost:3000,http://[::1]:8080", LLMR_OK, &err);
    CHECK(c != NULL);
    CHECK(llmr_http_cors_allows(c, "https://app.example.com"));
    CHECK(llmr_http_cors_allows(c, "HTTPS://App.Example.com"));
    CHECK(llmr_http_cors_allows(c, "http://localhost:3000"));
    CHECK(llmr_http_cors_allows(c, "http://[::1]:8080"));
    CHECK(!llmr_http_cors_allows(c, "http://app.example.com"));    /* another scheme */
    CHECK(!llmr_http_cors_allows(c, "https://app.example.com:444")); /* another port */
    CHECK(!llmr_http_cors_allows(c, "https://evil.app.example.com"));
    CHECK(!llmr_http_cors_allows(c, "http://localhost"));
    CHECK(!llmr_http_cors_allows(c, "null"));
    CHECK(!llmr_http_cors_allows(c, ""));
    CHECK(!llmr_http_cors_allows(c, NULL));
    llmr_http_cors_free(c);

    c = parse("*", LLMR_OK, &err);
    CHECK(llmr_http_cors_allows(c, "http://anything.test:1234"));
    CHECK(!llmr_http_cors_allows(c, NULL));
    llmr_http_cors_free(c);
    llmr_strbuf_free(&err);
}

TEST(what_is_not_an_origin_is_refused_by_name)
{
    static const char *const bad[] = {"app.example.com", "https://app.example.com/path", "ftp://x.test",
                                      "http://", "https://a.test:", "https://a.test:123456", "http://a b",
                                      "http://a.test,,http://b.test", "http://[zz]", "*x"};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parse(bad[i], LLMR_INVALID_ARGUMENT, &err);
        CHECK_CONTAINS(llmr_strbuf_cstr(&err), "is not an origin");
    }
    parse("http://ok.test, https://app.example.com/path", LLMR_INVALID_ARGUMENT, &err);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "\"https://app.example.com/path\"");
    llmr_strbuf_free(&err);
}

TEST(without_keys_only_loopback_names_with_the_port_pass)
{
    CHECK(llmr_http_local_host_ok(NULL, "127.0.0.1", 8080)); /* no Host: not a browser */
    CHECK(llmr_http_local_host_ok("localhost", "127.0.0.1", 8080));
    CHECK(llmr_http_local_host_ok("LocalHost:8080", "127.0.0.1", 8080));
    CHECK(llmr_http_local_host_ok("127.0.0.1:8080", "127.0.0.1", 8080));
    CHECK(llmr_http_local_host_ok("[::1]:8080", "::1", 8080));
    CHECK(llmr_http_local_host_ok("127.0.0.2:8080", "127.0.0.2", 8080)); /* the address bound */
    CHECK(!llmr_http_local_host_ok("127.0.0.2:8080", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("localhost:8081", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("attacker.example:8080", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("localhost.attacker.example", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("localhost:", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("localhost:80x", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("[::1", "127.0.0.1", 8080));
    CHECK(!llmr_http_local_host_ok("", "127.0.0.1", 8080));
}

int main(void)
{
    RUN(an_empty_list_is_no_cors);
    RUN(origins_are_matched_whole);
    RUN(what_is_not_an_origin_is_refused_by_name);
    RUN(without_keys_only_loopback_names_with_the_port_pass);
    return llmr_test_finish();
}
