/* Tests of the OpenAI wire format: requests of both kinds parsed with every field,
 * each mistake refused with its status, code, parameter and a message saying what
 * is wrong; responses, stream chunks, logprobs, errors and the models list compared
 * as compact JSON text; SSE framing; ids. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "openai/openai_api.h"

/* ---- helpers ----------------------------------------------------------------------- */

static bool parse(llmr_oai_kind kind, const char *body, llmr_oai_request *r, llmr_oai_error *err)
{
    return llmr_oai_parse(kind, body, strlen(body), r, err);
}

/* Parses a body that must be accepted; reports the error message when it is not. */
static bool parse_ok_at(int line, llmr_oai_kind kind, const char *body, llmr_oai_request *r)
{
    llmr_oai_error err;
    memset(&err, 0, sizeof err);
    if (parse(kind, body, r, &err))
        return true;
    llmr_test_fail(__FILE__, line, "parse refused %s: %u %s [%s] %s", body, err.status,
                   err.code ? err.code : "-", err.param, err.message);
    return false;
}
#define PARSE_OK(kind, body, r) parse_ok_at(__LINE__, kind, body, r)

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

/* Parses len bytes that must be refused with that status, code and param, and a
 * message holding each of the (up to two) fragments. */
static void expect_error_at(int line, llmr_oai_kind kind, const char *body, size_t len,
                            unsigned status, const char *code, const char *param,
                            const char *fragment, const char *fragment2)
{
    llmr_oai_request r;
    llmr_oai_error err;
    memset(&r, 0xab, sizeof r); /* the parser must clear it */
    memset(&err, 0, sizeof err);
    if (llmr_oai_parse(kind, body, len, &r, &err)) {
        llmr_test_fail(__FILE__, line, "parse accepted %.*s", (int)len, body);
        llmr_oai_request_free(&r);
        return;
    }
    if (!all_zero(&r, sizeof r))
        llmr_test_fail(__FILE__, line, "a refused request is not left zeroed");
    if (err.status != status)
        llmr_test_fail(__FILE__, line, "status %u, expected %u (%s)", err.status, status,
                       err.message);
    if (!err.type || strcmp(err.type, "invalid_request_error") != 0)
        llmr_test_fail(__FILE__, line, "type %s", err.type ? err.type : "(null)");
    if (!err.code || strcmp(err.code, code) != 0)
        llmr_test_fail(__FILE__, line, "code %s, expected %s (%s)", err.code ? err.code : "(null)",
                       code, err.message);
    if (strcmp(err.param, param) != 0)
        llmr_test_fail(__FILE__, line, "param '%s', expected '%s' (%s)", err.param, param,
                       err.message);
    if (strlen(err.message) < 20)
        llmr_test_fail(__FILE__, line, "message too short to help: '%s'", err.message);
    if (fragment && !strstr(err.message, fragment))
        llmr_test_fail(__FILE__, line, "message '%s' lacks '%s'", err.message, fragment);
    if (fragment2 && !strstr(err.message, fragment2))
        llmr_test_fail(__FILE__, line, "message '%s' lacks '%s'", err.message, fragment2);
}
#define EXPECT_ERR(kind, body, code, param, fragment)                                              \
    expect_error_at(__LINE__, kind, body, strlen(body), 400, code, param, fragment, NULL)
#define EXPECT_ERR2(kind, body, code, param, fragment, fragment2)                                  \
    expect_error_at(__LINE__, kind, body, strlen(body), 400, code, param, fragment, fragment2)
#define CHAT LLMR_OAI_CHAT
#define COMP LLMR_OAI_COMPLETION

/* A chat body with one user message and the given extra members. */
#define CHAT_BODY(extra)                                                                           \
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" extra "}"
#define COMP_BODY(extra) "{\"model\":\"m\",\"prompt\":\"hi\"" extra "}"

/* Compares the compact wire text of obj (taken) with the expected text. */
static void expect_json_at(int line, json_t *obj, const char *expected)
{
    if (!obj) {
        llmr_test_fail(__FILE__, line, "no JSON built (expected %s)", expected);
        return;
    }
    char *text = llmr_oai_dumps(obj);
    if (!text || strcmp(text, expected) != 0)
        llmr_test_fail(__FILE__, line, "JSON\n  got      %s\n  expected %s", text ? text : "(null)",
                       expected);
    free(text);
    json_decref(obj);
}
#define EXPECT_JSON(obj, expected) expect_json_at(__LINE__, obj, expected)

/* ---- chat requests ----------------------------------------------------------------- */

TEST(chat_request_with_every_field_is_read)
{
    const char *body =
        "{\"model\":\"gpt-oss-20b\",\n"
        " \"messages\":[\n"
        "  {\"role\":\"system\",\"content\":\"Be brief.\"},\n"
        "  {\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Rules.\"}]},\n"
        "  {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather?\"},"
        "{\"type\":\"text\",\"text\":\" In Paris.\"}],\"name\":\"ann\"},\n"
        "  {\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"need a tool\","
        "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},\n"
        "  {\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"},\n"
        "  {\"role\":\"assistant\",\"content\":\"Sunny.\",\"thinking\":\"easy\"}],\n"
        " \"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"weather\","
        "\"description\":\"Weather now\",\"parameters\":{\"type\":\"object\"}}}],\n"
        " \"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\n"
        " \"chat_template_kwargs\":{\"enable_thinking\":false},\n"
        " \"stream\":true,\"stream_options\":{\"include_usage\":true},\n"
        " \"max_tokens\":50,\"max_completion_tokens\":100,\n"
        " \"temperature\":0.7,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"repetition_penalty\":1.1,"
        "\n"
        " \"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"seed\":-1,\n"
        " \"stop\":[\"\\n\\n\",\"END\"],\"n\":1,\"user\":\"u-42\",\"logit_bias\":{},\n"
        " \"response_format\":{\"type\":\"text\"},\"logprobs\":true,\"top_logprobs\":5,\n"
        " \"modalities\":[\"text\"],\"store\":false,\"metadata\":{\"a\":\"b\"}}";
    llmr_oai_request r;
    if (!PARSE_OK(CHAT, body, &r))
        return;
    CHECK_EQ_INT(r.kind, LLMR_OAI_CHAT);
    CHECK_EQ_STR(r.model, "gpt-oss-20b");
    CHECK(json_is_array(r.messages));
    CHECK_EQ_INT(json_array_size(r.messages), 6);
    /* the messages are kept as sent, tool calls included */
    json_t *call = json_array_get(json_object_get(json_array_get(r.messages, 3), "tool_calls"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(call, "id")), "call_1");
    CHECK_EQ_STR(
        json_string_value(json_object_get(json_array_get(r.messages, 3), "reasoning_content")),
        "need a tool");
    CHECK(json_is_array(r.tools));
    CHECK_EQ_INT(json_array_size(r.tools), 1);
    CHECK(json_is_object(r.template_kwargs));
    CHECK(json_is_false(json_object_get(r.template_kwargs, "enable_thinking")));
    CHECK(r.prompt == NULL && r.prompt_ids == NULL);
    CHECK(r.stream);
    CHECK(r.include_usage);
    CHECK(r.max_tokens_set);
    CHECK_EQ_INT(r.max_tokens, 100); /* max_completion_tokens wins */
    CHECK(r.temperature == 0.7);
    CHECK(r.top_p == 0.9);
    CHECK_EQ_INT(r.top_k, 40);
    CHECK(r.min_p == 0.05);
    CHECK(r.repetition_penalty == 1.1);
    CHECK(r.presence_penalty == 0.5);
    CHECK(r.frequency_penalty == -0.5);
    CHECK(r.seed_set);
    CHECK(r.seed == UINT64_MAX); /* -1's bit pattern */
    CHECK_EQ_INT(r.stop_count, 2);
    CHECK_EQ_STR(r.stop[0], "\n\n");
    CHECK_EQ_INT(r.stop_len[0], 2);
    CHECK_EQ_STR(r.stop[1], "END");
    CHECK_EQ_INT(r.stop_len[1], 3);
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 5);
    CHECK_EQ_STR(r.user, "u-42");
    llmr_oai_request_free(&r);
    CHECK(all_zero(&r, sizeof r));
    llmr_oai_request_free(&r); /* twice is harmless */
    CHECK(all_zero(&r, sizeof r));
}

