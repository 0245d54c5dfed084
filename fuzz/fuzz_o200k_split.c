/* libFuzzer target: the o200k pre-tokenizer fast path against PCRE2 on any valid
 * UTF-8 text; the pieces must be identical. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "tokenizer/o200k_split.h"
#include "tokenizer/pretokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static llmr_pretokenizer *fast, *slow;

static llmr_pretokenizer *build(const char *pattern)
{
    json_t *spec = json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex",
                             pattern, "behavior", "Isolated", "invert", 0);
    llmr_pretokenizer *p = NULL;
    bool byte_level;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_pretokenizer_build(spec, &p, &byte_level, &err) != LLMR_OK)
        abort();
    json_decref(spec);
    llmr_strbuf_free(&err);
    return p;
}

static void split(const llmr_pretokenizer *p, const char *text, size_t len, llmr_pieces *out,
                  llmr_strbuf *arena)
{
    llmr_pieces scratch = {NULL, 0, 0, arena, false};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_strbuf_append(arena, text, len);
    llmr_pieces_push(out, (llmr_piece){0, len, -1, true, false});
    if (!llmr_pretokenizer_apply(p, out, &scratch, &err))
        out->n = SIZE_MAX; /* an engine limit: compared like any result */
    free(scratch.v);
    llmr_strbuf_free(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fast) {
        fast = build(llmr_o200k_pattern);
        char *wrapped = malloc(strlen(llmr_o200k_pattern) + 8);
        sprintf(wrapped, "(?:%s)", llmr_o200k_pattern);
        slow = build(wrapped);
        free(wrapped);
    }
    if (size == 0 || !llmr_utf8_valid((const char *)data, size, NULL))
        return 0;
    llmr_strbuf a1 = LLMR_STRBUF_INIT, a2 = LLMR_STRBUF_INIT;
    llmr_pieces p1 = {NULL, 0, 0, &a1, false}, p2 = {NULL, 0, 0, &a2, false};
    split(fast, (const char *)data, size, &p1, &a1);
    split(slow, (const char *)data, size, &p2, &a2);
    if (p1.n != p2.n)
        __builtin_trap();
    for (size_t i = 0; p1.n != SIZE_MAX && i < p1.n; i++)
        if (p1.v[i].off != p2.v[i].off || p1.v[i].len != p2.v[i].len)
            __builtin_trap();
    free(p1.v);
    free(p2.v);
    llmr_strbuf_free(&a1);
    llmr_strbuf_free(&a2);
    return 0;
}
