/* Tests of the tokenizer.json components against Hugging Face tokenizers: each
 * expectation is an input/output pair from that library's own unit tests (the file
 * under tokenizers/src/ is named above the test) or follows from its documented
 * behaviour (said so where it is the case).
 *
 *   1. the BPE model, through whole tokenizer.json documents
 *   2. pre-tokenizers, through llmr_pretokenizer_build / llmr_pretokenizer_apply
 *   3. normalizers     4. decoders     5. added tokens     6. post-processors
 *   7. decode and the vocabulary lookups
 *   8. errors: bad input to encode, malformed or unsupported tokenizer.json
 *
 * JSON is written with single quotes to keep it readable; the helpers turn every '
 * into " before parsing (a literal apostrophe would be written \u0027).  Added-token
 * ids follow the vocabulary, as in a file tokenizers writes (it renumbers otherwise). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pieces.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

/* --- helpers ---------------------------------------------------------------- */

/* What the helpers below return: valid until the next helper call. */
static char result[16384];

static const char *set_result(const char *s)
{
    snprintf(result, sizeof result, "%s", s);
    return result;
}

/* A copy of s with every ' turned into " (free() it). */
static char *dq(const char *s)
{
    char *c = strdup(s);
    for (char *p = c; p && *p; p++)
        if (*p == '\'')
            *p = '"';
    return c;
}

static json_t *parse(const char *sq)
{
    char *json = dq(sq);
    json_error_t e;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &e);
    if (!j)
        llmr_test_fail(__FILE__, __LINE__, "bad test JSON (%s): %s", e.text, json);
    free(json);
    return j;
}