TEST(chat_request_defaults)
{
    llmr_oai_request r;
    if (!PARSE_OK(CHAT, CHAT_BODY(""), &r))
        return;
    CHECK_EQ_STR(r.model, "m");
    CHECK(!r.stream && !r.include_usage && !r.max_tokens_set && !r.seed_set && !r.logprobs);
    CHECK(r.temperature == 1 && r.top_p == 1 && r.repetition_penalty == 1);
    CHECK(r.top_k == 0 && r.min_p == 0 && r.presence_penalty == 0 && r.frequency_penalty == 0);
    CHECK_EQ_INT(r.stop_count, 0);
    CHECK(r.tools == NULL && r.template_kwargs == NULL && r.user == NULL);
    llmr_oai_request_free(&r);
}

TEST(null_means_not_given_and_unknown_fields_are_ignored)
{
    llmr_oai_request r;
    if (!PARSE_OK(CHAT,
                  CHAT_BODY(",\"temperature\":null,\"max_tokens\":null,\"stop\":null,\"seed\":null,"
                            "\"tools\":null,\"stream\":null,\"stream_options\":null,\"n\":null,"
                            "\"logprobs\":null,\"top_logprobs\":null,\"user\":null,"
                            "\"response_format\":null,\"logit_bias\":null,\"tool_choice\":null,"
                            "\"chat_template_kwargs\":null,\"top_k\":-1,"
                            "\"some_future_field\":{\"x\":[1,2]},\"service_tier\":\"auto\""),
                  &r))
        return;
    CHECK(r.temperature == 1);
    CHECK(!r.max_tokens_set && !r.seed_set && !r.stream && !r.logprobs);
    CHECK(r.tools == NULL && r.template_kwargs == NULL && r.user == NULL);
    CHECK_EQ_INT(r.stop_count, 0);
    CHECK_EQ_INT(r.top_k, 0); /* -1: off, as other servers say it */
    llmr_oai_request_free(&r);
}

/* llmr_prompt_text: the request-text ranges of a router's llmr_prompt, in order, apart
 * and within it; read only with llmr_prompt. */
TEST(rendered_prompt_text_ranges)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abcdefgh\",\"llmr_prompt_text\":[[1,2],[3,1],[6,2]]"), &r)) {
        CHECK_EQ_INT(r.prompt_text.n, 2); /* [1,2] and [3,1] touch: one range */
        CHECK(r.prompt_text.n == 2 && r.prompt_text.v[0].off == 1 && r.prompt_text.v[0].len == 3 &&
              r.prompt_text.v[1].off == 6 && r.prompt_text.v[1].len == 2);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT, CHAT_BODY(",\"llmr_prompt_text\":[[1,2]]"), &r)) {
        CHECK_EQ_INT(r.prompt_text.n, 0);
        llmr_oai_request_free(&r);
    }
    EXPECT_ERR(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abc\",\"llmr_prompt_text\":[[2,2]]"), "invalid_value",
               "llmr_prompt_text", "within");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abcdef\",\"llmr_prompt_text\":[[4,1],[1,1]]"), "invalid_value",
               "llmr_prompt_text", "in order");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abc\",\"llmr_prompt_text\":[[0,0]]"), "invalid_type",
               "llmr_prompt_text", "[offset, length]");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abc\",\"llmr_prompt_text\":[[0,1,2]]"), "invalid_type",
               "llmr_prompt_text", "[offset, length]");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"llmr_prompt\":\"abc\",\"llmr_prompt_text\":{}"), "invalid_type",
               "llmr_prompt_text", "[offset, length]");
}

TEST(chat_max_tokens_alone_and_integer_numbers)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(",\"max_tokens\":7,\"temperature\":0,\"top_p\":1,\"stop\":\"x\""),
                 &r)) {
        CHECK(r.max_tokens_set);
        CHECK_EQ_INT(r.max_tokens, 7);
        CHECK(r.temperature == 0); /* integers are numbers */
        CHECK_EQ_INT(r.stop_count, 1);
        CHECK_EQ_STR(r.stop[0], "x");
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT,
                 CHAT_BODY(",\"max_completion_tokens\":2147483647,\"seed\":"
                           "9223372036854775807,\"stop\":[]"),
                 &r)) {
        CHECK_EQ_INT(r.max_tokens, 2147483647);
        CHECK(r.seed == 9223372036854775807ull);
        CHECK_EQ_INT(r.stop_count, 0);
        llmr_oai_request_free(&r);
    }
}

TEST(chat_reasoning_effort_reaches_the_template)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(",\"reasoning_effort\":\"low\""), &r)) {
        CHECK_EQ_STR(json_string_value(json_object_get(r.template_kwargs, "reasoning_effort")),
                     "low");
        llmr_oai_request_free(&r);
    }
    /* the kwargs' own value wins */
    if (PARSE_OK(CHAT,
                 CHAT_BODY(",\"reasoning_effort\":\"low\",\"chat_template_kwargs\":"
                           "{\"reasoning_effort\":\"high\",\"x\":1}"),
                 &r)) {
        CHECK_EQ_STR(json_string_value(json_object_get(r.template_kwargs, "reasoning_effort")),
                     "high");
        CHECK_EQ_INT(json_object_size(r.template_kwargs), 2);
        llmr_oai_request_free(&r);
    }
    EXPECT_ERR(CHAT, CHAT_BODY(",\"reasoning_effort\":\"banana\""), "invalid_value",
               "reasoning_effort", "Supported values are: 'low', 'medium', and 'high'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"reasoning_effort\":1"), "invalid_type", "reasoning_effort",
               "expected a string");
}

TEST(chat_content_may_hold_nul_but_names_may_not)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}",
                 &r)) {
        json_t *c = json_object_get(json_array_get(r.messages, 0), "content");
        CHECK_EQ_INT(json_string_length(c), 3);
        llmr_oai_request_free(&r);
    }
    EXPECT_ERR(CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\","
               "\"name\":\"a\\u0000\"}]}",
               "invalid_value", "messages[0].name", "NUL");
    EXPECT_ERR(CHAT,
               "{\"model\":\"m\\u0000x\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
               "invalid_value", "model", "NUL");
}

TEST(chat_assistant_content_may_be_absent_or_null)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                 "{\"role\":\"assistant\"},{\"role\":\"assistant\",\"content\":null,"
                 "\"tool_calls\":[]},{\"role\":\"assistant\",\"content\":[{\"type\":"
                 "\"refusal\",\"refusal\":\"no\"}]},{\"role\":\"user\",\"content\":\"b\"}]}",
                 &r)) {
        CHECK_EQ_INT(json_array_size(r.messages), 5);
        llmr_oai_request_free(&r);
    }
}

