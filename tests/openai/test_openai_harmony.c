/* Tests of the OpenAI wire format's side of harmony models: what a chat template is
 * given (llmr_oai_template_input: the request's own messages and tools for most
 * templates, gpt-oss's shape for a harmony one), and the answer built from a parser's
 * pieces (openai_answer.h), whole and as stream deltas, with tool_choice,
 * parallel_tool_calls and include_reasoning. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "openai/openai_answer.h"
#include "openai/openai_api.h"

static void parse_ok(const char *body, llmr_oai_request *r)
{
    llmr_oai_error err;
    memset(&err, 0, sizeof err);
    if (!llmr_oai_parse(LLMR_OAI_CHAT, body, strlen(body), r, &err)) {
        llmr_test_fail(__FILE__, __LINE__, "refused %s: %s", body, err.message);
        memset(r, 0, sizeof *r);
    }
}

/* Compact JSON of obj (not taken), or "(null)"; malloc'd. */
static char *text_of(const json_t *obj)
{
    char *t = obj ? json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    return t ? t : strdup("(null)");
}

static void expect_json_at(int line, const json_t *obj, const char *expected)
{
    char *t = text_of(obj);
    if (strcmp(t, expected) != 0)
        llmr_test_fail(__FILE__, line, "JSON\n  got      %s\n  expected %s", t, expected);
    free(t);
}
#define EXPECT_JSON(obj, expected) expect_json_at(__LINE__, obj, expected)

/* ---- template input ------------------------------------------------------------------- */

#define TOOLS                                                                                   \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"description\":\"A\"}},"    \
    "{\"type\":\"function\",\"function\":{\"name\":\"b\"}}]"

/* A user turn, an assistant's two calls with reasoning, their results in the other
 * order, and a final answer. */
static const char round_trip[] =
    "{\"model\":\"m\"," TOOLS ",\"messages\":["
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"},{\"type\":\"text\",\"text\":\"y\"}]},"
    "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"think\",\"tool_calls\":["
    "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"k\\\":1}\"}},"
    "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":\"not json\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"B\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"A\"},"
    "{\"role\":\"assistant\",\"content\":\"done\",\"tool_calls\":[],\"thinking\":null}]}";

TEST(other_templates_get_the_request_as_it_is)
{
    llmr_oai_request r;
    parse_ok(round_trip, &r);
    json_t *m, *t;
    llmr_oai_error err;
    CHECK(llmr_oai_template_input(&r, false, &m, &t, &err));
    CHECK(m == r.messages);
    CHECK(t == r.tools);
    json_decref(m);
    json_decref(t);
    llmr_oai_request_free(&r);
}

TEST(a_harmony_template_gets_gpt_oss_shape)
{
    llmr_oai_request r;
    parse_ok(round_trip, &r);
    json_t *m, *t;
    llmr_oai_error err;
    CHECK(llmr_oai_template_input(&r, true, &m, &t, &err));
    EXPECT_JSON(m,
                "[{\"role\":\"user\",\"content\":\"x\\ny\"},"
                "{\"role\":\"assistant\",\"reasoning_content\":\"think\",\"thinking\":\"think\","
                "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"a\","
                "\"arguments\":{\"k\":1}}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"A\"},"
                "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c2\",\"type\":\"function\","
                "\"function\":{\"name\":\"b\",\"arguments\":\"not json\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"B\"},"
                "{\"role\":\"assistant\",\"content\":\"done\"}]");
    EXPECT_JSON(t, "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"description\":\"A\"}},"
                   "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"description\":\"\"}}]");
    /* the request itself is left as it was */
    CHECK(json_is_null(json_object_get(json_array_get(r.messages, 1), "content")));
    json_decref(m);
    json_decref(t);
    llmr_oai_request_free(&r);
}

/* An answer sent back as it came: reasoning, a commentary preamble and a call.  gpt-oss's
 * template refuses content and thinking together on a call turn: the reasoning stays. */
