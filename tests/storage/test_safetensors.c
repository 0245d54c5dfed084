/* Tests of the safetensors header reader and the index parser: every rule of the
 * header, each broken rule giving a problem that names the file and the tensor. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "storage/safetensors.h"
#include "storage/st_index.h"

/* Parses header text with data_size bytes of data; returns the status and keeps the
 * problems' text (joined) for inspection. */
static llmr_status parse(const char *header, uint64_t data_size, char *why, size_t why_size)
{
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_header h;
    llmr_status st = llmr_st_header_parse(header, strlen(header), data_size, "shard.safetensors",
                                          &h, &p);
    why[0] = '\0';
    for (size_t i = 0; i < p.count; i++) {
        CHECK_EQ_STR(p.items[i].file, "shard.safetensors");
        strncat(why, p.items[i].message, why_size - strlen(why) - 2);
        strcat(why, "|");
    }
    if (st == LLMR_OK) {
        CHECK_EQ_INT(p.count, 0);
        llmr_st_header_free(&h);
    } else {
        CHECK(p.count > 0);
    }
    llmr_problems_free(&p);
    return st;
}

static char why[8192];

TEST(a_valid_header_is_read_in_data_order)
{
    const char *h = "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[8,20]},"
                    "\"__metadata__\":{\"format\":\"pt\"},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[20,21]},"
                    "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[21,21]}}   ";
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_header hd;
    CHECK_EQ_INT(llmr_st_header_parse(h, strlen(h), 21, "x", &hd, &p), LLMR_OK);
    CHECK_EQ_INT(hd.count, 4);
    CHECK_EQ_STR(hd.tensors[0].name, "a");
    CHECK_EQ_STR(hd.tensors[1].name, "b");
    CHECK_EQ_INT(hd.data_bytes, 21);
    const llmr_st_tensor *b = llmr_st_header_find(&hd, "b");
    CHECK(b && b->dtype == LLMR_DTYPE_BF16 && b->rank == 2 && b->shape[1] == 3);
    CHECK(llmr_st_header_find(&hd, "missing") == NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(hd.metadata, "format")), "pt");
    llmr_st_header_free(&hd);
    llmr_problems_free(&p);
}

TEST(a_header_that_lies_about_its_size_names_the_tensor)
{
    const char *h = "{\"model.w\":{\"dtype\":\"BF16\",\"shape\":[4,4],\"data_offsets\":[0,16]}}";
    CHECK_EQ_INT(parse(h, 16, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "tensor model.w");
    CHECK_CONTAINS(why, "BF16 [4, 4], which is 32 bytes");
    CHECK_CONTAINS(why, "span 16 bytes");
}

TEST(unknown_dtype_is_unsupported_and_named)
{
    const char *h = "{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,2]}}";
    CHECK_EQ_INT(parse(h, 2, why, sizeof why), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(why, "tensor w: unknown dtype \"Q4_K\"");
}

TEST(truncated_data_says_how_much_is_missing)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[0,4000]}}";
    CHECK_EQ_INT(parse(h, 1000, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "truncated");
    CHECK_CONTAINS(why, "3000 bytes missing");
    CHECK_EQ_INT(parse(h, 4100, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "100 bytes after the last tensor");
}

TEST(overlaps_and_gaps_are_refused)
{
    const char *overlap = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}";
    CHECK_EQ_INT(parse(overlap, 12, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "tensor b: bytes [4, 12) overlap those of tensor a");
    const char *gap = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[10,18]}}";
    CHECK_EQ_INT(parse(gap, 18, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "bytes [8, 10) of the data section belong to no tensor");
}

TEST(malformed_entries_are_each_reported)
{
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]},"
                    "\"b\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[5,1]},"
                    "\"d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]},"
                    "\"e\":[],"
                    "\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"__metadata__\":{\"k\":1}}";
    CHECK_EQ_INT(parse(h, 1, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "tensor a: shape is missing or not an array of non-negative integers");
    CHECK_CONTAINS(why, "tensor b: dtype is missing");
    CHECK_CONTAINS(why, "tensor c: data_offsets [5, 1] end before they begin");
    CHECK_CONTAINS(why, "tensor d: data_offsets is missing or not two");
    CHECK_CONTAINS(why, "tensor e: entry is not an object");
    CHECK_CONTAINS(why, "empty name");
    CHECK_CONTAINS(why, "__metadata__ value of k is not a string");
}

