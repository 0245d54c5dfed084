/* libFuzzer target: the streaming harmony parser (models/harmony_parser.h) on any
 * sequence of tokens.  Bytes 0..6 are the special tokens (start, end, message,
 * channel, constrain, return, call), byte 7 ends an ordinary token, any other byte is
 * text.  The same input runs twice, as written and with every text byte a token of its
 * own: the fields must be the same, no piece the parser emits may hold a special
 * token's spelling, and every call that starts ends.  (The pieces of a field joined may:
 * "<|end" written as text, then a special token, then "|>" as text.) */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/harmony_parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fields {
    char text[3][8192]; /* reasoning, content, arguments of every call */
    size_t len[3];
    char names[4096];
    size_t names_len;
    unsigned calls, call_ends, message_ends;
} fields;

static void put(char *dst, size_t *len, size_t cap, const char *s, size_t n)
{
    if (*len + n > cap)
        n = cap - *len;
    memcpy(dst + *len, s, n);
    *len += n;
}

static bool memfind(const char *hay, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(hay + i, needle, m))
            return true;
    return false;
}

static const char *const specials[] = {"<|start|>",     "<|end|>",    "<|message|>", "<|channel|>",
                                       "<|constrain|>", "<|return|>", "<|call|>"};

static void on_piece(void *user, llmr_harmony_kind kind, const char *text, size_t len)
{
    fields *f = user;
    for (size_t s = 0; s < 7; s++)
        if (memfind(text, len, specials[s]))
            abort(); /* a special token's text in what the parser emitted */
    int k = kind == LLMR_HARMONY_REASONING ? 0 : kind == LLMR_HARMONY_CONTENT ? 1 : 2;
    switch (kind) {
    case LLMR_HARMONY_REASONING:
    case LLMR_HARMONY_CONTENT:
    case LLMR_HARMONY_CALL_ARGS:
        put(f->text[k], &f->len[k], sizeof f->text[k], text, len);
        break;
    case LLMR_HARMONY_CALL_START:
        put(f->names, &f->names_len, sizeof f->names, text, len);
        put(f->names, &f->names_len, sizeof f->names, "\n", 1);
        f->calls++;
        break;
    case LLMR_HARMONY_CALL_END:
        f->call_ends++;
        break;
    case LLMR_HARMONY_MESSAGE_END:
        f->message_ends++;
        break;
    }
}

static void run(const uint8_t *data, size_t size, bool bytewise, fields *f)
{
    llmr_harmony_ids ids = llmr_harmony_gpt_oss_ids();
    const int32_t special[7] = {ids.start, ids.end, ids.message, ids.channel, ids.constrain, ids.ret, ids.call};
    llmr_harmony_parser p;
    llmr_harmony_parser_init(&p, &ids);
    memset(f, 0, sizeof *f);
    size_t tok = 0; /* the ordinary token being gathered starts here */
    for (size_t i = 0; i <= size; i++) {
        bool boundary = i == size || data[i] < 8 || bytewise;
        if (boundary && i > tok)
            llmr_harmony_feed(&p, 1000, (const char *)data + tok, i - tok, on_piece, f);
        if (i < size && data[i] < 7)
            llmr_harmony_feed(&p, special[data[i]], NULL, 0, on_piece, f);
        if (boundary)
            tok = i < size && data[i] < 8 ? i + 1 : i;
    }
    llmr_harmony_finish(&p, on_piece, f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fields a, b;
    if (size > 4096)
        return 0;
    run(data, size, false, &a);
    run(data, size, true, &b);
    if (memcmp(&a, &b, sizeof a) != 0)
        abort(); /* the split changed the fields */
    if (a.call_ends != a.calls)
        abort(); /* every call ends */
    return 0;
}