/* Loads a tokenizer.json written with single quotes; a failure fails the test. */
static llmr_tokenizer *load(const char *sq)
{
    char *json = dq(sq);
    llmr_tokenizer *t = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_tokenizer_load(json, strlen(json), &t, &err);
    if (st != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "load failed (%s): %s", llmr_status_name(st),
                       llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(json);
    return t;
}

/* Loads a tokenizer.json that must fail: the status, and the message as the result. */
static const char *load_error(const char *sq, llmr_status *st)
{
    char *json = dq(sq);
    llmr_tokenizer *t = (llmr_tokenizer *)1;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    *st = llmr_tokenizer_load(json, strlen(json), &t, &err);
    if (*st == LLMR_OK)
        llmr_tokenizer_free(t);
    else
        CHECK(t == NULL);
    set_result(llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(json);
    return result;
}

/* Encodes text; the ids as "1 2 3", or "error STATUS: message". */
static const char *encode_ids(const llmr_tokenizer *tok, const char *text, unsigned flags)
{
    if (!tok)
        return set_result("(no tokenizer)");
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_tokenizer_encode(tok, text, strlen(text), flags, &ids, &err);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (st != LLMR_OK)
        llmr_strbuf_printf(&sb, "error %s: %s", llmr_status_name(st), llmr_strbuf_cstr(&err));
    for (size_t i = 0; st == LLMR_OK && i < ids.count; i++)
        llmr_strbuf_printf(&sb, "%s%u", i ? " " : "", ids.data[i]);
    set_result(llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
    llmr_ids_free(&ids);
    return result;
}

/* Decodes ids; the text, or "error STATUS: message". */
static const char *decode_ids(const llmr_tokenizer *tok, const uint32_t *ids, size_t n,
                              unsigned flags, size_t *unknown)
{
    if (!tok)
        return set_result("(no tokenizer)");
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_tokenizer_decode(tok, ids, n, flags, &out, unknown, &err);
    if (st == LLMR_OK)
        set_result(llmr_strbuf_cstr(&out));
    else
        snprintf(result, sizeof result, "error %s: %s", llmr_status_name(st),
                 llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
    return result;
}

/* Pre-tokenizes text as one piece (whose `first` flag is given) with the
 * pre-tokenizer `spec`; the pieces as "a|b|c" ("" for none). */
static const char *pieces_from(const char *spec, const char *text, bool first)
{
    json_t *j = parse(spec);
    llmr_pretokenizer *p = NULL;
    bool byte_level = false;
    llmr_strbuf err = LLMR_STRBUF_INIT, arena = LLMR_STRBUF_INIT, sb = LLMR_STRBUF_INIT;
    llmr_status st = llmr_pretokenizer_build(j, &p, &byte_level, &err);
    json_decref(j);
    if (st != LLMR_OK || !p) {
        snprintf(result, sizeof result, "build error %s: %s", llmr_status_name(st),
                 llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return result;
    }
    size_t len = strlen(text);
    llmr_strbuf_append(&arena, text, len);
    llmr_pieces pieces = {NULL, 0, 0, &arena, false}, scratch = {NULL, 0, 0, &arena, false};
    llmr_pieces_push(&pieces, (llmr_piece){0, len, -1, first, false});
    if (!llmr_pretokenizer_apply(p, &pieces, &scratch, &err)) {
        llmr_strbuf_printf(&sb, "apply error: %s", llmr_strbuf_cstr(&err));
    } else {
        for (size_t i = 0; i < pieces.n; i++) {
            if (i)
                llmr_strbuf_putc(&sb, '|');
            llmr_strbuf_append(&sb, llmr_piece_text(&pieces, &pieces.v[i]), pieces.v[i].len);
        }
    }
    set_result(llmr_strbuf_cstr(&sb));
    free(pieces.v);
    free(scratch.v);
    llmr_pretokenizer_free(p);
    llmr_strbuf_free(&arena);
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
    return result;
}

static const char *pieces_of(const char *spec, const char *text)
{
    return pieces_from(spec, text, true);
}

/* Normalizes text with the normalizer `spec`. */
static const char *normalize(const char *spec, const char *text)
{
    json_t *j = parse(spec);
    llmr_normalizer *n = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    llmr_status st = llmr_normalizer_build(j, &n, &err);
    json_decref(j);
    if (st != LLMR_OK || !n)
        snprintf(result, sizeof result, "build error %s: %s", llmr_status_name(st),
                 llmr_strbuf_cstr(&err));
    else if (!llmr_normalizer_apply(n, text, strlen(text), &out, &err))
        snprintf(result, sizeof result, "apply error: %s", llmr_strbuf_cstr(&err));
    else
        set_result(llmr_strbuf_cstr(&out));
    llmr_normalizer_free(n);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
    return result;
}

/* Decodes a NULL-terminated list of token strings with the decoder `spec` (NULL: no
 * decoder); the text. */
static const char *decode_tokens(const char *spec, const char *const *tokens)
{
    json_t *j = spec ? parse(spec) : NULL;
    llmr_decoder *d = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    llmr_status st = llmr_decoder_build(j, &d, &err);
    json_decref(j);
    if (st != LLMR_OK || (spec && !d)) {
        snprintf(result, sizeof result, "build error %s: %s", llmr_status_name(st),
                 llmr_strbuf_cstr(&err));
    } else {
        llmr_token_list list;
        llmr_token_list_init(&list);
        for (size_t i = 0; tokens[i]; i++)
            llmr_token_list_add(&list, tokens[i], strlen(tokens[i]));
        if (!llmr_decoder_run(d, &list, &out, &err))
            snprintf(result, sizeof result, "run error: %s", llmr_strbuf_cstr(&err));
        else
            set_result(llmr_strbuf_cstr(&out));
        llmr_token_list_free(&list);
    }
    llmr_decoder_free(d);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
    return result;
}

typedef enum component { PRE_TOKENIZER, NORMALIZER, DECODER } component;

/* Builds a component that must fail: the status, and the message as the result. */
static const char *build_error(component c, const char *spec, llmr_status *st)
{
    json_t *j = parse(spec);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    switch (c) {
    case PRE_TOKENIZER: {
        llmr_pretokenizer *p = (llmr_pretokenizer *)1;
        bool byte_level;
        *st = llmr_pretokenizer_build(j, &p, &byte_level, &err);
        CHECK(*st == LLMR_OK || p == NULL);
        if (*st == LLMR_OK)
            llmr_pretokenizer_free(p);
        break;
    }
    case NORMALIZER: {
        llmr_normalizer *n = (llmr_normalizer *)1;
        *st = llmr_normalizer_build(j, &n, &err);
        CHECK(*st == LLMR_OK || n == NULL);
        if (*st == LLMR_OK)
            llmr_normalizer_free(n);
        break;
    }
    case DECODER: {
        llmr_decoder *d = (llmr_decoder *)1;
        *st = llmr_decoder_build(j, &d, &err);
        CHECK(*st == LLMR_OK || d == NULL);
        if (*st == LLMR_OK)
            llmr_decoder_free(d);
        break;
    }
    }
    json_decref(j);
    set_result(llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return result;
}

/* An added_tokens entry as tokenizer.json writes it. */
#define ADDED(id, content, single_word, lstrip, rstrip, normalized, special)                   \
    "{'id':" #id ",'content':'" content "','single_word':" #single_word ",'lstrip':" #lstrip \
    ",'rstrip':" #rstrip ",'normalized':" #normalized ",'special':" #special "}"

/* A pre-tokenizer that keeps every space as a piece of its own, so that whitespace an
 * added token did not take shows up as the id of ' '. */
#define SPACE_PIECES                                                                           \
    "'pre_tokenizer':{'type':'Split','pattern':{'String':' '},'behavior':'Isolated','invert':false}"

/* --- 1. BPE model ------------------------------------------------------------ */

/* models/bpe/model.rs, test_tokenize_with_and_without_dropout */
#define UNRELATED_VOCAB                                                                        \
    "'vocab':{'u':0,'n':1,'r':2,'e':3,'l':4,'a':5,'t':6,'d':7,'re':8,'at':9,'ed':10,'un':11," \
    "'ated':12,'rel':13,'related':14,'unrelated':15}"

TEST(bpe_merges_unrelated_into_one_token)
{
    llmr_tokenizer *t = load("{'model':{'type':'BPE'," UNRELATED_VOCAB ","
                             "'merges':['r e','a t','e d','u n','at ed','re l','rel ated','un related']}}");
    CHECK_EQ_STR(encode_ids(t, "unrelated", 0), "15");
    llmr_tokenizer_free(t);
}

TEST(bpe_merges_as_pairs_give_the_same_result_as_strings)
{
    llmr_tokenizer *t = load("{'model':{'type':'BPE'," UNRELATED_VOCAB ","
                             "'merges':[['r','e'],['a','t'],['e','d'],['u','n'],['at','ed'],"
                             "['re','l'],['rel','ated'],['un','related']]}}");
    CHECK_EQ_STR(encode_ids(t, "unrelated", 0), "15");
    llmr_tokenizer_free(t);
    /* The pair form exists for tokens that hold a space. */
    t = load("{'model':{'type':'BPE','vocab':{'a':0,' ':1,'a ':2,'b':3},'merges':[['a',' ']]}}");
    CHECK_EQ_STR(encode_ids(t, "a b", 0), "2 3");
    llmr_tokenizer_free(t);
}

/* models/bpe/model.rs, pipeline tests on the "hello" vocabulary */
#define HELLO_VOCAB "'h':0,'e':1,'l':2,'o':3,'he':4,'hel':5,'hell':6,'hello':7"
#define HELLO_MERGES "'merges':['h e','he l','hel l','hell o']"

TEST(bpe_applies_merges_in_rank_order)
{
    llmr_tokenizer *t = load("{'model':{'type':'BPE','vocab':{" HELLO_VOCAB "}," HELLO_MERGES "}}");
    CHECK_EQ_STR(encode_ids(t, "hello", 0), "7");
    CHECK_EQ_STR(encode_ids(t, "hell", 0), "6");
    CHECK_EQ_STR(encode_ids(t, "helo", 0), "5 3");
    CHECK_EQ_STR(encode_ids(t, "oleh", 0), "3 2 1 0");
    /* Without an unk token an unknown character is dropped, and its neighbours merge. */
    CHECK_EQ_STR(encode_ids(t, "hxe", 0), "4");
    llmr_tokenizer_free(t);
}

TEST(bpe_unk_replaces_each_unknown_character_when_not_fused)
{
    /* test_unk_not_fused */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':false,"
                             "'vocab':{'<unk>':0,'a':1,'b':2},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "c", 0), "0");
    CHECK_EQ_STR(encode_ids(t, "cc", 0), "0 0");
    CHECK_EQ_STR(encode_ids(t, "accb", 0), "1 0 0 2");
    llmr_tokenizer_free(t);
    /* unk_replaces_unknown_chars */
    t = load("{'model':{'type':'BPE','unk_token':'<unk>','vocab':{" HELLO_VOCAB ",'<unk>':8},"
             HELLO_MERGES "}}");
    CHECK_EQ_STR(encode_ids(t, "hxe", 0), "0 8 1");
    CHECK_EQ_STR(encode_ids(t, "xh", 0), "8 0");
    CHECK_EQ_STR(encode_ids(t, "hxxe", 0), "0 8 8 1");
    CHECK_EQ_STR(encode_ids(t, "xx", 0), "8 8");
    llmr_tokenizer_free(t);
}

TEST(bpe_fused_unk_collapses_runs_of_unknown_characters)
{
    /* test_unk_get_fused */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':true,"
                             "'vocab':{'<unk>':0,'a':1,'b':2},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "c", 0), "0");
    CHECK_EQ_STR(encode_ids(t, "cc", 0), "0");
    CHECK_EQ_STR(encode_ids(t, "accb", 0), "1 0 2");
    llmr_tokenizer_free(t);
    /* fused_unk_collapses_runs */
    t = load("{'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':true,'vocab':{" HELLO_VOCAB
             ",'<unk>':8}," HELLO_MERGES "}}");
    CHECK_EQ_STR(encode_ids(t, "hxxe", 0), "0 8 1");
    CHECK_EQ_STR(encode_ids(t, "xxh", 0), "8 0");
    CHECK_EQ_STR(encode_ids(t, "xxxx", 0), "8");
    CHECK_EQ_STR(encode_ids(t, "xhx", 0), "8 0 8");
    llmr_tokenizer_free(t);
}

/* The byte_fallback_vocab of the pipeline tests: <0xXX> has id XX, h 300, e 301,
 * <unk> 400. */
static char *byte_fallback_json(bool with_unk)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb, "{'model':{'type':'BPE','byte_fallback':true,%s'vocab':{'h':300,'e':301,"
                            "'<unk>':400",
                       with_unk ? "'unk_token':'<unk>'," : "");
    for (int b = 0; b < 256; b++)
        llmr_strbuf_printf(&sb, ",'<0x%02X>':%d", b, b);
    llmr_strbuf_puts(&sb, "},'merges':[]}}");
    return llmr_strbuf_take(&sb);
}

TEST(bpe_byte_fallback_uses_byte_tokens_for_unknown_characters)
{
    /* byte_fallback_encodes_missing_chars_as_byte_tokens */
    char *json = byte_fallback_json(false);
    llmr_tokenizer *t = load(json);
    CHECK_EQ_STR(encode_ids(t, "hé", 0), "300 195 169");
    CHECK_EQ_STR(encode_ids(t, "🤗", 0), "240 159 164 151");
    CHECK_EQ_STR(encode_ids(t, "he", 0), "300 301");
    llmr_tokenizer_free(t);
    free(json);
    /* byte_fallback_wins_over_unk */
    json = byte_fallback_json(true);
    t = load(json);
    CHECK_EQ_STR(encode_ids(t, "é", 0), "195 169");
    llmr_tokenizer_free(t);
    free(json);
}

TEST(bpe_byte_fallback_needs_every_byte_token_else_unk)
{
    /* test_bpe_byte_fallback: <0x63> ("c") is missing, so "c" is unknown. */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','unk_token':'<unk>','byte_fallback':true,"
                             "'vocab':{'<unk>':0,'<0x61>':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "c", 0), "0");
    CHECK_EQ_STR(encode_ids(t, "a", 0), "1");
    llmr_tokenizer_free(t);
    /* test_bpe_byte_fallback_newline */
    t = load("{'model':{'type':'BPE','unk_token':'<unk>','byte_fallback':true,"
             "'vocab':{'<unk>':0,'<0x0A>':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "\n", 0), "1");
    llmr_tokenizer_free(t);
}

/* test_ignore_merges */
#define IGNORE_MERGES_MODEL(flag)                                                              \
    "{'model':{'type':'BPE','ignore_merges':" flag ",'vocab':{'.:.:':0,'Ġbelirtilen':1,'.':2," \
    "':':3,'bel':4,'irtilen':5,'Ġ':6,'.:':7,'belirtilen':8,'.:.':9,'be':10,'l':11,'ir':12,"    \
    "'ti':13,'en':14,'irtil':15,'irti':16,'i':17,'r':18,'t':19,'b':20,'e':21,'n':22},"        \
    "'merges':['. :','b e','be l','i r','t i','ir ti','e n','irti l']}}"

TEST(bpe_ignore_merges_takes_a_word_in_the_vocabulary_whole)
{
    llmr_tokenizer *t = load(IGNORE_MERGES_MODEL("true"));
    CHECK_EQ_STR(encode_ids(t, ".:.:", 0), "0");
    CHECK_EQ_STR(encode_ids(t, "Ġbelirtilen", 0), "1");
    llmr_tokenizer_free(t);
    t = load(IGNORE_MERGES_MODEL("false"));
    CHECK_EQ_STR(encode_ids(t, ".:.:", 0), "7 7");
    CHECK_EQ_STR(encode_ids(t, "Ġbelirtilen", 0), "6 4 15 14");
    llmr_tokenizer_free(t);
    /* ignore_merges_prefers_whole_word: a miss falls through to the merges. */
    t = load("{'model':{'type':'BPE','ignore_merges':true,'vocab':{" HELLO_VOCAB "}," HELLO_MERGES "}}");
    CHECK_EQ_STR(encode_ids(t, "hello", 0), "7");
    CHECK_EQ_STR(encode_ids(t, "helo", 0), "5 3");
    llmr_tokenizer_free(t);
}

TEST(bpe_continuing_subword_prefix_marks_non_initial_characters)
{
    /* test_bpe_with_continuing_subword_prefix (without its unk_token, which is not in
     * that vocabulary) */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','continuing_subword_prefix':'##',"
                             "'vocab':{'a':0,'##b':1,'##c':2,'ab':3,'abc':4},"
                             "'merges':['a ##b','ab ##c']}}");
    CHECK_EQ_STR(encode_ids(t, "ab", 0), "3");
    CHECK_EQ_STR(encode_ids(t, "abc", 0), "4");
    CHECK_EQ_STR(encode_ids(t, "abcb", 0), "4 1");
    llmr_tokenizer_free(t);
}

TEST(bpe_end_of_word_suffix_marks_the_last_character)
{
    /* merge_word appends the suffix to the last character of the word. */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','end_of_word_suffix':'</w>',"
                             "'vocab':{'a':0,'b':1,'b</w>':2,'ab</w>':3},'merges':['a b</w>']}}");
    CHECK_EQ_STR(encode_ids(t, "ab", 0), "3");
    CHECK_EQ_STR(encode_ids(t, "abb", 0), "0 1 2");
    llmr_tokenizer_free(t);
}

TEST(bpe_words_come_from_the_pre_tokenizer)
{
    llmr_tokenizer *t = load("{'pre_tokenizer':{'type':'WhitespaceSplit'},"
                             "'model':{'type':'BPE'," UNRELATED_VOCAB ","
                             "'merges':['r e','a t','e d','u n','at ed','re l','rel ated','un related']}}");
    CHECK_EQ_STR(encode_ids(t, "unrelated  related\tun", 0), "15 14 11");
    llmr_tokenizer_free(t);
}

/* The GPT-2 byte-level alphabet (tokenizers' bytes_char): printable bytes stand for
 * themselves, the others for U+0100 onwards in byte order. */
static bool printable_byte(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
}

static unsigned byte_char(unsigned b)
{
    if (printable_byte(b))
        return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        n += !printable_byte(x);
    return 256 + n;
}

/* A GPT-2-shaped miniature (the byte_level_bpe of the pipeline tests): the 256
 * single-byte tokens with id == byte value, written as \uXXXX escapes, plus `extra`
 * vocabulary entries and merges given in the byte-level alphabet. */
static llmr_tokenizer *byte_level_tokenizer(const char *extra, const char *merges,
                                            bool add_prefix_space, bool ignore_merges)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb, "{'pre_tokenizer':{'type':'ByteLevel','add_prefix_space':%s,"
                            "'trim_offsets':true,'use_regex':true},"
                            "'decoder':{'type':'ByteLevel','add_prefix_space':true,"
                            "'trim_offsets':true,'use_regex':true},"
                            "'model':{'type':'BPE','ignore_merges':%s,'vocab':{",
                       add_prefix_space ? "true" : "false", ignore_merges ? "true" : "false");
    for (unsigned b = 0; b < 256; b++)
        llmr_strbuf_printf(&sb, "%s'\\u%04x':%u", b ? "," : "", byte_char(b), b);
    llmr_strbuf_printf(&sb, "%s},'merges':[%s]}}", extra, merges);
    llmr_tokenizer *t = load(llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    return t;
}

TEST(bpe_byte_level_merges_raw_bytes)
{
    /* byte_level_merges_raw_bytes: "Ġ" is the space byte */
    llmr_tokenizer *t = byte_level_tokenizer(",'he':300,'Ġhe':301", "'h e','Ġ he'", false, false);
    CHECK_EQ_STR(encode_ids(t, " he", 0), "301");
    CHECK_EQ_STR(encode_ids(t, "é", 0), "195 169");
    CHECK_EQ_STR(encode_ids(t, "hé llo", 0), "104 195 169 32 108 108 111");
    CHECK_EQ_STR(encode_ids(t, "he he", 0), "300 301");
    CHECK_EQ_STR(encode_ids(t, "\x01\x7f", 0), "1 127");
    static const uint32_t ids[] = {300, 301, 32, 195, 169};
    CHECK_EQ_STR(decode_ids(t, ids, 5, 0, NULL), "he he é");
    llmr_tokenizer_free(t);
    /* add_prefix_space: the first word is treated as any other */
    t = byte_level_tokenizer(",'he':300,'Ġhe':301", "'h e','Ġ he'", true, false);
    CHECK_EQ_STR(encode_ids(t, "he", 0), "301");
    CHECK_EQ_STR(encode_ids(t, " he", 0), "301");
    llmr_tokenizer_free(t);
}

TEST(bpe_byte_level_ignore_merges_takes_the_whole_word)
{
    /* byte_level_ignore_merges_whole_word */
    llmr_tokenizer *t = byte_level_tokenizer(",'Ġhello':300", "", false, true);
    CHECK_EQ_STR(encode_ids(t, " hello", 0), "300");
    CHECK_EQ_STR(encode_ids(t, "zz", 0), "122 122");
    llmr_tokenizer_free(t);
}

/* The i-th four-letter word: "aaaa", "aaab", ... (letters only: the byte-level
 * regex splits letters from digits). */
static const char *nth_word(unsigned i, char word[5])
{
    for (int k = 3; k >= 0; k--, i /= 26)
        word[k] = (char)('a' + i % 26);
    word[4] = '\0';
    return word;
}

TEST(bpe_large_byte_level_vocabulary_finds_every_token)
{
    /* Enough tokens that the vocabulary's tables are built in bulk, past 2 MiB each. */
    enum { WORDS = 70000 };
    char word[5], want[16];
    llmr_strbuf extra = LLMR_STRBUF_INIT;
    for (unsigned i = 0; i < WORDS; i++)
        llmr_strbuf_printf(&extra, ",'%s':%u", nth_word(i, word), 256 + i);
    llmr_tokenizer *t = byte_level_tokenizer(llmr_strbuf_cstr(&extra), "", false, true);
    llmr_strbuf_free(&extra);
    if (!t)
        return;
    CHECK_EQ_INT(llmr_tokenizer_vocab_size(t), 256 + WORDS);
    unsigned missing = 0, wrong = 0;
    for (unsigned i = 0; i < WORDS; i++) {
        nth_word(i, word);
        missing += llmr_tokenizer_token_to_id(t, word, 4) != 256 + (int64_t)i;
        if (i % 97 == 0) { /* through the byte-level map, as encoding finds it */
            snprintf(want, sizeof want, "%u", 256 + i);
            wrong += strcmp(encode_ids(t, word, 0), want) != 0;
        }
    }
    CHECK_EQ_INT(missing, 0);
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_STR(encode_ids(t, "zzzzz", 0), "122 122 122 122 122"); /* not in the vocabulary */
    llmr_tokenizer_free(t);
}

/* --- 2. pre-tokenizers ---------------------------------------------------------- */

TEST(split_regex_inverted_with_every_behavior)
{
    /* pre_tokenizers/split.rs, basic */
    static const struct {
        const char *behavior, *want;
    } cases[] = {
        {"Removed", "How|are|you|doing|?"},
        {"Isolated", "How| |are| |you| |doing|?"},
        {"MergedWithPrevious", "How |are |you |doing|?"},
        {"MergedWithNext", "How| are| you| doing|?"},
        {"Contiguous", "How| |are| |you| |doing?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[256];
        snprintf(spec, sizeof spec,
                 "{'type':'Split','pattern':{'Regex':'\\\\w+|[^\\\\w\\\\s]+'},'behavior':'%s',"
                 "'invert':true}",
                 cases[i].behavior);
        CHECK_EQ_STR(pieces_of(spec, "How are you doing?"), cases[i].want);
    }
}

TEST(split_regex_with_backslash_c_is_refused)
{
    /* \C matches one byte of a UTF-8 character; it would split characters (the
     * fuzzer's find: a piece ran past the text's end). */
    llmr_status st;
    const char *why = load_error("{'pre_tokenizer':{'type':'Split','pattern':{'Regex':'a|(\\\\C)'},"
                                 "'behavior':'Isolated','invert':false},"
                                 "'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}", &st);
    CHECK(st != LLMR_OK);
    CHECK_CONTAINS(why, "\\C");
}

TEST(split_string_pattern_is_literal)
{
    /* split.rs, regex_string: splitting on " " is splitting on \s+ here */
    CHECK_EQ_STR(pieces_of("{'type':'Split','pattern':{'String':' '},'behavior':'Removed',"
                           "'invert':false}",
                           "Hey, man!"),
                 "Hey,|man!");
    CHECK_EQ_STR(pieces_of("{'type':'Split','pattern':{'Regex':'\\\\s+'},'behavior':'Removed',"
                           "'invert':false}",
                           "Hey, man!"),
                 "Hey,|man!");
    /* split.rs, invert: keeping only "Hello" is splitting on the spaces */
    CHECK_EQ_STR(pieces_of("{'type':'Split','pattern':{'String':'Hello'},'behavior':'Removed',"
                           "'invert':true}",
                           "Hello Hello Hello"),
                 "Hello|Hello|Hello");
    /* A String pattern is escaped (regex::escape): "." is a dot, not any character. */
    CHECK_EQ_STR(pieces_of("{'type':'Split','pattern':{'String':'.'},'behavior':'Isolated',"
                           "'invert':false}",
                           "a.b.c"),
                 "a|.|b|.|c");
}

#define METASPACE(scheme, split) \
    "{'type':'Metaspace','replacement':'▁','prepend_scheme':'" scheme "','split':" split "}"

TEST(metaspace_replaces_spaces_and_splits_before_them)
{
    /* pre_tokenizers/metaspace.rs, basic and multiple_spaces */
    CHECK_EQ_STR(pieces_of(METASPACE("always", "true"), "Hey friend!"), "▁Hey|▁friend!");
    CHECK_EQ_STR(pieces_of(METASPACE("always", "true"), "Hey   friend!"), "▁Hey|▁|▁|▁friend!");
    /* the older form, add_prefix_space instead of prepend_scheme (serialization) */
    CHECK_EQ_STR(pieces_of("{'type':'Metaspace','replacement':'▁','add_prefix_space':true}",
                           "Hey friend!"),
                 "▁Hey|▁friend!");
    CHECK_EQ_STR(pieces_of("{'type':'Metaspace','replacement':'_','add_prefix_space':true}",
                           "Hey friend!"),
                 "_Hey|_friend!");
    /* No second prefix when the text already starts with one (or with a space). */
    CHECK_EQ_STR(pieces_of(METASPACE("always", "true"), "▁Hey"), "▁Hey");
    CHECK_EQ_STR(pieces_of(METASPACE("always", "true"), " Hey"), "▁Hey");
}

TEST(metaspace_prepend_scheme_never_and_first)
{
    CHECK_EQ_STR(pieces_of(METASPACE("never", "true"), "Hey friend!"), "Hey|▁friend!");
    /* "first": only the piece that starts the text gets the prefix */
    CHECK_EQ_STR(pieces_from(METASPACE("first", "true"), "Hey friend!", true), "▁Hey|▁friend!");
    CHECK_EQ_STR(pieces_from(METASPACE("first", "true"), "Hey friend!", false), "Hey|▁friend!");
    CHECK_EQ_STR(pieces_from(METASPACE("always", "true"), "Hey friend!", false), "▁Hey|▁friend!");
}

TEST(metaspace_without_split_keeps_one_piece)
{
    CHECK_EQ_STR(pieces_of(METASPACE("always", "false"), "Hey friend!"), "▁Hey▁friend!");
}

TEST(metaspace_first_after_an_isolated_split_as_in_tokenizers)
{
    /* metaspace.rs, non_legacy_meta_space: the text is split around <s> first, and
     * with "first" only the piece at offset 0 gets the prefix. */
#define ISOLATE_S "{'type':'Split','pattern':{'Regex':'(<s>)'},'behavior':'Isolated','invert':false}"
    const char *first = "{'type':'Sequence','pretokenizers':[" ISOLATE_S "," METASPACE("first", "false") "]}";
    CHECK_EQ_STR(pieces_of(first, "Hey my friend <s>how▁are you"),
                 "▁Hey▁my▁friend▁|<s>|how▁are▁you");
    CHECK_EQ_STR(pieces_of(first, " Hey <s>how"), "▁Hey▁|<s>|how");
    CHECK_EQ_STR(pieces_of(first, " Hey <s>how <s>are <s> you"),
                 "▁Hey▁|<s>|how▁|<s>|are▁|<s>|▁you");
    /* ... then Metaspace "always" with split over those pieces */
    CHECK_EQ_STR(pieces_of("{'type':'Sequence','pretokenizers':[" ISOLATE_S ","
                           METASPACE("first", "false") "," METASPACE("always", "true") "]}",
                           "Hey my friend <s>how▁are you"),
                 "▁Hey|▁my|▁friend|▁|▁<s>|▁how|▁are|▁you");
#undef ISOLATE_S
}

TEST(metaspace_prepends_nothing_to_empty_text)
{
    /* NormalizedString::prepend is a no-op on an empty string, and empty pieces are
     * dropped: empty text gives no pieces at all. */
    CHECK_EQ_STR(pieces_of(METASPACE("always", "true"), ""), "");
    CHECK_EQ_STR(pieces_of(METASPACE("always", "false"), ""), "");
}

#define BYTE_LEVEL(aps, regex) \
    "{'type':'ByteLevel','add_prefix_space':" aps ",'trim_offsets':true,'use_regex':" regex "}"

TEST(byte_level_splits_with_the_gpt2_regex)
{
    /* pre_tokenizers/byte_level.rs, pre_tokenization ("Ġ" is a space here: this
     * implementation keeps raw bytes and folds the alphabet into the vocabulary) */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("false", "true"), "Hello my friend, how is your day going?"),
                 "Hello| my| friend|,| how| is| your| day| going|?");
    /* handling_of_newlines */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("false", "true"), "Hello there\nHello there"),
                 "Hello| there|\n|Hello| there");
    /* handling_of_multiple_whitespaces: \s+(?!\S) leaves the last space to the word */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("false", "true"), "Hello there       dear"),
                 "Hello| there|      | dear");
    /* the contractions of the GPT-2 pattern */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("false", "true"), "don't we'll"), "don|'t| we|'ll");
}

