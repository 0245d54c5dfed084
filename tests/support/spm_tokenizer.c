/* SentencePiece-style tokenizer.json generator: see spm_tokenizer.h. */
#include "spm_tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

#define META "\xe2\x96\x81" /* ▁ */

static const char *const training_text =
    "The node turns the rendered prompt into token ids and the ids back into text as "
    "they stream. One wrong id silently degrades every answer; a split character in a "
    "stream shows as garbage in the chat. The tokenizer must be exact, and it must be "
    "fast: the router and the nodes encode every prompt and decode every token they "
    "send. Models are registered once, fetched by every node, checked, and loaded into "
    "the engine that fits. Les caf\xc3\xa9s de la r\xc3\xa9gion sont ouverts; "
    "die Stra\xc3\x9f" "e ist lang und \xc3\xbc" "berall gr\xc3\xbcn. Numbers like 2024, 3.14 and "
    "1,000,000 appear too, as do code lines such as x = f(y) + 1; return x;";

typedef struct sym_word {
    char **syms;
    size_t n;
    int count;
} sym_word;

static char *dup_n(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* Words of the training text, each "▁" + word, split into UTF-8 characters. */
static size_t split_words(sym_word *words, size_t max)
{
    size_t n = 0;
    const char *p = training_text;
    while (*p && n < max) {
        while (*p == ' ')
            p++;
        const char *start = p;
        while (*p && *p != ' ')
            p++;
        if (p == start)
            break;
        char buf[256];
        size_t len = (size_t)(p - start);
        snprintf(buf, sizeof buf, META "%.*s", (int)len, start);
        size_t blen = strlen(buf);
        sym_word *w = NULL;
        for (size_t i = 0; i < n && !w; i++) {
            size_t total = 0;
            for (size_t k = 0; k < words[i].n; k++)
                total += strlen(words[i].syms[k]);
            char joined[256] = "";
            for (size_t k = 0; k < words[i].n; k++)
                strcat(joined, words[i].syms[k]);
            if (total == blen && strcmp(joined, buf) == 0)
                w = &words[i];
        }
        if (w) {
            w->count++;
            continue;
        }
        w = &words[n++];
        w->syms = calloc(blen, sizeof *w->syms);
        w->n = 0;
        w->count = 1;
        for (size_t i = 0; i < blen;) {
            size_t k = llmr_utf8_char_len((const unsigned char *)buf + i, blen - i);
            w->syms[w->n++] = dup_n(buf + i, k);
            i += k;
        }
    }
    return n;
}

static void add_vocab(json_t *vocab, const char *token, int *next_id)
{
    if (!json_object_get(vocab, token))
        json_object_set_new(vocab, token, json_integer((*next_id)++));
}

char *spm_tokenizer_json(spm_style style, size_t n_merges)
{
    sym_word words[512];
    size_t n_words = split_words(words, 512);
    json_t *vocab = json_object(), *merges = json_array();
    int next_id = 0;
    add_vocab(vocab, "<unk>", &next_id);
    add_vocab(vocab, "<s>", &next_id);
    add_vocab(vocab, "</s>", &next_id);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add_vocab(vocab, name, &next_id);
    }
    for (size_t i = 0; i < n_words; i++)
        for (size_t k = 0; k < words[i].n; k++)
            add_vocab(vocab, words[i].syms[k], &next_id);

    /* Learn merges: the most frequent adjacent pair, ties to the smaller pair.  Pairs
     * are counted in a jansson object keyed "left\x1fright". */
    for (size_t m = 0; m < n_merges; m++) {
        json_t *counts = json_object();
        char key[512];
        for (size_t i = 0; i < n_words; i++) {
            for (size_t k = 0; k + 1 < words[i].n; k++) {
                snprintf(key, sizeof key, "%s\x1f%s", words[i].syms[k], words[i].syms[k + 1]);
                json_t *c = json_object_get(counts, key);
                json_object_set_new(counts, key,
                                    json_integer((c ? json_integer_value(c) : 0) + words[i].count));
            }
        }
        const char *best_key = NULL, *pk;
        json_int_t best = 0;
        json_t *v;
        json_object_foreach(counts, pk, v) {
            json_int_t c = json_integer_value(v);
            if (c > best || (c == best && strcmp(pk, best_key) < 0)) {
                best = c;
                best_key = pk;
            }
        }
        if (!best_key) {
            json_decref(counts);
            break;
        }
        char pair[512];
        snprintf(pair, sizeof pair, "%s", best_key);
        json_decref(counts);
        char *sep = strchr(pair, '\x1f');
        *sep = '\0';
        const char *best_a = pair, *best_b = sep + 1;
        char *a = strdup(best_a), *b = strdup(best_b);
        size_t la = strlen(a), lb = strlen(b);
        char *joined = malloc(la + lb + 1);
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb + 1);
        json_array_append_new(merges, json_pack("[s,s]", a, b));
        add_vocab(vocab, joined, &next_id);
        for (size_t i = 0; i < n_words; i++) {
            size_t out = 0;
            for (size_t k = 0; k < words[i].n; k++) {
                if (k + 1 < words[i].n && strcmp(words[i].syms[k], a) == 0 &&
                    strcmp(words[i].syms[k + 1], b) == 0) {
                    free(words[i].syms[k]);
                    free(words[i].syms[k + 1]);
                    words[i].syms[out++] = strdup(joined);
                    k++;
                } else {
                    words[i].syms[out++] = words[i].syms[k];
                }
            }
            words[i].n = out;
        }
        free(a);
        free(b);
        free(joined);
    }
    for (size_t i = 0; i < n_words; i++) {
        for (size_t k = 0; k < words[i].n; k++)
            free(words[i].syms[k]);
        free(words[i].syms);
    }

    json_t *added = json_pack("[{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b,s:b,s:b,s:b},"
                              "{s:i,s:s,s:b,s:b,s:b,s:b,s:b}]",
                              "id", 0, "content", "<unk>", "single_word", 0, "lstrip", 0, "rstrip", 0,
                              "normalized", 0, "special", 1, "id", 1, "content", "<s>", "single_word", 0,
                              "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1, "id", 2,
                              "content", "</s>", "single_word", 0, "lstrip", 0, "rstrip", 0,
                              "normalized", 0, "special", 1);
    json_t *post = json_pack("{s:s, s:[{s:{s:s,s:i}},{s:{s:s,s:i}}], s:[{s:{s:s,s:i}},{s:{s:s,s:i}},"
                             "{s:{s:s,s:i}},{s:{s:s,s:i}}], s:{s:{s:s,s:[i],s:[s]}}}",
                             "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>",
                             "type_id", 0, "Sequence", "id", "A", "type_id", 0, "pair",
                             "SpecialToken", "id", "<s>", "type_id", 0, "Sequence", "id", "A",
                             "type_id", 0, "SpecialToken", "id", "<s>", "type_id", 1, "Sequence",
                             "id", "B", "type_id", 1, "special_tokens", "<s>", "id", "<s>", "ids", 1,
                             "tokens", "<s>");
    json_t *normalizer = json_null(), *pre = json_null(), *decoder;
    if (style == SPM_LLAMA2) {
        normalizer = json_pack("{s:s, s:[{s:s,s:s},{s:s,s:{s:s},s:s}]}", "type", "Sequence",
                               "normalizers", "type", "Prepend", "prepend", META, "type",
                               "Replace", "pattern", "String", " ", "content", META);
        decoder = json_pack("{s:s, s:[{s:s,s:{s:s},s:s},{s:s},{s:s},{s:s,s:s,s:i,s:i}]}", "type",
                            "Sequence", "decoders", "type", "Replace", "pattern", "String", META,
                            "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip",
                            "content", " ", "start", 1, "stop", 0);
    } else {
        pre = json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement", META,
                        "prepend_scheme", "first", "split", 0);
        decoder = json_pack("{s:s, s:[{s:s,s:s,s:s,s:b},{s:s},{s:s}]}", "type", "Sequence",
                            "decoders", "type", "Metaspace", "replacement", META, "prepend_scheme",
                            "first", "split", 0, "type", "ByteFallback", "type", "Fuse");
    }
    json_t *model = json_pack("{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE",
                              "dropout", "unk_token", "<unk>", "continuing_subword_prefix",
                              "end_of_word_suffix", "fuse_unk", 1, "byte_fallback", 1,
                              "ignore_merges", 0, "vocab", vocab, "merges", merges);
    json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0",
                             "truncation", "padding", "added_tokens", added, "normalizer",
                             normalizer, "pre_tokenizer", pre, "post_processor", post, "decoder",
                             decoder, "model", model);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    return text;
}
