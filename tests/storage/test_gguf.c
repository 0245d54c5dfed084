/* Tests of the GGUF header reader: a valid file, then each rule broken. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_builder.h"
#include "storage/gguf.h"

static char why[4096];

static llmr_status parse_built(gguf_builder *b, uint64_t data_bytes, llmr_gguf_header *h)
{
    size_t len;
    uint8_t *bytes = gb_finish(b, data_bytes, &len);
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_gguf_header local;
    llmr_status st = llmr_gguf_parse(bytes, len, "m.gguf", h ? h : &local, &p);
    why[0] = '\0';
    for (size_t i = 0; i < p.count; i++) {
        CHECK_EQ_STR(p.items[i].file, "m.gguf");
        strncat(why, p.items[i].message, sizeof why - strlen(why) - 1);
    }
    if (st == LLMR_OK && !h)
        llmr_gguf_header_free(&local);
    CHECK((st == LLMR_OK) == (p.count == 0));
    llmr_problems_free(&p);
    free(bytes);
    gb_free(b);
    return st;
}

TEST(a_valid_file_yields_metadata_and_tensors)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "llama.context_length", 8192);
    gb_kv_f32(&b, "llama.rope.freq_base", 10000.0f);
    gb_kv_bool(&b, "general.flag", 1);
    const char *toks[] = {"<s>", "</s>", "hello"};
    gb_kv_string_array(&b, "tokenizer.ggml.tokens", 3, toks);
    gb_kv_i32_array(&b, "tokenizer.ggml.token_type", 3);
    gb_tensor(&b, "token_embd.weight", 2, (uint64_t[]){256, 3}, 12 /* Q4_K */, 0);
    gb_tensor(&b, "output_norm.weight", 1, (uint64_t[]){256}, 0 /* F32 */, 448);
    gb_tensor(&b, "blk.0.ffn_gate_exps.weight", 3, (uint64_t[]){64, 4, 2}, 39 /* MXFP4 */, 1472);
    llmr_gguf_header h;
    CHECK_EQ_INT(parse_built(&b, 1472 + 8 * 2 * 17, &h), LLMR_OK);
    CHECK_EQ_INT(h.version, 3);
    CHECK_EQ_INT(h.kv_count, 6);
    CHECK_EQ_INT(h.tensor_count, 3);
    CHECK_EQ_STR(h.architecture, "llama");
    const llmr_gguf_kv *kv = llmr_gguf_find(&h, "llama.context_length");
    CHECK(kv && kv->type == LLMR_GGUF_UINT32 && kv->num.u64 == 8192);
    kv = llmr_gguf_find(&h, "tokenizer.ggml.tokens");
    CHECK(kv && kv->type == LLMR_GGUF_ARRAY && kv->array_count == 3);
    CHECK_EQ_INT(h.tensors[0].bytes, 3 * 144);
    CHECK_EQ_INT(h.data_bytes, 1472 + 272);
    CHECK_EQ_STR(llmr_ggml_type_name(39), "MXFP4");
    CHECK(llmr_ggml_type_name(4) == NULL);
    llmr_gguf_header_free(&h);
}

TEST(magic_version_and_endianness_are_checked)
{
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_gguf_header h;
    const uint8_t not_gguf[] = "GGML\x03\0\0\0";
    CHECK_EQ_INT(llmr_gguf_parse(not_gguf, 8, "m.gguf", &h, &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "not a GGUF file"));
    llmr_problems_free(&p);

    gguf_builder b;
    gb_init(&b);
    b.version = 1;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "version 1");
    gb_init(&b);
    b.version = 0x03000000u;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "big-endian");
    gb_init(&b);
    b.version = 9;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
}

TEST(counts_the_file_cannot_hold_are_refused_up_front)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    b.claim_kvs = (int64_t)1 << 40;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_LIMIT_EXCEEDED);
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    b.claim_tensors = (int64_t)LLMR_GGUF_MAX_TENSORS + 1; /* one over the tensor limit */
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(why, "1048577 tensors");
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    b.claim_tensors = 100000;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "more than its");
}