/* ---- completion requests ----------------------------------------------------------- */

TEST(completion_request_with_every_field_is_read)
{
    const char *body =
        "{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":16,"
        "\"temperature\":1.5,\"top_p\":0.5,\"top_k\":0,\"min_p\":1,\"repetition_penalty\":0.8,"
        "\"presence_penalty\":2,\"frequency_penalty\":-2,\"seed\":42,\"stop\":\".\","
        "\"n\":1,\"best_of\":1,\"echo\":false,\"suffix\":null,\"logprobs\":3,\"user\":\"x\","
        "\"stream\":true,\"stream_options\":{\"include_usage\":false}}";
    llmr_oai_request r;
    if (!PARSE_OK(COMP, body, &r))
        return;
    CHECK_EQ_INT(r.kind, LLMR_OAI_COMPLETION);
    CHECK_EQ_STR(r.model, "tiny");
    CHECK(r.messages == NULL && r.tools == NULL && r.template_kwargs == NULL);
    CHECK_EQ_STR(r.prompt, "Once upon a time");
    CHECK_EQ_INT(r.prompt_len, 16);
    CHECK(r.prompt_ids == NULL);
    CHECK(r.max_tokens_set);
    CHECK_EQ_INT(r.max_tokens, 16);
    CHECK(r.temperature == 1.5 && r.top_p == 0.5 && r.top_k == 0 && r.min_p == 1);
    CHECK(r.repetition_penalty == 0.8);
    CHECK(r.presence_penalty == 2 && r.frequency_penalty == -2);
    CHECK(r.seed_set && r.seed == 42);
    CHECK_EQ_INT(r.stop_count, 1);
    CHECK_EQ_STR(r.stop[0], ".");
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK(r.stream && !r.include_usage);
    CHECK_EQ_STR(r.user, "x");
    llmr_oai_request_free(&r);
    CHECK(all_zero(&r, sizeof r));
}

TEST(completion_prompt_forms)
{
    llmr_oai_request r;
    if (PARSE_OK(COMP, "{\"model\":\"m\",\"prompt\":[\"one\"]}", &r)) {
        CHECK_EQ_STR(r.prompt, "one");
        CHECK_EQ_INT(r.prompt_len, 3);
        CHECK(!r.logprobs); /* not given: off */
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(COMP, "{\"model\":\"m\",\"prompt\":[1,0,2147483647]}", &r)) {
        CHECK(r.prompt == NULL);
        CHECK_EQ_INT(r.prompt_id_count, 3);
        CHECK_EQ_INT(r.prompt_ids[0], 1);
        CHECK_EQ_INT(r.prompt_ids[1], 0);
        CHECK_EQ_INT(r.prompt_ids[2], 2147483647);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(COMP, "{\"model\":\"m\",\"prompt\":[[5,6]],\"logprobs\":0}", &r)) {
        CHECK_EQ_INT(r.prompt_id_count, 2);
        CHECK_EQ_INT(r.prompt_ids[1], 6);
        CHECK(r.logprobs); /* 0: the sampled token's only */
        CHECK_EQ_INT(r.top_logprobs, 0);
        llmr_oai_request_free(&r);
    }
    /* empty text and text holding NUL: the length says where it ends */
    if (PARSE_OK(COMP, "{\"model\":\"m\",\"prompt\":\"\"}", &r)) {
        CHECK_EQ_STR(r.prompt, "");
        CHECK_EQ_INT(r.prompt_len, 0);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(COMP, "{\"model\":\"m\",\"prompt\":\"a\\u0000b\\u00e9\"}", &r)) {
        CHECK_EQ_INT(r.prompt_len, 5);
        CHECK(memcmp(r.prompt, "a\0b\xc3\xa9", 6) == 0);
        llmr_oai_request_free(&r);
    }
}

TEST(completion_prompt_mistakes)
{
    EXPECT_ERR(COMP, "{\"model\":\"m\"}", "missing_required_parameter", "prompt",
               "Missing required parameter: 'prompt'.");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":null}", "missing_required_parameter", "prompt",
               NULL);
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", "unsupported_value", "prompt",
               "only one prompt per request is supported");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[[1],[2],[3]]}", "unsupported_value", "prompt",
               "got 3");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[]}", "invalid_value", "prompt", "empty array");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[[]]}", "invalid_value", "prompt[0]",
               "empty array");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[1,-1]}", "invalid_value", "prompt[1]",
               "-1 is not a token id");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[[1,2147483648]]}", "invalid_value",
               "prompt[0][1]", "2147483648");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[1,\"a\"]}", "invalid_type", "prompt[1]",
               "but got a string instead");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[1.5]}", "invalid_type", "prompt[0]",
               "a decimal number");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":[{}]}", "invalid_type", "prompt[0]",
               "but got an object instead");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":7}", "invalid_type", "prompt",
               "Invalid type for 'prompt': expected a string, an array of one string, or an "
               "array of token ids, but got an integer instead.");
}

TEST(completion_unsupported_features)
{
    EXPECT_ERR(COMP, COMP_BODY(",\"echo\":true"), "unsupported_value", "echo", "not supported");
    EXPECT_ERR(COMP, COMP_BODY(",\"echo\":1"), "invalid_type", "echo", "expected a boolean");
    EXPECT_ERR(COMP, COMP_BODY(",\"suffix\":\"end\""), "unsupported_parameter", "suffix",
               "not supported");
    EXPECT_ERR(COMP, COMP_BODY(",\"suffix\":3"), "invalid_type", "suffix", NULL);
    EXPECT_ERR(COMP, COMP_BODY(",\"best_of\":3"), "unsupported_value", "best_of", "got 3");
    EXPECT_ERR(COMP, COMP_BODY(",\"best_of\":0"), "invalid_value", "best_of", ">= 1");
    EXPECT_ERR(COMP, COMP_BODY(",\"logprobs\":6"), "invalid_value", "logprobs",
               "Invalid 'logprobs': integer above maximum value. Expected a value <= 5, but got 6 "
               "instead.");
    EXPECT_ERR(COMP, COMP_BODY(",\"logprobs\":true"), "invalid_type", "logprobs",
               "expected an integer, but got a boolean instead");
    llmr_oai_request r;
    if (PARSE_OK(COMP, COMP_BODY(",\"suffix\":\"\",\"echo\":false,\"best_of\":1"), &r))
        llmr_oai_request_free(&r);
}

/* ---- the body ---------------------------------------------------------------------- */

TEST(bodies_that_are_not_json_objects)
{
    expect_error_at(__LINE__, CHAT, "", 0, 400, "invalid_json", "", "empty", NULL);
    expect_error_at(__LINE__, CHAT, NULL, 0, 400, "invalid_json", "", "empty", NULL);
    EXPECT_ERR(CHAT, "  \n ", "invalid_json", "", "empty");
    expect_error_at(__LINE__, CHAT, "\0\0", 2, 400, "invalid_json", "", "not valid JSON", NULL);
    EXPECT_ERR2(CHAT, "{\"model\":\"m\",\n \"messages\": [}", "invalid_json", "",
                "not valid JSON (line 2, column", "Expected a JSON object");
    EXPECT_ERR(CHAT, "{\"model\":\"m\"} trailing", "invalid_json", "", "not valid JSON");
    EXPECT_ERR(CHAT, "{\"model\":\"a\",\"model\":\"b\"}", "invalid_json", "", "duplicate");
    EXPECT_ERR(CHAT, "[1,2]", "invalid_json", "", "must be a JSON object, but it is an array");
    EXPECT_ERR(CHAT, "\"text\"", "invalid_json", "", "but it is a string");
    EXPECT_ERR(CHAT, "42", "invalid_json", "", "but it is an integer");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":\"\\ud800\"}", "invalid_json", "",
               "not valid JSON");
}

