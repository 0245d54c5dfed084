/* Streaming detokenizer: see detokenizer.h. */
#include "tokenizer/detokenizer.h"

#include <string.h>

/* How many ids may wait, while the text ends in U+FFFD, before the boundary in front
 * of the newest is tested (emit_if_closed), with byte-level decoding.  Valid text
 * rarely waits that long: a character has at most 3 bytes before its last, and ids
 * that add no text (a skipped BOS) add a few more; text that holds U+FFFD itself can,
 * and the test is exact there too.  It is not with ByteFallback, which shows a whole
 * run of byte tokens as U+FFFD while its end is incomplete, so that the two decodes
 * may agree at a boundary that is still open (a run of U+FFFD characters spelled in
 * bytes): ByteFallback streams hold back while the text ends in U+FFFD, as long as
 * that lasts. */
#define HELD_BEFORE_TEST 8

llmr_status llmr_detokenizer_init(llmr_detokenizer *d, const llmr_tokenizer *tok, unsigned flags,
                                  const uint32_t *context, size_t n_context)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->flags = flags;
    d->byte_fallback = llmr_tokenizer_decodes_byte_fallback(tok);
    if (n_context) {
        if (!llmr_ids_reserve(&d->ids, n_context))
            return LLMR_OOM_RAM;
        memcpy(d->ids.data, context, n_context * sizeof *context);
        d->ids.count = n_context;
    }
    d->read_offset = n_context;
    return LLMR_OK;
}

void llmr_detokenizer_free(llmr_detokenizer *d)
{
    llmr_ids_free(&d->ids);
    llmr_strbuf_free(&d->prefix_text);
    llmr_strbuf_free(&d->full_text);
    llmr_strbuf_free(&d->scratch);
}

/* Decodes the window twice: up to read_offset, and to the end. */
static llmr_status decode_window(llmr_detokenizer *d, llmr_strbuf *err)
{
    llmr_strbuf_reset(&d->prefix_text);
    llmr_strbuf_reset(&d->full_text);
    const uint32_t *w = d->ids.data + d->prefix_offset;
    llmr_status st = llmr_tokenizer_decode(d->tok, w, d->read_offset - d->prefix_offset, d->flags,
                                           &d->prefix_text, NULL, err);
    if (st == LLMR_OK)
        st = llmr_tokenizer_decode(d->tok, w, d->ids.count - d->prefix_offset, d->flags,
                                   &d->full_text, NULL, err);
    return st;
}

/* The decoders' lossy UTF-8 leaves U+FFFD where a character is cut off (and where
 * bytes are not UTF-8 at all: the text alone cannot tell which). */
static bool ends_in_replacement(const llmr_strbuf *s)
{
    return s->len >= 3 && memcmp(s->data + s->len - 3, "\xef\xbf\xbd", 3) == 0;
}

static bool is_continuation(char c)
{
    return ((unsigned char)c & 0xc0) == 0x80;
}

/* The offset of the character after the one at i in text (at most len). */
static size_t next_char(const char *text, size_t len, size_t i)
{
    if (i < len)
        i++;
    while (i < len && is_continuation(text[i]))
        i++;
    return i;
}

/* How much of text (a decode of the window) stands for prefix_text, which is out
 * already: all of prefix_text when text begins with it.  Otherwise the decoders have
 * changed text that went out: a ByteFallback run that turns out not to be UTF-8
 * becomes one U+FFFD per byte (Hugging Face's rule) though its valid start was
 * emitted.  Then, past the common start, as many characters of text count as
 * covered as prefix_text has there, so what is emitted next is whole UTF-8. */
static size_t covered_len(const llmr_strbuf *prefix, const char *text, size_t len)
{
    size_t c = 0;
    while (c < prefix->len && c < len && prefix->data[c] == text[c])
        c++;
    if (c == prefix->len)
        return c;
    while (c > 0 && is_continuation(prefix->data[c]))
        c--;
    size_t covered = c;
    for (size_t i = c; i < prefix->len; i++)
        if (!is_continuation(prefix->data[i]))
            covered = next_char(text, len, covered);
    return covered;
}

