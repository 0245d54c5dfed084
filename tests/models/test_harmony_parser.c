/* The streaming harmony parser (models/harmony_parser.h): gpt-oss's answers split into
 * reasoning, answer and tool calls, with the model's known slips, whatever the split of
 * the text into tokens, and never a special token's text in any field. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "models/harmony_parser.h"

/* What came out, as fields: reasoning, content, and the calls (name, arguments). */
typedef struct fields {
    char reasoning[4096], content[4096];
    char names[8][64], args[8][1024];
    int calls, call_ends, message_ends;
    bool open_call;
} fields;

static void cat(char *dst, size_t cap, const char *s, size_t n)
{
    size_t have = strlen(dst);
    if (have + n >= cap)
        n = cap - have - 1;
    memcpy(dst + have, s, n);
    dst[have + n] = '\0';
}

static bool pieces_whole_utf8 = true; /* no piece began or ended inside a character */

static bool whole_utf8(const char *s, size_t n)
{
    if (n && (((unsigned char)s[0] & 0xC0) == 0x80))
        return false;
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == n)
        return !(n && (unsigned char)s[n - 1] >= 0xC0);
    unsigned char lead = (unsigned char)s[i - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    return i > 0 && n - (i - 1) == want;
}

static void on_piece(void *user, llmr_harmony_kind kind, const char *text, size_t len)
{
    if (!whole_utf8(text, len))
        pieces_whole_utf8 = false;
    fields *f = user;
    switch (kind) {
    case LLMR_HARMONY_REASONING:
        cat(f->reasoning, sizeof f->reasoning, text, len);
        break;
    case LLMR_HARMONY_CONTENT:
        cat(f->content, sizeof f->content, text, len);
        break;
    case LLMR_HARMONY_CALL_START:
        if (f->calls < 8)
            cat(f->names[f->calls], sizeof f->names[0], text, len);
        f->calls++;
        f->open_call = true;
        break;
    case LLMR_HARMONY_CALL_ARGS:
        if (f->calls >= 1 && f->calls <= 8)
            cat(f->args[f->calls - 1], sizeof f->args[0], text, len);
        break;
    case LLMR_HARMONY_CALL_END:
        f->call_ends++;
        f->open_call = false;
        break;
    case LLMR_HARMONY_MESSAGE_END:
        f->message_ends++;
        break;
    }
}

/* A script of tokens: "#S" <|start|>, "#E" <|end|>, "#M" <|message|>, "#C" <|channel|>,
 * "#K" <|constrain|>, "#R" <|return|>, "#L" <|call|>; anything else is ordinary text
 * (NULL ends it).  Run with the text pieces cut into chunks of `chunk` bytes (0: as
 * written). */
static const int32_t *special_id(const char *t)
{
    static const struct {
        const char *name;
        int32_t id;
    } map[] = {{"#S", 200006}, {"#E", 200007}, {"#M", 200008}, {"#C", 200005},
               {"#K", 200003}, {"#R", 200002}, {"#L", 200012}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(t, map[i].name))
            return &map[i].id;
    return NULL;
}

static fields run(const char *const *script, size_t chunk)
{
    fields f;
    memset(&f, 0, sizeof f);
    llmr_harmony_ids ids = llmr_harmony_gpt_oss_ids();
    llmr_harmony_parser p;
    llmr_harmony_parser_init(&p, &ids);
    for (size_t i = 0; script[i]; i++) {
        const int32_t *sp = special_id(script[i]);
        if (sp) {
            llmr_harmony_feed(&p, *sp, NULL, 0, on_piece, &f);
            continue;
        }
        size_t n = strlen(script[i]), step = chunk ? chunk : n;
        for (size_t at = 0; at < n; at += step)
            llmr_harmony_feed(&p, 1000, script[i] + at, n - at < step ? n - at : step, on_piece, &f);
    }
    llmr_harmony_finish(&p, on_piece, &f);
    return f;
}

static bool has_special_text(const fields *f)
{
    const char *all[] = {f->reasoning, f->content, f->names[0], f->args[0], f->names[1], f->args[1],
                         f->names[2], f->args[2]};
    static const char *const specials[] = {"<|start|>",  "<|end|>",    "<|message|>", "<|channel|>",
                                           "<|constrain|>", "<|return|>", "<|call|>"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++)
            if (strstr(all[i], specials[k]))
                return true;
    return false;
}

/* The same fields whatever the chunk size, and no special-token text. */
static fields run_all_splits(const char *const *script)
{
    fields first = run(script, 0);
    CHECK(!has_special_text(&first));
    for (size_t chunk = 1; chunk <= 7; chunk++) {
        fields f = run(script, chunk);
        if (memcmp(&f, &first, sizeof f) != 0)
            llmr_test_fail(__FILE__, __LINE__, "split in chunks of %zu: other fields", chunk);
    }
    return first;
}

