/* The real gpt-oss tokenizer.json (shared data directory): every reference case
 * encodes to exactly its ids and decodes back to its text, in one call and streamed
 * one id at a time; special tokens and the Harmony ids.  Skips when the shared data
 * directory is absent. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/utf8.h"
#include "fixture.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

static llmr_tokenizer *tok;

static llmr_tokenizer *load_real(void)
{
    const char *shared = fx_shared_dir();
    if (!shared)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/models/gpt-oss-20b/tokenizer.json", shared);
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_tokenizer_load_file(path, &t, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "load: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return t;
}

static void ids_text(const llmr_ids *ids, llmr_strbuf *out)
{
    for (size_t i = 0; i < ids->count; i++)
        llmr_strbuf_printf(out, i ? " %u" : "%u", ids->data[i]);
}

TEST(every_reference_case_round_trips)
{
    const char *shared = fx_shared_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/gpt-oss/cases.jsonl", shared);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0, cases = 0;
    llmr_strbuf err = LLMR_STRBUF_INIT, got = LLMR_STRBUF_INIT, want = LLMR_STRBUF_INIT;
    while (getline(&line, &cap, f) > 0) {
        json_t *c = json_loads(line, 0, NULL);
        const json_t *text = json_object_get(c, "text");
        const json_t *expect = json_object_get(c, "ids");
        CHECK(json_is_string(text) && json_is_array(expect));
        const char *t = json_string_value(text);
        size_t n = json_string_length(text);
        llmr_ids ids = LLMR_IDS_INIT;
        CHECK_EQ_INT(llmr_tokenizer_encode(tok, t, n, LLMR_ENCODE_PARSE_SPECIAL, &ids, &err), LLMR_OK);
        llmr_strbuf_reset(&got);
        llmr_strbuf_reset(&want);
        ids_text(&ids, &got);
        for (size_t i = 0; i < json_array_size(expect); i++)
            llmr_strbuf_printf(&want, i ? " %lld" : "%lld",
                               (long long)json_integer_value(json_array_get(expect, i)));
        if (strcmp(llmr_strbuf_cstr(&got), llmr_strbuf_cstr(&want)) != 0)
            llmr_test_fail(__FILE__, __LINE__, "case %zu: got [%s], want [%s]", cases,
                           llmr_strbuf_cstr(&got), llmr_strbuf_cstr(&want));
        /* Decode in one call. */
        llmr_strbuf text_out = LLMR_STRBUF_INIT;
        CHECK_EQ_INT(llmr_tokenizer_decode(tok, ids.data, ids.count, 0, &text_out, NULL, &err), LLMR_OK);
        CHECK(text_out.len == n && memcmp(llmr_strbuf_cstr(&text_out), t, n) == 0);
        /* Streamed: every piece is whole UTF-8 and the pieces add up to the text. */
        llmr_detokenizer d;
        llmr_detokenizer_init(&d, tok, 0, NULL, 0);
        llmr_strbuf streamed = LLMR_STRBUF_INIT, piece = LLMR_STRBUF_INIT;
        for (size_t i = 0; i < ids.count; i++) {
            llmr_strbuf_reset(&piece);
            CHECK_EQ_INT(llmr_detokenizer_push(&d, ids.data[i], &piece, &err), LLMR_OK);
            CHECK(llmr_utf8_valid(llmr_strbuf_cstr(&piece), piece.len, NULL));
            llmr_strbuf_append(&streamed, llmr_strbuf_cstr(&piece), piece.len);
        }
        llmr_detokenizer_finish(&d, &streamed, &err);
        CHECK(streamed.len == n && memcmp(llmr_strbuf_cstr(&streamed), t, n) == 0);
        llmr_detokenizer_free(&d);
        llmr_strbuf_free(&streamed);
        llmr_strbuf_free(&piece);
        llmr_strbuf_free(&text_out);
        llmr_ids_free(&ids);
        json_decref(c);
        cases++;
    }
    CHECK_EQ_INT(cases, 68);
    free(line);
    fclose(f);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&got);
    llmr_strbuf_free(&want);
}

TEST(harmony_special_tokens)
{
    const char *names[] = {"<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|return|>",
                           "<|call|>", "<|constrain|>"};
    const int64_t ids[] = {200006, 200008, 200007, 200005, 200002, 200012, 200003};
    for (size_t i = 0; i < 7; i++) {
        CHECK_EQ_INT(llmr_tokenizer_token_to_id(tok, names[i], strlen(names[i])), ids[i]);
        CHECK(llmr_tokenizer_is_special(tok, (uint32_t)ids[i]));
    }
    CHECK_EQ_INT(llmr_tokenizer_vocab_size(tok), 200019);
    const char *msg = "<|start|>user<|message|>Hi<|end|>";
    llmr_ids with = LLMR_IDS_INIT, without = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_encode(tok, msg, strlen(msg), LLMR_ENCODE_PARSE_SPECIAL, &with, &err), LLMR_OK);
    CHECK(with.count >= 5 && with.data[0] == 200006 && with.data[with.count - 1] == 200007);
    CHECK_EQ_INT(llmr_tokenizer_encode(tok, msg, strlen(msg), 0, &without, &err), LLMR_OK);
    for (size_t i = 0; i < without.count; i++)
        CHECK(without.data[i] < 199998);
    CHECK_EQ_INT(llmr_tokenizer_decode(tok, with.data, with.count, LLMR_DECODE_SKIP_SPECIAL, &out, NULL, &err), LLMR_OK);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "userHi");
    llmr_ids_free(&with);
    llmr_ids_free(&without);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
}

TEST(bad_input_is_named_not_crashed_on)
{
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_encode(tok, "ok\xe2\x82", 5, 0, &ids, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "byte 2");
    CHECK_EQ_INT(ids.count, 0);
    /* Ids past the vocabulary (the model's padding rows) decode to nothing. */
    uint32_t past[] = {13225, 200500, 201087};
    size_t unknown = 0;
    CHECK_EQ_INT(llmr_tokenizer_decode(tok, past, 3, 0, &out, &unknown, &err), LLMR_OK);
    CHECK_EQ_INT(unknown, 2);
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "Hello");
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
}

int main(void)
{
    tok = load_real();
    if (!tok) {
        llmr_test_skip("the shared data directory is absent (set LLMR_SHARED_DIR)");
        return llmr_test_finish();
    }
    RUN(every_reference_case_round_trips);
    RUN(harmony_special_tokens);
    RUN(bad_input_is_named_not_crashed_on);
    llmr_tokenizer_free(tok);
    return llmr_test_finish();
}
