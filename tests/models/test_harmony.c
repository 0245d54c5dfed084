/* The harmony chat format (models/harmony.h) against gpt-oss's chat template as
 * rendered by jinja2 (the shared data's expected renders; skipped without them). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "models/harmony.h"

static char *expected(const char *name)
{
    const char *shared = getenv("LLMR_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/chat-templates/expected/openai-gpt-oss-120b/%s.txt",
             shared ? shared : "", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void check_case(const char *name, const llmr_chat_message *m, size_t n, bool gen)
{
    const char *want = expected(name);
    if (!want) {
        llmr_test_skip("the shared chat-template renders are not here");
        return;
    }
    char *got = llmr_harmony_render(m, n, gen, "2026-01-15");
    CHECK_EQ_STR(got, want);
    free(got);
}

TEST(basic_with_a_system_message)
{
    llmr_chat_message m[] = {{"system", "You are a helpful assistant."},
                             {"user", "What is the capital of France?"}};
    check_case("basic", m, 2, true);
}

TEST(multi_turn)
{
    llmr_chat_message m[] = {{"user", "Hi there!"},
                             {"assistant", "Hello! How can I help you today?"},
                             {"user", "Tell me a joke about GPUs."}};
    check_case("multi_turn", m, 3, true);
}

TEST(no_generation_prompt_ends_with_return)
{
    llmr_chat_message m[] = {{"user", "Say hello."}, {"assistant", "Hello."}};
    check_case("no_generation_prompt", m, 2, false);
}

TEST(unicode_passes_through)
{
    llmr_chat_message m[] = {
        {"user", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xa7\xe8\x87\xaa\xe5\xb7\xb1\xe7"
                 "\xb4\xb9\xe4\xbb\x8b\xe3\x81\x97\xe3\x81\xa6\xe3\x81\x8f\xe3\x81\xa0\xe3\x81"
                 "\x95\xe3\x81\x84 \xf0\x9f\x99\x82 \xe2\x80\x94 \xc2\xabquotes\xc2\xbb and "
                 "\"escapes\" \\ backslash"}};
    check_case("unicode", m, 1, true);
}

TEST(an_unknown_role_is_refused)
{
    llmr_chat_message m[] = {{"user", "x"}, {"tool", "y"}};
    CHECK(llmr_harmony_render(m, 2, true, "2026-01-15") == NULL);
}

int main(void)
{
    RUN(basic_with_a_system_message);
    RUN(multi_turn);
    RUN(no_generation_prompt_ends_with_return);
    RUN(unicode_passes_through);
    RUN(an_unknown_role_is_refused);
    return llmr_test_finish();
}