TEST(reasoning_then_answer)
{
    const char *s[] = {"#C", "analysis", "#M", "User greets; reply politely.", "#E", "#S", "assistant",
                       "#C", "final", "#M", "Hello! How can I help you today?", "#R", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.reasoning, "User greets; reply politely.");
    CHECK_EQ_STR(f.content, "Hello! How can I help you today?");
    CHECK_EQ_INT(f.calls, 0);
    CHECK_EQ_INT(f.message_ends, 2);
}

TEST(a_tool_call)
{
    const char *s[] = {"#C", "analysis", "#M", "Need weather.", "#E", "#S", "assistant", "#C",
                       "commentary to=functions.get_weather ", "#K", "json", "#M",
                       "{\"city\":\"Paris\"}", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.reasoning, "Need weather.");
    CHECK_EQ_STR(f.content, "");
    CHECK_EQ_INT(f.calls, 1);
    CHECK_EQ_STR(f.names[0], "get_weather");
    CHECK_EQ_STR(f.args[0], "{\"city\":\"Paris\"}");
    CHECK_EQ_INT(f.call_ends, 1);
}

TEST(three_calls_in_one_turn)
{
    const char *s[] = {"#C", "commentary to=functions.a", "#M", "{\"x\":1}", "#E",
                       "#S", "assistant", "#C", "commentary to=functions.b", "#M", "{}", "#E",
                       "#S", "assistant", "#C", "commentary to=functions.c", "#K", "json", "#M",
                       "[1,2]", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 3);
    CHECK_EQ_INT(f.call_ends, 3);
    CHECK_EQ_STR(f.names[0], "a");
    CHECK_EQ_STR(f.names[1], "b");
    CHECK_EQ_STR(f.names[2], "c");
    CHECK_EQ_STR(f.args[0], "{\"x\":1}");
    CHECK_EQ_STR(f.args[2], "[1,2]");
}

TEST(the_recipient_before_the_channel)
{
    const char *s[] = {" to=functions.get_weather", "#C", "commentary json", "#M", "{\"a\":1}", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 1);
    CHECK_EQ_STR(f.names[0], "get_weather");
    CHECK_EQ_STR(f.args[0], "{\"a\":1}");
}

/* Plain text without a header ended by <|call|> is the answer, as when <|return|> ends it */
TEST(plain_text_ended_by_call_is_the_answer)
{
    const char *s[] = {"final words", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 0);
    CHECK_EQ_STR(f.content, "final words");
}

/* gpt-oss's built-in tools are not the client's functions: no call, the message is
 * the model's reasoning */
TEST(a_message_to_a_built_in_tool_is_reasoning)
{
    const char *s[] = {"#C", "analysis to=python code", "#M", "print(1)", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 0);
    CHECK_EQ_STR(f.reasoning, "print(1)");
    CHECK_EQ_STR(f.content, "");
    const char *t[] = {"#C", "commentary to=browser.search json", "#M", "{\"q\":1}", "#E", "#S", "assistant",
                       "#C", "final", "#M", "ok", "#R", NULL};
    f = run_all_splits(t);
    CHECK_EQ_INT(f.calls, 0);
    CHECK_EQ_STR(f.reasoning, "{\"q\":1}");
    CHECK_EQ_STR(f.content, "ok");
}

TEST(a_special_token_glued_to_the_name)
{
    const char *s[] = {"#C", "commentary to=functions.get_weather", "#C", "commentary", "#M", "{}", "#L", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 1);
    CHECK_EQ_STR(f.names[0], "get_weather");
}

TEST(a_channel_name_without_its_special_token)
{
    const char *s[] = {"analysis", "#M", "thinking", "#E", "#S", "assistant", "final", "#M", "done", "#R", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.reasoning, "thinking");
    CHECK_EQ_STR(f.content, "done");
    /* the role's text and the channel's run together: "assistantanalysis" */
    const char *t[] = {"#S", "assistant", "#S", "assistant", "analysis", "#M", "why", "#E", "#S", "assistant",
                       "final", "#M", "so", "#R", NULL};
    f = run_all_splits(t);
    CHECK_EQ_STR(f.reasoning, "why");
    CHECK_EQ_STR(f.content, "so");
}

TEST(special_tokens_spelled_out_in_text)
{
    const char *s[] = {"<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final"
                       "<|message|>a < b and x<|y stays<|return|>",
                       NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.reasoning, "hmm");
    CHECK_EQ_STR(f.content, "a < b and x<|y stays");
}

