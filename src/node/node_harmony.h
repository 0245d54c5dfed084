/* What the node makes of the tokens a harmony model generates for a chat (the models
 * node_prompt.h says write harmony): each token, its id and its text, goes through
 * the harmony parser (models/harmony_parser.h), whose pieces build the OpenAI answer
 * (openai/openai_answer.h); for a stream, the deltas each token makes come back to be
 * sent at once.  One per request, fed from one thread. */
#ifndef LLMR_NODE_NODE_HARMONY_H
#define LLMR_NODE_NODE_HARMONY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/harmony_parser.h"
#include "openai/openai_answer.h"

typedef struct llmr_node_harmony llmr_node_harmony;

/* NULL without memory. */
llmr_node_harmony *llmr_node_harmony_new(const llmr_harmony_ids *ids,
                                         const llmr_oai_answer_options *o);
void llmr_node_harmony_free(llmr_node_harmony *h);

/* One event of the engine: a token (id >= 0) with its text, or text alone (id < 0:
 * text the detokenizer held back).  A harmony special token's text is empty when the
 * engine leaves special tokens out, or ends in the token's spelling (dropped: the id
 * says it); text before that was held back from the tokens before it, and goes in
 * first.  The deltas it makes are appended to deltas (NULL: not a stream). */
void llmr_node_harmony_feed(llmr_node_harmony *h, int32_t id, const char *text, size_t len,
                            json_t *deltas);
/* The generation ended: what the parser held back comes out, an open call ends. */
void llmr_node_harmony_finish(llmr_node_harmony *h, json_t *deltas);
const llmr_oai_answer *llmr_node_harmony_answer(const llmr_node_harmony *h);
/* Whether the answer has ended (<|return|> or <|call|>, as a token or spelled out):
 * what the engine generates after it would be dropped, so the request can stop. */
bool llmr_node_harmony_done(const llmr_node_harmony *h);

#endif
