/* Unicode helpers: see unicode.h. */
#include "tokenizer/unicode.h"

#include <utf8proc.h>

uint32_t llmr_uc_decode(const char *s, size_t n, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) {
        *len = 1;
        return u[0];
    }
    if (u[0] < 0xe0) {
        *len = 2;
        return ((uint32_t)(u[0] & 0x1f) << 6) | (u[1] & 0x3f);
    }
    if (u[0] < 0xf0 && n >= 3) {
        *len = 3;
        return ((uint32_t)(u[0] & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
    }
    if (n >= 4) {
        *len = 4;
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) |
               ((uint32_t)(u[2] & 0x3f) << 6) | (u[3] & 0x3f);
    }
    *len = 1;
    return u[0];
}

size_t llmr_uc_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

bool llmr_uc_is_whitespace(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool llmr_uc_is_numeric(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool llmr_uc_is_word(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
               cp == '_';
    if (cp == 0x200c || cp == 0x200d) /* Join_Control */
        return true;
    /* Letters that are symbols by category but Alphabetic by property (circled and
     * squared Latin letters). */
    if ((cp >= 0x24b6 && cp <= 0x24e9) || (cp >= 0x1f130 && cp <= 0x1f149) ||
        (cp >= 0x1f150 && cp <= 0x1f169) || (cp >= 0x1f170 && cp <= 0x1f189))
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool llmr_uc_is_punctuation(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2f) || (cp >= 0x3a && cp <= 0x40) ||
               (cp >= 0x5b && cp <= 0x60) || (cp >= 0x7b && cp <= 0x7e);
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

size_t llmr_uc_to_lower(uint32_t cp, uint32_t out[3])
{
    if (cp == 0x130) { /* LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE */
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}
