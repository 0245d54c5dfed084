/* A growable byte string for building messages, JSON text and paths.
 *
 * The buffer owns its memory; llmr_strbuf_free releases it, llmr_strbuf_take hands
 * it to the caller.  The contents are always NUL-terminated.  When an allocation
 * fails the buffer turns "failed": later appends do nothing and return false, and
 * llmr_strbuf_failed tells, so a caller may check once at the end. */
#ifndef LLMR_COMMON_STRBUF_H
#define LLMR_COMMON_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_strbuf {
    char *data;   /* NULL until the first append */
    size_t len;   /* bytes used, without the terminating NUL */
    size_t cap;   /* bytes allocated */
    bool failed;  /* an allocation failed; contents are what fitted before */
} llmr_strbuf;

#define LLMR_STRBUF_INIT {NULL, 0, 0, false}

void llmr_strbuf_init(llmr_strbuf *sb);
void llmr_strbuf_free(llmr_strbuf *sb);
/* Empties the buffer and clears the failed flag; keeps the allocation. */
void llmr_strbuf_reset(llmr_strbuf *sb);

bool llmr_strbuf_append(llmr_strbuf *sb, const void *bytes, size_t n);
bool llmr_strbuf_puts(llmr_strbuf *sb, const char *s);
/* Appends bytes [off, off + n) of the buffer itself (safe when the buffer moves). */
bool llmr_strbuf_append_range(llmr_strbuf *sb, size_t off, size_t n);
bool llmr_strbuf_putc(llmr_strbuf *sb, char c);
bool llmr_strbuf_printf(llmr_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool llmr_strbuf_vprintf(llmr_strbuf *sb, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Appends bytes for display to a person: printable ASCII and valid UTF-8 as they
 * are; control characters, backslashes and invalid bytes as \n, \\ or \xNN.  Use it
 * for every name that came from outside (file names, tensor names). */
bool llmr_strbuf_put_display(llmr_strbuf *sb, const char *bytes, size_t n);

/* Appends bytes as UTF-8, each ill-formed subsequence replaced by U+FFFD (Rust's
 * String::from_utf8_lossy). */
bool llmr_strbuf_append_lossy(llmr_strbuf *sb, const void *bytes, size_t n);

/* The contents; "" for an empty buffer, never NULL. */
const char *llmr_strbuf_cstr(const llmr_strbuf *sb);
bool llmr_strbuf_failed(const llmr_strbuf *sb);
/* Hands the contents to the caller (free() them) and leaves the buffer empty.
 * Returns NULL when the buffer failed. */
char *llmr_strbuf_take(llmr_strbuf *sb);

#endif