TEST(byte_level_add_prefix_space_adds_one_when_missing)
{
    /* byte_level.rs, add_prefix_space: both texts give the same pieces */
    const char *want = " Hello| my| friend|,| how| is| your| day| going|?";
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("true", "true"), " Hello my friend, how is your day going?"), want);
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("true", "true"), "Hello my friend, how is your day going?"), want);
    /* pre_tokenization_no_regex */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("true", "false"), "Hello my friend, how is your day going?"),
                 " Hello my friend, how is your day going?");
}

TEST(byte_level_prepends_nothing_to_empty_text)
{
    /* As for Metaspace: prepend on an empty NormalizedString does nothing. */
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("true", "true"), ""), "");
    CHECK_EQ_STR(pieces_of(BYTE_LEVEL("true", "false"), ""), "");
}

TEST(digits_individually_or_contiguous)
{
    /* pre_tokenizers/digits.rs */
    CHECK_EQ_STR(pieces_of("{'type':'Digits','individual_digits':false}", "Hey 123 friend!"),
                 "Hey |123| friend!");
    CHECK_EQ_STR(pieces_of("{'type':'Digits','individual_digits':true}", "Hey 123 friend!"),
                 "Hey |1|2|3| friend!");
}

TEST(whitespace_keeps_words_and_punctuation_runs)
{
    /* pre_tokenizers/whitespace.rs, basic */
    CHECK_EQ_STR(pieces_of("{'type':'Whitespace'}", "Hey man!"), "Hey|man|!");
    CHECK_EQ_STR(pieces_of("{'type':'Whitespace'}", "How are you doing?"), "How|are|you|doing|?");
    CHECK_EQ_STR(pieces_of("{'type':'Whitespace'}", "\n"), "");
}

