/* The gpt-oss CUDA path's KV pool range allocator (engines/gpt_oss/kv_pool.h), which
 * is plain C and runs without a GPU: the size and alignment it settles on, first-fit
 * order, lengths rounded up to the alignment, a freed gap taken again, refusal when
 * no gap is large enough (full or fragmented), release of offsets it never handed
 * out, the largest free gap, zero lengths, and more ranges than its first array. */
#include <stdint.h>

#include "check.h"
#include "kv_pool.h"

static uint64_t take(gpt_kv_pool *p, uint64_t len)
{
    uint64_t off = UINT64_MAX;
    if (!gpt_kv_pool_alloc(p, len, &off))
        llmr_test_fail(__FILE__, __LINE__, "no room for %llu bytes", (unsigned long long)len);
    return off;
}

TEST(init_rounds_the_size_down_and_defaults_the_alignment)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 1000, 0);
    CHECK_EQ_INT(p.align, 256);
    CHECK_EQ_INT(p.size, 768);
    CHECK_EQ_INT(p.n, 0);
    CHECK_EQ_INT(p.in_use, 0);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 768);
    gpt_kv_pool_free_all(&p);
    gpt_kv_pool_init(&p, 100, 256); /* smaller than one unit: nothing fits */
    uint64_t off;
    CHECK_EQ_INT(p.size, 0);
    CHECK(!gpt_kv_pool_alloc(&p, 1, &off));
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 0);
    gpt_kv_pool_free_all(&p);
}

TEST(first_fit_hands_out_ranges_in_order)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 4096, 256);
    CHECK_EQ_INT(take(&p, 256), 0);
    CHECK_EQ_INT(take(&p, 512), 256);
    CHECK_EQ_INT(take(&p, 256), 768);
    CHECK_EQ_INT(p.n, 3);
    CHECK_EQ_INT(p.in_use, 1024);
    for (size_t i = 1; i < p.n; i++)
        CHECK(p.used[i - 1].off + p.used[i - 1].len <= p.used[i].off);
    gpt_kv_pool_free_all(&p);
}

TEST(lengths_are_rounded_up_to_the_alignment)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 1 << 20, 256);
    CHECK_EQ_INT(take(&p, 1), 0);
    CHECK_EQ_INT(take(&p, 257), 256); /* the 1 took a whole unit */
    CHECK_EQ_INT(take(&p, 100), 768); /* the 257 took two */
    CHECK_EQ_INT(p.used[0].len, 256);
    CHECK_EQ_INT(p.used[1].len, 512);
    CHECK_EQ_INT(p.in_use, 1024);
    for (size_t i = 0; i < p.n; i++)
        CHECK_EQ_INT(p.used[i].off % 256, 0);
    gpt_kv_pool_free_all(&p);
    gpt_kv_pool_init(&p, 1 << 20, 4096);
    CHECK_EQ_INT(take(&p, 4095), 0);
    CHECK_EQ_INT(take(&p, 4097), 4096);
    CHECK_EQ_INT(take(&p, 1), 3 * 4096);
    CHECK_EQ_INT(p.in_use, 4 * 4096);
    gpt_kv_pool_free_all(&p);
}

TEST(a_freed_gap_is_taken_again)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 4096, 256);
    uint64_t a = take(&p, 256), b = take(&p, 512), c = take(&p, 256);
    CHECK(gpt_kv_pool_release(&p, b));
    CHECK_EQ_INT(p.in_use, 512);
    CHECK_EQ_INT(take(&p, 300), b); /* fits the 512-byte gap at b */
    CHECK_EQ_INT(take(&p, 256), 1024); /* the gap has no room left: after c */
    CHECK(gpt_kv_pool_release(&p, a));
    CHECK_EQ_INT(take(&p, 200), a);
    CHECK(gpt_kv_pool_release(&p, c));
    CHECK_EQ_INT(take(&p, 512), 1280); /* c's 256 bytes are too few */
    CHECK_EQ_INT(take(&p, 256), c);
    gpt_kv_pool_free_all(&p);
}

TEST(first_fit_takes_the_lowest_gap_not_the_tightest)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 8192, 256);
    uint64_t wide = take(&p, 1024), mid = take(&p, 256), tight = take(&p, 256);
    take(&p, 256);
    CHECK(gpt_kv_pool_release(&p, wide));
    CHECK(gpt_kv_pool_release(&p, tight));
    (void)mid;
    CHECK_EQ_INT(take(&p, 256), wide);
    CHECK_EQ_INT(take(&p, 768), 256); /* the rest of the wide gap, exactly */
    CHECK_EQ_INT(take(&p, 256), tight);
    gpt_kv_pool_free_all(&p);
}