/* Emits what text (the decode of the window up to id end) adds to what is out, and
 * moves the window on: ids before end are done. */
static void emit_upto(llmr_detokenizer *d, const char *text, size_t len, size_t end, llmr_strbuf *out)
{
    size_t from = covered_len(&d->prefix_text, text, len);
    if (len > from)
        llmr_strbuf_append(out, text + from, len - from);
    d->prefix_offset = d->read_offset;
    d->read_offset = end;
}

/* The window's text ends in U+FFFD and ids are piling up behind it: the bytes may
 * simply not be UTF-8.  Decodes the window without the newest id, and the newest
 * alone; when the two add up to the window's text, the boundary in front of the
 * newest is closed (with byte-level decoding, a character still open there would
 * have joined the newest id's bytes and changed the text), so the text before it
 * is final: emit it.  This keeps the window short on a long run of invalid bytes. */
static llmr_status emit_if_closed(llmr_detokenizer *d, llmr_strbuf *out, llmr_strbuf *err)
{
    size_t last = d->ids.count - 1;
    llmr_strbuf_reset(&d->scratch);
    llmr_status st = llmr_tokenizer_decode(d->tok, d->ids.data + d->prefix_offset,
                                           last - d->prefix_offset, d->flags, &d->scratch, NULL, err);
    size_t head = d->scratch.len;
    if (st == LLMR_OK)
        st = llmr_tokenizer_decode(d->tok, d->ids.data + last, 1, d->flags, &d->scratch, NULL, err);
    if (st != LLMR_OK)
        return st;
    if (llmr_strbuf_failed(&d->scratch))
        return LLMR_OOM_RAM;
    bool closed = d->scratch.len > head && d->scratch.len == d->full_text.len &&
                  memcmp(d->scratch.data, d->full_text.data, d->scratch.len) == 0;
    if (closed && head > covered_len(&d->prefix_text, d->full_text.data, head))
        emit_upto(d, d->full_text.data, head, last, out);
    return LLMR_OK;
}

llmr_status llmr_detokenizer_push(llmr_detokenizer *d, uint32_t id, llmr_strbuf *out,
                                  llmr_strbuf *err)
{
    /* Ids that decode to nothing whatever their neighbours (skipped special tokens,
     * ids outside the vocabulary) never enter the window: the decode skips them
     * anyway, and a long run of them must not make the window long. */
    size_t len;
    if (!llmr_tokenizer_id_to_token(d->tok, id, &len) ||
        ((d->flags & LLMR_DECODE_SKIP_SPECIAL) && llmr_tokenizer_is_special(d->tok, id)))
        return LLMR_OK;
    if (!llmr_ids_push(&d->ids, id))
        return LLMR_OOM_RAM;
    llmr_status st = decode_window(d, err);
    if (st != LLMR_OK)
        return st;
    /* Emit once the text has grown and is final.  The window only moves on past
     * tokens that produced text, so its first token (which some decoders treat
     * differently) is always one already emitted. */
    const llmr_strbuf *full = &d->full_text;
    if (!ends_in_replacement(full)) {
        if (full->len > covered_len(&d->prefix_text, full->data, full->len))
            emit_upto(d, full->data, full->len, d->ids.count, out);
    } else if (!d->byte_fallback && d->ids.count - d->read_offset > HELD_BEFORE_TEST) {
        st = emit_if_closed(d, out, err);
    }
    if (st == LLMR_OK && llmr_strbuf_failed(out))
        st = LLMR_OOM_RAM;
    return st;
}

llmr_status llmr_detokenizer_finish(llmr_detokenizer *d, llmr_strbuf *out, llmr_strbuf *err)
{
    if (d->read_offset == d->ids.count)
        return LLMR_OK;
    llmr_status st = decode_window(d, err);
    if (st != LLMR_OK)
        return st;
    emit_upto(d, d->full_text.data, d->full_text.len, d->ids.count, out);
    return llmr_strbuf_failed(out) ? LLMR_OOM_RAM : LLMR_OK;
}