TEST(whitespace_split_splits_on_whitespace_only)
{
    /* whitespace.rs, whitespace_split */
    CHECK_EQ_STR(pieces_of("{'type':'WhitespaceSplit'}", "Hey man!"), "Hey|man!");
    CHECK_EQ_STR(pieces_of("{'type':'WhitespaceSplit'}", "Hey, man, Good?"), "Hey,|man,|Good?");
}

TEST(punctuation_isolates_each_punctuation_character)
{
    /* pre_tokenizers/punctuation.rs, punctuation_basic */
    CHECK_EQ_STR(pieces_of("{'type':'Punctuation','behavior':'Isolated'}",
                           "Hey friend!     How are you?!?"),
                 "Hey friend|!|     How are you|?|!|?");
    CHECK_EQ_STR(pieces_of("{'type':'Punctuation'}", "Hey friend!     How are you?!?"),
                 "Hey friend|!|     How are you|?|!|?");
}

TEST(bert_pre_tokenizer_splits_whitespace_then_punctuation)
{
    /* pre_tokenizers/bert.rs, basic */
    CHECK_EQ_STR(pieces_of("{'type':'BertPreTokenizer'}", "Hey friend!     How are you?!?"),
                 "Hey|friend|!|How|are|you|?|!|?");
}

TEST(sequence_runs_pre_tokenizers_in_order)
{
    /* pre_tokenizers/sequence.rs, sequence_basic */
    CHECK_EQ_STR(pieces_of("{'type':'Sequence','pretokenizers':[{'type':'WhitespaceSplit'},"
                           "{'type':'Punctuation','behavior':'Isolated'}]}",
                           "Hey friend!     How are you?!?"),
                 "Hey|friend|!|How|are|you|?|!|?");
}

TEST(unsupported_pre_tokenizer_is_named)
{
    llmr_status st;
    const char *why = build_error(PRE_TOKENIZER, "{'type':'UnicodeScripts'}", &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "UnicodeScripts");
    why = build_error(PRE_TOKENIZER,
                      "{'type':'Sequence','pretokenizers':[{'type':'WhitespaceSplit'},"
                      "{'type':'CharDelimiterSplit','delimiter':'-'}]}",
                      &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "CharDelimiterSplit");
}

/* --- 3. normalizers ------------------------------------------------------------ */

TEST(unicode_normal_forms)
{
    /* normalizers/unicode.rs, test_nfkc: the ligature U+FB01 */
    CHECK_EQ_STR(normalize("{'type':'NFKC'}", "\uFB01"), "fi");
    CHECK_EQ_STR(normalize("{'type':'NFKD'}", "\uFB01"), "fi");
    /* canonical forms leave the ligature alone */
    CHECK_EQ_STR(normalize("{'type':'NFC'}", "\uFB01"), "\uFB01");
    CHECK_EQ_STR(normalize("{'type':'NFD'}", "\uFB01"), "\uFB01");
    /* é composed (U+00E9) and decomposed (e + U+0301) */
    CHECK_EQ_STR(normalize("{'type':'NFC'}", "e\u0301t\u00e9"), "\u00e9t\u00e9");
    CHECK_EQ_STR(normalize("{'type':'NFD'}", "\u00e9t\u00e9"), "e\u0301te\u0301");
    CHECK_EQ_STR(normalize("{'type':'NFKC'}", "e\u0301 \u2460"), "\u00e9 1");
    CHECK_EQ_STR(normalize("{'type':'NFKD'}", "\u00e9 \u2460"), "e\u0301 1");
}

