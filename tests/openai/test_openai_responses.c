/* Tests of the Responses API's side of the OpenAI module (openai_responses.h): input
 * items, instructions, tools and settings turned into the chat request, the mistakes
 * refused with the Responses field named, the chain of a follow-up, and chat deltas
 * turned into output items and typed stream events. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "openai/openai_answer.h"
#include "openai/openai_responses.h"

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

static bool parse(const char *body, llmr_oai_responses *r, llmr_oai_error *err)
{
    memset(err, 0, sizeof *err);
    return llmr_oai_responses_parse(body, strlen(body), false, r, err);
}

static void items_become_chat_messages(void)
{
    llmr_oai_responses r;
    llmr_oai_error err;
    CHECK(parse("{\"model\": \"m\", \"input\": \"Hi\", \"instructions\": \"Be brief.\"}", &r, &err));
    EXPECT_JSON(r.chat.messages,
                "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]");
    EXPECT_JSON(r.input, "[{\"type\":\"message\",\"role\":\"user\",\"content\":\"Hi\"}]");
    CHECK(r.store);
    llmr_oai_responses_free(&r);

    /* a conversation: parts joined, reasoning on the next assistant turn, calls in a row
     * one turn, their outputs as tool messages */
    const char *body =
        "{\"model\": \"m\", \"store\": false, \"input\": ["
        "{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"},"
        " {\"type\": \"input_text\", \"text\": \"b\"}]},"
        "{\"type\": \"reasoning\", \"id\": \"rs_1\", \"summary\": [], \"content\": "
        "[{\"type\": \"reasoning_text\", \"text\": \"think\"}]},"
        "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
        "{\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{\\\"x\\\":1}\"},"
        "{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"one\"},"
        "{\"type\": \"function_call_output\", \"call_id\": \"c2\", \"output\": \"two\"},"
        "{\"type\": \"message\", \"role\": \"assistant\", \"content\": "
        "[{\"type\": \"output_text\", \"text\": \"done\", \"annotations\": []}]}],"
        "\"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"type\": \"object\"}},"
        " {\"type\": \"function\", \"name\": \"g\", \"description\": \"G\"}],"
        "\"tool_choice\": {\"type\": \"function\", \"name\": \"g\"}, \"parallel_tool_calls\": false,"
        "\"reasoning\": {\"effort\": \"high\"}, \"max_output_tokens\": 77, \"temperature\": 0.5}";
    CHECK(parse(body, &r, &err));
    EXPECT_JSON(r.chat.messages,
                "[{\"role\":\"user\",\"content\":\"ab\"},"
                "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
                "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},"
                "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":1}\"}}],"
                "\"reasoning_content\":\"think\"},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"one\"},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"two\"},"
                "{\"role\":\"assistant\",\"content\":\"done\"}]");
    EXPECT_JSON(r.chat.tools,
                "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}},"
                "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"description\":\"G\"}}]");
    CHECK_EQ_INT(r.chat.tool_choice, LLMR_OAI_TOOL_FUNCTION);
    CHECK_EQ_STR(r.chat.tool_choice_name, "g");
    CHECK(!r.chat.parallel_tool_calls);
    CHECK(r.chat.max_tokens_set);
    CHECK_EQ_INT(r.chat.max_tokens, 77);
    CHECK(r.chat.temperature == 0.5);
    EXPECT_JSON(json_object_get(r.chat.template_kwargs, "reasoning_effort"), "\"high\"");
    CHECK(!r.store);
    llmr_oai_responses_free(&r);
}

static void expect_refused_at(int line, const char *body, const char *param, const char *in_message)
{
    llmr_oai_responses r;
    llmr_oai_error err;
    if (parse(body, &r, &err)) {
        llmr_test_fail(__FILE__, line, "accepted %s", body);
        llmr_oai_responses_free(&r);
        return;
    }
    if (err.status != 400 || strcmp(err.param, param) != 0 || !strstr(err.message, in_message))
        llmr_test_fail(__FILE__, line, "%s: got %u '%s' \"%s\", expected 400 '%s' \"...%s...\"",
                       body, err.status, err.param, err.message, param, in_message);
}
#define EXPECT_REFUSED(body, param, msg) expect_refused_at(__LINE__, body, param, msg)

