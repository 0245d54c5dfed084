/* A second tokenizer family: SentencePiece-style BPE (byte fallback, <unk>, the "▁"
 * word marker) in both layouts Hugging Face uses, Llama-2 (normalizer Prepend +
 * Replace) and Metaspace.  A tiny hand-made vocabulary gives exact expectations; a
 * trained one checks round trips over varied text.  With LLMR_WRITE_TOKENIZERS=DIR
 * the trained tokenizer.json files are also written there, for the comparison with
 * Hugging Face tokenizers that runs on the GPU machine (tests/gpu). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/utf8.h"
#include "fixture.h"
#include "spm_tokenizer.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

#define META "\xe2\x96\x81"

/* ids 0-2 specials, 3-258 bytes, then: ▁ h e l o ▁h ll ▁he llo ▁hello w ▁w */
static char *tiny_json(bool metaspace)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&sb, "{\"version\":\"1.0\",\"added_tokens\":["
                          "{\"id\":0,\"content\":\"<unk>\",\"special\":true,\"normalized\":false},"
                          "{\"id\":1,\"content\":\"<s>\",\"special\":true,\"normalized\":false},"
                          "{\"id\":2,\"content\":\"</s>\",\"special\":true,\"normalized\":false}],");
    if (metaspace)
        llmr_strbuf_puts(&sb, "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\","
                              "\"replacement\":\"" META "\",\"prepend_scheme\":\"first\",\"split\":false},"
                              "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Metaspace\","
                              "\"replacement\":\"" META "\",\"prepend_scheme\":\"first\",\"split\":false},"
                              "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},");
    else
        llmr_strbuf_puts(&sb, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
                              "{\"type\":\"Prepend\",\"prepend\":\"" META "\"},"
                              "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" META "\"}]},"
                              "\"pre_tokenizer\":null,"
                              "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                              "{\"type\":\"Replace\",\"pattern\":{\"String\":\"" META "\"},\"content\":\" \"},"
                              "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
                              "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},");
    llmr_strbuf_puts(&sb, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
                          "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
                          "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
                          "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,"
                          "\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (int b = 0; b < 256; b++)
        llmr_strbuf_printf(&sb, ",\"<0x%02X>\":%d", b, 3 + b);
    llmr_strbuf_puts(&sb, ",\"" META "\":259,\"h\":260,\"e\":261,\"l\":262,\"o\":263,\"" META "h\":264,"
                          "\"ll\":265,\"" META "he\":266,\"llo\":267,\"" META "hello\":268,\"w\":269,"
                          "\"" META "w\":270},\"merges\":[\"" META " h\",\"l l\",\"" META "h e\","
                          "\"ll o\",\"" META "he llo\",\"" META " w\"]}}");
    return llmr_strbuf_take(&sb);
}

static llmr_tokenizer *load_json(char *json)
{
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load(json, strlen(json), &t, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "load: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(json);
    return t;
}

static const char *enc(const llmr_tokenizer *t, const char *text, unsigned flags)
{
    static char buf[4096];
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_encode(t, text, strlen(text), flags, &ids, &err) != LLMR_OK)
        llmr_strbuf_printf(&out, "error: %s", llmr_strbuf_cstr(&err));
    for (size_t i = 0; i < ids.count; i++)
        llmr_strbuf_printf(&out, i ? " %u" : "%u", ids.data[i]);
    snprintf(buf, sizeof buf, "%s", llmr_strbuf_cstr(&out));
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
    return buf;
}

static const char *dec(const llmr_tokenizer *t, const uint32_t *ids, size_t n)
{
    static char buf[4096];
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    llmr_tokenizer_decode(t, ids, n, LLMR_DECODE_SKIP_SPECIAL, &out, NULL, &err);
    snprintf(buf, sizeof buf, "%s", llmr_strbuf_cstr(&out));
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
    return buf;
}

TEST(llama2_layout_exact_ids)
{
    llmr_tokenizer *t = load_json(tiny_json(false));
    if (!t)
        return;
    CHECK_EQ_STR(enc(t, "hello", 0), "268");               /* ▁hello */
    CHECK_EQ_STR(enc(t, "hello hello", 0), "268 268");
    CHECK_EQ_STR(enc(t, "hello", LLMR_ENCODE_ADD_SPECIAL), "1 268");
    CHECK_EQ_STR(enc(t, "hew", 0), "266 269");             /* ▁he w */
    /* é is not in the vocabulary: its two bytes C3 A9 fall back to <0xC3> <0xA9>. */
    CHECK_EQ_STR(enc(t, "h\xc3\xa9", 0), "264 198 172");
    CHECK_EQ_STR(enc(t, "", 0), "");
    CHECK_EQ_STR(enc(t, " hello", 0), "259 268");          /* ▁ ▁hello */
    uint32_t ids[] = {1, 268, 268, 264, 198, 172};
    CHECK_EQ_STR(dec(t, ids, 6), "hello hello h\xc3\xa9");
    uint32_t leading[] = {259, 268};
    CHECK_EQ_STR(dec(t, leading, 2), " hello");
    llmr_tokenizer_free(t);
}

TEST(metaspace_layout_exact_ids)
{
    llmr_tokenizer *t = load_json(tiny_json(true));
    if (!t)
        return;
    CHECK_EQ_STR(enc(t, "hello", 0), "268");
    CHECK_EQ_STR(enc(t, "hello hello", 0), "268 268");
    /* prepend_scheme "first": text after a special token gets no ▁ (h e llo). */
    CHECK_EQ_STR(enc(t, "<s>hello", LLMR_ENCODE_PARSE_SPECIAL), "1 260 261 267");
    /* Not parsed, "<s>" is text: ▁, then the bytes of '<', 's', '>' by fallback. */
    CHECK_EQ_STR(enc(t, "<s>hello", 0), "259 63 118 65 260 261 267");
    uint32_t ids[] = {268, 268};
    CHECK_EQ_STR(dec(t, ids, 2), "hello hello");
    llmr_tokenizer_free(t);
}

static const char *const samples[] = {
    "The nodes encode every prompt.",
    "  leading spaces and trailing  ",
    "caf\xc3\xa9 Stra\xc3\x9f\x65 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\xa6\x99 \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f",
    "12345678901234567890 and\ttabs\nand newlines\n\n",
    "x = f(y) + 1; return x; // code",
    "unseen ASCII ~^`|{} mixed with \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
};

TEST(trained_llama2_tokenizer_round_trips)
{
    llmr_tokenizer *t = load_json(spm_tokenizer_json(SPM_LLAMA2, 200));
    if (!t)
        return;
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        llmr_ids ids = LLMR_IDS_INIT;
        llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT;
        const char *s = samples[i];
        CHECK_EQ_INT(llmr_tokenizer_encode(t, s, strlen(s), LLMR_ENCODE_ADD_SPECIAL, &ids, &err), LLMR_OK);
        CHECK(ids.count > 0 && ids.data[0] == 1);
        llmr_tokenizer_decode(t, ids.data, ids.count, LLMR_DECODE_SKIP_SPECIAL, &out, NULL, &err);
        CHECK_EQ_STR(llmr_strbuf_cstr(&out), s);
        llmr_detokenizer d;
        llmr_detokenizer_init(&d, t, LLMR_DECODE_SKIP_SPECIAL, NULL, 0);
        for (size_t k = 0; k < ids.count; k++)
            llmr_detokenizer_push(&d, ids.data[k], &streamed, &err);
        llmr_detokenizer_finish(&d, &streamed, &err);
        CHECK_EQ_STR(llmr_strbuf_cstr(&streamed), s);
        llmr_detokenizer_free(&d);
        llmr_ids_free(&ids);
        llmr_strbuf_free(&err);
        llmr_strbuf_free(&out);
        llmr_strbuf_free(&streamed);
    }
    llmr_tokenizer_free(t);
}

