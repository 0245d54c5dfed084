/* Growable string: see strbuf.h. */
#include "common/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

void llmr_strbuf_init(llmr_strbuf *sb)
{
    sb->data = NULL;
    sb->len = 0;
    sb->cap = 0;
    sb->failed = false;
}

void llmr_strbuf_free(llmr_strbuf *sb)
{
    free(sb->data);
    llmr_strbuf_init(sb);
}

void llmr_strbuf_reset(llmr_strbuf *sb)
{
    sb->len = 0;
    sb->failed = false;
    if (sb->data)
        sb->data[0] = '\0';
}

/* Makes room for `extra` more bytes plus the terminator. */
static bool reserve(llmr_strbuf *sb, size_t extra)
{
    if (sb->failed)
        return false;
    if (extra > SIZE_MAX - sb->len - 1) {
        sb->failed = true;
        return false;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return true;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

bool llmr_strbuf_append(llmr_strbuf *sb, const void *bytes, size_t n)
{
    if (!reserve(sb, n))
        return false;
    if (n)
        memcpy(sb->data + sb->len, bytes, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
    return true;
}

bool llmr_strbuf_append_range(llmr_strbuf *sb, size_t off, size_t n)
{
    if (off > sb->len || n > sb->len - off || !reserve(sb, n))
        return false;
    memcpy(sb->data + sb->len, sb->data + off, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
    return true;
}

bool llmr_strbuf_puts(llmr_strbuf *sb, const char *s)
{
    return llmr_strbuf_append(sb, s, strlen(s));
}

bool llmr_strbuf_putc(llmr_strbuf *sb, char c)
{
    return llmr_strbuf_append(sb, &c, 1);
}

bool llmr_strbuf_vprintf(llmr_strbuf *sb, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) {
        sb->failed = true;
        return false;
    }
    if (!reserve(sb, (size_t)n))
        return false;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
    return true;
}

bool llmr_strbuf_printf(llmr_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = llmr_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
    return ok;
}

bool llmr_strbuf_put_display(llmr_strbuf *sb, const char *bytes, size_t n)
{
    const unsigned char *s = (const unsigned char *)bytes;
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c == '\\') {
            llmr_strbuf_puts(sb, "\\\\");
            i++;
        } else if (c == '\n') {
            llmr_strbuf_puts(sb, "\\n");
            i++;
        } else if (c == '\t') {
            llmr_strbuf_puts(sb, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            llmr_strbuf_printf(sb, "\\x%02x", c);
            i++;
        } else if (c < 0x80) {
            llmr_strbuf_putc(sb, (char)c);
            i++;
        } else {
            size_t len = llmr_utf8_char_len(s + i, n - i);
            if (len == 0) {
                llmr_strbuf_printf(sb, "\\x%02x", c);
                i++;
            } else {
                llmr_strbuf_append(sb, s + i, len);
                i += len;
            }
        }
    }
    return !sb->failed;
}

bool llmr_strbuf_append_lossy(llmr_strbuf *sb, const void *bytes, size_t n)
{
    const unsigned char *s = bytes;
    size_t i = 0, run = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = llmr_utf8_char_len(s + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        llmr_strbuf_append(sb, s + run, i - run);
        llmr_strbuf_puts(sb, "\xef\xbf\xbd");
        i += llmr_utf8_invalid_len(s + i, n - i);
        run = i;
    }
    llmr_strbuf_append(sb, s + run, n - run);
    return !sb->failed;
}

const char *llmr_strbuf_cstr(const llmr_strbuf *sb)
{
    return sb->data ? sb->data : "";
}

bool llmr_strbuf_failed(const llmr_strbuf *sb)
{
    return sb->failed;
}

char *llmr_strbuf_take(llmr_strbuf *sb)
{
    if (sb->failed) {
        llmr_strbuf_free(sb);
        return NULL;
    }
    char *out = sb->data ? sb->data : calloc(1, 1);
    llmr_strbuf_init(sb);
    return out;
}
