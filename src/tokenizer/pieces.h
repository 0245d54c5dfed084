/* The text of an encode call as a list of pieces, each either plain text still to
 * be pre-tokenized and tokenized, or an added token already recognised.  Pieces
 * point into one arena by offset, so splitting costs no copying and rewriting
 * (Metaspace, a prefix space) appends new text to the arena. */
#ifndef LLMR_TOKENIZER_PIECES_H
#define LLMR_TOKENIZER_PIECES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/strbuf.h"

typedef struct llmr_piece {
    size_t off, len;
    int64_t id;  /* >= 0: an added token, final */
    bool first;  /* begins at byte 0 of the original text */
    bool plain;  /* holds request text: no special token is recognised in it
                    (llmr_added_tokens_split) */
} llmr_piece;

typedef struct llmr_pieces {
    llmr_piece *v;
    size_t n, cap;
    llmr_strbuf *arena; /* shared between the lists of one encode call */
    bool failed;
} llmr_pieces;

static inline void llmr_pieces_push(llmr_pieces *p, llmr_piece piece)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        llmr_piece *v = (llmr_piece *)realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->failed = true;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = piece;
}

static inline const char *llmr_piece_text(const llmr_pieces *p, const llmr_piece *piece)
{
    return p->arena->data + piece->off;
}

#endif