TEST(lowercase_is_rust_char_to_lowercase)
{
    CHECK_EQ_STR(normalize("{'type':'Lowercase'}", "HeLLo WORLD"), "hello world");
    /* U+0130 lowercases to i + U+0307 */
    CHECK_EQ_STR(normalize("{'type':'Lowercase'}", "\u0130stanbul"), "i\u0307stanbul");
    /* character by character: no final sigma */
    CHECK_EQ_STR(normalize("{'type':'Lowercase'}", "ΣΑΣ"), "σασ");
}

TEST(strip_removes_whitespace_on_the_chosen_sides)
{
    const char *text = " \t hi there \u3000";
    CHECK_EQ_STR(normalize("{'type':'Strip','strip_left':true,'strip_right':false}", text),
                 "hi there \u3000");
    CHECK_EQ_STR(normalize("{'type':'Strip','strip_left':false,'strip_right':true}", text),
                 " \t hi there");
    CHECK_EQ_STR(normalize("{'type':'Strip','strip_left':true,'strip_right':true}", text),
                 "hi there");
    CHECK_EQ_STR(normalize("{'type':'Strip','strip_left':true,'strip_right':true}", "   "), "");
}

TEST(prepend_adds_its_text_to_non_empty_text)
{
    /* normalizers/prepend.rs, test_prepend; and nothing is prepended to "" */
    CHECK_EQ_STR(normalize("{'type':'Prepend','prepend':'▁'}", "Hello"), "▁Hello");
    CHECK_EQ_STR(normalize("{'type':'Prepend','prepend':'▁'}", ""), "");
}

TEST(replace_with_a_string_or_a_regex)
{
    /* normalizers/replace.rs, test_replace and test_replace_regex */
    CHECK_EQ_STR(normalize("{'type':'Replace','pattern':{'String':'\\u0027\\u0027'},'content':'\\\"'}",
                           "This is a ''test''"),
                 "This is a \"test\"");
    CHECK_EQ_STR(normalize("{'type':'Replace','pattern':{'Regex':'\\\\s+'},'content':' '}",
                           "This     is   a         test"),
                 "This is a test");
    /* A String pattern is literal. */
    CHECK_EQ_STR(normalize("{'type':'Replace','pattern':{'String':'.'},'content':'!'}", "a.b"), "a!b");
}

TEST(sequence_of_normalizers_applies_each_in_turn)
{
    /* Llama 2's normalizer: Prepend "▁" then every space to "▁" */
    const char *llama = "{'type':'Sequence','normalizers':[{'type':'Prepend','prepend':'▁'},"
                        "{'type':'Replace','pattern':{'String':' '},'content':'▁'}]}";
    CHECK_EQ_STR(normalize(llama, "Hey friend"), "▁Hey▁friend");
    CHECK_EQ_STR(normalize("{'type':'Sequence','normalizers':[{'type':'NFKC'},{'type':'Lowercase'},"
                           "{'type':'Strip','strip_left':true,'strip_right':true}]}",
                           "  \uFB01NE  "),
                 "fine");
}

TEST(unsupported_normalizer_is_named)
{
    llmr_status st;
    const char *why = build_error(NORMALIZER, "{'type':'BertNormalizer','clean_text':true,"
                                              "'handle_chinese_chars':true,'strip_accents':null,"
                                              "'lowercase':true}",
                                  &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "BertNormalizer");
}

/* --- 4. decoders --------------------------------------------------------------- */

#define TOKENS(...) ((const char *const[]){__VA_ARGS__, NULL})

TEST(byte_fallback_decoder_joins_byte_tokens)
{
    /* decoders/byte_fallback.rs, decode */
    const char *d = "{'type':'ByteFallback'}";
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Hey", "friend!")), "Heyfriend!");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0x61>")), "a");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0xE5>")), "\uFFFD");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0xE5>", "<0x8f>")), "\uFFFD\uFFFD");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0xE5>", "<0x8f>", "<0xab>")), "叫");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0xE5>", "<0x8f>", "<0xab>", "a")), "叫a");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("<0xE5>", "<0x8f>", "a")), "\uFFFD\uFFFDa");
}

TEST(strip_decoder_cuts_the_content_character)
{
    /* decoders/strip.rs, decode */
    CHECK_EQ_STR(decode_tokens("{'type':'Strip','content':'H','start':1,'stop':0}",
                               TOKENS("Hey", " friend!", "HHH")),
                 "ey friend!HH");
    CHECK_EQ_STR(decode_tokens("{'type':'Strip','content':'y','start':0,'stop':1}",
                               TOKENS("Hey", " friend!")),
                 "He friend!");
}

TEST(metaspace_decoder_turns_the_marker_into_spaces)
{
    /* metaspace.rs, decode: the first token's marker is dropped ... */
    CHECK_EQ_STR(decode_tokens(METASPACE("always", "true"), TOKENS("▁Hey", "▁friend!")),
                 "Hey friend!");
    CHECK_EQ_STR(decode_tokens("{'type':'Metaspace','replacement':'▁','add_prefix_space':true}",
                               TOKENS("▁Hey", "▁friend!")),
                 "Hey friend!");
    /* ... unless the scheme is "never" */
    CHECK_EQ_STR(decode_tokens(METASPACE("never", "true"), TOKENS("▁Hey", "▁friend!")),
                 " Hey friend!");
}

TEST(fuse_decoder_makes_one_token)
{
    /* decoders/fuse.rs: ["Hey", " friend!"] -> ["Hey friend!"].  Joined, Fuse shows
     * through a following Strip, which then acts on the fused token only. */
    CHECK_EQ_STR(decode_tokens("{'type':'Fuse'}", TOKENS("Hey", " friend!")), "Hey friend!");
    CHECK_EQ_STR(decode_tokens("{'type':'Sequence','decoders':[{'type':'Fuse'},"
                               "{'type':'Strip','content':' ','start':1,'stop':0}]}",
                               TOKENS(" a", " b")),
                 "a b");
    CHECK_EQ_STR(decode_tokens("{'type':'Strip','content':' ','start':1,'stop':0}", TOKENS(" a", " b")),
                 "ab");
}

TEST(replace_decoder_replaces_in_each_token)
{
    /* normalizers/replace.rs, test_replace_decode */
    CHECK_EQ_STR(decode_tokens("{'type':'Replace','pattern':{'String':'_'},'content':' '}",
                               TOKENS("hello", "_hello")),
                 "hello hello");
    CHECK_EQ_STR(decode_tokens("{'type':'Replace','pattern':{'Regex':'_+'},'content':' '}",
                               TOKENS("a__b", "_c")),
                 "a b c");
}

TEST(byte_level_decoder_maps_the_alphabet_back_to_bytes)
{
    /* pre_tokenizers/byte_level.rs, decoding */
    const char *d = "{'type':'ByteLevel','add_prefix_space':true,'trim_offsets':true,'use_regex':true}";
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Hello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour",
                                         "Ġday", "Ġgoing", "?")),
                 "Hello my friend, how is your day going?");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Hello", "Ċ")), "Hello\n");
    /* a byte split over two tokens (é is C3 A9: "Ã" and "©") */
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Ã", "©")), "é");
    /* a token with a character outside the alphabet is taken as its own UTF-8, whole */
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Hi", "Ġ€")), "HiĠ€");
    /* invalid UTF-8 becomes U+FFFD as String::from_utf8_lossy does: FF alone, and E5 8F
     * (a truncated three-byte character) as one replacement */
    CHECK_EQ_STR(decode_tokens(d, TOKENS("ÿ", "åı", "a")), "\uFFFD\uFFFDa");
    CHECK_EQ_STR(decode_tokens(d, TOKENS("Hello", "Ã")), "Hello\uFFFD");
}

TEST(sequence_decoder_chains_decoders)
{
    /* Llama 2's decoder: Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading space */
    const char *llama = "{'type':'Sequence','decoders':["
                        "{'type':'Replace','pattern':{'String':'▁'},'content':' '},"
                        "{'type':'ByteFallback'},{'type':'Fuse'},"
                        "{'type':'Strip','content':' ','start':1,'stop':0}]}";
    CHECK_EQ_STR(decode_tokens(llama, TOKENS("▁Hey", "▁friend", "<0x21>")), "Hey friend!");
    CHECK_EQ_STR(decode_tokens(llama, TOKENS("▁", "▁Hey", "<0xE5>", "<0x8F>", "<0xAB>")), " Hey叫");
}

TEST(no_decoder_joins_tokens_with_spaces)
{
    CHECK_EQ_STR(decode_tokens(NULL, TOKENS("Hey", "friend", "!")), "Hey friend !");
}

TEST(unsupported_decoder_is_named)
{
    llmr_status st;
    const char *why = build_error(DECODER, "{'type':'CTC','pad_token':'<pad>',"
                                           "'word_delimiter_token':'|','cleanup':true}",
                                  &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "CTC");
}

/* --- 5. added tokens ------------------------------------------------------------- */