static void mistakes_name_the_responses_field(void)
{
    EXPECT_REFUSED("{\"model\": \"m\"}", "input", "Missing required parameter");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": 3}", "input", "a string or an array");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": []}", "input", "at least one message");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [{\"role\": \"robot\", \"content\": \"x\"}]}",
                   "input[0].role", "supported values");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [\"x\", {\"type\": \"function_call\", \"name\": \"f\","
                   " \"arguments\": \"{}\"}]}",
                   "input[0]", "an object");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [{\"type\": \"function_call\", \"name\": \"f\","
                   " \"arguments\": \"{}\"}]}",
                   "input[0].call_id", "Missing required parameter");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\"}]}",
                   "input[0].output", "Missing");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [{\"role\": \"user\", \"content\": [{\"type\": "
                   "\"input_image\", \"image_url\": \"x\"}]}]}",
                   "input[0].content[0].type", "not supported");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": [{\"type\": \"web_search_call\"}]}", "input[0].type",
                   "not supported");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"reasoning\": {\"effort\": \"banana\"}}",
                   "reasoning.effort", "banana");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"reasoning\": \"high\"}", "reasoning", "an object");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"max_output_tokens\": \"5\"}", "max_output_tokens",
                   "max_output_tokens");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"temperature\": 9}", "temperature", "temperature");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"tools\": [{\"type\": \"web_search\"}]}",
                   "tools[0].type", "only 'function'");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"tools\": [{\"type\": \"function\"}]}",
                   "tools[0].name", "Missing");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\","
                   " \"parameters\": 1}]}",
                   "tools[0].parameters", "tools[0].parameters");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\"}],"
                   " \"tool_choice\": {\"type\": \"function\", \"name\": \"g\"}}",
                   "tool_choice.name", "no function named 'g'");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"store\": \"yes\"}", "store", "a boolean");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"metadata\": {\"k\": 1}}", "metadata.k", "a string");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"previous_response_id\": \"resp_1\"}",
                   "previous_response_id", "router's response store");
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\"}}}",
                   "text.format.type", "not supported");
    EXPECT_REFUSED("{\"input\": \"x\"}", "model", "model");
}

/* What the chat parser finds wrong names the client's input item, not the index of
 * the chat message it became: instructions come first as a message of their own, and
 * calls in a row share one message while reasoning items make none. */
static void chat_errors_name_the_input_item(void)
{
    EXPECT_REFUSED("{\"model\": \"m\", \"instructions\": \"Be brief.\", \"input\": ["
                   "{\"role\": \"user\", \"content\": \"hi\"},"
                   "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
                   "{\"type\": \"function_call_output\", \"call_id\": \"c\\u00001\", \"output\": \"x\"},"
                   "{\"role\": \"user\", \"content\": \"more\"}]}",
                   "input[2].call_id", "Invalid 'input[2].call_id': the string contains a NUL");
    EXPECT_REFUSED("{\"model\": \"m\", \"instructions\": \"Be brief.\", \"input\": ["
                   "{\"role\": \"user\", \"content\": \"hi\"},"
                   "{\"type\": \"reasoning\", \"content\": [{\"type\": \"reasoning_text\", \"text\": \"t\"}]},"
                   "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
                   "{\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{}\"},"
                   "{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"one\"},"
                   "{\"type\": \"function_call_output\", \"call_id\": \"c\\u00002\", \"output\": \"two\"}]}",
                   "input[5].call_id", "'input[5].call_id'");
    /* without instructions the indexes still follow the items */
    EXPECT_REFUSED("{\"model\": \"m\", \"input\": ["
                   "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},"
                   "{\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{}\"},"
                   "{\"type\": \"function_call_output\", \"call_id\": \"\\u0000\", \"output\": \"one\"}]}",
                   "input[2].call_id", "'input[2].call_id'");
}