/* Streams ids one at a time: the pieces joined with '|', and false when a piece
 * is not valid UTF-8. */
static bool stream_pieces(const llmr_tokenizer *t, const uint32_t *ids, size_t n, llmr_strbuf *joined)
{
    llmr_detokenizer d;
    llmr_strbuf piece = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    bool valid = true;
    llmr_detokenizer_init(&d, t, LLMR_DECODE_SKIP_SPECIAL, NULL, 0);
    for (size_t i = 0; i <= n; i++) {
        llmr_strbuf_reset(&piece);
        if (i < n)
            llmr_detokenizer_push(&d, ids[i], &piece, &err);
        else
            llmr_detokenizer_finish(&d, &piece, &err);
        valid = valid && llmr_utf8_valid(llmr_strbuf_cstr(&piece), piece.len, NULL);
        llmr_strbuf_printf(joined, i ? "|%s" : "%s", llmr_strbuf_cstr(&piece));
    }
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&piece);
    llmr_strbuf_free(&err);
    return valid;
}

#define FFFD "\xef\xbf\xbd"

/* Hugging Face's ByteFallback turns a whole run of byte tokens that is not UTF-8
 * into one U+FFFD per byte.  A valid run streams as each character completes; an
 * invalid one may already have shown its valid start, so only there the stream
 * differs from the one-call decode; every piece is still valid UTF-8. */
