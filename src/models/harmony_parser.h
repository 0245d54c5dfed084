/* A streaming parser of what gpt-oss writes back in the harmony format (DESIGN.md §5b):
 * fed one generated token at a time (its id, and its text for ordinary tokens), it
 * emits typed pieces: reasoning text (the analysis channel), answer text (final, and
 * commentary addressed to no one), and tool calls (a message addressed `to=NAME`: its
 * start with the name, its argument text, its end).  It never emits the text of a
 * special token, whether the model wrote the special token itself or spelled it out
 * in ordinary text, and it takes the model's known slips: a channel name without
 * <|channel|> before it, the recipient before the channel, special tokens glued to a
 * tool's name, a missing <|end|> or <|start|>, a repeated <|start|>assistant, a call
 * whose <|call|> never comes (llmr_harmony_finish ends it).
 *
 * The parser is a fixed-size struct (no allocation); one per request, owned by whoever
 * streams the request's tokens.  The prompt ends with <|start|>assistant, so a parser
 * starts in a message header whose role is known. */
#ifndef LLMR_MODELS_HARMONY_PARSER_H
#define LLMR_MODELS_HARMONY_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum llmr_harmony_kind {
    LLMR_HARMONY_REASONING = 1, /* text of an analysis message */
    LLMR_HARMONY_CONTENT,       /* text of the answer (final, or commentary to no one) */
    LLMR_HARMONY_CALL_START,    /* a call of functions.NAME begins; text: NAME (a message to
                                 * another recipient, a built-in tool, is REASONING) */
    LLMR_HARMONY_CALL_ARGS,     /* text of the call's arguments, as the model wrote them */
    LLMR_HARMONY_CALL_END,      /* the call is complete (no text) */
    LLMR_HARMONY_MESSAGE_END,   /* a message ended, whatever it was (no text) */
} llmr_harmony_kind;

/* The special tokens' ids (-1: none). */
typedef struct llmr_harmony_ids {
    int32_t start, end, message, channel, constrain, ret, call;
} llmr_harmony_ids;

/* gpt-oss's (o200k_harmony): 200006, 200007, 200008, 200005, 200003, 200002, 200012. */
llmr_harmony_ids llmr_harmony_gpt_oss_ids(void);

/* What the parser emits: kind, and text (not NUL-terminated, valid during the call). */
typedef void (*llmr_harmony_emit_fn)(void *user, llmr_harmony_kind kind, const char *text,
                                     size_t len);

#define LLMR_HARMONY_HEADER_MAX 256 /* header bytes kept; past that it was no header */

typedef struct llmr_harmony_parser {
    llmr_harmony_ids ids;
    int state;              /* internal */
    llmr_harmony_kind body; /* what the current message's text is */
    char header[LLMR_HARMONY_HEADER_MAX + 16];
    size_t header_len;
    char pending[16];       /* ordinary text that may be the start of a spelled special token */
    size_t pending_len;
    uint32_t calls;         /* calls started so far */
} llmr_harmony_parser;

void llmr_harmony_parser_init(llmr_harmony_parser *p, const llmr_harmony_ids *ids);
/* One generated token: id, and for an ordinary token its text (text may be NULL with
 * len 0 for a special one). */
void llmr_harmony_feed(llmr_harmony_parser *p, int32_t id, const char *text, size_t len,
                       llmr_harmony_emit_fn emit, void *user);
/* The stream ended: what is held back comes out, an open message or call ends. */
void llmr_harmony_finish(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user);
/* Whether the turn ended (<|return|> or <|call|>): what follows is ignored. */
bool llmr_harmony_done(const llmr_harmony_parser *p);

#endif