static void a_follow_up_chains_the_items(void)
{
    llmr_oai_responses r;
    llmr_oai_error err;
    const char *body = "{\"model\": \"m\", \"input\": \"again\", \"previous_response_id\": \"resp_1\"}";
    memset(&err, 0, sizeof err);
    CHECK(llmr_oai_responses_parse(body, strlen(body), true, &r, &err));
    CHECK_EQ_STR(r.previous_response_id, "resp_1");
    json_t *in = json_pack("[{s:s, s:s}]", "role", "user", "content", "first");
    json_t *out = json_pack("[{s:s, s:s, s:s, s:[{s:s, s:s}]}]", "type", "message", "role", "assistant",
                            "status", "completed", "content", "type", "output_text", "text", "hello");
    char *chained = llmr_oai_responses_chain(&r, in, out);
    json_t *j = chained ? json_loads(chained, 0, NULL) : NULL;
    CHECK(j && !json_object_get(j, "previous_response_id"));
    CHECK_EQ_INT(json_array_size(json_object_get(j, "input")), 3);
    llmr_oai_responses second;
    CHECK(chained && parse(chained, &second, &err));
    EXPECT_JSON(second.chat.messages, "[{\"role\":\"user\",\"content\":\"first\"},"
                                      "{\"role\":\"assistant\",\"content\":\"hello\"},"
                                      "{\"role\":\"user\",\"content\":\"again\"}]");
    llmr_oai_responses_free(&second);
    json_decref(j);
    free(chained);
    json_decref(in);
    json_decref(out);
    llmr_oai_responses_free(&r);
}

/* The types of the events, space separated. */
static char *types_of(const json_t *events)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        llmr_strbuf_printf(&sb, "%s%s", i ? " " : "", json_string_value(json_object_get(e, "type")));
        CHECK_EQ_INT(json_integer_value(json_object_get(e, "sequence_number")), i);
    }
    char *t = strdup(llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    return t;
}

/* The deltas an answer makes for: reasoning "ab", then calls f({"x":1}) and g({}). */
static json_t *reasoning_and_two_calls(void)
{
    llmr_oai_answer_options ao = {true, true, true};
    llmr_oai_answer *a = llmr_oai_answer_new(&ao);
    json_t *d = json_array();
    json_array_append_new(d, llmr_oai_answer_reasoning(a, "a", 1));
    json_array_append_new(d, llmr_oai_answer_reasoning(a, "b", 1));
    json_array_append_new(d, llmr_oai_answer_call_start(a, "f", 1));
    json_array_append_new(d, llmr_oai_answer_call_args(a, "{\"x\":", 5));
    json_array_append_new(d, llmr_oai_answer_call_args(a, "1}", 2));
    llmr_oai_answer_call_end(a);
    json_array_append_new(d, llmr_oai_answer_call_start(a, "g", 1));
    json_array_append_new(d, llmr_oai_answer_call_args(a, "{}", 2));
    llmr_oai_answer_call_end(a);
    llmr_oai_answer_free(a);
    return d;
}

static void deltas_become_items_and_events(void)
{
    json_t *request = json_pack("{s:s, s:s, s:{s:s}, s:I}", "model", "m", "input", "x", "metadata", "k",
                                "v", "max_output_tokens", (json_int_t)100);
    llmr_oai_resp_out *o = llmr_oai_resp_out_new("resp_1", "m", 5, request);
    json_t *events = json_array(), *deltas = reasoning_and_two_calls(), *d;
    llmr_oai_resp_out_start(o, events);
    size_t i;
    json_array_foreach(deltas, i, d) llmr_oai_resp_out_delta(o, d, events);
    llmr_oai_resp_usage u = {10, 20, 3};
    llmr_oai_resp_out_finish(o, false, &u, events);
    char *types = types_of(events);
    CHECK_EQ_STR(types,
                 "response.created response.in_progress "
                 "response.output_item.added response.content_part.added "
                 "response.reasoning_text.delta response.reasoning_text.delta "
                 "response.reasoning_text.done response.content_part.done response.output_item.done "
                 "response.output_item.added response.function_call_arguments.delta "
                 "response.function_call_arguments.delta response.function_call_arguments.done "
                 "response.output_item.done "
                 "response.output_item.added response.function_call_arguments.delta "
                 "response.function_call_arguments.done response.output_item.done "
                 "response.completed");
    free(types);
    /* an item comes added with its content empty: its part comes with content_part.added
     * (an SDK's accumulator would otherwise hold the part twice) */
    json_t *added = json_object_get(json_array_get(events, 2), "item");
    CHECK(added && json_is_array(json_object_get(added, "content")) &&
          json_array_size(json_object_get(added, "content")) == 0);
    json_t *resp = llmr_oai_resp_out_response(o);
    CHECK_EQ_STR(json_string_value(json_object_get(resp, "status")), "completed");
    CHECK_EQ_STR(json_string_value(json_object_get(resp, "object")), "response");
    EXPECT_JSON(json_object_get(resp, "metadata"), "{\"k\":\"v\"}");
    EXPECT_JSON(json_object_get(resp, "max_output_tokens"), "100");
    EXPECT_JSON(json_object_get(resp, "usage"),
                "{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":20,"
                "\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":30}");
    json_t *out = json_object_get(resp, "output");
    CHECK_EQ_INT(json_array_size(out), 3);
    json_t *rs = json_array_get(out, 0), *f = json_array_get(out, 1), *g = json_array_get(out, 2);
    CHECK_EQ_STR(json_string_value(json_object_get(rs, "type")), "reasoning");
    EXPECT_JSON(json_object_get(rs, "content"), "[{\"type\":\"reasoning_text\",\"text\":\"ab\"}]");
    CHECK_EQ_STR(json_string_value(json_object_get(f, "type")), "function_call");
    CHECK_EQ_STR(json_string_value(json_object_get(f, "name")), "f");
    CHECK_EQ_STR(json_string_value(json_object_get(f, "arguments")), "{\"x\":1}");
    CHECK_EQ_STR(json_string_value(json_object_get(f, "status")), "completed");
    CHECK(strncmp(json_string_value(json_object_get(f, "call_id")), "call_", 5) == 0);
    CHECK(strncmp(json_string_value(json_object_get(f, "id")), "fc_", 3) == 0);
    CHECK_EQ_STR(json_string_value(json_object_get(g, "arguments")), "{}");
    /* the last event carries the whole response */
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    CHECK(json_equal(json_object_get(last, "response"), resp));
    json_decref(resp);
    json_decref(deltas);
    json_decref(events);
    llmr_oai_resp_out_free(o);
    json_decref(request);
}