TEST(truncation_is_named_in_header_and_in_data)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "w", 1, (uint64_t[]){1024}, 0, 0);
    CHECK_EQ_INT(parse_built(&b, 100, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "truncated");
    CHECK_CONTAINS(why, "3996 bytes missing");

    /* A zero-byte tensor still needs the file to reach its data section (found by
     * the fuzzer). */
    size_t len;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "empty", 1, (uint64_t[]){0}, 0, 0);
    uint8_t *cut = gb_finish(&b, 0, &len);
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_gguf_header h;
    CHECK_EQ_INT(llmr_gguf_parse(cut, len - 5, "m.gguf", &h, &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "before its data section starts"));
    free(cut);
    gb_free(&b);

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    uint8_t *bytes = gb_finish(&b, 0, &len);
    CHECK_EQ_INT(llmr_gguf_parse(bytes, 60, "m.gguf", &h, &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "truncated inside its header"));
    free(bytes);
    gb_free(&b);
    llmr_problems_free(&p);
}

TEST(tensor_rules_are_enforced)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "w", 1, (uint64_t[]){32}, 4 /* retired Q4_2 */, 0);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "ggml type 4");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "w", 1, (uint64_t[]){100}, 12 /* Q4_K: blocks of 256 */, 0);
    CHECK_EQ_INT(parse_built(&b, 1024, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not a multiple of Q4_K's block of 256");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "w", 1, (uint64_t[]){8}, 0, 4);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not a multiple of the alignment");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "a", 1, (uint64_t[]){16}, 0, 0);
    gb_tensor(&b, "b", 1, (uint64_t[]){16}, 0, 32);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "overlaps");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "a", 1, (uint64_t[]){16}, 0, 0);
    gb_tensor(&b, "a", 1, (uint64_t[]){16}, 0, 64);
    CHECK_EQ_INT(parse_built(&b, 128, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "appears twice");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "a", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "5 dimensions");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "a", 2, (uint64_t[]){(uint64_t)1 << 40, (uint64_t)1 << 40}, 0, 0);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "overflows");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_tensor(&b, "a\nb", 1, (uint64_t[]){8}, 0, 0);
    CHECK_EQ_INT(parse_built(&b, 64, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "control characters");
}

TEST(metadata_rules_are_enforced)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.name", "no architecture");
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "general.architecture");

    gb_init(&b);
    gb_kv_u32(&b, "general.architecture", 7);
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not a non-empty UTF-8 string");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_kv_string(&b, "general.architecture", "llama");
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "appears twice");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "general.alignment", 24);
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "power of two");

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    gb_kv_bool(&b, "general.flag", 2);
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "neither 0 nor 1");

    /* An array claiming more elements than the file holds. */
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    llmr_strbuf_append(&b.kvs, "\x03\0\0\0\0\0\0\0arr\x09\0\0\0\x05\0\0\0\xff\xff\xff\xff\xff\0\0\0", 27);
    b.n_kvs++;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "more than the");

    /* Nested arrays are not a GGUF feature readers support. */
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    llmr_strbuf_append(&b.kvs, "\x03\0\0\0\0\0\0\0arr\x09\0\0\0\x09\0\0\0\x01\0\0\0\0\0\0\0", 27);
    b.n_kvs++;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_UNSUPPORTED);

    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "llama");
    llmr_strbuf_append(&b.kvs, "\x03\0\0\0\0\0\0\0bad\x2a\0\0\0", 15);
    b.n_kvs++;
    CHECK_EQ_INT(parse_built(&b, 0, NULL), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "unknown value type 42");
}

int main(void)
{
    RUN(a_valid_file_yields_metadata_and_tensors);
    RUN(magic_version_and_endianness_are_checked);
    RUN(counts_the_file_cannot_hold_are_refused_up_front);
    RUN(truncation_is_named_in_header_and_in_data);
    RUN(tensor_rules_are_enforced);
    RUN(metadata_rules_are_enforced);
    return llmr_test_finish();
}