TEST(invalid_utf8_is_named_with_its_place)
{
    /* a lone 0xFF inside a string on line 2, and a truncated character at the end */
    EXPECT_ERR2(COMP,
                "{\"model\":\"m\",\n\"prompt\":\"ab\xff"
                "cd\"}",
                "invalid_json", "", "not valid UTF-8", "0xFF at offset 26 (line 2, column 13)");
    EXPECT_ERR(COMP, "{\"model\":\"m\",\"prompt\":\"\xc3", "invalid_json", "", "UTF-8");
    EXPECT_ERR(CHAT, "{\"model\":\"\xc0\xaf\"}", "invalid_json", "", "0xC0");
}

/* ---- model and messages ------------------------------------------------------------ */

TEST(model_mistakes)
{
    EXPECT_ERR(CHAT, "{\"messages\":[]}", "missing_required_parameter", "model",
               "Missing required parameter: 'model'.");
    EXPECT_ERR(CHAT, "{\"model\":5,\"messages\":[]}", "invalid_type", "model",
               "Invalid type for 'model': expected a string, but got an integer instead.");
    EXPECT_ERR(CHAT, "{\"model\":\"\",\"messages\":[]}", "invalid_value", "model", "empty string");
}

TEST(message_list_mistakes)
{
    EXPECT_ERR(CHAT, "{\"model\":\"m\"}", "missing_required_parameter", "messages",
               "Missing required parameter: 'messages'.");
    EXPECT_ERR(CHAT, "{\"model\":\"m\",\"messages\":{}}", "invalid_type", "messages",
               "Invalid type for 'messages': expected an array, but got an object instead.");
    EXPECT_ERR(CHAT, "{\"model\":\"m\",\"messages\":[]}", "invalid_value", "messages",
               "empty array");
    EXPECT_ERR(CHAT, "{\"model\":\"m\",\"messages\":[\"hi\"]}", "invalid_type", "messages[0]",
               "expected an object, but got a string instead");
}

#define MSGS(m) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}," m "]}"

TEST(message_mistakes)
{
    EXPECT_ERR(CHAT, MSGS("{\"content\":\"x\"}"), "missing_required_parameter", "messages[1].role",
               "'messages[1].role'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":1,\"content\":\"x\"}"), "invalid_type", "messages[1].role",
               "expected a string, but got an integer instead");
    EXPECT_ERR2(CHAT, MSGS("{\"role\":\"robot\",\"content\":\"x\"}"), "invalid_value",
                "messages[1].role", "'robot'",
                "'system', 'developer', 'user', 'assistant', and 'tool'");
    EXPECT_ERR2(CHAT, MSGS("{\"role\":\"function\",\"name\":\"f\",\"content\":\"x\"}"),
                "unsupported_value", "messages[1].role", "deprecated", "'tool'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\"}"), "missing_required_parameter",
               "messages[1].content", "Missing required parameter: 'messages[1].content'.");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":null}"), "invalid_type",
               "messages[1].content", "but got null instead");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"system\",\"content\":42}"), "invalid_type",
               "messages[1].content",
               "Invalid type for 'messages[1].content': expected a string or an array of content "
               "parts, but got an integer instead.");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[]}"), "invalid_value",
               "messages[1].content", "empty array");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[\"x\"]}"), "invalid_type",
               "messages[1].content[0]", "expected an object");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}"),
               "missing_required_parameter", "messages[1].content[0].type", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}"),
               "missing_required_parameter", "messages[1].content[0].text", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}"),
               "invalid_type", "messages[1].content[0].text", "expected a string");
    EXPECT_ERR2(CHAT,
                MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"see\"},"
                     "{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/a.png\"}}]}"),
                "unsupported_content", "messages[1].content[1].type", "'image_url'", "text only");
    EXPECT_ERR(CHAT,
               MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
                    "\"input_audio\":{\"data\":\"\",\"format\":\"wav\"}}]}"),
               "unsupported_content", "messages[1].content[0].type", "'input_audio'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"blob\"}]}"), "invalid_value",
               "messages[1].content[0].type", "Supported values are: 'text'.");
    EXPECT_ERR(CHAT,
               MSGS("{\"role\":\"user\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"x\"}]}"),
               "invalid_value", "messages[1].content[0].type", "'refusal'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"tool\",\"content\":\"r\"}"), "missing_required_parameter",
               "messages[1].tool_call_id", "'messages[1].tool_call_id'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":7}"),
               "invalid_type", "messages[1].tool_call_id", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":\"a\",\"name\":[]}"), "invalid_type",
               "messages[1].name", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"assistant\",\"content\":\"a\",\"thinking\":{}}"),
               "invalid_type", "messages[1].thinking", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"assistant\",\"content\":\"a\",\"reasoning_content\":1}"),
               "invalid_type", "messages[1].reasoning_content", NULL);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}"),
               "invalid_value", "messages[1].tool_calls", "only messages with role 'assistant'");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"assistant\",\"tool_calls\":{}}"), "invalid_type",
               "messages[1].tool_calls", "expected an array");
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\"}]}"),
               "missing_required_parameter", "messages[1].tool_calls[0].function", NULL);
    EXPECT_ERR(
        CHAT,
        MSGS("{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}"),
        "missing_required_parameter", "messages[1].tool_calls[0].function.name", NULL);
    EXPECT_ERR(CHAT,
               MSGS("{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                    "\"arguments\":3}}]}"),
               "invalid_type", "messages[1].tool_calls[0].function.arguments", NULL);
}

/* Two function tools, f and g. */
#define TOOLS_FG                                                                                    \
    ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"description\":\"G\"}}]"

TEST(tool_choice_and_its_companions_are_read)
{
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(TOOLS_FG), &r)) {
        CHECK_EQ_INT(r.tool_choice, LLMR_OAI_TOOL_AUTO);
        CHECK(r.parallel_tool_calls);
        CHECK(r.include_reasoning);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false,"
                                          "\"include_reasoning\":false"),
                 &r)) {
        CHECK_EQ_INT(r.tool_choice, LLMR_OAI_TOOL_REQUIRED);
        CHECK(!r.parallel_tool_calls);
        CHECK(!r.include_reasoning);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}"),
                 &r)) {
        CHECK_EQ_INT(r.tool_choice, LLMR_OAI_TOOL_FUNCTION);
        CHECK_EQ_STR(r.tool_choice_name, "g");
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT, CHAT_BODY(",\"tool_choice\":\"none\""), &r)) {
        CHECK_EQ_INT(r.tool_choice, LLMR_OAI_TOOL_NONE);
        llmr_oai_request_free(&r);
    }
    /* an assistant's calls with ids, and its reasoning under either name */
    if (PARSE_OK(CHAT,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                 "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\",\"tool_calls\":[{"
                 "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
                 "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"ok\"}]}",
                 &r))
        llmr_oai_request_free(&r);
    EXPECT_ERR(CHAT, MSGS("{\"role\":\"assistant\",\"reasoning\":3}"), "invalid_type",
               "messages[1].reasoning", NULL);
    EXPECT_ERR(CHAT,
               MSGS("{\"role\":\"assistant\",\"tool_calls\":[{\"id\":3,\"function\":{\"name\":\"f\"}}]}"),
               "invalid_type", "messages[1].tool_calls[0].id", NULL);
    EXPECT_ERR(CHAT,
               MSGS("{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"custom\",\"function\":{\"name\":\"f\"}}]}"),
               "invalid_value", "messages[1].tool_calls[0].type", "only 'function'");
}