TEST(byte_fallback_runs_stream)
{
    llmr_tokenizer *t = load_json(tiny_json(false));
    if (!t)
        return;
    llmr_strbuf s = LLMR_STRBUF_INIT;
    uint32_t valid[] = {232, 146, 174, 232, 146, 174, 260}; /* E5 8F AB twice: 叫叫, h */
    CHECK(stream_pieces(t, valid, 7, &s));
    CHECK_EQ_STR(llmr_strbuf_cstr(&s), "||\xe5\x8f\xab|||\xe5\x8f\xab|h|");
    CHECK_EQ_STR(dec(t, valid, 7), "\xe5\x8f\xab\xe5\x8f\xab" "h");
    /* 叫 then a stray 0x80: the whole run is 4 bytes of U+FFFD. */
    uint32_t stray[] = {232, 146, 174, 131, 260};
    CHECK_EQ_STR(dec(t, stray, 5), FFFD FFFD FFFD FFFD "h");
    llmr_strbuf_reset(&s);
    CHECK(stream_pieces(t, stray, 5, &s));
    CHECK_EQ_STR(llmr_strbuf_cstr(&s), "||\xe5\x8f\xab||" FFFD FFFD FFFD "h|");
    /* é (2 bytes) then 0x80: still whole characters. */
    uint32_t e_acute[] = {198, 172, 131, 260};
    CHECK_EQ_STR(dec(t, e_acute, 4), FFFD FFFD FFFD "h");
    llmr_strbuf_reset(&s);
    CHECK(stream_pieces(t, e_acute, 4, &s));
    CHECK_EQ_STR(llmr_strbuf_cstr(&s), "|\xc3\xa9||" FFFD FFFD "h|");
    /* A run of U+FFFD characters spelled in bytes is valid text that ends in U+FFFD
     * all along: ByteFallback streams hold it back until the run ends (a run that is
     * not UTF-8 the same way), then it is exactly the one-call decode. */
    uint32_t run[1000];
    for (size_t i = 0; i < 999; i++)
        run[i] = (uint32_t[]){242, 194, 192}[i % 3]; /* EF BF BD */
    run[999] = 260;                                  /* h */
    llmr_detokenizer d;
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_detokenizer_init(&d, t, 0, NULL, 0);
    for (size_t i = 0; i < 999; i++)
        llmr_detokenizer_push(&d, run[i], &out, &err);
    CHECK_EQ_INT(out.len, 0);
    llmr_detokenizer_push(&d, run[999], &out, &err);
    llmr_detokenizer_finish(&d, &out, &err);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), dec(t, run, 1000));
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&s);
    llmr_tokenizer_free(t);
}

TEST(runs_of_byte_spelled_emoji_stream_as_the_one_call_decode)
{
    /* Emoji the trained vocabulary lacks are spelled in byte tokens, several
     * characters to a run, after a skipped BOS: while a run's last character is
     * incomplete, ByteFallback shows the whole run as U+FFFD, and the stream must
     * wait, not take it for bytes that are not UTF-8. */
    llmr_tokenizer *t = load_json(spm_tokenizer_json(SPM_LLAMA2, 200));
    if (!t)
        return;
    const char *s = "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x98\x80 "
                    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7!";
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, joined = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_encode(t, s, strlen(s), LLMR_ENCODE_ADD_SPECIAL, &ids, &err), LLMR_OK);
    size_t bytes = 0;
    for (size_t i = 0; i < ids.count; i++)
        bytes += ids.data[i] >= 3 && ids.data[i] < 3 + 256; /* <0x00>..<0xFF> */
    CHECK(bytes >= 16);
    CHECK(stream_pieces(t, ids.data, ids.count, &joined));
    llmr_strbuf whole = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < joined.len; i++)
        if (joined.data[i] != '|')
            llmr_strbuf_putc(&whole, joined.data[i]);
    CHECK_EQ_STR(llmr_strbuf_cstr(&whole), s);
    llmr_strbuf_free(&whole);
    llmr_strbuf_free(&joined);
    llmr_strbuf_free(&err);
    llmr_ids_free(&ids);
    llmr_tokenizer_free(t);
}

TEST(trained_tokenizers_are_written_for_the_device_check)
{
    const char *dir = getenv("LLMR_WRITE_TOKENIZERS");
    char *a = spm_tokenizer_json(SPM_LLAMA2, 200), *b = spm_tokenizer_json(SPM_METASPACE, 200);
    /* Deterministic: the same document every time. */
    char *a2 = spm_tokenizer_json(SPM_LLAMA2, 200);
    CHECK_EQ_STR(a, a2);
    if (dir) {
        fx_write_text(dir, "spm_llama2.json", a);
        fx_write_text(dir, "spm_metaspace.json", b);
    }
    llmr_tokenizer *t = load_json(b);
    CHECK(t != NULL);
    llmr_tokenizer_free(t);
    free(a);
    free(a2);
}

int main(void)
{
    RUN(llama2_layout_exact_ids);
    RUN(metaspace_layout_exact_ids);
    RUN(trained_llama2_tokenizer_round_trips);
    RUN(byte_fallback_runs_stream);
    RUN(runs_of_byte_spelled_emoji_stream_as_the_one_call_decode);
    RUN(trained_tokenizers_are_written_for_the_device_check);
    return llmr_test_finish();
}
