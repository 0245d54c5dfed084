/* Byte-level alphabet: see byte_level.h. */
#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

static bool printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t llmr_byte_level_char(uint8_t b)
{
    if (printable(b))
        return b;
    /* The n-th non-printable byte maps to U+0100 + n. */
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++)
        n += !printable(x);
    return 0x100 + n;
}

/* The 68 non-printable bytes in order: U+0100 + n stands for unprintable[n]. */
static const uint8_t unprintable[68] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
    0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
    0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x7f, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95,
    0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f, 0xa0, 0xad};

int llmr_byte_level_byte(uint32_t cp)
{
    if (cp < 0x100)
        return printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + sizeof unprintable)
        return -1;
    return unprintable[cp - 0x100];
}

bool llmr_byte_level_decode(const char *text, size_t len, llmr_strbuf *out)
{
    size_t mark = out->len;
    size_t i = 0;
    while (i < len) {
        size_t k;
        int b = llmr_byte_level_byte(llmr_uc_decode(text + i, len - i, &k));
        if (b < 0) {
            out->len = mark;
            if (out->data)
                out->data[mark] = '\0';
            return false;
        }
        llmr_strbuf_putc(out, (char)b);
        i += k;
    }
    return !out->failed;
}