TEST(tool_mistakes)
{
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":{}"), "invalid_type", "tools", "expected an array");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[1]"), "invalid_type", "tools[0]", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[{\"function\":{\"name\":\"f\"}}]"),
               "missing_required_parameter", "tools[0].type", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[{\"type\":\"web_search\"}]"), "unsupported_value",
               "tools[0].type", "only 'function' tools");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[{\"type\":\"function\"}]"),
               "missing_required_parameter", "tools[0].function", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[{\"type\":\"function\",\"function\":{}}]"),
               "missing_required_parameter", "tools[0].function.name", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]"),
               "invalid_value", "tools[0].function.name", "non-empty name");
    EXPECT_ERR(CHAT,
               CHAT_BODY(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                         "\"parameters\":[]}}]"),
               "invalid_type", "tools[0].function.parameters", "expected an object");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tool_choice\":\"required\""), "invalid_value", "tool_choice",
               "needs functions in 'tools'");
    EXPECT_ERR(CHAT,
               CHAT_BODY(",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"),
               "invalid_value", "tool_choice.function.name", "no function named 'f'");
    EXPECT_ERR(CHAT,
               CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}"),
               "invalid_value", "tool_choice.function.name", "no function named 'h'");
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"function\":{\"name\":\"f\"}}"),
               "missing_required_parameter", "tool_choice.type", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"custom\",\"function\":{\"name\":\"f\"}}"),
               "invalid_value", "tool_choice.type", "only 'function'");
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"function\"}"),
               "missing_required_parameter", "tool_choice.function", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"function\",\"function\":{}}"),
               "missing_required_parameter", "tool_choice.function.name", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":1}}"),
               "invalid_type", "tool_choice.function.name", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(TOOLS_FG ",\"parallel_tool_calls\":\"no\""), "invalid_type",
               "parallel_tool_calls", "expected a boolean");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"include_reasoning\":1"), "invalid_type", "include_reasoning",
               "expected a boolean");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tool_choice\":\"sometimes\""), "invalid_value", "tool_choice",
               "'none', 'auto'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"tool_choice\":true"), "invalid_type", "tool_choice", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"functions\":[{\"name\":\"f\"}]"), "unsupported_parameter",
               "functions", "'tools'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"function_call\":\"auto\""), "unsupported_parameter",
               "function_call", "deprecated");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"chat_template_kwargs\":[]"), "invalid_type",
               "chat_template_kwargs", "expected an object");
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(",\"tools\":[],\"tool_choice\":\"none\""), &r)) {
        CHECK(r.tools == NULL); /* an empty list: no tools */
        llmr_oai_request_free(&r);
    }
}

TEST(chat_logprobs_rules)
{
    EXPECT_ERR2(CHAT, CHAT_BODY(",\"top_logprobs\":3"), "invalid_value", "top_logprobs",
                "'logprobs' must be set to true", "'top_logprobs'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"logprobs\":false,\"top_logprobs\":0"), "invalid_value",
               "top_logprobs", "must be set to true");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"logprobs\":true,\"top_logprobs\":21"), "invalid_value",
               "top_logprobs", "Expected a value <= 20, but got 21 instead.");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"logprobs\":1"), "invalid_type", "logprobs",
               "Invalid type for 'logprobs': expected a boolean, but got an integer instead.");
    llmr_oai_request r;
    if (PARSE_OK(CHAT, CHAT_BODY(",\"logprobs\":true"), &r)) {
        CHECK(r.logprobs);
        CHECK_EQ_INT(r.top_logprobs, 0);
        llmr_oai_request_free(&r);
    }
    if (PARSE_OK(CHAT, CHAT_BODY(",\"logprobs\":true,\"top_logprobs\":20"), &r)) {
        CHECK_EQ_INT(r.top_logprobs, 20);
        llmr_oai_request_free(&r);
    }
}

TEST(chat_output_kinds_we_cannot_make)
{
    EXPECT_ERR(CHAT, CHAT_BODY(",\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}"),
               "unsupported_parameter", "audio", "text only");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"modalities\":[\"text\",\"audio\"]"), "unsupported_value",
               "modalities[1]", "'text'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"modalities\":\"text\""), "invalid_type", "modalities", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"response_format\":{\"type\":\"json_object\"}"),
               "unsupported_value", "response_format.type", "'json_object' is not supported");
    EXPECT_ERR(COMP,
               COMP_BODY(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}"),
               "unsupported_value", "response_format.type", "'json_schema'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"response_format\":{\"type\":\"yaml\"}"), "invalid_value",
               "response_format.type", "'text'");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"response_format\":{}"), "missing_required_parameter",
               "response_format.type", NULL);
    EXPECT_ERR(CHAT, CHAT_BODY(",\"response_format\":\"text\""), "invalid_type", "response_format",
               NULL);
}

/* ---- common parameters ------------------------------------------------------------- */

