/* Streaming detokenizer: see detokenizer.h. */
#include "tokenizer/detokenizer.h"

#include <string.h>

llmr_status llmr_detokenizer_init(llmr_detokenizer *d, const llmr_tokenizer *tok, unsigned flags,
                                  const uint32_t *context, size_t n_context)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->flags = flags;
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

static bool ends_incomplete(const llmr_strbuf *s)
{
    /* The decoders' lossy UTF-8 leaves U+FFFD where a character is cut off. */
    return s->len >= 3 && memcmp(s->data + s->len - 3, "\xef\xbf\xbd", 3) == 0;
}

static void emit_new(llmr_detokenizer *d, llmr_strbuf *out)
{
    if (d->full_text.len > d->prefix_text.len)
        llmr_strbuf_append(out, d->full_text.data + d->prefix_text.len,
                           d->full_text.len - d->prefix_text.len);
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
    if (d->full_text.len > d->prefix_text.len && !ends_incomplete(&d->full_text)) {
        emit_new(d, out);
        d->prefix_offset = d->read_offset;
        d->read_offset = d->ids.count;
    }
    return llmr_strbuf_failed(out) ? LLMR_OOM_RAM : LLMR_OK;
}

llmr_status llmr_detokenizer_finish(llmr_detokenizer *d, llmr_strbuf *out, llmr_strbuf *err)
{
    if (d->read_offset == d->ids.count)
        return LLMR_OK;
    llmr_status st = decode_window(d, err);
    if (st != LLMR_OK)
        return st;
    emit_new(d, out);
    d->prefix_offset = d->read_offset;
    d->read_offset = d->ids.count;
    return llmr_strbuf_failed(out) ? LLMR_OOM_RAM : LLMR_OK;
}
