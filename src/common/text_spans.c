/* Byte ranges of a text: see text_spans.h. */
#include "common/text_spans.h"

#include <stdlib.h>

void llmr_text_spans_push(llmr_text_spans *s, size_t off, size_t len)
{
    if (len == 0)
        return;
    if (s->n && off <= s->v[s->n - 1].off + s->v[s->n - 1].len) {
        llmr_text_span *last = &s->v[s->n - 1];
        if (off + len > last->off + last->len)
            last->len = off + len - last->off;
        return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        llmr_text_span *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            s->failed = true;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (llmr_text_span){off, len};
}

void llmr_text_spans_free(llmr_text_spans *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
    s->failed = false;
}

bool llmr_text_spans_overlap(const llmr_text_span *v, size_t n, size_t off, size_t len)
{
    /* the first span that ends after off */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].off + v[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].off < off + len;
}

bool llmr_text_spans_valid(const llmr_text_span *v, size_t n, size_t text_len)
{
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].len == 0 || v[i].off < end || v[i].off > text_len || v[i].len > text_len - v[i].off)
            return false;
        end = v[i].off + v[i].len;
    }
    return true;
}
