/* o200k pre-tokenizer fast path: see o200k_split.h.  The comments name the
 * alternatives of the pattern in order: 1 lower-cased word, 2 upper-cased word,
 * 3 up to three digits, 4 punctuation run, 5 whitespace up to the last line break,
 * 6 whitespace not followed by a non-space, 7 whitespace. */
#include "tokenizer/o200k_split.h"

#include <stdint.h>

const char llmr_o200k_pattern[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum {
    UPPER = 1, LOWER = 2, DIGIT = 4, SPACE = 8, NEWLINE = 16, /* \r \n */
    WIDE = 32 /* not ASCII: unknown here */
};

/* Classes of every byte; a byte >= 0x80 is WIDE. */
static uint8_t cls[256];
static bool cls_ready;

static void init_classes(void)
{
    for (int b = 0; b < 256; b++) {
        uint8_t c = 0;
        if (b >= 0x80)
            c = WIDE;
        else if (b >= 'A' && b <= 'Z')
            c = UPPER;
        else if (b >= 'a' && b <= 'z')
            c = LOWER;
        else if (b >= '0' && b <= '9')
            c = DIGIT;
        else if (b == '\r' || b == '\n')
            c = SPACE | NEWLINE;
        else if (b == ' ' || b == '\t' || b == 0x0b || b == 0x0c)
            c = SPACE;
        cls[b] = c;
    }
    cls_ready = true;
}

#define CLS(i) cls[(unsigned char)text[i]]
#define LETTER (UPPER | LOWER)
/* [^\r\n\p{L}\p{N}]: no line break, letter or digit (spaces and punctuation). */
#define IS_PREFIX(c) (!((c) & (NEWLINE | LETTER | DIGIT | WIDE)))
/* [^\s\p{L}\p{N}]: punctuation, symbols, controls. */
#define IS_PUNCT(c) (!((c) & (SPACE | LETTER | DIGIT | WIDE)))

typedef enum { NO_MATCH, MATCH, ASK_ENGINE } result;

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at i: the end, or ASK_ENGINE when a non-ASCII
 * character could fold to one of these letters. */
static result contraction(const char *text, size_t len, size_t i, size_t *end)
{
    *end = i;
    if (i >= len || text[i] != '\'' || i + 1 >= len)
        return MATCH;
    unsigned char a = (unsigned char)text[i + 1];
    if (a >= 0x80)
        return ASK_ENGINE; /* e.g. U+017F folds to s */
    a |= 0x20;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        *end = i + 2;
        return MATCH;
    }
    if (a == 'r' || a == 'v' || a == 'l') {
        if (i + 2 >= len)
            return MATCH;
        unsigned char b = (unsigned char)text[i + 2];
        if (b >= 0x80)
            return ASK_ENGINE;
        if ((b | 0x20) == (a == 'l' ? 'l' : 'e'))
            *end = i + 3;
    }
    return MATCH;
}

/* Alternatives 1 and 2 from q (after the optional prefix character). */
static result word(const char *text, size_t len, size_t q, bool need_lower, size_t *end)
{
    size_t u = q;
    while (u < len && CLS(u) == UPPER)
        u++;
    if (u < len && CLS(u) == WIDE)
        return ASK_ENGINE; /* could be an upper- or lower-case letter or a mark */
    size_t l = u;
    while (l < len && CLS(l) == LOWER)
        l++;
    if (l < len && CLS(l) == WIDE)
        return ASK_ENGINE;
    /* In ASCII the upper and lower classes are disjoint: no backtracking helps. */
    if (need_lower ? l == u : u == q)
        return NO_MATCH;
    return contraction(text, len, l, end);
}

bool llmr_o200k_match_ascii(const char *text, size_t len, size_t p, size_t *end)
{
    if (!cls_ready)
        init_classes();
    uint8_t c = CLS(p);
    if (c & WIDE)
        return false;
    /* 1, 2: the optional prefix is taken when the first character can be one, and a
     * word can only start after it then (the prefix is no letter). */
    size_t q = IS_PREFIX(c) ? p + 1 : p;
    for (int alt = 1; alt <= 2 && q < len; alt++) {
        result r = word(text, len, q, alt == 1, end);
        if (r == MATCH)
            return true;
        if (r == ASK_ENGINE)
            return false;
    }
    /* 3: \p{N}{1,3} */
    if (c & DIGIT) {
        size_t e = p;
        while (e < len && e - p < 3 && (CLS(e) & DIGIT))
            e++;
        if (e - p < 3 && e < len && CLS(e) == WIDE)
            return false; /* a non-ASCII digit would continue the run */
        *end = e;
        return true;
    }
    /* 4:  ?[^\s\p{L}\p{N}]+[\r\n/]* */
    size_t r = text[p] == ' ' ? p + 1 : p;
    if (r < len && IS_PUNCT(CLS(r))) {
        size_t e = r;
        while (e < len && IS_PUNCT(CLS(e)))
            e++;
        if (e < len && CLS(e) == WIDE)
            return false; /* non-ASCII punctuation would continue the run */
        while (e < len && (text[e] == '\r' || text[e] == '\n' || text[e] == '/'))
            e++;
        *end = e;
        return true;
    }
    if (r < len && r > p && CLS(r) == WIDE)
        return false; /* " " + non-ASCII: alternative 4 might apply */
    if (!(c & SPACE))
        return false; /* only whitespace is left to match here */
    /* 5, 6, 7 on the whitespace run. */
    size_t w = p, last_newline = SIZE_MAX;
    while (w < len && (CLS(w) & SPACE)) {
        if (CLS(w) & NEWLINE)
            last_newline = w;
        w++;
    }
    if (w < len && CLS(w) == WIDE)
        return false; /* Unicode whitespace would lengthen the run */
    if (last_newline != SIZE_MAX) {
        *end = last_newline + 1;
        return true;
    }
    if (w == len || w - p == 1) {
        *end = w;
        return true;
    }
    *end = w - 1;
    return true;
}