TEST(wrong_types_are_named)
{
    static const struct {
        const char *extra, *param, *message;
    } cases[] = {
        {",\"temperature\":\"hot\"", "temperature",
         "Invalid type for 'temperature': expected a number, but got a string instead."},
        {",\"top_p\":true", "top_p", "expected a number, but got a boolean instead"},
        {",\"min_p\":[]", "min_p", "expected a number, but got an array instead"},
        {",\"repetition_penalty\":{}", "repetition_penalty", "but got an object instead"},
        {",\"presence_penalty\":\"1\"", "presence_penalty", "expected a number"},
        {",\"frequency_penalty\":false", "frequency_penalty", "expected a number"},
        {",\"max_tokens\":10.5", "max_tokens",
         "Invalid type for 'max_tokens': expected an integer, but got a decimal number instead."},
        {",\"max_tokens\":\"10\"", "max_tokens", "expected an integer, but got a string"},
        {",\"max_completion_tokens\":1.0", "max_completion_tokens", "expected an integer"},
        {",\"top_k\":1.5", "top_k", "expected an integer"},
        {",\"seed\":\"x\"", "seed", "expected an integer"},
        {",\"n\":\"1\"", "n", "expected an integer"},
        {",\"stream\":\"yes\"", "stream", "expected a boolean, but got a string instead"},
        {",\"stream\":true,\"stream_options\":true", "stream_options", "expected an object"},
        {",\"stream\":true,\"stream_options\":{\"include_usage\":1}",
         "stream_options.include_usage", "expected a boolean"},
        {",\"stop\":5", "stop", "expected a string or an array of strings, but got an integer"},
        {",\"stop\":[\"a\",7]", "stop[1]", "expected a string, but got an integer"},
        {",\"user\":5", "user", "expected a string"},
        {",\"logit_bias\":[]", "logit_bias", "expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, CHAT_BODY("%s"), cases[i].extra);
        EXPECT_ERR(CHAT, body, "invalid_type", cases[i].param, cases[i].message);
    }
}

TEST(values_out_of_range_are_named)
{
    static const struct {
        const char *extra, *param, *message;
    } cases[] = {
        {",\"max_tokens\":-5", "max_tokens",
         "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got -5 "
         "instead."},
        {",\"max_tokens\":0", "max_tokens", "Expected a value >= 1, but got 0 instead."},
        {",\"max_completion_tokens\":0", "max_completion_tokens", ">= 1"},
        {",\"max_tokens\":4294967296", "max_tokens", "Expected a value <= 2147483647"},
        {",\"temperature\":2.5", "temperature",
         "Invalid 'temperature': number above maximum value. Expected a value <= 2, but got 2.5 "
         "instead."},
        {",\"temperature\":-0.1", "temperature", "Expected a value >= 0, but got -0.1 instead."},
        {",\"top_p\":1.01", "top_p", "<= 1"},
        {",\"top_p\":-1", "top_p", ">= 0"},
        {",\"min_p\":2", "min_p", "<= 1"},
        {",\"repetition_penalty\":0", "repetition_penalty",
         "Expected a value > 0, but got 0 instead."},
        {",\"repetition_penalty\":-1", "repetition_penalty", "> 0"},
        {",\"presence_penalty\":-2.5", "presence_penalty", ">= -2"},
        {",\"frequency_penalty\":3", "frequency_penalty", "<= 2"},
        {",\"top_k\":-2", "top_k", ">= -1"},
        {",\"n\":0", "n", ">= 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, CHAT_BODY("%s"), cases[i].extra);
        EXPECT_ERR(CHAT, body, "invalid_value", cases[i].param, cases[i].message);
        snprintf(body, sizeof body, COMP_BODY("%s"), cases[i].extra);
        if (strncmp(cases[i].extra, ",\"max_completion", 16) != 0) /* chat only */
            EXPECT_ERR(COMP, body, "invalid_value", cases[i].param, cases[i].message);
    }
}

TEST(stop_rules)
{
    EXPECT_ERR(CHAT,
               CHAT_BODY(",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
                         "\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]"),
               "invalid_value", "stop",
               "Invalid 'stop': array too long. Expected an array with maximum length 16, but got "
               "an array with length 17 instead.");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"stop\":\"\""), "invalid_value", "stop", "1 to 1024 bytes");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"stop\":[\"a\",\"\"]"), "invalid_value", "stop[1]", "has 0");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"stop\":[\"a\\u0000b\"]"), "invalid_value", "stop[0]", "NUL");
    char body[2048], big[1100];
    memset(big, 'x', 1025);
    big[1025] = '\0';
    snprintf(body, sizeof body, CHAT_BODY(",\"stop\":\"%s\""), big);
    EXPECT_ERR(CHAT, body, "invalid_value", "stop", "has 1025");
    llmr_oai_request r;
    if (PARSE_OK(
            CHAT,
            CHAT_BODY(",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\","
                      "\"11\",\"12\",\"13\",\"14\",\"15\",\"\\u00e9t\\u00e9\"]"),
            &r)) {
        CHECK_EQ_INT(r.stop_count, 16);
        CHECK_EQ_STR(r.stop[15], "\xc3\xa9t\xc3\xa9");
        CHECK_EQ_INT(r.stop_len[15], 5);
        llmr_oai_request_free(&r);
    }
}

TEST(stream_options_need_stream)
{
    EXPECT_ERR(CHAT, CHAT_BODY(",\"stream_options\":{\"include_usage\":true}"), "invalid_value",
               "stream_options", "only allowed when 'stream' is true");
    EXPECT_ERR(COMP, COMP_BODY(",\"stream\":false,\"stream_options\":{}"), "invalid_value",
               "stream_options", "'stream'");
    llmr_oai_request r;
    if (PARSE_OK(COMP,
                 COMP_BODY(",\"stream\":true,\"stream_options\":{\"include_usage\":true,"
                           "\"continuous_usage_stats\":false}"),
                 &r)) {
        CHECK(r.stream && r.include_usage);
        llmr_oai_request_free(&r);
    }
}

TEST(features_at_their_defaults_only)
{
    EXPECT_ERR2(CHAT, CHAT_BODY(",\"n\":2"), "unsupported_value", "n", "'n' = 2", "n must be 1");
    EXPECT_ERR(COMP, COMP_BODY(",\"n\":5"), "unsupported_value", "n", "one choice");
    EXPECT_ERR(CHAT, CHAT_BODY(",\"logit_bias\":{\"50256\":-100}"), "unsupported_parameter",
               "logit_bias", "not supported");
}

/* ---- errors ------------------------------------------------------------------------ */

TEST(error_objects)
{
    llmr_oai_error err;
    llmr_oai_error_set(&err, 404, "not_found_error", "model_not_found", NULL,
                       "The model '%s' does not exist.", "nope");
    CHECK_EQ_INT(err.status, 404);
    CHECK_EQ_STR(err.param, "");
    EXPECT_JSON(llmr_oai_error_json(&err),
                "{\"error\":{\"message\":\"The model 'nope' does not exist.\",\"type\":"
                "\"not_found_error\",\"param\":null,\"code\":\"model_not_found\"}}");
    llmr_oai_error_set(&err, 400, NULL, NULL, "messages[0].content", "bad \"quote\"");
    CHECK_EQ_STR(err.type, "invalid_request_error");
    EXPECT_JSON(llmr_oai_error_json(&err),
                "{\"error\":{\"message\":\"bad \\\"quote\\\"\",\"type\":\"invalid_request_error\","
                "\"param\":\"messages[0].content\",\"code\":null}}");

    /* a parse error as a client sees it */
    llmr_oai_request r;
    CHECK(!parse(CHAT, CHAT_BODY(",\"max_tokens\":-5"), &r, &err));
    EXPECT_JSON(llmr_oai_error_json(&err),
                "{\"error\":{\"message\":\"Invalid 'max_tokens': integer below minimum value. "
                "Expected a value >= 1, but got -5 instead.\",\"type\":\"invalid_request_error\","
                "\"param\":\"max_tokens\",\"code\":\"invalid_value\"}}");
}

TEST(error_messages_cut_inside_a_character_stay_valid_utf8)
{
    llmr_oai_error err;
    char text[1200];
    /* 510 ASCII bytes then é (2 bytes), so that the cut at 511 bytes splits it */
    memset(text, 'a', 510);
    strcpy(text + 510, "\xc3\xa9\xc3\xa9 tail");
    llmr_oai_error_set(&err, 400, NULL, NULL, NULL, "%s", text);
    CHECK_EQ_INT(strlen(err.message), 510);
    json_t *j = llmr_oai_error_json(&err);
    CHECK(j != NULL);
    json_decref(j);
}

/* ---- responses --------------------------------------------------------------------- */

