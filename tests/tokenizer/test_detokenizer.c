/* Streaming detokenization: text comes out as soon as it is final, never a broken
 * UTF-8 character, and the pieces add up to the one-call decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/utf8.h"
#include "fixture.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

/* A byte-level BPE with one token per byte (id = byte value) and no merges, plus a
 * special token <|x|> with id 256: every multi-byte character spans several tokens. */
static llmr_tokenizer *bytes_tokenizer(void)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&sb, "{\"added_tokens\":[{\"id\":256,\"content\":\"<|x|>\",\"special\":true}],"
                          "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false},\"decoder\":{\"type\":\"ByteLevel\"},"
                          "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        char c[4];
        size_t n = llmr_uc_encode(llmr_byte_level_char((uint8_t)b), c);
        llmr_strbuf_puts(&sb, b ? ",\"" : "\"");
        if (c[0] == '"' || c[0] == '\\')
            llmr_strbuf_putc(&sb, '\\');
        llmr_strbuf_append(&sb, c, n);
        llmr_strbuf_printf(&sb, "\":%d", b);
    }
    llmr_strbuf_puts(&sb, "},\"merges\":[]}}");
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load(sb.data, sb.len, &t, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "load: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
    return t;
}

static llmr_tokenizer *tok;

TEST(a_character_split_over_tokens_waits_for_its_last_byte)
{
    const char *text = "a\xf0\x9f\xa6\x99" "b"; /* a 🦙 b */
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_encode(tok, text, strlen(text), 0, &ids, &err), LLMR_OK);
    CHECK_EQ_INT(ids.count, 6);
    llmr_detokenizer d;
    llmr_detokenizer_init(&d, tok, 0, NULL, 0);
    const char *expect[] = {"a", "", "", "", "\xf0\x9f\xa6\x99", "b"};
    for (size_t i = 0; i < ids.count; i++) {
        llmr_strbuf piece = LLMR_STRBUF_INIT;
        CHECK_EQ_INT(llmr_detokenizer_push(&d, ids.data[i], &piece, &err), LLMR_OK);
        CHECK_EQ_STR(llmr_strbuf_cstr(&piece), expect[i]);
        llmr_strbuf_free(&piece);
    }
    llmr_strbuf rest = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_detokenizer_finish(&d, &rest, &err), LLMR_OK);
    CHECK_EQ_INT(rest.len, 0);
    llmr_strbuf_free(&rest);
    llmr_detokenizer_free(&d);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
}

TEST(an_unfinished_character_at_the_end_becomes_a_replacement)
{
    llmr_detokenizer d;
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_detokenizer_init(&d, tok, 0, NULL, 0);
    llmr_detokenizer_push(&d, 'o', &out, &err);
    llmr_detokenizer_push(&d, 'k', &out, &err);
    llmr_detokenizer_push(&d, 0xf0, &out, &err);
    llmr_detokenizer_push(&d, 0x9f, &out, &err);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "ok");
    llmr_detokenizer_finish(&d, &out, &err);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "ok\xef\xbf\xbd"); /* one U+FFFD, as from_utf8_lossy */
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
}

TEST(skipped_special_tokens_keep_the_window_short)
{
    llmr_detokenizer d;
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_detokenizer_init(&d, tok, LLMR_DECODE_SKIP_SPECIAL, NULL, 0);
    llmr_detokenizer_push(&d, 'x', &out, &err);
    for (int i = 0; i < 10000; i++)
        llmr_detokenizer_push(&d, 256, &out, &err);
    llmr_detokenizer_push(&d, 'y', &out, &err);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "xy");
    CHECK(d.ids.count - d.prefix_offset < 4);
    llmr_detokenizer_free(&d);
    /* Not skipped, the special token's text comes out. */
    llmr_strbuf_reset(&out);
    llmr_detokenizer_init(&d, tok, 0, NULL, 0);
    llmr_detokenizer_push(&d, 256, &out, &err);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "<|x|>");
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
}