TEST(special_tokens_are_parsed_only_when_asked)
{
    /* A special token is text unless special tokens are parsed; a non-special added
     * token is always recognised. */
    llmr_tokenizer *t = load("{'added_tokens':[" ADDED(6, "<s>", false, false, false, false, true) ","
                             ADDED(7, "xyz", false, false, false, false, false) "],"
                             "'model':{'type':'BPE','ignore_merges':true,"
                             "'vocab':{'<':0,'s':1,'>':2,'h':3,'i':4,'hi':5},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "<s>hi", LLMR_ENCODE_PARSE_SPECIAL), "6 5");
    CHECK_EQ_STR(encode_ids(t, "<s>hi", 0), "0 1 2 3 4");
    CHECK_EQ_STR(encode_ids(t, "hixyz<s>", 0), "5 7 0 1 2");
    CHECK_EQ_STR(encode_ids(t, "hixyz<s>", LLMR_ENCODE_PARSE_SPECIAL), "5 7 6");
    llmr_tokenizer_free(t);
}

TEST(added_tokens_match_leftmost_then_longest)
{
    /* The added vocabulary matches leftmost-longest: at the leftmost position the
     * longest token wins, and a longer token further right loses to it. */
    llmr_tokenizer *t = load("{'added_tokens':[" ADDED(4, "ab", false, false, false, true, false) ","
                             ADDED(5, "abc", false, false, false, true, false) ","
                             ADDED(6, "bcde", false, false, false, true, false) "],"
                             "'model':{'type':'BPE','vocab':{'a':0,'c':1,'d':2,'e':3},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "abcde", 0), "5 2 3");
    CHECK_EQ_STR(encode_ids(t, "abd", 0), "4 2");
    CHECK_EQ_STR(encode_ids(t, "cbcde", 0), "1 6");
    llmr_tokenizer_free(t);
}

TEST(added_token_options_lstrip_rstrip_single_word)
{
    /* tokenizer/added_vocabulary.rs, options_use_cases: "[CLS]", " my " (both spaces,
     * lstrip and rstrip, matched after lowercasing), "name", " is anthony " (no "ony":
     * single_word), "[SEP]".  The spaces left in the text are ' ' tokens (id 1). */
    llmr_tokenizer *t = load("{'added_tokens':["
                             ADDED(4, "my", false, true, true, true, false) ","
                             ADDED(5, "name", false, false, false, true, false) ","
                             ADDED(6, "ony", true, false, false, true, false) ","
                             ADDED(7, "[CLS]", false, false, false, false, true) ","
                             ADDED(8, "[SEP]", false, false, false, false, true) "],"
                             "'normalizer':{'type':'Lowercase'}," SPACE_PIECES ","
                             "'model':{'type':'BPE','unk_token':'<unk>','ignore_merges':true,"
                             "'vocab':{'<unk>':0,' ':1,'is':2,'anthony':3},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "[CLS] My name is Anthony [SEP]", LLMR_ENCODE_PARSE_SPECIAL),
                 "7 4 5 1 2 1 3 1 8");
    llmr_tokenizer_free(t);
}

TEST(single_word_tokens_do_not_match_inside_words)
{
    /* added_vocabulary.rs, test_single_word_is_correct: "<mask>", " my name ",
     * "<mask>", " a<mask> <mask>ony ", "<mask>" */
    llmr_tokenizer *t = load("{'added_tokens':[" ADDED(6, "<mask>", true, false, false, true, false) "],"
                             "'normalizer':{'type':'Lowercase'}," SPACE_PIECES ","
                             "'model':{'type':'BPE','unk_token':'<unk>','ignore_merges':true,"
                             "'vocab':{'<unk>':0,' ':1,'my':2,'name':3,'a<mask>':4,'<mask>ony':5},"
                             "'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "<mask> My name <mask> A<mask> <mask>ony <mask>", 0),
                 "6 1 2 1 3 1 6 1 4 1 5 1 6");
    llmr_tokenizer_free(t);
    /* test_single_word_is_unicode_correct: punctuation and "-" are not word
     * characters, the combining mark U+0330 is: "<mask>", ", ", "<mask>", "- ◌̰<mask>".
     * Unknown characters fuse into <unk> (0). */
    t = load("{'added_tokens':[" ADDED(2, "<mask>", true, false, false, true, false) "],"
             "'normalizer':{'type':'Lowercase'}," SPACE_PIECES ","
             "'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':true,"
             "'vocab':{'<unk>':0,' ':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "<mask>, <mask>- \u25cc\u0330<mask>", 0), "2 0 1 2 0 1 0");
    llmr_tokenizer_free(t);
}

TEST(lstrip_and_rstrip_take_unicode_whitespace)
{
    /* added_vocabulary.rs, test_lstrip_unicode_space: "hi", " <mask> ", "there",
     * "\t<mask>\t", "<mask>\u2000" (the second tab was already taken) */
    llmr_tokenizer *t = load("{'added_tokens':[" ADDED(4, "<mask>", true, true, true, true, false) "],"
                             "'normalizer':{'type':'Lowercase'}," SPACE_PIECES ","
                             "'model':{'type':'BPE','unk_token':'<unk>','ignore_merges':true,"
                             "'vocab':{'<unk>':0,' ':1,'hi':2,'there':3},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "Hi <mask> there\t<mask>\t<mask>\u2000", 0), "2 4 3 4 4");
    llmr_tokenizer_free(t);
}

TEST(special_tokens_left_as_text_still_let_other_tokens_match)
{
    /* added_vocabulary.rs, test_encode_special_tokens: <mask> and <pad> are special,
     * "ask>" is not (and is normalized).  Unknown words fuse into <unk> (0). */
    llmr_tokenizer *t = load("{'added_tokens':["
                             ADDED(4, "<mask>", true, true, true, false, true) ","
                             ADDED(5, "ask>", false, false, false, true, false) ","
                             ADDED(6, "<pad>", false, false, false, false, true) "],"
                             "'normalizer':{'type':'Lowercase'},'pre_tokenizer':{'type':'WhitespaceSplit'},"
                             "'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':true,'ignore_merges':true,"
                             "'vocab':{'<unk>':0,'hi':1,'there':2,'<m':3},'merges':[]}}");
    const char *text = "Hi <mask> there\t<mask>\t<mask>\u2000 <pad> <mask><pad><pad>";
    /* hi <mask> there <mask> <mask> <pad> <mask> <pad> <pad> */
    CHECK_EQ_STR(encode_ids(t, text, LLMR_ENCODE_PARSE_SPECIAL), "1 4 2 4 4 6 4 6 6");
    /* "hi <m", "ask>", " there\t<m", "ask>", "\t<m", "ask>", "\u2000 <pad> <m", "ask>",
     * "<pad><pad>" */
    CHECK_EQ_STR(encode_ids(t, text, 0), "1 3 5 2 3 5 3 5 0 3 5 0");
    llmr_tokenizer_free(t);
}

TEST(normalized_added_tokens_match_the_normalized_text)
{
    /* A normalized token is matched in the normalized text (its content normalized
     * too); a token with normalized false in the raw text. */
    llmr_tokenizer *t = load("{'added_tokens':["
                             ADDED(2, "Yesterday", false, false, false, true, false) ","
                             ADDED(3, "Today", false, false, false, false, false) "],"
                             "'normalizer':{'type':'Lowercase'},'pre_tokenizer':{'type':'WhitespaceSplit'},"
                             "'model':{'type':'BPE','unk_token':'<unk>','fuse_unk':true,"
                             "'ignore_merges':true,'vocab':{'<unk>':0,'was':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "yesterday was", 0), "2 1");
    CHECK_EQ_STR(encode_ids(t, "Yesterday WAS", 0), "2 1");
    CHECK_EQ_STR(encode_ids(t, "YESTERDAY was", 0), "2 1");
    CHECK_EQ_STR(encode_ids(t, "Today was", 0), "3 1");
    CHECK_EQ_STR(encode_ids(t, "today was", 0), "0 1");
    llmr_tokenizer_free(t);
}

static llmr_tokenizer *metaspace_tokenizer(const char *scheme)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{'added_tokens':[" ADDED(4, "<s>", false, false, false, false, true) "],"
             "'pre_tokenizer':{'type':'Metaspace','replacement':'▁','prepend_scheme':'%s','split':true},"
             "'post_processor':{'type':'TemplateProcessing','single':[{'SpecialToken':{'id':'<s>','type_id':0}},"
             "{'Sequence':{'id':'A','type_id':0}}],'pair':[],'special_tokens':{'<s>':{'id':'<s>','ids':[4],"
             "'tokens':['<s>']}}},"
             "'model':{'type':'BPE','unk_token':'<unk>','ignore_merges':true,"
             "'vocab':{'<unk>':0,'▁Hey':1,'Hey':2,'▁':3},'merges':[]}}",
             scheme);
    return load(json);
}

TEST(metaspace_first_skips_text_after_a_leading_special_token)
{
    /* prepend_scheme "first": the text after a leading <s> does not start the input,
     * so it gets no "▁"; "always" prefixes every piece. */
    llmr_tokenizer *t = metaspace_tokenizer("first");
    CHECK_EQ_STR(encode_ids(t, "Hey", 0), "1");
    CHECK_EQ_STR(encode_ids(t, "<s>Hey", LLMR_ENCODE_PARSE_SPECIAL), "4 2");
    CHECK_EQ_STR(encode_ids(t, "<s> Hey", LLMR_ENCODE_PARSE_SPECIAL), "4 1");
    llmr_tokenizer_free(t);
    t = metaspace_tokenizer("always");
    CHECK_EQ_STR(encode_ids(t, "<s>Hey", LLMR_ENCODE_PARSE_SPECIAL), "4 1");
    llmr_tokenizer_free(t);
}

TEST(empty_text_encodes_to_no_tokens)
{
    /* tokenizers drops empty pieces, and prepend does nothing to an empty string:
     * "" gives no ids, only what the post-processor adds. */
    llmr_tokenizer *t = metaspace_tokenizer("always");
    CHECK_EQ_STR(encode_ids(t, "", 0), "");
    CHECK_EQ_STR(encode_ids(t, "", LLMR_ENCODE_ADD_SPECIAL), "4");
    llmr_tokenizer_free(t);
    t = byte_level_tokenizer("", "", true, false);
    CHECK_EQ_STR(encode_ids(t, "", 0), "");
    llmr_tokenizer_free(t);
    /* also when the normalizer empties the text */
    t = load("{'normalizer':{'type':'Strip','strip_left':true,'strip_right':true},"
             "'pre_tokenizer':{'type':'Metaspace','replacement':'▁','prepend_scheme':'always','split':true},"
             "'model':{'type':'BPE','vocab':{'▁':0,'a':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "   ", 0), "");
    CHECK_EQ_STR(encode_ids(t, " a ", 0), "0 1");
    llmr_tokenizer_free(t);
}

/* --- 6. post-processors ------------------------------------------------------------ */

static llmr_tokenizer *with_post_processor(const char *post)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{'added_tokens':[" ADDED(2, "<s>", false, false, false, false, true) ","
             ADDED(3, "</s>", false, false, false, false, true) "],"
             "'post_processor':%s,"
             "'model':{'type':'BPE','vocab':{'a':0,'b':1},'merges':[]}}",
             post);
    return load(json);
}

#define BOS_TEMPLATE                                                                            \
    "{'type':'TemplateProcessing','single':[{'SpecialToken':{'id':'<s>','type_id':0}},"        \
    "{'Sequence':{'id':'A','type_id':0}}],'pair':[{'SpecialToken':{'id':'<s>','type_id':0}},"  \
    "{'Sequence':{'id':'A','type_id':0}},{'SpecialToken':{'id':'<s>','type_id':1}},"           \
    "{'Sequence':{'id':'B','type_id':1}}],'special_tokens':{'<s>':{'id':'<s>','ids':[2],"       \
    "'tokens':['<s>']}}}"

TEST(template_processing_adds_bos_only_with_add_special)
{
    llmr_tokenizer *t = with_post_processor(BOS_TEMPLATE);
    CHECK_EQ_STR(encode_ids(t, "ab", 0), "0 1");
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "2 0 1");
    llmr_tokenizer_free(t);
    t = with_post_processor("{'type':'TemplateProcessing','single':[{'SpecialToken':{'id':'<s>',"
                            "'type_id':0}},{'Sequence':{'id':'A','type_id':0}},{'SpecialToken':"
                            "{'id':'</s>','type_id':0}}],'pair':[],'special_tokens':{'<s>':"
                            "{'id':'<s>','ids':[2],'tokens':['<s>']},'</s>':{'id':'</s>','ids':[3],"
                            "'tokens':['</s>']}}}");
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "2 0 1 3");
    CHECK_EQ_STR(encode_ids(t, "ba", 0), "1 0");
    llmr_tokenizer_free(t);
}

TEST(bert_and_roberta_processing_wrap_in_cls_and_sep)
{
    llmr_tokenizer *t = with_post_processor("{'type':'BertProcessing','sep':['</s>',3],'cls':['<s>',2]}");
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "2 0 1 3");
    CHECK_EQ_STR(encode_ids(t, "ab", 0), "0 1");
    llmr_tokenizer_free(t);
    t = with_post_processor("{'type':'RobertaProcessing','sep':['</s>',3],'cls':['<s>',2],"
                            "'trim_offsets':true,'add_prefix_space':true}");
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "2 0 1 3");
    llmr_tokenizer_free(t);
}

TEST(byte_level_post_processor_changes_no_ids)
{
    llmr_tokenizer *t = with_post_processor(BYTE_LEVEL("false", "true"));
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "0 1");
    llmr_tokenizer_free(t);
    /* Llama 3's shape: ByteLevel then the template */
    t = with_post_processor("{'type':'Sequence','processors':[" BYTE_LEVEL("false", "true") ","
                            BOS_TEMPLATE "]}");
    CHECK_EQ_STR(encode_ids(t, "ab", LLMR_ENCODE_ADD_SPECIAL), "2 0 1");
    CHECK_EQ_STR(encode_ids(t, "ab", 0), "0 1");
    llmr_tokenizer_free(t);
}