TEST(a_call_turn_with_reasoning_and_a_preamble_keeps_the_reasoning)
{
    llmr_oai_request r;
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
             "{\"role\":\"assistant\",\"content\":\"Let me look.\",\"reasoning_content\":\"think\","
             "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"a\","
             "\"arguments\":\"{}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"A\"}],"
             "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}",
             &r);
    json_t *m, *t;
    llmr_oai_error err;
    CHECK(llmr_oai_template_input(&r, true, &m, &t, &err));
    EXPECT_JSON(m,
                "[{\"role\":\"user\",\"content\":\"x\"},"
                "{\"role\":\"assistant\",\"reasoning_content\":\"think\",\"thinking\":\"think\","
                "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"a\","
                "\"arguments\":{}}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"A\"}]");
    json_decref(m);
    json_decref(t);
    llmr_oai_request_free(&r);
}

TEST(tool_choice_decides_the_tools_offered)
{
    llmr_oai_request r;
    json_t *m, *t;
    llmr_oai_error err;
    parse_ok("{\"model\":\"m\"," TOOLS ",\"tool_choice\":\"none\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             &r);
    CHECK(llmr_oai_template_input(&r, true, &m, &t, &err));
    CHECK(t == NULL);
    json_decref(m);
    llmr_oai_request_free(&r);
    parse_ok("{\"model\":\"m\"," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"b\"}},"
             "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             &r);
    CHECK(llmr_oai_template_input(&r, true, &m, &t, &err));
    EXPECT_JSON(t, "[{\"type\":\"function\",\"function\":{\"name\":\"b\",\"description\":\"\"}}]");
    json_decref(m);
    json_decref(t);
    /* a template that is not harmony: its answers are not read for calls, so a named
     * function cannot be honoured (a 400 on tool_choice); "auto" gives it every tool,
     * "none" none */
    CHECK(!llmr_oai_template_input(&r, false, &m, &t, &err));
    CHECK_EQ_INT(err.status, 400);
    CHECK_EQ_STR(err.param, "tool_choice");
    llmr_oai_request_free(&r);
    parse_ok("{\"model\":\"m\"," TOOLS ",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", &r);
    CHECK(llmr_oai_template_input(&r, false, &m, &t, &err));
    CHECK(t == r.tools);
    json_decref(m);
    json_decref(t);
    llmr_oai_request_free(&r);
    parse_ok("{\"model\":\"m\"," TOOLS ",\"tool_choice\":\"none\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             &r);
    CHECK(llmr_oai_template_input(&r, false, &m, &t, &err));
    CHECK(t == NULL);
    json_decref(m);
    llmr_oai_request_free(&r);
    parse_ok("{\"model\":\"m\"," TOOLS ",\"tool_choice\":\"required\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
             &r);
    CHECK(llmr_oai_template_input(&r, true, &m, &t, &err));
    CHECK_EQ_INT(json_array_size(t), 2);
    json_decref(m);
    json_decref(t);
    llmr_oai_request_free(&r);
}

/* ---- answers -------------------------------------------------------------------------- */

/* Feeds pieces: "R:text" reasoning, "C:text" content, "S:name" call start, "A:text"
 * arguments, "E" call end; the deltas' compact JSON joined by " | " into deltas. */
static llmr_oai_answer *feed(const llmr_oai_answer_options *o, const char *const *pieces,
                             char *deltas, size_t size)
{
    llmr_oai_answer *a = llmr_oai_answer_new(o);
    deltas[0] = '\0';
    for (size_t i = 0; pieces[i]; i++) {
        const char *p = pieces[i] + 2;
        size_t n = strlen(pieces[i]) > 2 ? strlen(p) : 0;
        json_t *d = NULL;
        switch (pieces[i][0]) {
        case 'R': d = llmr_oai_answer_reasoning(a, p, n); break;
        case 'C': d = llmr_oai_answer_content(a, p, n); break;
        case 'S': d = llmr_oai_answer_call_start(a, p, n); break;
        case 'A': d = llmr_oai_answer_call_args(a, p, n); break;
        default: llmr_oai_answer_call_end(a); break;
        }
        if (!d)
            continue;
        /* a call's id is random: checked, then written as ID */
        json_t *calls = json_object_get(d, "tool_calls");
        json_t *id = json_object_get(json_array_get(calls, 0), "id");
        if (id) {
            CHECK(strncmp(json_string_value(id), "call_", 5) == 0);
            CHECK_EQ_INT(strlen(json_string_value(id)), 29);
            json_object_set_new(json_array_get(calls, 0), "id", json_string("ID"));
        }
        char *t = text_of(d);
        snprintf(deltas + strlen(deltas), size - strlen(deltas), "%s%s", deltas[0] ? " | " : "", t);
        free(t);
        json_decref(d);
    }
    CHECK(!llmr_oai_answer_failed(a));
    return a;
}

/* The message with each call's id written as ID. */
static void expect_message_at(int line, const llmr_oai_answer *a, const char *expected)
{
    json_t *m = llmr_oai_answer_message(a);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(m, "tool_calls"), i, c) {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (!id || strncmp(id, "call_", 5) != 0)
            llmr_test_fail(__FILE__, line, "call id %s", id ? id : "(none)");
        json_object_set_new(c, "id", json_string("ID"));
    }
    expect_json_at(line, m, expected);
    json_decref(m);
}
#define EXPECT_MESSAGE(a, expected) expect_message_at(__LINE__, a, expected)

static const llmr_oai_answer_options all_on = {true, true, true};

TEST(reasoning_and_answer_come_apart)
{
    const char *p[] = {"R:Think", "R:", "R: more.", "C:Hello", "C:!", NULL};
    char d[2048];
    llmr_oai_answer *a = feed(&all_on, p, d, sizeof d);
    CHECK_EQ_STR(d, "{\"reasoning_content\":\"Think\",\"reasoning\":\"Think\"} | "
                    "{\"reasoning_content\":\" more.\",\"reasoning\":\" more.\"} | "
                    "{\"content\":\"Hello\"} | {\"content\":\"!\"}");
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":\"Hello!\",\"refusal\":null,"
                      "\"reasoning_content\":\"Think more.\",\"reasoning\":\"Think more.\"}");
    CHECK_EQ_STR(llmr_oai_answer_finish_reason(a, false), "stop");
    CHECK_EQ_STR(llmr_oai_answer_finish_reason(a, true), "length");
    llmr_oai_answer_free(a);

    llmr_oai_answer_options no_reasoning = {false, true, true};
    a = feed(&no_reasoning, p, d, sizeof d);
    CHECK_EQ_STR(d, "{\"content\":\"Hello\"} | {\"content\":\"!\"}");
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":\"Hello!\",\"refusal\":null}");
    llmr_oai_answer_free(a);
}