TEST(limits_hold_for_rank_overflow_and_json)
{
    const char *rank = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}";
    CHECK_EQ_INT(parse(rank, 1, why, sizeof why), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(why, "9 dimensions, more than 8");
    const char *overflow = "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                           "\"data_offsets\":[0,0]}}";
    CHECK_EQ_INT(parse(overflow, 0, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "overflows");
    const char *subbyte = "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}";
    CHECK_EQ_INT(parse(subbyte, 1, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not a whole number of bytes");
    const char *packed = "{\"a\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]}}";
    CHECK_EQ_INT(parse(packed, 2, why, sizeof why), LLMR_OK);
    CHECK_EQ_INT(parse("[1,2]", 0, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "does not start with '{'");
    CHECK_EQ_INT(parse("{\"a\": {", 0, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not valid JSON: line 1");
    CHECK_EQ_INT(parse("{\"a\":1,\"a\":2}", 0, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_EQ_INT(parse("{\"\xff\":1}", 0, why, sizeof why), LLMR_MODEL_CORRUPT);
}

TEST(the_tensor_and_name_limits_hold)
{
    /* One tensor more than the limit, and no __metadata__: refused by the streaming
     * count, before any JSON tree is built. */
    llmr_strbuf big = LLMR_STRBUF_INIT;
    llmr_strbuf_putc(&big, '{');
    for (unsigned i = 0; i <= LLMR_ST_MAX_TENSORS; i++)
        llmr_strbuf_printf(&big, "%s\"t%u\":{}", i ? "," : "", i);
    llmr_strbuf_putc(&big, '}');
    CHECK(!llmr_strbuf_failed(&big));
    CHECK_EQ_INT(parse(llmr_strbuf_cstr(&big), 0, why, sizeof why), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(why, "at least 1048577 tensors, more than the limit of 1048576");
    llmr_strbuf_free(&big);
    /* A name one byte over the limit. */
    char name[LLMR_ST_MAX_NAME_BYTES + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    char header[LLMR_ST_MAX_NAME_BYTES + 128];
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", name);
    CHECK_EQ_INT(parse(header, 1, why, sizeof why), LLMR_LIMIT_EXCEEDED);
    CHECK_CONTAINS(why, "name is longer than 1024 bytes");
    name[sizeof name - 2] = '\0'; /* exactly the limit */
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", name);
    CHECK_EQ_INT(parse(header, 1, why, sizeof why), LLMR_OK);
}

TEST(file_prefix_checks_come_before_any_allocation)
{
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_header h;
    uint8_t small[4] = {0};
    CHECK_EQ_INT(llmr_st_parse_buffer(small, sizeof small, "f", &h, &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "too short"));
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    CHECK_EQ_INT(llmr_st_parse_buffer(huge, sizeof huge, "f", &h, &p), LLMR_LIMIT_EXCEEDED);
    CHECK(llmr_problems_mention(&p, "more than the limit"));
    uint8_t cut[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    CHECK_EQ_INT(llmr_st_parse_buffer(cut, sizeof cut, "f", &h, &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "truncated inside its header"));
    uint8_t ok[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    size_t before = llmr_problems_total(&p);
    CHECK_EQ_INT(llmr_st_parse_buffer(ok, sizeof ok, "f", &h, &p), LLMR_OK);
    CHECK_EQ_INT(llmr_problems_total(&p), before);
    CHECK_EQ_INT(h.count, 0);
    llmr_st_header_free(&h);
    llmr_problems_free(&p);
}

TEST(files_are_opened_by_header_and_mapped)
{
    const char *dir = fx_tmpdir();
    llmr_st_write_tensor t[] = {{"w", LLMR_DTYPE_F32, 2, {3, 5}}, {"b", LLMR_DTYPE_BF16, 1, {5}}};
    fx_write_st(dir, "m.safetensors", t, 2);
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_st_file f;
    CHECK_EQ_INT(llmr_st_file_open(fx_path(dir, "m.safetensors"), "m.safetensors", &f, &p), LLMR_OK);
    CHECK_EQ_INT(f.header.count, 2);
    CHECK_EQ_INT(f.header.data_bytes, 70);
    CHECK_EQ_INT(f.data_offset % 8, 0); /* the writer pads the header as the reference does */
    CHECK(llmr_st_file_tensor_data(&f, &f.header.tensors[0]) == NULL);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_st_file_map(&f, &err), LLMR_OK);
    const uint8_t *d = llmr_st_file_tensor_data(&f, llmr_st_header_find(&f.header, "b"));
    CHECK(d != NULL && d[0] == 0 && d[9] == 0);
    llmr_st_file_close(&f);
    CHECK_EQ_INT(llmr_st_file_open(fx_path(dir, "none.safetensors"), "none.safetensors", &f, &p),
                 LLMR_NOT_FOUND);
    llmr_strbuf_free(&err);
    llmr_problems_free(&p);
}

static llmr_status parse_index(const char *text, llmr_st_index *ix, char *out, size_t size)
{
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_status st = llmr_st_index_parse(text, strlen(text), "index.json", ix, &p);
    out[0] = '\0';
    for (size_t i = 0; i < p.count; i++) {
        strncat(out, p.items[i].message, size - strlen(out) - 2);
        strcat(out, "|");
    }
    llmr_problems_free(&p);
    return st;
}

TEST(index_maps_tensors_to_sorted_shards)
{
    const char *text = "{\"metadata\": {\"total_size\": 1234.0}, \"weight_map\": {"
                       "\"a\": \"model-00002-of-00002.safetensors\","
                       "\"b\": \"model-00001-of-00002.safetensors\","
                       "\"c\": \"model-00002-of-00002.safetensors\"}}";
    llmr_st_index ix;
    CHECK_EQ_INT(parse_index(text, &ix, why, sizeof why), LLMR_OK);
    CHECK_EQ_INT(ix.shard_count, 2);
    CHECK_EQ_STR(ix.shards[0], "model-00001-of-00002.safetensors");
    size_t s;
    CHECK(llmr_st_index_find(&ix, "a", &s) && s == 1);
    CHECK(llmr_st_index_find(&ix, "b", &s) && s == 0);
    CHECK(!llmr_st_index_find(&ix, "zz", &s));
    CHECK(ix.has_total_size && ix.total_size == 1234);
    llmr_st_index_free(&ix);
}

TEST(index_cannot_point_outside_the_model)
{
    llmr_st_index ix;
    CHECK_EQ_INT(parse_index("{\"weight_map\": {\"a\": \"../../etc/passwd.safetensors\"}}", &ix,
                             why, sizeof why),
                 LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not a plain file name inside the model directory");
    CHECK_EQ_INT(parse_index("{\"weight_map\": {\"a\": \"/abs.safetensors\", \"b\": \"x.bin\", "
                             "\"c\": 3, \"d\": \"\"}}",
                             &ix, why, sizeof why),
                 LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "tensor b to \"x.bin\", which is not a .safetensors file");
    CHECK_CONTAINS(why, "tensor c to \"(not a string)\"");
    CHECK_EQ_INT(parse_index("{\"metadata\": {}}", &ix, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "no weight_map");
    CHECK_EQ_INT(parse_index("{\"weight_map\": {}}", &ix, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "empty");
    CHECK_EQ_INT(parse_index("{\"weight_map\": {\"a\": \"x.safetensors\"}, \"metadata\": "
                             "{\"total_size\": -5}}",
                             &ix, why, sizeof why),
                 LLMR_MODEL_CORRUPT);
    CHECK_EQ_INT(parse_index("not json", &ix, why, sizeof why), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(why, "not valid JSON");
}

int main(void)
{
    RUN(a_valid_header_is_read_in_data_order);
    RUN(a_header_that_lies_about_its_size_names_the_tensor);
    RUN(unknown_dtype_is_unsupported_and_named);
    RUN(truncated_data_says_how_much_is_missing);
    RUN(overlaps_and_gaps_are_refused);
    RUN(malformed_entries_are_each_reported);
    RUN(limits_hold_for_rank_overflow_and_json);
    RUN(the_tensor_and_name_limits_hold);
    RUN(file_prefix_checks_come_before_any_allocation);
    RUN(files_are_opened_by_header_and_mapped);
    RUN(index_maps_tensors_to_sorted_shards);
    RUN(index_cannot_point_outside_the_model);
    return llmr_test_finish();
}
