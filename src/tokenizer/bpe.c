/* BPE word tokenization: see bpe.h. */
#include "tokenizer/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

#define SMALL_WORD 64

typedef struct symbol {
    uint32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes; 0 marks a symbol merged into its left neighbour */
} symbol;

typedef struct merge {
    uint32_t rank, pos, merged;
} merge;

typedef struct word {
    symbol *s;
    size_t n, cap;
    merge *heap;
    size_t heap_n, heap_cap;
    bool failed;
} word;

static void add_symbol(word *w, uint32_t id, uint32_t len)
{
    if (w->n == w->cap) {
        w->failed = true; /* capacity is sized for the worst case up front */
        return;
    }
    int32_t n = (int32_t)w->n;
    if (n > 0)
        w->s[n - 1].next = n;
    w->s[n] = (symbol){id, n - 1, -1, len};
    w->n++;
}

static bool heap_less(const merge *a, const merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(word *w, merge m)
{
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap * 2;
        merge *h = malloc(cap * sizeof *h);
        if (!h) {
            w->failed = true;
            return;
        }
        memcpy(h, w->heap, w->heap_n * sizeof *h);
        if (w->heap_cap > SMALL_WORD * 3) /* the first block lives on the caller's stack */
            free(w->heap);
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&m, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = m;
}

static merge heap_pop(word *w)
{
    merge top = w->heap[0];
    merge last = w->heap[--w->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const merge *best = &last;
        if (l < w->heap_n && heap_less(&w->heap[l], best)) {
            m = l;
            best = &w->heap[l];
        }
        if (r < w->heap_n && heap_less(&w->heap[r], best))
            m = r;
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (w->heap_n)
        w->heap[i] = last;
    return top;
}

/* The merge of a pair: the dense table for two low ids, else the hash table. */
static inline bool pair_merge(const llmr_bpe *b, uint32_t left, uint32_t right, uint32_t *rank,
                              uint32_t *merged)
{
    if (b->low_pairs && (left | right) < 256) {
        uint64_t v = b->low_pairs[left << 8 | right];
        if (v == UINT64_MAX)
            return false;
        *rank = (uint32_t)(v >> 32);
        *merged = (uint32_t)v;
        return true;
    }
    return llmr_merge_map_get(&b->merges, left, right, rank, merged);
}

bool llmr_bpe_index_low_pairs(llmr_bpe *b)
{
    b->low_pairs = malloc(65536 * sizeof *b->low_pairs);
    if (!b->low_pairs)
        return false;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t rank, merged;
        b->low_pairs[i] = llmr_merge_map_get(&b->merges, i >> 8, i & 255, &rank, &merged)
                              ? (uint64_t)rank << 32 | merged
                              : UINT64_MAX;
    }
    return true;
}

static void push_pair(const llmr_bpe *b, word *w, uint32_t pos, uint32_t left, uint32_t right)
{
    uint32_t rank, merged;
    if (pair_merge(b, left, right, &rank, &merged))
        heap_push(w, (merge){rank, pos, merged});
}

/* tokenizers' Word::merge_all. */
static void merge_all(const llmr_bpe *b, word *w)
{
    for (size_t i = 0; i + 1 < w->n; i++)
        push_pair(b, w, (uint32_t)i, w->s[i].id, w->s[i + 1].id);
    while (w->heap_n && !w->failed) {
        merge top = heap_pop(w);
        symbol *cur = &w->s[top.pos];
        if (cur->len == 0 || cur->next < 0)
            continue;
        symbol right = w->s[cur->next];
        uint32_t rank, merged;
        /* A stale entry: the pair at this position has changed since it was queued. */
        if (!pair_merge(b, cur->id, right.id, &rank, &merged) ||
            merged != top.merged)
            continue;
        int32_t right_pos = cur->next;
        cur->id = top.merged;
        cur->len += right.len;
        cur->next = right.next;
        w->s[right_pos].len = 0;
        if (right.next >= 0)
            w->s[right.next].prev = (int32_t)top.pos;
        if (cur->prev >= 0)
            push_pair(b, w, (uint32_t)cur->prev, w->s[cur->prev].id, cur->id);
        if (cur->next >= 0)
            push_pair(b, w, top.pos, cur->id, w->s[cur->next].id);
    }
}

/* merge_all for short words: the same merges in the same order (lowest rank first,
 * leftmost among equals) with the pair ranks in a flat array, of which a merge
 * changes only the two pairs beside it.  A queue entry of the heap version can
 * never be stale and still carry the current pair's merged id (merged strings are
 * concatenations of their pair), so both orders are the same. */
static void merge_small(const llmr_bpe *b, word *w)
{
    uint32_t ids[SMALL_WORD], lens[SMALL_WORD], rank[SMALL_WORD], merged[SMALL_WORD];
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) {
        ids[n] = w->s[i].id;
        lens[n++] = w->s[i].len;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (!pair_merge(b, ids[i], ids[i + 1], &rank[i], &merged[i]))
            rank[i] = UINT32_MAX;
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best])
                best = i;
        if (rank[best] == UINT32_MAX)
            break;
        ids[best] = merged[best];
        lens[best] += lens[best + 1];
        size_t tail = n - best - 2;
        memmove(ids + best + 1, ids + best + 2, tail * sizeof *ids);
        memmove(lens + best + 1, lens + best + 2, tail * sizeof *lens);
        memmove(rank + best + 1, rank + best + 2, tail * sizeof *rank);
        memmove(merged + best + 1, merged + best + 2, tail * sizeof *merged);
        n--;
        if (best > 0 && !pair_merge(b, ids[best - 1], ids[best], &rank[best - 1], &merged[best - 1]))
            rank[best - 1] = UINT32_MAX;
        if (best + 1 < n && !pair_merge(b, ids[best], ids[best + 1], &rank[best], &merged[best]))
            rank[best] = UINT32_MAX;
    }
    for (size_t i = 0; i < n; i++)
        w->s[i] = (symbol){ids[i], 0, 0, lens[i]};
    w->n = n;
}