static const char *const three_calls[] = {"R:r", "S:a", "A:{\"x\":", "A:1}", "E",
                                          "S:b", "A:{}", "E", "S:c", "E", NULL};

TEST(calls_are_tool_calls)
{
    char d[4096];
    llmr_oai_answer *a = feed(&all_on, three_calls, d, sizeof d);
    CHECK_EQ_STR(d,
                 "{\"reasoning_content\":\"r\",\"reasoning\":\"r\"} | "
                 "{\"tool_calls\":[{\"index\":0,\"id\":\"ID\",\"type\":\"function\",\"function\":"
                 "{\"name\":\"a\",\"arguments\":\"\"}}]} | "
                 "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"x\\\":\"}}]} | "
                 "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]} | "
                 "{\"tool_calls\":[{\"index\":1,\"id\":\"ID\",\"type\":\"function\",\"function\":"
                 "{\"name\":\"b\",\"arguments\":\"\"}}]} | "
                 "{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{}\"}}]} | "
                 "{\"tool_calls\":[{\"index\":2,\"id\":\"ID\",\"type\":\"function\",\"function\":"
                 "{\"name\":\"c\",\"arguments\":\"\"}}]}");
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":null,\"refusal\":null,"
                      "\"reasoning_content\":\"r\",\"reasoning\":\"r\",\"tool_calls\":["
                      "{\"id\":\"ID\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}},"
                      "{\"id\":\"ID\",\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":\"{}\"}},"
                      "{\"id\":\"ID\",\"type\":\"function\",\"function\":{\"name\":\"c\",\"arguments\":\"\"}}]}");
    CHECK_EQ_STR(llmr_oai_answer_finish_reason(a, false), "tool_calls");
    /* the ids differ */
    json_t *m = llmr_oai_answer_message(a);
    json_t *calls = json_object_get(m, "tool_calls");
    CHECK(strcmp(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                 json_string_value(json_object_get(json_array_get(calls, 1), "id"))) != 0);
    json_decref(m);
    llmr_oai_answer_free(a);
}

