/* The llama.cpp engine's token text (engines/llama_cpp/lc_text.c): pieces that end
 * inside a UTF-8 character are held until the character is complete, broken sequences
 * become U+FFFD, and the end flushes what is held.  The pieces come from a real
 * byte-level vocabulary (gpt-oss's, in the tiny GGUF of the llama_tiny fixture),
 * loaded vocabulary-only. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lc_engine.h"

static const struct llama_vocab *vocab;

/* The id of the token whose piece is exactly the bytes s[0..n), or -1. */
static int32_t token_of(const char *s, int32_t n)
{
    char buf[64];
    for (int32_t id = 0; id < llama_vocab_n_tokens(vocab); id++) {
        int32_t got = llama_token_to_piece(vocab, id, buf, sizeof buf, 0, false);
        if (got == n && memcmp(buf, s, (size_t)n) == 0)
            return id;
    }
    return -1;
}

/* Pushes ids in order; the concatenated output and each push's length. */
static void push_all(const int32_t *ids, int n, char *out, uint32_t *lens, bool finish)
{
    lc_text t = {{0}, 0};
    uint32_t at = 0;
    for (int i = 0; i < n; i++) {
        lens[i] = lc_text_push(&t, vocab, ids[i], out + at, 256);
        at += lens[i];
    }
    if (finish)
        at += lc_text_finish(&t, out + at, 256);
    out[at] = '\0';
}

TEST(holds_a_split_character_until_it_is_complete)
{
    int32_t ids[3] = {token_of("\xE2", 1), token_of("\x82", 1), token_of("\xAC", 1)};
    CHECK(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
    if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0)
        return;
    char out[1024];
    uint32_t lens[3];
    push_all(ids, 3, out, lens, true);
    CHECK_EQ_INT(lens[0], 0);
    CHECK_EQ_INT(lens[1], 0);
    CHECK_EQ_INT(lens[2], 3);
    CHECK_EQ_STR(out, "\xE2\x82\xAC"); /* the euro sign, whole */
}

TEST(a_broken_sequence_becomes_replacement_characters)
{
    int32_t e2 = token_of("\xE2", 1), a = token_of("a", 1), x82 = token_of("\x82", 1);
    CHECK(e2 >= 0 && a >= 0 && x82 >= 0);
    if (e2 < 0 || a < 0 || x82 < 0)
        return;
    char out[1024];
    uint32_t lens[3];
    int32_t lead_then_ascii[2] = {e2, a};
    push_all(lead_then_ascii, 2, out, lens, true);
    CHECK_EQ_STR(out, "\xEF\xBF\xBD" "a");
    int32_t lone_continuation[1] = {x82};
    push_all(lone_continuation, 1, out, lens, true);
    CHECK_EQ_STR(out, "\xEF\xBF\xBD");
    int32_t cut_at_the_end[2] = {a, e2};
    push_all(cut_at_the_end, 2, out, lens, false);
    CHECK_EQ_STR(out, "a"); /* held, not yet given out */
    push_all(cut_at_the_end, 2, out, lens, true);
    CHECK_EQ_STR(out, "a\xEF\xBF\xBD"); /* the end flushes it */
}

TEST(whole_tokens_pass_as_they_are)
{
    int32_t hello = token_of("Hello", 5), space_world = token_of(" world", 6);
    CHECK(hello >= 0 && space_world >= 0);
    if (hello < 0 || space_world < 0)
        return;
    int32_t ids[2] = {hello, space_world};
    char out[1024];
    uint32_t lens[2];
    push_all(ids, 2, out, lens, true);
    CHECK_EQ_INT(lens[0], 5);
    CHECK_EQ_STR(out, "Hello world");
}

int main(void)
{
    const char *dir = getenv("LLMR_LLAMA_TINY_DIR");
    if (!dir) {
        fprintf(stderr, "LLMR_LLAMA_TINY_DIR is not set (ctest sets it)\n");
        return 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny/model.gguf", dir);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "cannot load the vocabulary of %s\n", path);
        return 1;
    }
    vocab = llama_model_get_vocab(model);
    RUN(holds_a_split_character_until_it_is_complete);
    RUN(a_broken_sequence_becomes_replacement_characters);
    RUN(whole_tokens_pass_as_they_are);
    llama_model_free(model);
    llama_backend_free();
    return llmr_test_finish();
}