/* --- 7. decode and lookups ---------------------------------------------------------- */

static llmr_tokenizer *decode_tokenizer(void)
{
    return load("{'added_tokens':[" ADDED(3, "<s>", false, false, false, false, true) ","
                ADDED(4, "<extra>", false, false, false, false, false) "],"
                "'decoder':" METASPACE("always", "true") ","
                "'model':{'type':'BPE','vocab':{'▁Hey':0,'▁friend':1,'!':2},'merges':[]}}");
}

TEST(decode_keeps_or_skips_special_tokens)
{
    /* Tokenizer::decode: ids to tokens, special ones dropped when asked, then the
     * decoder (Metaspace drops the first token's marker only) */
    llmr_tokenizer *t = decode_tokenizer();
    static const uint32_t ids[] = {3, 0, 1, 2, 4};
    CHECK_EQ_STR(decode_ids(t, ids, 5, 0, NULL), "<s> Hey friend!<extra>");
    CHECK_EQ_STR(decode_ids(t, ids, 5, LLMR_DECODE_SKIP_SPECIAL, NULL), "Hey friend!<extra>");
    CHECK_EQ_STR(decode_ids(t, ids, 0, 0, NULL), "");
    llmr_tokenizer_free(t);
}

TEST(decode_skips_and_counts_unknown_ids)
{
    llmr_tokenizer *t = decode_tokenizer();
    static const uint32_t ids[] = {0, 99, 1, 1000000, 5, 2};
    size_t unknown = 42;
    CHECK_EQ_STR(decode_ids(t, ids, 6, 0, &unknown), "Hey friend!");
    CHECK_EQ_INT(unknown, 3);
    CHECK_EQ_STR(decode_ids(t, ids, 2, 0, NULL), "Hey");
    llmr_tokenizer_free(t);
}

TEST(decode_without_decoder_joins_with_spaces)
{
    llmr_tokenizer *t = load("{'model':{'type':'BPE','vocab':{'a':0,'b':1},'merges':[]}}");
    static const uint32_t ids[] = {0, 1, 0};
    CHECK_EQ_STR(decode_ids(t, ids, 3, 0, NULL), "a b a");
    llmr_tokenizer_free(t);
}

TEST(token_and_id_lookups)
{
    llmr_tokenizer *t = decode_tokenizer();
    if (!t)
        return;
    CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "▁Hey", strlen("▁Hey")), 0);
    CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "<s>", 3), 3);
    CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "<extra>", 7), 4);
    CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "Hey", 3), -1);
    CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "<s>x", 3), 3); /* len counts */
    size_t len = 99;
    const char *s = llmr_tokenizer_id_to_token(t, 1, &len);
    CHECK(s && len == strlen("▁friend") && memcmp(s, "▁friend", len) == 0);
    s = llmr_tokenizer_id_to_token(t, 3, &len);
    CHECK(s && len == 3 && memcmp(s, "<s>", 3) == 0);
    CHECK(llmr_tokenizer_id_to_token(t, 5, &len) == NULL);
    CHECK_EQ_INT(len, 0);
    CHECK(llmr_tokenizer_id_to_token(t, UINT32_MAX, &len) == NULL);
    CHECK(llmr_tokenizer_is_special(t, 3));
    CHECK(!llmr_tokenizer_is_special(t, 4));
    CHECK(!llmr_tokenizer_is_special(t, 0));
    CHECK(!llmr_tokenizer_is_special(t, 1000));
    CHECK_EQ_INT(llmr_tokenizer_vocab_size(t), 5);
    llmr_tokenizer_free(t);
}