static void a_message_cut_short_is_incomplete(void)
{
    json_t *request = json_pack("{s:s}", "model", "m");
    llmr_oai_resp_out *o = llmr_oai_resp_out_new("resp_2", "m", 5, request);
    json_t *events = json_array();
    llmr_oai_resp_out_text(o, "Hel", 3, events);
    llmr_oai_resp_out_text(o, "lo", 2, events);
    llmr_oai_resp_usage u = {1, 2, 0};
    llmr_oai_resp_out_finish(o, true, &u, events);
    char *types = types_of(events);
    CHECK_EQ_STR(types, "response.output_item.added response.content_part.added response.output_text.delta "
                        "response.output_text.delta response.output_text.done response.content_part.done "
                        "response.output_item.done response.incomplete");
    free(types);
    json_t *resp = llmr_oai_resp_out_response(o);
    CHECK_EQ_STR(json_string_value(json_object_get(resp, "status")), "incomplete");
    EXPECT_JSON(json_object_get(resp, "incomplete_details"), "{\"reason\":\"max_output_tokens\"}");
    json_t *msg = json_array_get(json_object_get(resp, "output"), 0);
    EXPECT_JSON(msg ? json_object_get(msg, "content") : NULL,
                "[{\"type\":\"output_text\",\"text\":\"Hello\",\"annotations\":[]}]");
    CHECK_EQ_STR(json_string_value(json_object_get(msg, "status")), "incomplete");
    json_decref(resp);
    json_decref(events);
    llmr_oai_resp_out_free(o);

    o = llmr_oai_resp_out_new("resp_3", "m", 5, request);
    events = json_array();
    llmr_oai_resp_out_fail(o, "timeout", "too slow", events);
    types = types_of(events);
    CHECK_EQ_STR(types, "response.failed");
    free(types);
    resp = llmr_oai_resp_out_response(o);
    EXPECT_JSON(json_object_get(resp, "error"), "{\"code\":\"timeout\",\"message\":\"too slow\"}");
    json_decref(resp);
    json_decref(events);
    llmr_oai_resp_out_free(o);
    json_decref(request);

    llmr_strbuf sb = LLMR_STRBUF_INIT;
    json_t *e = json_pack("{s:s, s:i}", "type", "response.created", "sequence_number", 0);
    llmr_oai_sse_event(&sb, e);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb),
                 "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n");
    json_decref(e);
    llmr_strbuf_free(&sb);
}

int main(void)
{
    RUN(items_become_chat_messages);
    RUN(mistakes_name_the_responses_field);
    RUN(chat_errors_name_the_input_item);
    RUN(a_follow_up_chains_the_items);
    RUN(deltas_become_items_and_events);
    RUN(a_message_cut_short_is_incomplete);
    return llmr_test_finish();
}