TEST(parallel_tool_calls_false_keeps_the_first)
{
    llmr_oai_answer_options one = {true, true, false};
    char d[4096];
    llmr_oai_answer *a = feed(&one, three_calls, d, sizeof d);
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":null,\"refusal\":null,"
                      "\"reasoning_content\":\"r\",\"reasoning\":\"r\",\"tool_calls\":["
                      "{\"id\":\"ID\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}}]}");
    CHECK(strstr(d, "\"index\":1") == NULL);
    CHECK_EQ_STR(llmr_oai_answer_finish_reason(a, false), "tool_calls");
    llmr_oai_answer_free(a);
}

TEST(without_tool_calls_a_call_is_text)
{
    llmr_oai_answer_options no_calls = {true, false, true};
    const char *p[] = {"S:a", "A:{\"x\":1}", "E", "C:ok", NULL};
    char d[2048];
    llmr_oai_answer *a = feed(&no_calls, p, d, sizeof d);
    CHECK_EQ_STR(d, "{\"content\":\"{\\\"x\\\":1}\"} | {\"content\":\"ok\"}");
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":\"{\\\"x\\\":1}ok\",\"refusal\":null}");
    CHECK_EQ_STR(llmr_oai_answer_finish_reason(a, false), "stop");
    llmr_oai_answer_free(a);
    /* nothing at all: content "" */
    const char *none[] = {NULL};
    a = feed(&all_on, none, d, sizeof d);
    CHECK_EQ_STR(d, "");
    EXPECT_MESSAGE(a, "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}");
    llmr_oai_answer_free(a);
}

TEST(responses_and_chunks_around_a_message)
{
    llmr_oai_usage u = {3, 4};
    json_t *msg = json_pack("{s:s, s:n}", "role", "assistant", "content");
    json_t *o = llmr_oai_chat_response_message("chatcmpl-1", "m", 7, msg, "tool_calls", &u, NULL);
    EXPECT_JSON(o, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":7,\"model\":\"m\","
                   "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null},"
                   "\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,"
                   "\"completion_tokens\":4,\"total_tokens\":7}}");
    json_decref(o);
    o = llmr_oai_chat_delta_chunk("chatcmpl-1", "m", 7, json_pack("{s:s}", "reasoning", "x"), NULL,
                                  NULL, true);
    EXPECT_JSON(o, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7,"
                   "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"x\"},"
                   "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}");
    json_decref(o);
    o = llmr_oai_chat_delta_chunk("chatcmpl-1", "m", 7, NULL, "stop", NULL, false);
    EXPECT_JSON(o, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":7,"
                   "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},"
                   "\"logprobs\":null,\"finish_reason\":\"stop\"}]}");
    json_decref(o);
}

int main(void)
{
    RUN(other_templates_get_the_request_as_it_is);
    RUN(a_harmony_template_gets_gpt_oss_shape);
    RUN(a_call_turn_with_reasoning_and_a_preamble_keeps_the_reasoning);
    RUN(tool_choice_decides_the_tools_offered);
    RUN(reasoning_and_answer_come_apart);
    RUN(calls_are_tool_calls);
    RUN(parallel_tool_calls_false_keeps_the_first);
    RUN(without_tool_calls_a_call_is_text);
    RUN(responses_and_chunks_around_a_message);
    return llmr_test_finish();
}