TEST(chat_response_shape)
{
    llmr_oai_usage u = {12, 3};
    EXPECT_JSON(llmr_oai_chat_response("chatcmpl-abc", "m1", 1700000000, "Hi \"you\"\n", 9, "stop",
                                       &u, NULL),
                "{\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion\",\"created\":1700000000,"
                "\"model\":\"m1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                "\"content\":\"Hi \\\"you\\\"\\n\",\"refusal\":null},\"logprobs\":null,"
                "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,"
                "\"completion_tokens\":3,\"total_tokens\":15}}");
    /* text is taken by length; ill-formed UTF-8 becomes U+FFFD; no usage, no finish */
    EXPECT_JSON(llmr_oai_chat_response("c", "m", 1,
                                       "ok\xe2\x82"
                                       "XYZ",
                                       4, NULL, NULL, NULL),
                "{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
                "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
                "\"ok\xef\xbf\xbd\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}");
    /* logprobs: the content array is wrapped */
    json_t *content = json_array();
    float lp = -0.5f;
    llmr_oai_token_logprob t = {"Hi", 2, lp, 0, NULL, NULL, NULL};
    json_array_append_new(content, llmr_oai_chat_logprob(&t));
    EXPECT_JSON(llmr_oai_chat_response("c", "m", 1, "Hi", 2, "length", &u, content),
                "{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
                "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi\","
                "\"refusal\":null},\"logprobs\":{\"content\":[{\"token\":\"Hi\",\"logprob\":-0.5,"
                "\"bytes\":[72,105],\"top_logprobs\":[]}],\"refusal\":null},\"finish_reason\":"
                "\"length\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
                "\"total_tokens\":15}}");
}

TEST(completion_response_shape)
{
    llmr_oai_usage u = {4, 16};
    EXPECT_JSON(llmr_oai_completion_response("cmpl-x", "tiny", 1700000001, " there was", 10,
                                             "length", &u, NULL),
                "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":1700000001,"
                "\"model\":\"tiny\",\"choices\":[{\"text\":\" there was\",\"index\":0,"
                "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":4,"
                "\"completion_tokens\":16,\"total_tokens\":20}}");
    llmr_oai_token_logprob t = {"a", 1, -1.0f, 0, NULL, NULL, NULL};
    EXPECT_JSON(
        llmr_oai_completion_response("cmpl-x", "tiny", 2, "a", 1, "stop", NULL,
                                     llmr_oai_completion_logprobs(&t, 1, 0)),
        "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":2,\"model\":"
        "\"tiny\",\"choices\":[{\"text\":\"a\",\"index\":0,\"logprobs\":{\"tokens\":[\"a\"],"
        "\"token_logprobs\":[-1.0],\"top_logprobs\":[{\"a\":-1.0}],\"text_offset\":[0]},"
        "\"finish_reason\":\"stop\"}]}");
}

TEST(chat_stream_chunks)
{
    const char *head = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":5,"
                       "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":";
    char want[512];
    snprintf(want, sizeof want,
             "%s{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
             "\"finish_reason\":null}]}",
             head);
    EXPECT_JSON(llmr_oai_chat_chunk("chatcmpl-1", "m", 5, true, NULL, 0, NULL, NULL, false), want);
    snprintf(want, sizeof want,
             "%s{\"content\":\"Hel\"},\"logprobs\":null,"
             "\"finish_reason\":null}],\"usage\":null}",
             head);
    EXPECT_JSON(llmr_oai_chat_chunk("chatcmpl-1", "m", 5, false, "Hello", 3, NULL, NULL, true),
                want);
    snprintf(want, sizeof want, "%s{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}", head);
    EXPECT_JSON(llmr_oai_chat_chunk("chatcmpl-1", "m", 5, false, NULL, 0, "stop", NULL, false),
                want);
    /* logprobs on a content chunk */
    json_t *content = json_array();
    llmr_oai_token_logprob t = {"lo", 2, -0.25f, 0, NULL, NULL, NULL};
    json_array_append_new(content, llmr_oai_chat_logprob(&t));
    snprintf(want, sizeof want,
             "%s{\"content\":\"lo\"},\"logprobs\":{\"content\":[{\"token\":"
             "\"lo\",\"logprob\":-0.25,\"bytes\":[108,111],\"top_logprobs\":[]}],"
             "\"refusal\":null},\"finish_reason\":null}]}",
             head);
    EXPECT_JSON(llmr_oai_chat_chunk("chatcmpl-1", "m", 5, false, "lo", 2, NULL, content, false),
                want);
    llmr_oai_usage u = {7, 2};
    EXPECT_JSON(llmr_oai_usage_chunk(LLMR_OAI_CHAT, "chatcmpl-1", "m", 5, &u),
                "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":5,"
                "\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,"
                "\"completion_tokens\":2,\"total_tokens\":9}}");
}

TEST(completion_stream_chunks)
{
    EXPECT_JSON(llmr_oai_completion_chunk("cmpl-1", "m", 9, "abc", 3, NULL, NULL, false),
                "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":9,\"model\":\"m\","
                "\"choices\":[{\"text\":\"abc\",\"index\":0,\"logprobs\":null,"
                "\"finish_reason\":null}]}");
    EXPECT_JSON(llmr_oai_completion_chunk("cmpl-1", "m", 9, NULL, 0, "length", NULL, true),
                "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":9,\"model\":\"m\","
                "\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,"
                "\"finish_reason\":\"length\"}],\"usage\":null}");
    llmr_oai_usage u = {1, 1};
    EXPECT_JSON(llmr_oai_usage_chunk(LLMR_OAI_COMPLETION, "cmpl-1", "m", 9, &u),
                "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":9,\"model\":\"m\","
                "\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,"
                "\"total_tokens\":2}}");
}

/* ---- logprobs ---------------------------------------------------------------------- */

TEST(chat_logprob_entries)
{
    const char *top_text[] = {"Hello", "Hi", "\xe2\x82"};
    size_t top_len[] = {5, 2, 2};
    float top_lp[] = {-0.1f, -2.5f, -INFINITY};
    llmr_oai_token_logprob t = {"Hello", 5, -0.1f, 3, top_text, top_len, top_lp};
    EXPECT_JSON(llmr_oai_chat_logprob(&t),
                "{\"token\":\"Hello\",\"logprob\":-0.1,\"bytes\":[72,101,108,108,111],"
                "\"top_logprobs\":[{\"token\":\"Hello\",\"logprob\":-0.1,\"bytes\":[72,101,108,108,"
                "111]},{\"token\":\"Hi\",\"logprob\":-2.5,\"bytes\":[72,105]},{\"token\":"
                "\"\xef\xbf\xbd\",\"logprob\":-9999.0,\"bytes\":[226,130]}]}");
    /* a token ending inside a character: its bytes say what it holds */
    llmr_oai_token_logprob part = {"\xf0\x9f", 2, -1.3862944f, 0, NULL, NULL, NULL};
    EXPECT_JSON(llmr_oai_chat_logprob(&part),
                "{\"token\":\"\xef\xbf\xbd\",\"logprob\":-1.3862944,\"bytes\":[240,159],"
                "\"top_logprobs\":[]}");
    llmr_oai_token_logprob empty = {"", 0, NAN, 0, NULL, NULL, NULL};
    EXPECT_JSON(llmr_oai_chat_logprob(&empty),
                "{\"token\":\"\",\"logprob\":-9999.0,\"bytes\":[],\"top_logprobs\":[]}");
}