TEST(a_call_whose_call_token_never_comes)
{
    const char *s[] = {"#C", "commentary to=functions.f", "#M", "{\"k\":", "\"v\"}", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_INT(f.calls, 1);
    CHECK_EQ_INT(f.call_ends, 1);
    CHECK_EQ_STR(f.args[0], "{\"k\":\"v\"}");
}

TEST(repeated_start_and_missing_end)
{
    const char *s[] = {"#S", "assistant", "#S", "assistant", "#C", "analysis", "#M", "r1",
                       "#C", "final", "#M", "c1", "#R", "after the end", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.reasoning, "r1");
    CHECK_EQ_STR(f.content, "c1");
}

TEST(an_answer_without_any_header)
{
    const char *s[] = {"Just an answer, no header.", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.content, "Just an answer, no header.");
    const char *t[] = {"#C", "final", "#M", "ok", "#E", "plain text after the end", "#R", NULL};
    f = run_all_splits(t);
    CHECK_EQ_STR(f.content, "okplain text after the end");
}

/* Text that cannot begin a header is the answer as it comes, not held until the end
 * (a stream of a model that writes no headers streams). */
TEST(text_that_cannot_begin_a_header_streams_at_once)
{
    llmr_harmony_ids ids = llmr_harmony_gpt_oss_ids();
    llmr_harmony_parser p;
    llmr_harmony_parser_init(&p, &ids);
    fields f = {0};
    llmr_harmony_feed(&p, -1, "\n", 1, on_piece, &f);
    CHECK_EQ_STR(f.content, "\n");
    llmr_harmony_feed(&p, -1, "Hi", 2, on_piece, &f);
    CHECK_EQ_STR(f.content, "\nHi");
    /* once the start says plain text, a recipient further on is words of it, however
     * the text is split (a case the fuzzer found) */
    const char *s[] = {"#S", "hello to=functions.f now", "#E", NULL};
    fields h = run_all_splits(s);
    CHECK_EQ_STR(h.content, "hello to=functions.f now");
    CHECK_EQ_INT(h.calls, 0);
    /* a channel's name or a recipient may still be a header: held */
    llmr_harmony_parser_init(&p, &ids);
    fields g = {0};
    llmr_harmony_feed(&p, -1, " to=functions.f", 15, on_piece, &g);
    llmr_harmony_feed(&p, -1, "analy", 5, on_piece, &g);
    CHECK_EQ_STR(g.content, "");
}

TEST(a_plain_answer_may_hold_angle_brackets_and_channel_words)
{
    const char *s[] = {"Hello <b>friend</b>! 3 < 4, the final word.", "#R", NULL};
    fields f = run_all_splits(s);
    CHECK_EQ_STR(f.content, "Hello <b>friend</b>! 3 < 4, the final word.");
    const char *t[] = {"x <|y and analysis", NULL};
    f = run_all_splits(t);
    CHECK_EQ_STR(f.content, "x <|y and analysis");
    /* a header cut short is no answer */
    const char *u[] = {"#C", "commentary to=functions.f", NULL};
    f = run_all_splits(u);
    CHECK_EQ_STR(f.content, "");
    CHECK_EQ_INT(f.calls, 0);
}

TEST(a_header_too_long_to_be_one_is_the_answer)
{
    static char big[600];
    memset(big, 'x', sizeof big - 1);
    const char *s[] = {big, NULL};
    fields f = run(s, 0);
    CHECK_EQ_INT((int)strlen(f.content), (int)sizeof big - 1);
    /* a character across the limit is not cut between two pieces */
    static char utf[600];
    memset(utf, 'x', sizeof utf - 1);
    memcpy(utf + LLMR_HARMONY_HEADER_MAX - 1, "\xc3\xa9", 2);
    memcpy(utf + 400, "\xe2\x82\xac", 3);
    const char *t[] = {utf, NULL};
    /* a <|channel|> that comes when the header is full: the text before it was the
     * answer, and the token starts a header of its own (its spelling is no text) */
    static char full[LLMR_HARMONY_HEADER_MAX + 1], want[LLMR_HARMONY_HEADER_MAX + 3];
    memset(full, 'y', LLMR_HARMONY_HEADER_MAX);
    snprintf(want, sizeof want, "%sok", full);
    const char *c[] = {"#S", full, "#C", "final", "#M", "ok", "#R", NULL};
    f = run_all_splits(c);
    CHECK_EQ_STR(f.content, want);
    pieces_whole_utf8 = true;
    f = run(t, 0); /* one token: only the limit could cut it */
    CHECK(pieces_whole_utf8);
    CHECK_EQ_STR(f.content, utf);
    for (size_t chunk = 1; chunk <= 7; chunk++) {
        f = run(t, chunk);
        CHECK_EQ_STR(f.content, utf);
    }
}

int main(void)
{
    RUN(reasoning_then_answer);
    RUN(a_tool_call);
    RUN(three_calls_in_one_turn);
    RUN(the_recipient_before_the_channel);
    RUN(a_message_to_a_built_in_tool_is_reasoning);
    RUN(plain_text_ended_by_call_is_the_answer);
    RUN(a_special_token_glued_to_the_name);
    RUN(a_channel_name_without_its_special_token);
    RUN(special_tokens_spelled_out_in_text);
    RUN(a_call_whose_call_token_never_comes);
    RUN(a_plain_answer_may_hold_angle_brackets_and_channel_words);
    RUN(repeated_start_and_missing_end);
    RUN(an_answer_without_any_header);
    RUN(text_that_cannot_begin_a_header_streams_at_once);
    RUN(a_header_too_long_to_be_one_is_the_answer);
    return llmr_test_finish();
}
