/* Token pieces into complete UTF-8: a byte-level token may end inside a character,
 * whose rest comes with the next token.  See lc_engine.h. */
#include <string.h>

#include "lc_engine.h"

/* Length of the UTF-8 sequence that lead byte c starts (0: not a lead byte). */
static uint32_t seq_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0;
}

/* Writes s[0..n) to out as complete UTF-8: valid sequences as they are, a broken one
 * as U+FFFD; a sequence cut by the end of s (when keep_tail) is moved to held.
 * Returns bytes written (never more than cap). */
static uint32_t settle(const char *s, uint32_t n, bool keep_tail, lc_text *t, char *out,
                       uint32_t cap)
{
    static const char replacement[] = "\xEF\xBF\xBD";
    uint32_t w = 0, i = 0;
    t->held_len = 0;
    while (i < n) {
        const unsigned char *u = (const unsigned char *)s + i;
        uint32_t len = seq_len(u[0]), ok = len;
        for (uint32_t k = 1; k < len && ok == len; k++) {
            if (i + k >= n) {
                ok = 0; /* cut by the end */
                break;
            }
            if ((u[k] & 0xC0) != 0x80)
                ok = k; /* broken after k bytes */
        }
        if (len && ok == len) { /* one valid character (overlongs of 3/4 are rare: kept) */
            if (w + len > cap)
                break;
            memcpy(out + w, u, len);
            w += len;
            i += len;
        } else if (len && ok == 0 && keep_tail) {
            memcpy(t->held, u, n - i);
            t->held_len = n - i;
            break;
        } else {
            if (w + 3 > cap)
                break;
            memcpy(out + w, replacement, 3);
            w += 3;
            i += ok ? ok : 1;
        }
    }
    return w;
}

uint32_t lc_text_push(lc_text *t, const struct llama_vocab *vocab, int32_t token, char *out,
                      uint32_t cap)
{
    char piece[256 + sizeof t->held];
    memcpy(piece, t->held, t->held_len);
    int32_t n = llama_token_to_piece(vocab, token, piece + t->held_len, 256, 0, false);
    if (n < 0)
        n = 0; /* a piece over 256 bytes: no token of a real vocabulary is that long */
    return settle(piece, t->held_len + (uint32_t)n, true, t, out, cap);
}

uint32_t lc_text_finish(lc_text *t, char *out, uint32_t cap)
{
    char rest[sizeof t->held];
    uint32_t n = t->held_len;
    memcpy(rest, t->held, n);
    return settle(rest, n, false, t, out, cap);
}
