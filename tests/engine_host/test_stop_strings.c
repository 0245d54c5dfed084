/* Stop strings (engine_host/stop_strings.h): text is released as soon as it cannot
 * begin a stop string, the stop string and what follows never come out, and bad
 * stop strings are refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine_host/stop_strings.h"

/* Feeds pieces (NULL-terminated) and returns what came out; *stopped tells. */
static char *run(const char *const *stops, size_t n_stops, const char *const *pieces,
                 bool *stopped, char *released_after_each)
{
    size_t lens[8] = {0};
    for (size_t i = 0; i < n_stops; i++)
        lens[i] = strlen(stops[i]);
    llmr_stop_matcher m;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_stop_matcher_init(&m, stops, lens, n_stops, &err), LLMR_OK);
    *stopped = false;
    for (size_t i = 0; pieces[i] && !*stopped; i++) {
        *stopped = llmr_stop_matcher_push(&m, pieces[i], strlen(pieces[i]), &out);
        if (released_after_each)
            released_after_each[i] = (char)('0' + out.len);
    }
    if (!*stopped)
        llmr_stop_matcher_flush(&m, &out);
    llmr_stop_matcher_free(&m);
    llmr_strbuf_free(&err);
    return llmr_strbuf_take(&out);
}

TEST(no_stop_strings_pass_everything_through)
{
    bool stopped;
    const char *pieces[] = {"Hello", " world", NULL};
    char *out = run(NULL, 0, pieces, &stopped, NULL);
    CHECK_EQ_STR(out, "Hello world");
    CHECK(!stopped);
    free(out);
}

TEST(a_stop_string_across_pieces_ends_the_text_before_it)
{
    bool stopped;
    const char *stops[] = {"\n\nUser:"};
    const char *pieces[] = {"Sure.", "\n", "\nUs", "er:", " more", NULL};
    char after[8] = {0};
    char *out = run(stops, 1, pieces, &stopped, after);
    CHECK_EQ_STR(out, "Sure.");
    CHECK(stopped);
    /* "Sure." goes out at once; the newlines and "Us" are held back */
    CHECK_EQ_INT(after[0], '5');
    CHECK_EQ_INT(after[1], '5');
    CHECK_EQ_INT(after[2], '5');
    free(out);
}

TEST(held_text_that_turns_out_not_to_stop_is_released)
{
    bool stopped;
    const char *stops[] = {"END"};
    const char *pieces[] = {"the E", "N", "D", NULL};
    char *out = run(stops, 1, pieces, &stopped, NULL);
    CHECK_EQ_STR(out, "the ");
    CHECK(stopped);
    free(out);
    const char *pieces2[] = {"the E", "Nx", " and EN", NULL};
    char after[8] = {0};
    out = run(stops, 1, pieces2, &stopped, after);
    CHECK(!stopped);
    CHECK_EQ_STR(out, "the ENx and EN"); /* the final "EN" comes out at the end */
    CHECK_EQ_INT(after[0], '4');
    CHECK_EQ_INT(after[1], '0' + 7);
    free(out);
}

TEST(the_earliest_of_several_stop_strings_wins)
{
    bool stopped;
    const char *stops[] = {"cd", "bcde", "x"};
    const char *pieces[] = {"abcdef", NULL};
    char *out = run(stops, 3, pieces, &stopped, NULL);
    CHECK_EQ_STR(out, "a");
    CHECK(stopped);
    free(out);
}

TEST(utf8_stop_strings_match_bytes)
{
    bool stopped;
    const char *stops[] = {"\xe3\x80\x82"}; /* 。 */
    const char *pieces[] = {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xe3\x80\x82", "\xe5\x86\x8d", NULL};
    char *out = run(stops, 1, pieces, &stopped, NULL);
    CHECK_EQ_STR(out, "\xe4\xbd\xa0\xe5\xa5\xbd");
    CHECK(stopped);
    free(out);
}

TEST(bad_stop_strings_are_refused)
{
    llmr_stop_matcher m;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const char *empty[] = {"ok", ""};
    size_t lens[] = {2, 0};
    CHECK_EQ_INT(llmr_stop_matcher_init(&m, empty, lens, 2, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "stop string 1 is empty");
    llmr_strbuf_reset(&err);
    const char *bad[] = {"\xff"};
    size_t bad_len[] = {1};
    CHECK_EQ_INT(llmr_stop_matcher_init(&m, bad, bad_len, 1, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "not valid UTF-8");
    llmr_strbuf_reset(&err);
    const char *many[17];
    size_t many_len[17];
    for (int i = 0; i < 17; i++) {
        many[i] = "x";
        many_len[i] = 1;
    }
    CHECK_EQ_INT(llmr_stop_matcher_init(&m, many, many_len, 17, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "at most 16");
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(no_stop_strings_pass_everything_through);
    RUN(a_stop_string_across_pieces_ends_the_text_before_it);
    RUN(held_text_that_turns_out_not_to_stop_is_released);
    RUN(the_earliest_of_several_stop_strings_wins);
    RUN(utf8_stop_strings_match_bytes);
    RUN(bad_stop_strings_are_refused);
    return llmr_test_finish();
}
