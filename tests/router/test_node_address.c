/* Where a node may be (router/node_address.h): a node's URL names the machine its
 * registration came from, or a network the operator allowed; the address checked is
 * pinned for curl; the list of allowed networks parses strictly.  And the comparison
 * of secrets (common/secret.h) the node makes. */
#include <string.h>

#include "check.h"
#include "common/secret.h"
#include "router/node_address.h"

static bool ok(const char *url, const char *remote, const char *allow, char *pin)
{
    llmr_strbuf why = LLMR_STRBUF_INIT;
    char buf[320];
    bool res = llmr_node_url_check(url, remote, allow, pin ? pin : buf, 320, &why);
    CHECK(res || why.len > 0); /* a refusal says why */
    llmr_strbuf_free(&why);
    return res;
}

TEST(the_url_is_the_source_address)
{
    char pin[320];
    CHECK(ok("http://127.0.0.1:8081", "127.0.0.1", NULL, pin));
    CHECK_EQ_STR(pin, ""); /* an address needs no pin */
    CHECK(ok("http://127.0.0.1", "::ffff:127.0.0.1", NULL, NULL)); /* IPv4 seen as mapped IPv6 */
    CHECK(ok("http://[::1]:9/", "::1", NULL, NULL));
    CHECK(ok("https://10.0.0.5:8443/x?y", "10.0.0.5", NULL, NULL));
    CHECK(!ok("http://10.0.0.6:8081", "10.0.0.5", NULL, NULL));
    CHECK(!ok("http://169.254.169.254/latest", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://[::1]:9", "127.0.0.1", NULL, NULL));
    /* a name: resolved, and the address found pinned */
    CHECK(ok("http://localhost:8081/", "127.0.0.1", NULL, pin));
    CHECK_EQ_STR(pin, "localhost:8081:127.0.0.1");
}

TEST(malformed_urls_are_refused)
{
    CHECK(!ok(NULL, "127.0.0.1", NULL, NULL));
    CHECK(!ok("ftp://127.0.0.1", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://user@127.0.0.1:80", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://127.0.0.1:0", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://127.0.0.1:70000", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://127.0.0.1:80x", "127.0.0.1", NULL, NULL));
    CHECK(!ok("http://[::1", "::1", NULL, NULL));
    CHECK(!ok("http://127.0.0.1", NULL, NULL, NULL)); /* no source known */
}

TEST(allowed_networks)
{
    CHECK(ok("http://10.1.2.3:8081", "192.0.2.1", "10.0.0.0/8", NULL));
    CHECK(ok("http://10.1.2.3:8081", "192.0.2.1", " 172.16.0.0/12 , 10.1.2.3", NULL));
    CHECK(!ok("http://10.1.2.4:8081", "192.0.2.1", "10.1.2.3", NULL));
    CHECK(!ok("http://11.0.0.1:8081", "192.0.2.1", "10.0.0.0/8", NULL));
    CHECK(ok("http://[fd00::7]:8081", "192.0.2.1", "fd00::/8", NULL));
    CHECK(!ok("http://[fe80::7]:8081", "192.0.2.1", "fd00::/8", NULL));
    CHECK(ok("http://10.9.9.9", "192.0.2.1", "0.0.0.0/0", NULL));
    CHECK(!ok("http://[::1]", "192.0.2.1", "0.0.0.0/0", NULL)); /* an IPv4 network holds no IPv6 */
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK(llmr_node_allow_valid(NULL, &err));
    CHECK(llmr_node_allow_valid("", &err));
    CHECK(llmr_node_allow_valid("10.0.0.0/8,fd00::/8, 192.0.2.7", &err));
    CHECK(!llmr_node_allow_valid("10.0.0.0/33", &err));
    CHECK(strstr(llmr_strbuf_cstr(&err), "10.0.0.0/33") != NULL);
    CHECK(!llmr_node_allow_valid("example.com", &err));
    CHECK(!llmr_node_allow_valid("10.0.0.0/", &err));
    CHECK(!llmr_node_allow_valid("::/129", &err));
    llmr_strbuf_free(&err);
}

TEST(secrets_compare_whole)
{
    CHECK(llmr_secret_equal("abc", "abc"));
    CHECK(!llmr_secret_equal("abd", "abc"));
    CHECK(!llmr_secret_equal("ab", "abc"));
    CHECK(!llmr_secret_equal("abcd", "abc"));
    CHECK(!llmr_secret_equal("", "abc"));
    CHECK(!llmr_secret_equal("abc", NULL));
    CHECK(!llmr_secret_equal(NULL, NULL));
}

int main(void)
{
    RUN(the_url_is_the_source_address);
    RUN(malformed_urls_are_refused);
    RUN(allowed_networks);
    RUN(secrets_compare_whole);
    return llmr_test_finish();
}
