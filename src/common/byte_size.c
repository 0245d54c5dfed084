/* Byte sizes and NAME=SIZE lists: see byte_size.h. */
#include "common/byte_size.h"

#include <ctype.h>
#include <string.h>

bool llmr_byte_size_parse(const char *s, size_t n, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t scale;
    } units[] = {{"", 1},          {"B", 1},
                 {"K", 1000ull},   {"KB", 1000ull},
                 {"M", 1000000ull}, {"MB", 1000000ull},
                 {"G", 1000000000ull}, {"GB", 1000000000ull},
                 {"T", 1000000000000ull}, {"TB", 1000000000000ull},
                 {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
                 {"GiB", 1ull << 30}, {"TiB", 1ull << 40}};
    size_t i = 0;
    uint64_t v = 0;
    if (n == 0 || !isdigit((unsigned char)s[0]))
        return false;
    while (i < n && isdigit((unsigned char)s[i])) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i++] - '0');
    }
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        if (strlen(units[u].unit) == n - i && strncmp(s + i, units[u].unit, n - i) == 0) {
            if (v > UINT64_MAX / units[u].scale)
                return false;
            *out = v * units[u].scale;
            return true;
        }
    }
    return false;
}

llmr_status llmr_byte_size_list_parse(const char *text, llmr_byte_size_item_fn fn, void *ctx,
                                      llmr_strbuf *err)
{
    const char *p = text ? text : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        uint64_t bytes = 0;
        if (!eq || eq == p ||
            !llmr_byte_size_parse(eq + 1, n - (size_t)(eq + 1 - p), &bytes) || bytes == 0) {
            llmr_strbuf_printf(err, "\"%.*s\" is not NAME=SIZE (a size like 20GiB or 16G)",
                               (int)(n > 80 ? 80 : n), p);
            return LLMR_INVALID_ARGUMENT;
        }
        if (fn) {
            llmr_status st = fn(ctx, p, (size_t)(eq - p), bytes);
            if (st != LLMR_OK)
                return st;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return LLMR_OK;
}
