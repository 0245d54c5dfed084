/* Added-token matching: see added_tokens.h. */
#include "tokenizer/added_tokens.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode.h"

void llmr_added_tokens_free(llmr_added_tokens *a)
{
    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].match != a->v[i].content)
            free(a->v[i].match);
        free(a->v[i].content);
    }
    free(a->v);
    for (int b = 0; b < 256; b++)
        free(a->by_byte[b]);
    memset(a, 0, sizeof *a);
}

static int compare_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

bool llmr_added_tokens_index(llmr_added_tokens *a)
{
    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].match_len == 0)
            continue; /* an empty token never matches */
        unsigned char b = (unsigned char)a->v[i].match[0];
        uint32_t *list = realloc(a->by_byte[b], (a->by_byte_n[b] + 1) * sizeof *list);
        if (!list)
            return false;
        list[a->by_byte_n[b]++] = (uint32_t)i;
        a->by_byte[b] = list;
    }
    /* Longest first, then in file order: sort keys (max - length, index). */
    for (int b = 0; b < 256; b++) {
        uint32_t n = a->by_byte_n[b];
        if (n < 2)
            continue;
        uint64_t *keys = malloc(n * sizeof *keys);
        if (!keys)
            return false;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = a->by_byte[b][k];
            uint64_t len = a->v[i].match_len > UINT32_MAX ? UINT32_MAX : a->v[i].match_len;
            keys[k] = (uint64_t)(UINT32_MAX - len) << 32 | i;
        }
        qsort(keys, n, sizeof *keys, compare_u64);
        for (uint32_t k = 0; k < n; k++)
            a->by_byte[b][k] = (uint32_t)keys[k];
        free(keys);
    }
    return true;
}

static uint32_t last_char(const char *text, size_t end)
{
    size_t b = end - 1;
    while (b > 0 && ((unsigned char)text[b] & 0xc0) == 0x80)
        b--;
    size_t k;
    return llmr_uc_decode(text + b, end - b, &k);
}

/* Leftmost-longest match at or after `from`, among tokens of the wanted kind. */
static const llmr_added_token *find(const llmr_added_tokens *a, bool normalized, bool parse_special,
                                    const llmr_text_spans *plain, size_t base, const char *text,
                                    size_t len, size_t from, size_t *at)
{
    for (size_t i = from; i < len; i++) {
        unsigned char b = (unsigned char)text[i];
        for (uint32_t k = 0; k < a->by_byte_n[b]; k++) {
            const llmr_added_token *t = &a->v[a->by_byte[b][k]];
            if (t->normalized != normalized || (t->special && !parse_special))
                continue;
            if (t->match_len <= len - i && memcmp(text + i, t->match, t->match_len) == 0) {
                if (t->special && plain &&
                    llmr_text_spans_overlap(plain->v, plain->n, base + i, t->match_len))
                    continue; /* request text: not a token here */
                *at = i;
                return t;
            }
        }
    }
    return NULL;
}

/* A text piece of the split, marked plain when it holds bytes of a plain span. */
static void push_text(llmr_pieces *out, const llmr_text_spans *plain, const llmr_piece *src,
                      size_t start, size_t len)
{
    llmr_piece p = {src->off + start, len, -1, src->first && start == 0, src->plain};
    if (plain && llmr_text_spans_overlap(plain->v, plain->n, src->off + start, len))
        p.plain = true;
    llmr_pieces_push(out, p);
}

static void split_piece(const llmr_added_tokens *a, bool normalized, bool parse_special,
                        const llmr_text_spans *plain, const llmr_piece *src, llmr_pieces *out)
{
    if (src->plain)
        parse_special = false;
    const char *text = out->arena->data + src->off;
    size_t len = src->len, start_offset = 0, from = 0, start;
    const llmr_added_token *t;
    while ((t = find(a, normalized, parse_special, plain, src->off, text, len, from, &start)) != NULL) {
        size_t stop = start + t->match_len;
        from = stop;
        if (t->single_word) {
            bool start_space = start == 0 || !llmr_uc_is_word(last_char(text, start));
            size_t k;
            bool stop_space = stop == len || !llmr_uc_is_word(llmr_uc_decode(text + stop, len - stop, &k));
            if (!start_space || !stop_space)
                continue;
        }
        if (t->lstrip) {
            size_t s = start;
            while (s > 0 && llmr_uc_is_whitespace(last_char(text, s))) {
                size_t b = s - 1;
                while (b > 0 && ((unsigned char)text[b] & 0xc0) == 0x80)
                    b--;
                s = b;
            }
            start = s > start_offset ? s : start_offset;
        }
        if (t->rstrip) {
            while (stop < len) {
                size_t k;
                if (!llmr_uc_is_whitespace(llmr_uc_decode(text + stop, len - stop, &k)))
                    break;
                stop += k;
            }
        }
        if (start < start_offset)
            start = start_offset;
        if (start_offset < start)
            push_text(out, plain, src, start_offset, start - start_offset);
        llmr_pieces_push(out, (llmr_piece){src->off + start, stop - start, t->id, false, false});
        start_offset = stop;
        if (from < stop)
            from = stop;
    }
    if (start_offset < len)
        push_text(out, plain, src, start_offset, len - start_offset);
}

void llmr_added_tokens_split(const llmr_added_tokens *a, bool normalized, bool parse_special,
                             const llmr_text_spans *plain, const llmr_pieces *in, llmr_pieces *out)
{
    for (size_t i = 0; i < in->n; i++) {
        if (in->v[i].id >= 0 || a->n == 0)
            llmr_pieces_push(out, in->v[i]);
        else
            split_piece(a, normalized, parse_special, plain, &in->v[i], out);
    }
}