TEST(a_full_or_fragmented_pool_refuses)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 1024, 256);
    uint64_t off = 77;
    CHECK(!gpt_kv_pool_alloc(&p, 1025, &off)); /* larger than the pool */
    CHECK_EQ_INT(take(&p, 1024), 0);
    CHECK(!gpt_kv_pool_alloc(&p, 1, &off));
    CHECK_EQ_INT(p.n, 1);
    CHECK_EQ_INT(p.in_use, 1024);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 0);
    CHECK(gpt_kv_pool_release(&p, 0));
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(take(&p, 256), 256 * i);
    CHECK(!gpt_kv_pool_alloc(&p, 1, &off));
    /* 512 bytes free in two gaps of 256: no room for 512 at once */
    CHECK(gpt_kv_pool_release(&p, 0));
    CHECK(gpt_kv_pool_release(&p, 512));
    CHECK_EQ_INT(p.in_use, 512);
    CHECK(!gpt_kv_pool_alloc(&p, 512, &off));
    CHECK(!gpt_kv_pool_alloc(&p, 257, &off));
    CHECK_EQ_INT(p.n, 2);
    CHECK_EQ_INT(take(&p, 256), 0);
    gpt_kv_pool_free_all(&p);
}

TEST(releasing_an_offset_it_never_handed_out_changes_nothing)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 4096, 256);
    CHECK(!gpt_kv_pool_release(&p, 0)); /* empty pool */
    uint64_t a = take(&p, 512);
    take(&p, 256);
    CHECK(!gpt_kv_pool_release(&p, 256));  /* inside a's range */
    CHECK(!gpt_kv_pool_release(&p, 1024)); /* free space */
    CHECK(!gpt_kv_pool_release(&p, 12345));
    CHECK(!gpt_kv_pool_release(&p, UINT64_MAX));
    CHECK_EQ_INT(p.n, 2);
    CHECK_EQ_INT(p.in_use, 768);
    CHECK(gpt_kv_pool_release(&p, a));
    CHECK(!gpt_kv_pool_release(&p, a)); /* twice */
    CHECK_EQ_INT(p.n, 1);
    CHECK_EQ_INT(p.in_use, 256);
    gpt_kv_pool_free_all(&p);
}

TEST(largest_free_is_the_widest_gap_anywhere)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 4096, 256);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 4096);
    uint64_t a = take(&p, 256), b = take(&p, 1024), c = take(&p, 256);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 4096 - 1536); /* the tail */
    take(&p, 4096 - 1536);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 0);
    CHECK(gpt_kv_pool_release(&p, b));
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 1024); /* a gap in the middle */
    CHECK(gpt_kv_pool_release(&p, a));
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 1280); /* at the front, joined with b's */
    CHECK(gpt_kv_pool_release(&p, c));
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 1536);
    gpt_kv_pool_free_all(&p);
}

TEST(a_zero_length_is_refused)
{
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, 4096, 256);
    uint64_t off = 77;
    CHECK(!gpt_kv_pool_alloc(&p, 0, &off));
    CHECK_EQ_INT(p.n, 0);
    CHECK_EQ_INT(p.in_use, 0);
    take(&p, 256);
    CHECK(!gpt_kv_pool_alloc(&p, 0, &off));
    CHECK_EQ_INT(p.n, 1);
    CHECK_EQ_INT(take(&p, 256), 256);
    gpt_kv_pool_free_all(&p);
}

TEST(many_ranges_grow_the_array_and_free_all_empties_it)
{
    enum { COUNT = 100 };
    gpt_kv_pool p;
    gpt_kv_pool_init(&p, COUNT * 256, 256);
    for (uint64_t i = 0; i < COUNT; i++)
        CHECK_EQ_INT(take(&p, 256), i * 256);
    CHECK_EQ_INT(p.n, COUNT);
    CHECK_EQ_INT(p.in_use, COUNT * 256);
    for (uint64_t i = 0; i < COUNT; i += 2)
        CHECK(gpt_kv_pool_release(&p, i * 256));
    CHECK_EQ_INT(p.n, COUNT / 2);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), 256);
    for (uint64_t i = 0; i < COUNT; i += 2)
        CHECK_EQ_INT(take(&p, 1), i * 256);
    for (size_t i = 0; i < p.n; i++)
        CHECK_EQ_INT(p.used[i].off, i * 256); /* still sorted */
    gpt_kv_pool_free_all(&p);
    CHECK_EQ_INT(p.n, 0);
    CHECK_EQ_INT(p.in_use, 0);
    CHECK(p.used == NULL);
    CHECK_EQ_INT(gpt_kv_pool_largest_free(&p), COUNT * 256);
    CHECK_EQ_INT(take(&p, COUNT * 256), 0); /* the whole region again */
    gpt_kv_pool_free_all(&p);
}

int main(void)
{
    RUN(init_rounds_the_size_down_and_defaults_the_alignment);
    RUN(first_fit_hands_out_ranges_in_order);
    RUN(lengths_are_rounded_up_to_the_alignment);
    RUN(a_freed_gap_is_taken_again);
    RUN(first_fit_takes_the_lowest_gap_not_the_tightest);
    RUN(a_full_or_fragmented_pool_refuses);
    RUN(releasing_an_offset_it_never_handed_out_changes_nothing);
    RUN(largest_free_is_the_widest_gap_anywhere);
    RUN(a_zero_length_is_refused);
    RUN(many_ranges_grow_the_array_and_free_all_empties_it);
    return llmr_test_finish();
}
