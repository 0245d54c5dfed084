/* The node's harmony glue (node/node_harmony.h): engine events, ids and texts as the
 * worker sends them (special tokens without text, or spelled by an engine that writes
 * them, text held back and sent with a later event), into the OpenAI answer and its
 * stream deltas. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "node/node_harmony.h"

#define S 200006 /* <|start|> */
#define E 200007 /* <|end|> */
#define M 200008 /* <|message|> */
#define C 200005 /* <|channel|> */
#define K 200003 /* <|constrain|> */
#define R 200002 /* <|return|> */
#define L 200012 /* <|call|> */

typedef struct event {
    int32_t id;
    const char *text;
} event;

/* Feeds the events (ending at id 0), streamed; the message's compact JSON and the
 * deltas' joined fields into out. */
static char *run(const event *ev, const llmr_oai_answer_options *o, char *fields, size_t size)
{
    llmr_harmony_ids ids = llmr_harmony_gpt_oss_ids();
    llmr_node_harmony *h = llmr_node_harmony_new(&ids, o);
    json_t *deltas = json_array();
    for (size_t i = 0; ev[i].id; i++)
        llmr_node_harmony_feed(h, ev[i].id, ev[i].text, ev[i].text ? strlen(ev[i].text) : 0, deltas);
    llmr_node_harmony_finish(h, deltas);
    /* the deltas joined, field by field */
    char reasoning[256] = "", content[256] = "", args[256] = "";
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        CHECK(json_object_size(d) > 0);
        const char *r = json_string_value(json_object_get(d, "reasoning_content"));
        const char *c = json_string_value(json_object_get(d, "content"));
        json_t *fn = json_object_get(json_array_get(json_object_get(d, "tool_calls"), 0), "function");
        const char *a = json_string_value(json_object_get(fn, "arguments"));
        strncat(reasoning, r ? r : "", sizeof reasoning - strlen(reasoning) - 1);
        strncat(content, c ? c : "", sizeof content - strlen(content) - 1);
        strncat(args, a ? a : "", sizeof args - strlen(args) - 1);
    }
    snprintf(fields, size, "r=%s c=%s a=%s", reasoning, content, args);
    json_t *m = llmr_oai_answer_message(llmr_node_harmony_answer(h));
    json_t *calls = json_object_get(m, "tool_calls");
    json_array_foreach(calls, i, d) json_object_set_new(d, "id", json_string("ID"));
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    json_decref(deltas);
    llmr_node_harmony_free(h);
    return text;
}

static const llmr_oai_answer_options on = {true, true, true};

TEST(special_tokens_without_text)
{
    const event ev[] = {{C, NULL}, {1, "analysis"}, {M, NULL}, {2, "Hm"}, {3, "m."}, {E, NULL},
                        {S, NULL}, {4, "assistant"}, {C, NULL}, {5, "final"}, {M, NULL},
                        {6, "Hi"}, {R, NULL}, {0, NULL}};
    char f[512];
    char *m = run(ev, &on, f, sizeof f);
    CHECK_EQ_STR(m, "{\"role\":\"assistant\",\"content\":\"Hi\",\"refusal\":null,"
                    "\"reasoning_content\":\"Hmm.\",\"reasoning\":\"Hmm.\"}");
    CHECK_EQ_STR(f, "r=Hmm. c=Hi a=");
    free(m);
}

TEST(special_tokens_spelled_by_the_engine_and_held_back_text)
{
    /* "é" held back from token 7 comes with the <|end|> event, spelled */
    const event ev[] = {{C, "<|channel|>"}, {1, "analysis"}, {M, "<|message|>"}, {7, ""},
                        {E, "\xc3\xa9<|end|>"}, {S, "<|start|>"}, {4, "assistant"},
                        {C, "<|channel|>"}, {1, "commentary to=functions.f "}, {K, "<|constrain|>"},
                        {2, "json"}, {M, "<|message|>"}, {3, "{\"a\":"}, {-1, "1}"}, {L, "<|call|>"},
                        {0, NULL}};
    char f[512];
    char *m = run(ev, &on, f, sizeof f);
    CHECK_EQ_STR(m, "{\"role\":\"assistant\",\"content\":null,\"refusal\":null,"
                    "\"reasoning_content\":\"\xc3\xa9\",\"reasoning\":\"\xc3\xa9\","
                    "\"tool_calls\":[{\"id\":\"ID\",\"type\":\"function\",\"function\":"
                    "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}");
    CHECK_EQ_STR(f, "r=\xc3\xa9 c= a={\"a\":1}");
    free(m);
}

int main(void)
{
    RUN(special_tokens_without_text);
    RUN(special_tokens_spelled_by_the_engine_and_held_back_text);
    return llmr_test_finish();
}
