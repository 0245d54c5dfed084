/* include/llmr/engine_options.h: the load options as plugins read them.  A number, a
 * JSON switch (true, false), a string; a key only where it is a key. */
#include <stdint.h>

#include "check.h"
#include "llmr/engine_options.h"

TEST(numbers_and_switches_read_as_whole_numbers)
{
    const char *o = "{\"sequences\": 8, \"batch_invariant\": true, \"cublas\":false,\n \"kv_pool_mb\" :\t1024}";
    CHECK_EQ_INT(llmr_engine_option_u64(o, "sequences", 4), 8);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "batch_invariant", 0), 1);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "cublas", 1), 0);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "kv_pool_mb", 0), 1024);
}

TEST(absent_or_other_values_give_the_default)
{
    const char *o = "{\"a\": -3, \"b\": \"12\", \"c\": null, \"d\": [1], \"e\": truthy}";
    CHECK_EQ_INT(llmr_engine_option_u64(o, "a", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "b", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "c", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "d", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64(o, "missing", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64(NULL, "a", 7), 7);
    CHECK_EQ_INT(llmr_engine_option_u64("{}", "a", 7), 7);
}

TEST(a_name_inside_a_string_value_is_not_a_key)
{
    const char *o = "{\"note\": \"\\\"sequences\\\" 9\", \"sequences\": 2}";
    CHECK_EQ_INT(llmr_engine_option_u64(o, "sequences", 4), 2);
    const char *only_in_value = "{\"note\": \"sequences\", \"x\": 1}";
    CHECK_EQ_INT(llmr_engine_option_u64(only_in_value, "sequences", 4), 4);
    char out[16];
    CHECK_EQ_INT(llmr_engine_option_str("{\"k\": \"kv_dtype\", \"kv_dtype\": \"fp8\"}", "kv_dtype", out, sizeof out), 1);
    CHECK_EQ_STR(out, "fp8");
}

TEST(strings_that_do_not_fit_or_are_not_strings_are_refused)
{
    char out[4];
    CHECK_EQ_INT(llmr_engine_option_str("{\"kv_dtype\": \"fp16\"}", "kv_dtype", out, sizeof out), -1);
    CHECK_EQ_STR(out, "");
    CHECK_EQ_INT(llmr_engine_option_str("{\"kv_dtype\": 8}", "kv_dtype", out, sizeof out), -1);
    CHECK_EQ_INT(llmr_engine_option_str("{\"kv_dtype\": \"a\\\"b\"}", "kv_dtype", out, sizeof out), -1);
    CHECK_EQ_INT(llmr_engine_option_str("{}", "kv_dtype", out, sizeof out), 0);
    CHECK_EQ_INT(llmr_engine_option_str("{\"kv_dtype\": \"fp8\"}", "kv_dtype", out, sizeof out), 1);
    CHECK_EQ_STR(out, "fp8");
}

int main(void)
{
    RUN(numbers_and_switches_read_as_whole_numbers);
    RUN(absent_or_other_values_give_the_default);
    RUN(a_name_inside_a_string_value_is_not_a_key);
    RUN(strings_that_do_not_fit_or_are_not_strings_are_refused);
    return llmr_test_finish();
}
