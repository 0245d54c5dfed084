/* libFuzzer target: encode/decode round trips on two fixed tokenizers, a byte-level
 * BPE with the GPT-2 split regex and special tokens, and a SentencePiece-style BPE
 * with byte fallback.  For valid UTF-8, decode(encode(text)) must be the text (where
 * the layout promises it), and streaming the ids must give the same text as one
 * decode; invalid UTF-8 must be refused. */
#define _GNU_SOURCE /* memmem */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "spm_tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static llmr_tokenizer *byte_level, *spm;

/* Byte tokens (id = byte), a few merges, two special tokens. */
static llmr_tokenizer *make_byte_level(void)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&sb, "{\"added_tokens\":[{\"id\":300,\"content\":\"<|end|>\",\"special\":true},"
                          "{\"id\":301,\"content\":\"<|end|>x\",\"special\":true}],"
                          "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
                          "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        char c[4];
        size_t n = llmr_uc_encode(llmr_byte_level_char((uint8_t)b), c);
        llmr_strbuf_puts(&sb, b ? ",\"" : "\"");
        if (c[0] == '"' || c[0] == '\\')
            llmr_strbuf_putc(&sb, '\\');
        llmr_strbuf_append(&sb, c, n);
        llmr_strbuf_printf(&sb, "\":%d", b);
    }
    llmr_strbuf_puts(&sb, ",\"\xc4\xa0t\":256,\"he\":257,\"\xc4\xa0the\":258,\"in\":259,\"\xc4\xa0\xc4\xa0\":260},"
                          "\"merges\":[\"\xc4\xa0 t\",\"h e\",\"\xc4\xa0t he\",\"i n\",\"\xc4\xa0 \xc4\xa0\"]}}");
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load(sb.data, sb.len, &t, &err) != LLMR_OK)
        abort();
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
    return t;
}

static void round_trip(const llmr_tokenizer *t, const char *text, size_t n, unsigned encode_flags,
                       unsigned skip)
{
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, whole = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_encode(t, text, n, encode_flags, &ids, &err) != LLMR_OK)
        __builtin_trap(); /* valid UTF-8 always encodes */
    llmr_tokenizer_decode(t, ids.data, ids.count, skip, &whole, NULL, &err);
    if (!skip && (whole.len != n || memcmp(llmr_strbuf_cstr(&whole), text, n) != 0))
        __builtin_trap(); /* the text must come back exactly */
    llmr_detokenizer d;
    llmr_detokenizer_init(&d, t, skip, NULL, 0);
    for (size_t i = 0; i < ids.count; i++)
        llmr_detokenizer_push(&d, ids.data[i], &streamed, &err);
    llmr_detokenizer_finish(&d, &streamed, &err);
    if (streamed.len != whole.len || memcmp(llmr_strbuf_cstr(&streamed), llmr_strbuf_cstr(&whole), whole.len) != 0)
        __builtin_trap(); /* streaming must add up to the one-call decode */
    llmr_detokenizer_free(&d);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&whole);
    llmr_strbuf_free(&streamed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!byte_level) {
        byte_level = make_byte_level();
        char *json = spm_tokenizer_json(SPM_LLAMA2, 100);
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_tokenizer_load(json, strlen(json), &spm, &err) != LLMR_OK)
            abort();
        free(json);
        llmr_strbuf_free(&err);
    }
    const char *text = (const char *)data;
    if (!llmr_utf8_valid(text, size, NULL)) {
        llmr_ids ids = LLMR_IDS_INIT;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_tokenizer_encode(byte_level, text, size, 0, &ids, &err) != LLMR_INVALID_ARGUMENT)
            __builtin_trap();
        llmr_ids_free(&ids);
        llmr_strbuf_free(&err);
        return 0;
    }
    round_trip(byte_level, text, size, LLMR_ENCODE_PARSE_SPECIAL, 0);
    /* The SentencePiece layout maps spaces to ▁ and back, and prepends ▁ to every
     * segment between special tokens (as Hugging Face does): it round-trips exactly
     * when specials are not parsed and the text holds no ▁; otherwise only the
     * streaming identity is checked. */
    round_trip(spm, text, size, 0, memmem(text, size, "\xe2\x96\x81", 3) ? LLMR_DECODE_SKIP_SPECIAL : 0);
    round_trip(spm, text, size, LLMR_ENCODE_PARSE_SPECIAL, LLMR_DECODE_SKIP_SPECIAL);
    return 0;
}