TEST(added_token_in_the_vocabulary_keeps_the_vocabulary_id)
{
    /* AddedVocabulary::add_tokens: a token the model already has reuses its id */
    llmr_tokenizer *t = load("{'added_tokens':[" ADDED(0, "<s>", false, false, false, false, true) "],"
                             "'model':{'type':'BPE','vocab':{'<s>':0,'a':1},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "a<s>a", LLMR_ENCODE_PARSE_SPECIAL), "1 0 1");
    if (t) {
        CHECK(llmr_tokenizer_is_special(t, 0));
        CHECK_EQ_INT(llmr_tokenizer_token_to_id(t, "<s>", 3), 0);
    }
    static const uint32_t ids[] = {1, 0, 1};
    CHECK_EQ_STR(decode_ids(t, ids, 3, LLMR_DECODE_SKIP_SPECIAL, NULL), "a a");
    llmr_tokenizer_free(t);
}

/* --- 8. errors ------------------------------------------------------------------- */

TEST(invalid_utf8_input_names_the_byte_offset)
{
    llmr_tokenizer *t = load("{'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}");
    if (!t)
        return;
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_encode(t, "aa\xff" "a", 4, 0, &ids, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "byte 2");
    CHECK_EQ_INT(ids.count, 0);
    llmr_strbuf_reset(&err);
    /* a truncated character at the end, an overlong encoding */
    CHECK_EQ_INT(llmr_tokenizer_encode(t, "aaa\xe5\x8f", 5, 0, &ids, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "byte 3");
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_tokenizer_encode(t, "\xc0\x80", 2, 0, &ids, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "byte 0");
    CHECK_EQ_INT(ids.count, 0);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    llmr_tokenizer_free(t);
}

TEST(malformed_json_fails_to_load)
{
    llmr_status st;
    const char *why = load_error("{'model':{'type':'BPE','vocab':{'a':0},'merges':[]}", &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK(why[0] != '\0');
    why = load_error("{'model':{'type':'BPE','vocab':{'a':0,},'merges':[]}}", &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "vocab");
    why = load_error("{'pre_tokenizer':{'type':'WhitespaceSplit',,},"
                     "'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK(why[0] != '\0');
    why = load_error("[]", &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK(why[0] != '\0');
}

TEST(merge_of_tokens_outside_the_vocabulary_fails)
{
    /* models/bpe/model.rs, test_bpe_from_file_merge_token_oov: "a d" with no "d" */
    llmr_status st;
    const char *why = load_error("{'model':{'type':'BPE','vocab':{'a':0,'b':1,'c':2,'ab':3},"
                                 "'merges':['a b','a d']}}",
                                 &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "merges[1]");
    CHECK_CONTAINS(why, "not in the vocabulary");
    /* BpeBuilder: the merged token must be in the vocabulary too */
    why = load_error("{'model':{'type':'BPE','vocab':{'a':0,'b':1,'c':2,'ab':3},"
                     "'merges':['a b','b c']}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "merges[1]");
    CHECK_CONTAINS(why, "merged token");
}

TEST(malformed_merge_strings_fail_with_their_index)
{
    /* An empty first merge once did pointer arithmetic on an empty pool (fuzz find). */
    const char *bad[] = {"''", "'ab'", "'a b c'", "' '"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[160];
        snprintf(json, sizeof json,
                 "{'model':{'type':'BPE','vocab':{'a':0,'b':1,'ab':2},'merges':[%s]}}", bad[i]);
        llmr_status st;
        const char *why = load_error(json, &st);
        CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
        CHECK_CONTAINS(why, "merges[0]");
    }
}

TEST(unsupported_model_types_are_named)
{
    /* Unigram as tokenizers writes it: type, unk_id, then vocab as [piece, score] */
    llmr_status st;
    const char *why = load_error("{'model':{'type':'Unigram','unk_id':0,"
                                 "'vocab':[['<unk>',0.0],['a',-1.5]],'byte_fallback':false}}",
                                 &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "Unigram");
    why = load_error("{'model':{'type':'WordPiece','unk_token':'[UNK]',"
                     "'continuing_subword_prefix':'##','max_input_chars_per_word':100,"
                     "'vocab':{'[UNK]':0,'a':1}}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "WordPiece");
    why = load_error("{'model':{'type':'WordLevel','vocab':{'<unk>':0,'a':1},'unk_token':'<unk>'}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "WordLevel");
}

TEST(unsupported_components_in_a_tokenizer_are_named)
{
    llmr_status st;
    const char *why = load_error("{'pre_tokenizer':{'type':'UnicodeScripts'},"
                                 "'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}",
                                 &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "UnicodeScripts");
    why = load_error("{'normalizer':{'type':'BertNormalizer','clean_text':true},"
                     "'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "BertNormalizer");
    why = load_error("{'decoder':{'type':'WordPiece','prefix':'##','cleanup':true},"
                     "'model':{'type':'BPE','vocab':{'a':0},'merges':[]}}",
                     &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "WordPiece");
}

TEST(duplicate_vocabulary_id_fails)
{
    llmr_status st;
    const char *why = load_error("{'model':{'type':'BPE','vocab':{'a':0,'b':1,'c':1},'merges':[]}}", &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "id 1");
}

TEST(duplicate_vocabulary_string_fails_naming_its_second_id)
{
    llmr_status st;
    const char *why = load_error("{'model':{'type':'BPE','vocab':{'a':0,'b':1,'a':2},'merges':[]}}", &st);
    CHECK_EQ_INT(st, LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "appears twice (id 2)");
}

TEST(bpe_dropout_is_unsupported_but_zero_or_null_is_fine)
{
    llmr_status st;
    const char *why = load_error("{'model':{'type':'BPE','dropout':0.1,'vocab':{'a':0},'merges':[]}}", &st);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "dropout");
    /* test_bpe_with_dropout_0: 0.0 is no dropout */
    llmr_tokenizer *t = load("{'model':{'type':'BPE','dropout':0.0,'vocab':{'a':0},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "aa", 0), "0 0");
    llmr_tokenizer_free(t);
    t = load("{'model':{'type':'BPE','dropout':null,'vocab':{'a':0},'merges':[]}}");
    CHECK_EQ_STR(encode_ids(t, "a", 0), "0");
    llmr_tokenizer_free(t);
}

int main(void)
{
    /* 1. BPE */
    RUN(bpe_merges_unrelated_into_one_token);
    RUN(bpe_merges_as_pairs_give_the_same_result_as_strings);
    RUN(bpe_applies_merges_in_rank_order);
    RUN(bpe_unk_replaces_each_unknown_character_when_not_fused);
    RUN(bpe_fused_unk_collapses_runs_of_unknown_characters);
    RUN(bpe_byte_fallback_uses_byte_tokens_for_unknown_characters);
    RUN(bpe_byte_fallback_needs_every_byte_token_else_unk);
    RUN(bpe_ignore_merges_takes_a_word_in_the_vocabulary_whole);
    RUN(bpe_continuing_subword_prefix_marks_non_initial_characters);
    RUN(bpe_end_of_word_suffix_marks_the_last_character);
    RUN(bpe_words_come_from_the_pre_tokenizer);
    RUN(bpe_byte_level_merges_raw_bytes);
    RUN(bpe_byte_level_ignore_merges_takes_the_whole_word);
    RUN(bpe_large_byte_level_vocabulary_finds_every_token);
    /* 2. pre-tokenizers */
    RUN(split_regex_inverted_with_every_behavior);
    RUN(split_regex_with_backslash_c_is_refused);
    RUN(split_string_pattern_is_literal);
    RUN(metaspace_replaces_spaces_and_splits_before_them);
    RUN(metaspace_prepend_scheme_never_and_first);
    RUN(metaspace_without_split_keeps_one_piece);
    RUN(metaspace_first_after_an_isolated_split_as_in_tokenizers);
    RUN(metaspace_prepends_nothing_to_empty_text);
    RUN(byte_level_splits_with_the_gpt2_regex);
    RUN(byte_level_add_prefix_space_adds_one_when_missing);
    RUN(byte_level_prepends_nothing_to_empty_text);
    RUN(digits_individually_or_contiguous);
    RUN(whitespace_keeps_words_and_punctuation_runs);
    RUN(whitespace_split_splits_on_whitespace_only);
    RUN(punctuation_isolates_each_punctuation_character);
    RUN(bert_pre_tokenizer_splits_whitespace_then_punctuation);
    RUN(sequence_runs_pre_tokenizers_in_order);
    RUN(unsupported_pre_tokenizer_is_named);
    /* 3. normalizers */
    RUN(unicode_normal_forms);
    RUN(lowercase_is_rust_char_to_lowercase);
    RUN(strip_removes_whitespace_on_the_chosen_sides);
    RUN(prepend_adds_its_text_to_non_empty_text);
    RUN(replace_with_a_string_or_a_regex);
    RUN(sequence_of_normalizers_applies_each_in_turn);
    RUN(unsupported_normalizer_is_named);
    /* 4. decoders */
    RUN(byte_fallback_decoder_joins_byte_tokens);
    RUN(strip_decoder_cuts_the_content_character);
    RUN(metaspace_decoder_turns_the_marker_into_spaces);
    RUN(fuse_decoder_makes_one_token);
    RUN(replace_decoder_replaces_in_each_token);
    RUN(byte_level_decoder_maps_the_alphabet_back_to_bytes);
    RUN(sequence_decoder_chains_decoders);
    RUN(no_decoder_joins_tokens_with_spaces);
    RUN(unsupported_decoder_is_named);
    /* 5. added tokens */
    RUN(special_tokens_are_parsed_only_when_asked);
    RUN(added_tokens_match_leftmost_then_longest);
    RUN(added_token_options_lstrip_rstrip_single_word);
    RUN(single_word_tokens_do_not_match_inside_words);
    RUN(lstrip_and_rstrip_take_unicode_whitespace);
    RUN(special_tokens_left_as_text_still_let_other_tokens_match);
    RUN(normalized_added_tokens_match_the_normalized_text);
    RUN(metaspace_first_skips_text_after_a_leading_special_token);
    RUN(empty_text_encodes_to_no_tokens);
    /* 6. post-processors */
    RUN(template_processing_adds_bos_only_with_add_special);
    RUN(bert_and_roberta_processing_wrap_in_cls_and_sep);
    RUN(byte_level_post_processor_changes_no_ids);
    /* 7. decode and lookups */
    RUN(decode_keeps_or_skips_special_tokens);
    RUN(decode_skips_and_counts_unknown_ids);
    RUN(decode_without_decoder_joins_with_spaces);
    RUN(token_and_id_lookups);
    RUN(added_token_in_the_vocabulary_keeps_the_vocabulary_id);
    /* 8. errors */
    RUN(invalid_utf8_input_names_the_byte_offset);
    RUN(malformed_json_fails_to_load);
    RUN(merge_of_tokens_outside_the_vocabulary_fails);
    RUN(malformed_merge_strings_fail_with_their_index);
    RUN(unsupported_model_types_are_named);
    RUN(unsupported_components_in_a_tokenizer_are_named);
    RUN(duplicate_vocabulary_id_fails);
    RUN(duplicate_vocabulary_string_fails_naming_its_second_id);
    RUN(bpe_dropout_is_unsupported_but_zero_or_null_is_fine);
    return llmr_test_finish();
}
