/* SHA-1 (FIPS 180-4, section 6.1), one shot: see sha1.h. */
#include "common/sha1.h"

#include <stdio.h>
#include <string.h>

typedef struct sha1_state {
    uint32_t h[5];
    uint64_t total;
    uint8_t block[64];
    size_t used;
} sha1_state;

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void compress(sha1_state *s, const uint8_t b[64])
{
    uint32_t w[80];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 | (uint32_t)b[4 * t + 2] << 8 |
               (uint32_t)b[4 * t + 3];
    for (int t = 16; t < 80; t++)
        w[t] = rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    uint32_t a = s->h[0], bb = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
    for (int t = 0; t < 80; t++) {
        uint32_t f, k;
        if (t < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5a827999u;
        } else if (t < 40) {
            f = bb ^ c ^ d;
            k = 0x6ed9eba1u;
        } else if (t < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8f1bbcdcu;
        } else {
            f = bb ^ c ^ d;
            k = 0xca62c1d6u;
        }
        uint32_t temp = rol(a, 5) + f + e + k + w[t];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = temp;
    }
    s->h[0] += a;
    s->h[1] += bb;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
}

static void update(sha1_state *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->total += len;
    while (len > 0) {
        size_t take = 64 - s->used < len ? 64 - s->used : len;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        len -= take;
        if (s->used == 64) {
            compress(s, s->block);
            s->used = 0;
        }
    }
}

static void finish(sha1_state *s, char out[41])
{
    uint64_t bits = s->total * 8;
    uint8_t pad = 0x80, zero = 0;
    update(s, &pad, 1);
    while (s->used != 56)
        update(s, &zero, 1);
    uint8_t len_be[8];
    for (int i = 0; i < 8; i++)
        len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
    update(s, len_be, 8);
    for (int i = 0; i < 5; i++)
        snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

static void start(sha1_state *s)
{
    static const uint32_t init[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    memcpy(s->h, init, sizeof init);
    s->total = 0;
    s->used = 0;
}

void llmr_sha1_hex(const void *data, size_t len, char out[41])
{
    sha1_state s;
    start(&s);
    update(&s, data, len);
    finish(&s, out);
}

void llmr_git_blob_id(const void *data, size_t len, char out[41])
{
    sha1_state s;
    char head[32];
    int n = snprintf(head, sizeof head, "blob %zu", len);
    start(&s);
    update(&s, head, (size_t)n + 1); /* with its NUL */
    update(&s, data, len);
    finish(&s, out);
}
