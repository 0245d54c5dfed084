/* Streaming detokenization: ids arrive one at a time while a model generates; text
 * goes out as soon as it is final.  Text is held back while it ends in a character
 * that the next ids could still complete (a token may carry half of one, the next
 * token the rest), so a chat never shows a broken character.  Bytes that can no
 * longer become UTF-8 go out as U+FFFD a few ids later, so a long run of them
 * streams too, in linear time.
 *
 * The method is that of Hugging Face's text-generation servers: decode a small
 * window of recent ids twice, with and without the newest, and emit the difference.
 * It works for every decoder chain, including ones whose output for a token depends
 * on its neighbours (Metaspace drops the first token's leading space, ByteFallback
 * joins byte runs).  Concatenated, the pieces equal llmr_tokenizer_decode of all
 * ids, with one exception: ByteFallback turns a whole run of byte tokens that is
 * not UTF-8 into one U+FFFD per byte, and the stream may already have shown the
 * characters that were valid in the part of the run it had seen; for such a run
 * the stream can differ in those characters and in the number of U+FFFD, the text
 * around it is the same.  Every piece is valid UTF-8. */
#ifndef LLMR_TOKENIZER_DETOKENIZER_H
#define LLMR_TOKENIZER_DETOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct llmr_detokenizer {
    const llmr_tokenizer *tok;
    unsigned flags;      /* LLMR_DECODE_* */
    llmr_ids ids;
    size_t prefix_offset; /* the window starts here */
    size_t read_offset;   /* text of ids before this has been emitted */
    llmr_strbuf prefix_text, full_text;
    llmr_strbuf scratch;  /* emit_if_closed's decodes */
    bool byte_fallback;   /* the tokenizer decodes through ByteFallback */
} llmr_detokenizer;

/* Starts a stream.  context: ids that come before the stream (the end of the
 * prompt), used as left context and never emitted; may be NULL. */
llmr_status llmr_detokenizer_init(llmr_detokenizer *d, const llmr_tokenizer *tok, unsigned flags,
                                  const uint32_t *context, size_t n_context);
/* Adds one id; appends to out the text that became final (possibly nothing). */
llmr_status llmr_detokenizer_push(llmr_detokenizer *d, uint32_t id, llmr_strbuf *out,
                                  llmr_strbuf *err);
/* Ends the stream: appends whatever is left, an incomplete character as U+FFFD. */
llmr_status llmr_detokenizer_finish(llmr_detokenizer *d, llmr_strbuf *out, llmr_strbuf *err);
void llmr_detokenizer_free(llmr_detokenizer *d);

#endif