TEST(context_ids_are_never_emitted)
{
    llmr_detokenizer d;
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    uint32_t context[] = {'p', 'r', 0xe2, 0x82}; /* ends inside a character */
    llmr_detokenizer_init(&d, tok, 0, context, 4);
    llmr_detokenizer_push(&d, 0xac, &out, &err); /* completes € */
    llmr_detokenizer_push(&d, '!', &out, &err);
    llmr_detokenizer_finish(&d, &out, &err);
    /* The euro sign was begun by the prompt: only what follows it is new. */
    CHECK(strstr(llmr_strbuf_cstr(&out), "pr") == NULL);
    CHECK(llmr_utf8_valid(llmr_strbuf_cstr(&out), out.len, NULL));
    CHECK_CONTAINS(llmr_strbuf_cstr(&out), "!");
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
}

TEST(random_byte_streams_match_the_one_call_decode)
{
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        uint32_t ids[64];
        size_t n = 1 + (size_t)(round % 63);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            ids[i] = (seed >> 16) % 257; /* any byte, or the special token */
        }
        llmr_strbuf whole = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
        llmr_tokenizer_decode(tok, ids, n, 0, &whole, NULL, &err);
        llmr_detokenizer d;
        llmr_detokenizer_init(&d, tok, 0, NULL, 0);
        for (size_t i = 0; i < n; i++) {
            llmr_strbuf piece = LLMR_STRBUF_INIT;
            llmr_detokenizer_push(&d, ids[i], &piece, &err);
            CHECK(llmr_utf8_valid(llmr_strbuf_cstr(&piece), piece.len, NULL));
            llmr_strbuf_append(&streamed, llmr_strbuf_cstr(&piece), piece.len);
            llmr_strbuf_free(&piece);
        }
        llmr_detokenizer_finish(&d, &streamed, &err);
        CHECK_EQ_STR(llmr_strbuf_cstr(&streamed), llmr_strbuf_cstr(&whole));
        llmr_detokenizer_free(&d);
        llmr_strbuf_free(&whole);
        llmr_strbuf_free(&streamed);
        llmr_strbuf_free(&err);
    }
}

/* Streams ids one at a time: out gets the text, and *before_last how much of it
 * came out before the last id; every piece must be whole UTF-8. */
static void stream_ids(const llmr_tokenizer *t, const uint32_t *ids, size_t n, llmr_strbuf *out,
                       size_t *before_last, size_t *max_window)
{
    llmr_detokenizer d;
    llmr_strbuf piece = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_detokenizer_init(&d, t, 0, NULL, 0);
    *max_window = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == n)
            *before_last = out->len;
        llmr_strbuf_reset(&piece);
        CHECK_EQ_INT(llmr_detokenizer_push(&d, ids[i], &piece, &err), LLMR_OK);
        CHECK(llmr_utf8_valid(llmr_strbuf_cstr(&piece), piece.len, NULL));
        llmr_strbuf_append(out, llmr_strbuf_cstr(&piece), piece.len);
        if (d.ids.count - d.prefix_offset > *max_window)
            *max_window = d.ids.count - d.prefix_offset;
    }
    CHECK_EQ_INT(llmr_detokenizer_finish(&d, out, &err), LLMR_OK);
    llmr_detokenizer_free(&d);
    llmr_strbuf_free(&piece);
    llmr_strbuf_free(&err);
}

/* Bytes that can never become UTF-8 go out as U+FFFD as they come: the window
 * stays short and nothing waits for the end. */
