/* The o200k fast path against PCRE2: the same pieces for every string of up to four
 * characters over an alphabet chosen to hit each alternative and each way a
 * non-ASCII character can matter, and for thousands of random longer strings. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokenizer/o200k_split.h"
#include "tokenizer/pretokenizer.h"

static llmr_pretokenizer *fast, *slow;

static llmr_pretokenizer *build(const char *pattern)
{
    json_t *spec = json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", pattern,
                             "behavior", "Isolated", "invert", 0);
    llmr_pretokenizer *p = NULL;
    bool byte_level;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_pretokenizer_build(spec, &p, &byte_level, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "build: %s", llmr_strbuf_cstr(&err));
    json_decref(spec);
    llmr_strbuf_free(&err);
    return p;
}

/* The pieces as "a|b|c" into out. */
static void pieces(const llmr_pretokenizer *p, const char *text, size_t len, llmr_strbuf *out)
{
    llmr_strbuf arena = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_strbuf_append(&arena, text, len);
    llmr_pieces a = {NULL, 0, 0, &arena, false}, b = {NULL, 0, 0, &arena, false};
    if (len)
        llmr_pieces_push(&a, (llmr_piece){0, len, -1, true, false});
    llmr_strbuf_reset(out);
    if (!llmr_pretokenizer_apply(p, &a, &b, &err))
        llmr_strbuf_printf(out, "error: %s", llmr_strbuf_cstr(&err));
    for (size_t i = 0; i < a.n; i++) {
        if (i)
            llmr_strbuf_putc(out, '|');
        llmr_strbuf_append(out, arena.data + a.v[i].off, a.v[i].len);
    }
    free(a.v);
    free(b.v);
    llmr_strbuf_free(&arena);
    llmr_strbuf_free(&err);
}

static int compare(const char *text, size_t len)
{
    llmr_strbuf x = LLMR_STRBUF_INIT, y = LLMR_STRBUF_INIT;
    pieces(fast, text, len, &x);
    pieces(slow, text, len, &y);
    int differ = strcmp(llmr_strbuf_cstr(&x), llmr_strbuf_cstr(&y)) != 0;
    if (differ)
        llmr_test_fail(__FILE__, __LINE__, "text \"%.*s\": fast [%s] engine [%s]", (int)len, text,
                       llmr_strbuf_cstr(&x), llmr_strbuf_cstr(&y));
    llmr_strbuf_free(&x);
    llmr_strbuf_free(&y);
    return differ;
}

/* One of each kind: letters of both cases, digits, spaces and line breaks,
 * punctuation, the apostrophe of contractions, and non-ASCII letters, marks, digits,
 * spaces, punctuation and the long s that folds to 's'. */
static const char *const alphabet[] = {
    "a", "Z", "s", "r", "e", "7", " ", "\t", "\n", "\r", "'", "!", "/", "\x01",
    "\xc3\xa9",         /* é, lower-case letter */
    "\xc3\x89",         /* É, upper-case letter */
    "\xcc\x81",         /* combining acute: a mark */
    "\xd9\xa3",         /* Arabic-Indic three: a digit */
    "\xc2\xa0",         /* no-break space */
    "\xe3\x80\x80",     /* ideographic space */
    "\xe2\x80\x94",     /* em dash: punctuation */
    "\xc5\xbf",         /* long s */
    "\xe6\x97\xa5",     /* a CJK ideograph (Lo) */
};
#define N_ALPHA (sizeof alphabet / sizeof *alphabet)

TEST(every_short_string_matches_the_engine)
{
    int differ = 0;
    char buf[64];
    size_t idx[4];
    for (size_t n = 1; n <= 4 && differ < 5; n++) {
        size_t total = 1;
        for (size_t i = 0; i < n; i++)
            total *= N_ALPHA;
        for (size_t k = 0; k < total && differ < 5; k++) {
            size_t v = k, len = 0;
            for (size_t i = 0; i < n; i++) {
                idx[i] = v % N_ALPHA;
                v /= N_ALPHA;
                size_t l = strlen(alphabet[idx[i]]);
                memcpy(buf + len, alphabet[idx[i]], l);
                len += l;
            }
            differ += compare(buf, len);
        }
    }
}

TEST(random_longer_strings_match_the_engine)
{
    unsigned seed = 42;
    int differ = 0;
    char buf[512];
    for (int round = 0; round < 20000 && differ < 5; round++) {
        size_t len = 0;
        seed = seed * 1103515245u + 12345u;
        size_t n = 5 + (seed >> 16) % 40;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            /* ASCII letters most of the time, like real text. */
            const char *piece = (seed >> 16) % 3 ? alphabet[(seed >> 20) % 6]
                                                 : alphabet[(seed >> 20) % N_ALPHA];
            size_t l = strlen(piece);
            memcpy(buf + len, piece, l);
            len += l;
        }
        differ += compare(buf, len);
    }
}

TEST(typical_text_takes_the_fast_path_and_agrees)
{
    const char *samples[] = {
        "Hello world", "  Hello", "I'm here, they're THERE's", "x = f(y) + 1;\n\treturn x;//ok",
        "12345678 ab12cd", "line\r\n\r\n  next  \n", "end with spaces   ", "HTTPServer ABCdef",
        "'S 'LL 'Ve", "path/to/file.c:12:\n", "a\n\n\nb", "\x01\x02 x",
    };
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
        compare(samples[i], strlen(samples[i]));
    size_t end;
    CHECK(llmr_o200k_match_ascii("Hello world", 11, 0, &end) && end == 5);
    CHECK(llmr_o200k_match_ascii("Hello world", 11, 5, &end) && end == 11);
    CHECK(!llmr_o200k_match_ascii("caf\xc3\xa9", 5, 0, &end)); /* the engine decides */
}

int main(void)
{
    fast = build(llmr_o200k_pattern);
    /* The same regex spelled differently: no fast path, the engine alone. */
    llmr_strbuf wrapped = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&wrapped, "(?:%s)", llmr_o200k_pattern);
    slow = build(llmr_strbuf_cstr(&wrapped));
    llmr_strbuf_free(&wrapped);
    RUN(every_short_string_matches_the_engine);
    RUN(random_longer_strings_match_the_engine);
    RUN(typical_text_takes_the_fast_path_and_agrees);
    llmr_pretokenizer_free(fast);
    llmr_pretokenizer_free(slow);
    return llmr_test_finish();
}