TEST(completion_logprobs_object)
{
    const char *top0[] = {" A", "A"};
    size_t top0_len[] = {2, 1};
    float top0_lp[] = {-0.5f, -1.5f};
    const char *top1[] = {" caf\xc3\xa9", " cafe"};
    size_t top1_len[] = {6, 5};
    float top1_lp[] = {-0.75f, -2.0f};
    llmr_oai_token_logprob t[3] = {
        /* the sampled token is not among the alternatives: it is added last */
        {"The", 3, -3.0f, 2, top0, top0_len, top0_lp},
        /* it is: not twice */
        {" cafe", 5, -2.0f, 2, top1, top1_len, top1_lp},
        {" caf\xc3\xa9", 6, -0.75f, 0, NULL, NULL, NULL},
    };
    EXPECT_JSON(
        llmr_oai_completion_logprobs(t, 3, 10),
        "{\"tokens\":[\"The\",\" cafe\",\" caf\xc3\xa9\"],\"token_logprobs\":[-3.0,-2.0,"
        "-0.75],\"top_logprobs\":[{\" A\":-0.5,\"A\":-1.5,\"The\":-3.0},{\" caf\xc3\xa9\":-0.75,"
        "\" cafe\":-2.0},{\" caf\xc3\xa9\":-0.75}],\"text_offset\":[10,13,18]}");
    EXPECT_JSON(llmr_oai_completion_logprobs(t, 0, 0),
                "{\"tokens\":[],\"token_logprobs\":[],\"top_logprobs\":[],\"text_offset\":[]}");
    /* text_offset counts characters: é is one */
    CHECK_EQ_INT(llmr_oai_text_chars(" caf\xc3\xa9", 6), 5);
    CHECK_EQ_INT(llmr_oai_text_chars("\xf0\x9f\x98\x80!", 5), 2);
    CHECK_EQ_INT(llmr_oai_text_chars("a\xff\xfe"
                                     "b",
                                     4),
                 4);
    CHECK_EQ_INT(llmr_oai_text_chars("\xe2\x82", 2), 1);
    CHECK_EQ_INT(llmr_oai_text_chars("", 0), 0);
}

/* ---- the wire ---------------------------------------------------------------------- */

TEST(sse_framing)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    json_t *o = json_pack("{s:s, s:[i]}", "a", "x y", "b", 1);
    llmr_oai_sse_data(&sb, o);
    llmr_oai_sse_data(&sb, o); /* not taken: usable twice */
    llmr_oai_sse_done(&sb);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb),
                 "data: {\"a\":\"x y\",\"b\":[1]}\n\ndata: {\"a\":\"x y\",\"b\":[1]}\n\n"
                 "data: [DONE]\n\n");
    CHECK(!llmr_strbuf_failed(&sb));
    json_decref(o);
    /* newlines in text are escaped, so one event is one line */
    llmr_strbuf_reset(&sb);
    json_t *c = llmr_oai_chat_chunk("i", "m", 1, false, "a\nb\r\n", 5, NULL, NULL, false);
    llmr_oai_sse_data(&sb, c);
    json_decref(c);
    const char *s = llmr_strbuf_cstr(&sb);
    CHECK(strncmp(s, "data: {", 7) == 0);
    CHECK_EQ_INT(strlen(s) - strlen(strchr(s, '\n')), strlen(s) - 2);
    CHECK_CONTAINS(s, "\"content\":\"a\\nb\\r\\n\"");
    llmr_strbuf_free(&sb);
}

static bool id_ok(const char *id, const char *prefix)
{
    size_t p = strlen(prefix);
    if (strncmp(id, prefix, p) != 0 || strlen(id) != p + 24)
        return false;
    for (size_t i = p; id[i]; i++)
        if (!isalnum((unsigned char)id[i]))
            return false;
    return true;
}

TEST(ids_are_random_alphanumerics)
{
    char a[64], b[64];
    llmr_oai_new_id("chatcmpl-", a, sizeof a);
    llmr_oai_new_id("chatcmpl-", b, sizeof b);
    CHECK(id_ok(a, "chatcmpl-"));
    CHECK(id_ok(b, "chatcmpl-"));
    CHECK(strcmp(a, b) != 0);
    llmr_oai_new_id("cmpl-", a, sizeof a);
    CHECK(id_ok(a, "cmpl-"));
    /* over many ids every character class shows up */
    bool upper = false, lower = false, digit = false;
    for (int i = 0; i < 50; i++) {
        llmr_oai_new_id("", a, sizeof a);
        CHECK(id_ok(a, ""));
        for (const char *c = a; *c; c++) {
            upper |= isupper((unsigned char)*c) != 0;
            lower |= islower((unsigned char)*c) != 0;
            digit |= isdigit((unsigned char)*c) != 0;
        }
    }
    CHECK(upper && lower && digit);
    /* a small buffer gets a terminated prefix of the id */
    char small[8];
    llmr_oai_new_id("chatcmpl-", small, sizeof small);
    CHECK_EQ_STR(small, "chatcmp");
    llmr_oai_new_id("x", small, 0); /* nothing written */
}

TEST(models_list)
{
    llmr_oai_model_entry m[] = {
        {"gpt-oss-20b", 1700000000, "openai", true, NULL},
        {"big", 1700000001, NULL, false, "loading"},
        {"tiny", 5, NULL, true, NULL},
        {"broken", 6, "me", false, NULL},
    };
    EXPECT_JSON(llmr_oai_models_list(m, 4),
                "{\"object\":\"list\",\"data\":[{\"id\":\"gpt-oss-20b\",\"object\":\"model\","
                "\"created\":1700000000,\"owned_by\":\"openai\"},{\"id\":\"tiny\",\"object\":"
                "\"model\",\"created\":5,\"owned_by\":\"llmr\"}],\"not_ready\":[{\"id\":\"big\","
                "\"reason\":\"loading\"},{\"id\":\"broken\",\"reason\":\"not ready\"}]}");
    EXPECT_JSON(llmr_oai_models_list(NULL, 0),
                "{\"object\":\"list\",\"data\":[],\"not_ready\":[]}");
}

int main(void)
{
    RUN(chat_request_with_every_field_is_read);
    RUN(chat_request_defaults);
    RUN(null_means_not_given_and_unknown_fields_are_ignored);
    RUN(rendered_prompt_text_ranges);
    RUN(chat_max_tokens_alone_and_integer_numbers);
    RUN(chat_reasoning_effort_reaches_the_template);
    RUN(chat_content_may_hold_nul_but_names_may_not);
    RUN(chat_assistant_content_may_be_absent_or_null);
    RUN(completion_request_with_every_field_is_read);
    RUN(completion_prompt_forms);
    RUN(completion_prompt_mistakes);
    RUN(completion_unsupported_features);
    RUN(bodies_that_are_not_json_objects);
    RUN(invalid_utf8_is_named_with_its_place);
    RUN(model_mistakes);
    RUN(message_list_mistakes);
    RUN(message_mistakes);
    RUN(tool_mistakes);
    RUN(tool_choice_and_its_companions_are_read);
    RUN(chat_logprobs_rules);
    RUN(chat_output_kinds_we_cannot_make);
    RUN(wrong_types_are_named);
    RUN(values_out_of_range_are_named);
    RUN(stop_rules);
    RUN(stream_options_need_stream);
    RUN(features_at_their_defaults_only);
    RUN(error_objects);
    RUN(error_messages_cut_inside_a_character_stay_valid_utf8);
    RUN(chat_response_shape);
    RUN(completion_response_shape);
    RUN(chat_stream_chunks);
    RUN(completion_stream_chunks);
    RUN(chat_logprob_entries);
    RUN(completion_logprobs_object);
    RUN(sse_framing);
    RUN(ids_are_random_alphanumerics);
    RUN(models_list);
    return llmr_test_finish();
}