TEST(a_long_invalid_run_streams_in_a_short_window)
{
    uint32_t ids[5003];
    size_t n = 0;
    ids[n++] = 'a';
    for (int i = 0; i < 5000; i++)
        ids[n++] = i % 7 == 3 ? 0xe5 : 0x80; /* stray continuations, lone leads */
    ids[n++] = 0xf0; /* an unfinished character at the end */
    ids[n++] = 0x9f;
    llmr_strbuf whole = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_tokenizer_decode(tok, ids, n, 0, &whole, NULL, &err);
    size_t before_last = 0, window = 0;
    stream_ids(tok, ids, n, &streamed, &before_last, &window);
    CHECK_EQ_STR(llmr_strbuf_cstr(&streamed), llmr_strbuf_cstr(&whole));
    CHECK(before_last >= whole.len - 3 * 16);
    CHECK(window < 24); /* held ids (at most 9) and the previous emission's */
    llmr_strbuf_free(&whole);
    llmr_strbuf_free(&streamed);
    llmr_strbuf_free(&err);
}

/* Byte streams rich in broken and unfinished characters: every piece is whole
 * UTF-8, the pieces add up to the one-call decode, the window stays short. */
TEST(broken_byte_streams_match_the_one_call_decode)
{
    static const uint8_t alphabet[] = {'a', 0x80, 0x8f, 0xa0, 0xbf, 0xc3, 0xe0, 0xe5,
                                       0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xc0, 0xbd};
    unsigned seed = 777;
    for (int round = 0; round < 300; round++) {
        uint32_t ids[400];
        size_t n = 1 + (size_t)(round * 37 % 400);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            ids[i] = alphabet[(seed >> 16) % sizeof alphabet];
        }
        llmr_strbuf whole = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
        llmr_tokenizer_decode(tok, ids, n, 0, &whole, NULL, &err);
        size_t before_last = 0, window = 0;
        stream_ids(tok, ids, n, &streamed, &before_last, &window);
        CHECK_EQ_STR(llmr_strbuf_cstr(&streamed), llmr_strbuf_cstr(&whole));
        CHECK(window < 24); /* held ids (at most 9) and the previous emission's */
        llmr_strbuf_free(&whole);
        llmr_strbuf_free(&streamed);
        llmr_strbuf_free(&err);
    }
}

/* The real gpt-oss tokenizer (shared data directory), where id 222 is the byte 0x80
 * alone: 20,000 of them and a letter stream progressively, in a short window, and
 * add up to the one-call decode. */
TEST(gpt_oss_invalid_run_streams)
{
    const char *shared = fx_shared_dir();
    if (!shared) {
        fprintf(stderr, "skipped: no LLMR_SHARED_DIR\n");
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/models/gpt-oss-20b/tokenizer.json", shared);
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_load_file(path, &t, &err), LLMR_OK);
    if (!t) {
        llmr_strbuf_free(&err);
        return;
    }
    size_t n = 20001;
    uint32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = i + 1 < n ? 222 : 64;
    llmr_strbuf whole = LLMR_STRBUF_INIT, streamed = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_decode(t, ids, n, 0, &whole, NULL, &err), LLMR_OK);
    CHECK_EQ_INT(whole.len, 3 * 20000 + 1);
    size_t before_last = 0, window = 0;
    stream_ids(t, ids, n, &streamed, &before_last, &window);
    CHECK(streamed.len == whole.len && memcmp(streamed.data, whole.data, whole.len) == 0);
    CHECK(before_last >= 3 * 19990);
    CHECK(window < 24); /* held ids (at most 9) and the previous emission's */
    free(ids);
    llmr_strbuf_free(&whole);
    llmr_strbuf_free(&streamed);
    llmr_strbuf_free(&err);
    llmr_tokenizer_free(t);
}

int main(void)
{
    tok = bytes_tokenizer();
    if (!tok)
        return llmr_test_finish();
    RUN(a_character_split_over_tokens_waits_for_its_last_byte);
    RUN(an_unfinished_character_at_the_end_becomes_a_replacement);
    RUN(skipped_special_tokens_keep_the_window_short);
    RUN(context_ids_are_never_emitted);
    RUN(random_byte_streams_match_the_one_call_decode);
    RUN(a_long_invalid_run_streams_in_a_short_window);
    RUN(broken_byte_streams_match_the_one_call_decode);
    RUN(gpt_oss_invalid_run_streams);
    llmr_tokenizer_free(tok);
    return llmr_test_finish();
}