/* An unknown character: the pending unk of tokenizers' merge_word. */
typedef struct pending_unk {
    bool set;
    uint32_t len;
} pending_unk;

static void flush_unk(const llmr_bpe *b, word *w, pending_unk *u)
{
    if (u->set)
        add_symbol(w, (uint32_t)b->unk_id, u->len);
    u->set = false;
}

static void unknown(const llmr_bpe *b, word *w, pending_unk *u, uint32_t len)
{
    if (b->unk_id < 0)
        return; /* no unk token: the character is dropped, as tokenizers does */
    if (u->set && b->fuse_unk) {
        u->len += len;
        return;
    }
    flush_unk(b, w, u);
    u->set = true;
    u->len = len;
}

static void symbols_byte_mode(const llmr_bpe *b, const char *word_text, size_t len, word *w)
{
    pending_unk u = {false, 0};
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)word_text[i];
        if (b->byte_token[c] >= 0) {
            flush_unk(b, w, &u);
            add_symbol(w, (uint32_t)b->byte_token[c], 1);
        } else if (b->byte_fallback_count[c]) {
            for (unsigned k = 0; k < b->byte_fallback_count[c]; k++)
                add_symbol(w, (uint32_t)b->byte_fallback_tokens[c][k], 1);
        } else {
            unknown(b, w, &u, 1);
        }
    }
    flush_unk(b, w, &u);
}

static void symbols_char_mode(const llmr_bpe *b, const char *text, size_t len, word *w,
                              char *scratch)
{
    pending_unk u = {false, 0};
    size_t i = 0;
    while (i < len) {
        size_t n = llmr_utf8_char_len((const unsigned char *)text + i, len - i);
        if (n == 0)
            n = 1;
        bool first = i == 0, last = i + n == len;
        /* The character with the subword prefix and word suffix it takes. */
        size_t k = 0;
        if (!first && b->prefix) {
            memcpy(scratch, b->prefix, b->prefix_len);
            k = b->prefix_len;
        }
        memcpy(scratch + k, text + i, n);
        k += n;
        if (last && b->suffix) {
            memcpy(scratch + k, b->suffix, b->suffix_len);
            k += b->suffix_len;
        }
        int64_t id = llmr_token_map_get(b->surface, scratch, k);
        if (id >= 0) {
            flush_unk(b, w, &u);
            add_symbol(w, (uint32_t)id, (uint32_t)n);
        } else {
            bool all = b->byte_fallback;
            for (size_t j = 0; all && j < k; j++)
                all = b->fallback[(unsigned char)scratch[j]] >= 0;
            if (all) {
                for (size_t j = 0; j < k; j++)
                    add_symbol(w, (uint32_t)b->fallback[(unsigned char)scratch[j]], 1);
            } else {
                unknown(b, w, &u, (uint32_t)n);
            }
        }
        i += n;
    }
    flush_unk(b, w, &u);
}

bool llmr_bpe_tokenize(const llmr_bpe *b, const char *text, size_t len, llmr_ids *out)
{
    if (len == 0)
        return true;
    if (b->ignore_merges) {
        int64_t id = b->byte_mode ? llmr_token_map_get(&b->bytes, text, len)
                                  : llmr_token_map_get(b->surface, text, len);
        if (id >= 0)
            return llmr_ids_push(out, (uint32_t)id);
    }
    /* A byte becomes at most two symbols (byte mode: the fallback bytes of its
     * alphabet character), a character at most one per byte of itself with the
     * prefix and suffix (character mode). */
    size_t extra = b->prefix_len + b->suffix_len;
    size_t max_symbols = len * (2 + extra) + 4;
    symbol small_s[SMALL_WORD];
    merge small_h[SMALL_WORD * 3];
    char small_scratch[SMALL_WORD];
    word w = {small_s, 0, SMALL_WORD, small_h, 0, SMALL_WORD * 3, false};
    char *scratch = small_scratch;
    bool ok = false;
    if (max_symbols > SMALL_WORD && !(w.s = malloc(max_symbols * sizeof *w.s)))
        return false;
    if (max_symbols > SMALL_WORD)
        w.cap = max_symbols;
    if (4 + extra > sizeof small_scratch && !(scratch = malloc(4 + extra)))
        goto done;
    if (b->byte_mode)
        symbols_byte_mode(b, text, len, &w);
    else
        symbols_char_mode(b, text, len, &w, scratch);
    if (w.n <= SMALL_WORD && !w.failed)
        merge_small(b, &w);
    else
        merge_all(b, &w);
    if (w.failed || !llmr_ids_reserve(out, w.n))
        goto done;
    for (size_t i = 0; i < w.n; i++)
        if (w.s[i].len)
            out->data[out->count++] = w.s[i].id;
    ok = true;
done:
    if (w.s != small_s)
        free(w.s);
    if (w.heap != small_h)
        free(w.heap);
    if (scratch != small_scratch)
        free(scratch);
    return ok;
}

void llmr_bpe_free(llmr_bpe *b)
{
    llmr_token_map_free(&b->bytes);
    llmr_merge_map_free(&b->merges);
    free(b->low_pairs);
    free(b->prefix);
    free(b->suffix);
}
