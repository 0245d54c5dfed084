/* A harmony model's tokens into an OpenAI answer: see node_harmony.h. */
#include "node/node_harmony.h"

#include <stdlib.h>
#include <string.h>

struct llmr_node_harmony {
    llmr_harmony_parser parser;
    llmr_oai_answer *answer;
};

/* Where a feed's pieces go: the answer, and the deltas to stream (or NULL). */
typedef struct sink {
    llmr_oai_answer *answer;
    json_t *deltas;
} sink;

llmr_node_harmony *llmr_node_harmony_new(const llmr_harmony_ids *ids,
                                         const llmr_oai_answer_options *o)
{
    llmr_node_harmony *h = calloc(1, sizeof *h);
    if (!h || !(h->answer = llmr_oai_answer_new(o))) {
        free(h);
        return NULL;
    }
    llmr_harmony_parser_init(&h->parser, ids);
    return h;
}

void llmr_node_harmony_free(llmr_node_harmony *h)
{
    if (!h)
        return;
    llmr_oai_answer_free(h->answer);
    free(h);
}

static void on_piece(void *user, llmr_harmony_kind kind, const char *text, size_t len)
{
    sink *s = user;
    json_t *delta = NULL;
    switch (kind) {
    case LLMR_HARMONY_REASONING:
        delta = llmr_oai_answer_reasoning(s->answer, text, len);
        break;
    case LLMR_HARMONY_CONTENT:
        delta = llmr_oai_answer_content(s->answer, text, len);
        break;
    case LLMR_HARMONY_CALL_START:
        delta = llmr_oai_answer_call_start(s->answer, text, len);
        break;
    case LLMR_HARMONY_CALL_ARGS:
        delta = llmr_oai_answer_call_args(s->answer, text, len);
        break;
    case LLMR_HARMONY_CALL_END:
        llmr_oai_answer_call_end(s->answer);
        break;
    case LLMR_HARMONY_MESSAGE_END:
        break;
    }
    if (delta && s->deltas)
        json_array_append(s->deltas, delta);
    json_decref(delta);
}

/* The spelling of a harmony special token id, or NULL when id is none of them. */
static const char *special_text(const llmr_harmony_ids *ids, int32_t id)
{
    const struct {
        int32_t id;
        const char *text;
    } all[] = {{ids->start, "<|start|>"},     {ids->end, "<|end|>"},
               {ids->message, "<|message|>"}, {ids->channel, "<|channel|>"},
               {ids->constrain, "<|constrain|>"}, {ids->ret, "<|return|>"},
               {ids->call, "<|call|>"}};
    for (size_t i = 0; id >= 0 && i < sizeof all / sizeof all[0]; i++)
        if (all[i].id == id)
            return all[i].text;
    return NULL;
}

void llmr_node_harmony_feed(llmr_node_harmony *h, int32_t id, const char *text, size_t len,
                            json_t *deltas)
{
    sink s = {h->answer, deltas};
    const char *spelled = special_text(&h->parser.ids, id);
    if (spelled) { /* an engine that writes special tokens' text: the id says it */
        size_t n = strlen(spelled);
        if (len >= n && memcmp(text + len - n, spelled, n) == 0)
            len -= n;
    }
    if (len && (id < 0 || spelled)) {
        llmr_harmony_feed(&h->parser, -1, text, len, on_piece, &s);
        len = 0;
    }
    if (id >= 0)
        llmr_harmony_feed(&h->parser, id, text, len, on_piece, &s);
}

void llmr_node_harmony_finish(llmr_node_harmony *h, json_t *deltas)
{
    sink s = {h->answer, deltas};
    llmr_harmony_finish(&h->parser, on_piece, &s);
}

const llmr_oai_answer *llmr_node_harmony_answer(const llmr_node_harmony *h)
{
    return h->answer;
}

bool llmr_node_harmony_done(const llmr_node_harmony *h)
{
    return llmr_harmony_done(&h->parser);
}
