/* libFuzzer target: loading tokenizer.json.  Whatever loads is then used: a fixed
 * text is encoded (special tokens parsed, post-processor applied) and decoded, and
 * the ids are streamed through the detokenizer.  Nothing may crash, leak or hang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] = "Hello, world! <s> 123 caf\xc3\xa9 \xf0\x9f\xa6\x99  \ttabs\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmr_tokenizer *tok = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load((const char *)data, size, &tok, &err) != LLMR_OK) {
        if (err.len == 0)
            __builtin_trap(); /* a refusal must say why */
        llmr_strbuf_free(&err);
        return 0;
    }
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf text = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_encode(tok, sample, sizeof sample - 1,
                              LLMR_ENCODE_PARSE_SPECIAL | LLMR_ENCODE_ADD_SPECIAL, &ids, &err) == LLMR_OK) {
        llmr_tokenizer_decode(tok, ids.data, ids.count, 0, &text, NULL, &err);
        llmr_detokenizer d;
        if (llmr_detokenizer_init(&d, tok, LLMR_DECODE_SKIP_SPECIAL, NULL, 0) == LLMR_OK) {
            for (size_t i = 0; i < ids.count; i++)
                llmr_detokenizer_push(&d, ids.data[i], &streamed, &err);
            llmr_detokenizer_finish(&d, &streamed, &err);
            llmr_detokenizer_free(&d);
        }
    }
    llmr_ids_free(&ids);
    llmr_strbuf_free(&text);
    llmr_strbuf_free(&streamed);
    llmr_strbuf_free(&err);
    llmr_tokenizer_free(tok);
    return 0;
}
