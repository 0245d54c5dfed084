/* The gpt-oss token sampler (engines/gpt_oss/sampler.h): greedy and its ties, logprobs
 * against a double-precision log-softmax, the penalties by their exact effect on the
 * logprobs, the seeded stream, top_k, top_p, min_p and temperature by what comes out
 * over many draws, refused parameters, non-finite logits, and a step over gpt-oss's
 * 201088-token vocabulary (timed and printed, never asserted). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "sampler.h"

#define BIG_VOCAB 201088u

static gpt_sampler_params defaults(void)
{
    gpt_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    p.seed = 1234;
    return p;
}

static gpt_sampler *make(const gpt_sampler_params *p, uint32_t vocab, const int32_t *prompt,
                         uint32_t prompt_len)
{
    const char *why = NULL;
    gpt_sampler *s = gpt_sampler_create(p, vocab, prompt, prompt_len, &why);
    if (!s)
        llmr_test_fail(__FILE__, __LINE__, "gpt_sampler_create: %s", why ? why : "(no reason)");
    return s;
}

/* One step over a copy of the logits (the sampler overwrites what it gets). */
static gpt_sample step(gpt_sampler *s, const float *logits, uint32_t vocab, float *scratch)
{
    gpt_sample out;
    memcpy(scratch, logits, vocab * sizeof *logits);
    gpt_sampler_sample(s, scratch, &out);
    return out;
}

/* Counts of each id over n draws. */
static void draw_counts(const gpt_sampler_params *p, const float *logits, uint32_t vocab,
                        int n, long *counts)
{
    float *scratch = malloc(vocab * sizeof *scratch);
    gpt_sampler *s = make(p, vocab, NULL, 0);
    memset(counts, 0, vocab * sizeof *counts);
    for (int i = 0; s && i < n; i++) {
        gpt_sample o = step(s, logits, vocab, scratch);
        CHECK(o.id >= 0 && (uint32_t)o.id < vocab);
        if (o.id >= 0 && (uint32_t)o.id < vocab)
            counts[o.id]++;
    }
    gpt_sampler_free(s);
    free(scratch);
}

/* The observed frequency of each id is within 5 standard deviations of p (and 5 sd of
 * 20000 draws is at most 0.018): a deterministic stream, so this never flakes, and a
 * wrong distribution cannot pass by accident. */
static void check_frequencies(const long *counts, const double *expect, uint32_t vocab, int n,
                              int line)
{
    for (uint32_t i = 0; i < vocab; i++) {
        double f = (double)counts[i] / n, sd = sqrt(expect[i] * (1.0 - expect[i]) / n);
        double tol = 5.0 * sd;
        if (expect[i] == 0.0 ? counts[i] != 0 : fabs(f - expect[i]) > tol)
            llmr_test_fail(__FILE__, line, "id %u: frequency %.4f, expected %.4f (+-%.4f)", i,
                           f, expect[i], tol);
    }
}

/* A deterministic pseudo-random float in [0, 1) for building logits. */
static uint64_t lcg_state = 88172645463325252u;
static float frand(void)
{
    lcg_state = lcg_state * 6364136223846793005u + 1442695040888963407u;
    return (float)((lcg_state >> 40) * 0x1.0p-24);
}

/* Double-precision log-softmax of n logits. */
static void ref_log_softmax(const double *l, uint32_t n, double *out)
{
    double mx = -INFINITY, sum = 0.0;
    for (uint32_t i = 0; i < n; i++)
        if (l[i] > mx)
            mx = l[i];
    for (uint32_t i = 0; i < n; i++)
        sum += exp(l[i] - mx);
    for (uint32_t i = 0; i < n; i++)
        out[i] = l[i] - mx - log(sum);
}

/* The order of tokens for the reference: logit descending, then id ascending. */
static const float *order_logits;
static int by_order(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float lx = order_logits[x], ly = order_logits[y];
    if (lx != ly)
        return lx > ly ? -1 : 1;
    return x < y ? -1 : (x > y);
}

static int32_t *sorted_ids(const float *logits, uint32_t n)
{
    int32_t *ids = malloc(n * sizeof *ids);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = (int32_t)i;
    order_logits = logits;
    qsort(ids, n, sizeof *ids, by_order);
    return ids;
}

/* Checks a step's logprob and its top_logprobs (asked for all of a small vocabulary)
 * against the log-softmax of the logits we expect after the penalties. */
static void check_logprobs(const gpt_sample *o, const double *expect_logits, uint32_t n,
                           int line)
{
    double lp[16];
    ref_log_softmax(expect_logits, n, lp);
    if (fabs(o->logprob - lp[o->id]) > 1e-5)
        llmr_test_fail(__FILE__, line, "logprob of %d: %.7f, expected %.7f", o->id,
                       (double)o->logprob, lp[o->id]);
    if (o->top_count != n)
        llmr_test_fail(__FILE__, line, "top_count %u, expected %u", o->top_count, n);
    for (uint32_t j = 0; j < o->top_count && j < n; j++) {
        int32_t id = o->top_ids[j];
        if (fabs(o->top_logprobs[j] - lp[id]) > 1e-5)
            llmr_test_fail(__FILE__, line, "top %u (id %d): %.7f, expected %.7f", j, id,
                           (double)o->top_logprobs[j], lp[id]);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- greedy and logprobs -------------------------------------------------------------- */

TEST(greedy_picks_the_argmax_and_ties_to_the_lowest_id)
{
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    const float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f};
    float scratch[6];
    gpt_sampler *s = make(&p, 6, NULL, 0);
    for (int i = 0; s && i < 5; i++) {
        gpt_sample o = step(s, logits, 6, scratch);
        CHECK_EQ_INT(o.id, 1);
        CHECK_EQ_INT(o.top_count, 0);
        CHECK(o.logprob == 0.0f); /* not asked for */
    }
    gpt_sampler_free(s);

    /* the seed does not matter to greedy, nor do top_k/top_p/min_p */
    p.seed = 99;
    p.top_k = 3;
    p.top_p = 0.1f;
    p.min_p = 0.9f;
    s = make(&p, 6, NULL, 0);
    if (s)
        CHECK_EQ_INT(step(s, logits, 6, scratch).id, 1);
    gpt_sampler_free(s);

    /* a temperature below 1e-5 is greedy too (vLLM) */
    p = defaults();
    p.temperature = 1e-6f;
    s = make(&p, 6, NULL, 0);
    for (int i = 0; s && i < 20; i++)
        CHECK_EQ_INT(step(s, logits, 6, scratch).id, 1);
    gpt_sampler_free(s);

    /* all equal: id 0 */
    const float flat[4] = {7.0f, 7.0f, 7.0f, 7.0f};
    s = make(&p, 4, NULL, 0);
    if (s)
        CHECK_EQ_INT(step(s, flat, 4, scratch).id, 0);
    gpt_sampler_free(s);
}

TEST(logprobs_are_a_double_log_softmax_and_top_logprobs_the_best_in_order)
{
    enum { N = 3000 };
    float *logits = malloc(N * sizeof *logits), *scratch = malloc(N * sizeof *scratch);
    double *dl = malloc(N * sizeof *dl), *lp = malloc(N * sizeof *lp);
    for (uint32_t i = 0; i < N; i++)
        logits[i] = 30.0f * frand() - 20.0f;
    /* ties among the best: ids 10, 20 and 2999 share the top logit; 5 and 6 the next */
    logits[2999] = logits[20] = logits[10] = 12.0f;
    logits[6] = logits[5] = 11.5f;
    for (uint32_t i = 0; i < N; i++)
        dl[i] = logits[i];
    ref_log_softmax(dl, N, lp);
    int32_t *order = sorted_ids(logits, N);
    CHECK_EQ_INT(order[0], 10);
    CHECK_EQ_INT(order[1], 20);
    CHECK_EQ_INT(order[2], 2999);

    /* greedy; temperature 0.7; 1.3 with filters; temperature 1 plain, with top_p and
     * with min_p (where the draw's weights may serve the logprobs): the reported
     * logprobs never change */
    for (int mode = 0; mode < 6; mode++) {
        gpt_sampler_params p = defaults();
        p.logprobs = true;
        p.top_logprobs = 20;
        const float temps[6] = {0.0f, 0.7f, 1.3f, 1.0f, 1.0f, 1.0f};
        p.temperature = temps[mode];
        if (mode == 2) {
            p.top_p = 0.8f;
            p.top_k = 50;
            p.min_p = 0.01f;
        }
        if (mode == 4)
            p.top_p = 0.5f;
        if (mode == 5)
            p.min_p = 0.2f;
        gpt_sampler *s = make(&p, N, NULL, 0);
        for (int it = 0; s && it < 20; it++) {
            gpt_sample o = step(s, logits, N, scratch);
            if (mode == 0)
                CHECK_EQ_INT(o.id, 10);
            CHECK(o.id >= 0 && o.id < N);
            if (o.id < 0 || o.id >= N)
                continue;
            if (fabs(o.logprob - lp[o.id]) > 1e-5)
                llmr_test_fail(__FILE__, __LINE__, "mode %d: logprob of %d: %.7f, expected %.7f",
                               mode, o.id, (double)o.logprob, lp[o.id]);
            CHECK_EQ_INT(o.top_count, 20);
            for (uint32_t j = 0; j < o.top_count; j++) {
                if (o.top_ids[j] != order[j])
                    llmr_test_fail(__FILE__, __LINE__, "mode %d: top %u is %d, expected %d",
                                   mode, j, o.top_ids[j], order[j]);
                if (fabs(o.top_logprobs[j] - lp[order[j]]) > 1e-5)
                    llmr_test_fail(__FILE__, __LINE__, "mode %d: top %u: %.7f, expected %.7f",
                                   mode, j, (double)o.top_logprobs[j], lp[order[j]]);
            }
        }
        gpt_sampler_free(s);
    }

    /* fewer alternatives than asked, and the logprob alone */
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.top_logprobs = 3;
    gpt_sampler *s = make(&p, N, NULL, 0);
    if (s) {
        gpt_sample o = step(s, logits, N, scratch);
        CHECK_EQ_INT(o.top_count, 3);
        CHECK_EQ_INT(o.top_ids[2], 2999);
        CHECK(fabs(o.logprob - lp[10]) <= 1e-5);
    }
    gpt_sampler_free(s);
    free(order);
    free(lp);
    free(dl);
    free(scratch);
    free(logits);
}

TEST(top_logprobs_leave_out_impossible_tokens)
{
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.top_logprobs = 5;
    const float logits[5] = {-INFINITY, 1.0f, NAN, 2.0f, -INFINITY};
    float scratch[5];
    gpt_sampler *s = make(&p, 5, NULL, 0);
    if (s) {
        gpt_sample o = step(s, logits, 5, scratch);
        CHECK_EQ_INT(o.id, 3);
        CHECK_EQ_INT(o.top_count, 2);
        CHECK_EQ_INT(o.top_ids[0], 3);
        CHECK_EQ_INT(o.top_ids[1], 1);
        CHECK(fabs(o.top_logprobs[0] - (-log1p(exp(-1.0)))) < 1e-6);
    }
    gpt_sampler_free(s);
}

/* ---- penalties ------------------------------------------------------------------------ */

TEST(repetition_penalty_divides_positive_and_multiplies_negative_seen_logits)
{
    enum { N = 6 };
    const float logits[N] = {5.0f, 2.0f, -1.0f, 0.5f, -3.0f, 4.0f};
    const int32_t prompt[] = {1, 2, 2, 4, 77 /* out of range: ignored */, -1};
    float scratch[N];
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
    p.logprobs = true;
    p.top_logprobs = N;
    gpt_sampler *s = make(&p, N, prompt, 6);
    if (!s)
        return;
    /* step 1: the prompt's 1, 2 and 4 are penalised once each */
    double e1[N] = {5.0, 1.0, -2.0, 0.5, -6.0, 4.0};
    gpt_sample o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e1, N, __LINE__);
    /* step 2: the generated 0 too (5 / 2 = 2.5), so 5 (4.0) wins */
    double e2[N] = {2.5, 1.0, -2.0, 0.5, -6.0, 4.0};
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 5);
    check_logprobs(&o, e2, N, __LINE__);
    /* step 3: 5 becomes 2.0; 0 is 2.5 (penalised once, however often seen) */
    double e3[N] = {2.5, 1.0, -2.0, 0.5, -6.0, 2.0};
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e3, N, __LINE__);
    o = step(s, logits, N, scratch);
    check_logprobs(&o, e3, N, __LINE__);
    gpt_sampler_free(s);

    /* a penalty below 1 favours seen tokens the same way round */
    p.repetition_penalty = 0.5f;
    s = make(&p, N, prompt, 6);
    if (!s)
        return;
    double e4[N] = {5.0, 4.0, -0.5, 0.5, -1.5, 4.0};
    o = step(s, logits, N, scratch);
    check_logprobs(&o, e4, N, __LINE__);
    gpt_sampler_free(s);
}

TEST(presence_and_frequency_penalties_count_generated_tokens_only)
{
    enum { N = 4 };
    const float logits[N] = {10.0f, 9.0f, 1.0f, 0.0f};
    const int32_t prompt[] = {0, 0, 1, 2, 2, 2};
    float scratch[N];
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.presence_penalty = 1.5f;
    p.frequency_penalty = 2.0f;
    p.logprobs = true;
    p.top_logprobs = N;
    gpt_sampler *s = make(&p, N, prompt, 6);
    if (!s)
        return;
    /* the prompt does not count: the logits are untouched at first */
    double e[N] = {10.0, 9.0, 1.0, 0.0};
    gpt_sample o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e, N, __LINE__);
    /* 0 once: 10 - 2*1 - 1.5 = 6.5, so 1 */
    e[0] = 6.5;
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 1);
    check_logprobs(&o, e, N, __LINE__);
    /* 1 once: 9 - 3.5 = 5.5, so 0 again */
    e[1] = 5.5;
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e, N, __LINE__);
    /* 0 twice: 10 - 2*2 - 1.5 = 4.5, so 1 again */
    e[0] = 4.5;
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 1);
    check_logprobs(&o, e, N, __LINE__);
    /* 1 twice: 9 - 4 - 1.5 = 3.5 */
    e[1] = 3.5;
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e, N, __LINE__);
    gpt_sampler_free(s);

    /* negative penalties favour generated tokens; the presence one alone */
    p.presence_penalty = -1.0f;
    p.frequency_penalty = 0.0f;
    s = make(&p, N, prompt, 6);
    if (!s)
        return;
    double f[N] = {10.0, 9.0, 1.0, 0.0};
    o = step(s, logits, N, scratch);
    check_logprobs(&o, f, N, __LINE__);
    f[0] = 11.0;
    for (int i = 0; i < 3; i++) {
        o = step(s, logits, N, scratch);
        CHECK_EQ_INT(o.id, 0);
        check_logprobs(&o, f, N, __LINE__);
    }
    gpt_sampler_free(s);
}

TEST(all_three_penalties_apply_in_vllm_order)
{
    enum { N = 3 };
    const float logits[N] = {4.0f, 3.9f, -2.0f};
    const int32_t prompt[] = {2};
    float scratch[N];
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.logprobs = true;
    p.top_logprobs = N;
    gpt_sampler *s = make(&p, N, prompt, 1);
    if (!s)
        return;
    double e[N] = {4.0, 3.9, -4.0};
    gpt_sample o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 0);
    check_logprobs(&o, e, N, __LINE__);
    e[0] = 4.0 / 2.0 - 0.25 - 0.5; /* repetition first, then frequency and presence */
    o = step(s, logits, N, scratch);
    CHECK_EQ_INT(o.id, 1);
    check_logprobs(&o, e, N, __LINE__);
    gpt_sampler_free(s);
}

/* What a pick elsewhere (the GPU's) reads and records: the seen tokens once each, the
 * prompt's with count 0, generated ones with their count; accept() counts as sample()
 * does; no penalty, nothing seen. */
TEST(the_seen_tokens_go_out_once_each_with_their_counts)
{
    enum { N = 8 };
    const float logits[N] = {0, 1, 2, 3, 9, 5, 6, 7};
    const int32_t prompt[] = {2, 5, 2};
    float scratch[N];
    int32_t ids[N];
    uint32_t counts[N];
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    gpt_sampler *plain = make(&p, N, prompt, 3);
    if (plain) {
        CHECK(!gpt_sampler_penalizes(plain));
        CHECK_EQ_INT(gpt_sampler_seen(plain, ids, counts, N), 0);
        gpt_sampler_accept(plain, 3); /* nothing to record */
        CHECK_EQ_INT(gpt_sampler_seen(plain, ids, counts, N), 0);
        gpt_sampler_free(plain);
    }
    p.repetition_penalty = 1.5f;
    p.frequency_penalty = 0.5f;
    gpt_sampler *s = make(&p, N, prompt, 3);
    if (!s)
        return;
    CHECK(gpt_sampler_penalizes(s));
    CHECK_EQ_INT(gpt_sampler_seen(s, ids, counts, N), 2); /* 2 and 5, once each */
    CHECK_EQ_INT(ids[0], 2);
    CHECK_EQ_INT(counts[0], 0);
    CHECK_EQ_INT(ids[1], 5);
    CHECK_EQ_INT(counts[1], 0);
    gpt_sample o = step(s, logits, N, scratch); /* 4, recorded by sample() */
    CHECK_EQ_INT(o.id, 4);
    gpt_sampler_accept(s, 5); /* picked elsewhere */
    gpt_sampler_accept(s, 5);
    gpt_sampler_accept(s, 7);
    gpt_sampler_accept(s, -1); /* outside the vocabulary: ignored */
    gpt_sampler_accept(s, N);
    CHECK_EQ_INT(gpt_sampler_seen(s, ids, counts, N), 4);
    const int32_t want_ids[4] = {2, 5, 4, 7};
    const uint32_t want_counts[4] = {0, 2, 1, 1};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(ids[i], want_ids[i]);
        CHECK_EQ_INT(counts[i], want_counts[i]);
    }
    CHECK_EQ_INT(gpt_sampler_seen(s, ids, counts, 1), 4); /* the count, whatever fits */
    CHECK_EQ_INT(gpt_sampler_seen(s, NULL, NULL, 0), 4);
    gpt_sampler_free(s);
}

/* ---- the random stream ------------------------------------------------------------------ */

TEST(the_same_seed_gives_the_same_sequence_and_another_seed_another)
{
    enum { N = 1000, STEPS = 200 };
    float *logits = malloc(N * sizeof *logits), *scratch = malloc(N * sizeof *scratch);
    for (uint32_t i = 0; i < N; i++)
        logits[i] = 2.0f * frand();
    int32_t seq[3][STEPS];
    const uint64_t seeds[3] = {42, 42, 43};
    for (int r = 0; r < 3; r++) {
        gpt_sampler_params p = defaults();
        p.seed = seeds[r];
        gpt_sampler *s = make(&p, N, NULL, 0);
        for (int i = 0; i < STEPS; i++)
            seq[r][i] = s ? step(s, logits, N, scratch).id : -1;
        gpt_sampler_free(s);
    }
    int same = 0, differ = 0;
    for (int i = 0; i < STEPS; i++) {
        same += seq[0][i] == seq[1][i];
        differ += seq[0][i] != seq[2][i];
    }
    CHECK_EQ_INT(same, STEPS);
    CHECK(differ > STEPS / 2); /* two independent draws over ~1000 ids rarely agree */

    /* the same through top_k/top_p/min_p */
    for (int r = 0; r < 2; r++) {
        gpt_sampler_params p = defaults();
        p.seed = 7;
        p.top_k = 500;
        p.top_p = 0.9f;
        p.min_p = 0.05f;
        p.temperature = 0.8f;
        gpt_sampler *s = make(&p, N, NULL, 0);
        for (int i = 0; i < STEPS; i++)
            seq[r][i] = s ? step(s, logits, N, scratch).id : -1;
        gpt_sampler_free(s);
    }
    same = 0;
    for (int i = 0; i < STEPS; i++)
        same += seq[0][i] == seq[1][i];
    CHECK_EQ_INT(same, STEPS);
    free(scratch);
    free(logits);
}

/* ---- top_k, top_p, min_p, temperature ------------------------------------------------ */

TEST(top_k_1_is_greedy)
{
    enum { N = 5000 };
    float *logits = malloc(N * sizeof *logits), *scratch = malloc(N * sizeof *scratch);
    gpt_sampler_params p = defaults();
    p.top_k = 1;
    p.temperature = 1.5f;
    gpt_sampler *s = make(&p, N, NULL, 0);
    for (int it = 0; s && it < 100; it++) {
        uint32_t best = 0;
        for (uint32_t i = 0; i < N; i++) {
            logits[i] = 3.0f * frand(); /* close together: plenty of mass elsewhere */
            if (logits[i] > logits[best])
                best = i;
        }
        CHECK_EQ_INT(step(s, logits, N, scratch).id, best);
    }
    gpt_sampler_free(s);
    free(scratch);
    free(logits);
}

TEST(top_k_2_only_ever_gives_the_two_best)
{
    enum { N = 8, DRAWS = 20000 };
    const float logits[N] = {1.0f, 2.0f, 1.95f, 1.9f, 1.9f, 0.0f, 1.0f, 2.0f};
    long counts[N];
    gpt_sampler_params p = defaults();
    p.top_k = 2;
    draw_counts(&p, logits, N, DRAWS, counts);
    /* 1 and 7 tie at the top: each half */
    double expect[N] = {0, 0.5, 0, 0, 0, 0, 0, 0.5};
    check_frequencies(counts, expect, N, DRAWS, __LINE__);

    /* k = 3: 1, then the tie at 1.5 (3 and 4); the 1.0s are out */
    const float l3[N] = {1.0f, 2.0f, 1.0f, 1.5f, 1.5f, 0.0f, 1.0f, 0.5f};
    p.top_k = 3;
    draw_counts(&p, l3, N, DRAWS, counts);
    double z = exp(2.0) + 2.0 * exp(1.5);
    double e3[N] = {0, exp(2.0) / z, 0, exp(1.5) / z, exp(1.5) / z, 0, 0, 0};
    check_frequencies(counts, e3, N, DRAWS, __LINE__);

    /* with ties straddling k: {2.0, 1.5, 1.5} and k = 2 keeps 1 and the lower id 3 */
    p.top_k = 2;
    draw_counts(&p, l3, N, DRAWS, counts);
    double z2 = exp(2.0) + exp(1.5);
    double e2[N] = {0, exp(2.0) / z2, 0, exp(1.5) / z2, 0, 0, 0, 0};
    check_frequencies(counts, e2, N, DRAWS, __LINE__);
}

TEST(a_large_top_k_keeps_the_same_set)
{
    /* above 1024, top_k goes through a quickselect instead of a heap: the same set */
    enum { N = 4000, K = 1500, DRAWS = 20000 };
    float *logits = malloc(N * sizeof *logits), *scratch = malloc(N * sizeof *scratch);
    long *counts = malloc(N * sizeof *counts);
    /* even ids tie at 1.0, odd ones at 0.0: the set is the 1500 lowest even ids */
    for (uint32_t i = 0; i < N; i++)
        logits[i] = i % 2 ? 0.0f : 1.0f;
    gpt_sampler_params p = defaults();
    p.top_k = K;
    draw_counts(&p, logits, N, DRAWS, counts);
    long inside = 0, outside = 0, hit = 0;
    for (uint32_t i = 0; i < N; i++) {
        bool in = i % 2 == 0 && i < 2 * K;
        if (in)
            inside += counts[i];
        else
            outside += counts[i];
        hit += in && counts[i] > 0;
    }
    CHECK_EQ_INT(outside, 0);
    CHECK_EQ_INT(inside, DRAWS);
    CHECK(hit > K * 9 / 10); /* ~13 draws each: nearly all of them come up */

    /* distinct logits against a sorted reference, for several k, with top_p on top of
     * one of them */
    const uint32_t ks[] = {1025, 1031, 1100, 1234, 1500, 2047, 3000, 3999};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (uint32_t i = 0; i < N; i++)
            logits[i] = 3.0f * frand();
        int32_t *order = sorted_ids(logits, N);
        char *in = calloc(N, 1);
        for (uint32_t j = 0; j < ks[t]; j++)
            in[order[j]] = 1;
        p.top_k = ks[t];
        p.top_p = t == 4 ? 0.95f : 1.0f;
        p.seed = 3 + t;
        draw_counts(&p, logits, N, 4000, counts);
        outside = 0;
        for (uint32_t i = 0; i < N; i++)
            outside += in[i] ? 0 : counts[i];
        if (outside)
            llmr_test_fail(__FILE__, __LINE__, "top_k %u: %ld draws outside the set", ks[t],
                           outside);
        free(in);
        free(order);
    }
    free(counts);
    free(scratch);
    free(logits);
}

TEST(top_p_keeps_the_nucleus)
{
    enum { DRAWS = 20000 };
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    long counts[3];
    gpt_sampler_params p = defaults();
    p.top_p = 0.75f; /* 0.5 < 0.75 <= 0.8: {0, 1} */
    draw_counts(&p, logits, 3, DRAWS, counts);
    double e[3] = {0.625, 0.375, 0.0};
    check_frequencies(counts, e, 3, DRAWS, __LINE__);

    p.top_p = 0.45f; /* the first alone reaches it */
    draw_counts(&p, logits, 3, DRAWS, counts);
    double e1[3] = {1.0, 0.0, 0.0};
    check_frequencies(counts, e1, 3, DRAWS, __LINE__);

    p.top_p = 0.85f; /* all three */
    draw_counts(&p, logits, 3, DRAWS, counts);
    double e3[3] = {0.5, 0.3, 0.2};
    check_frequencies(counts, e3, 3, DRAWS, __LINE__);

    /* top_p over what top_k kept, renormalised: 0.4/0.3/0.2/0.1 with top_k 3 is
     * 0.444/0.333/0.222, and top_p 0.72 stops at the second (0.778); without the
     * renormalisation it would take the third (0.7 < 0.72) */
    const float l4[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    long c4[4];
    p.top_k = 3;
    p.top_p = 0.72f;
    draw_counts(&p, l4, 4, DRAWS, c4);
    double e4[4] = {4.0 / 7.0, 3.0 / 7.0, 0.0, 0.0};
    check_frequencies(c4, e4, 4, DRAWS, __LINE__);
}

TEST(top_p_over_a_large_vocabulary_matches_a_sorted_reference)
{
    /* a head of 40 likely tokens (some tied) over a body, at two temperatures, and a
     * flat vocabulary whose nucleus holds thousands of tokens: nothing comes out of the
     * reference nucleus, and the outer half of the nucleus (by the order) comes out as
     * often as its share of the nucleus's mass, so the nucleus is not cut short */
    enum { N = 30000, DRAWS = 3000 };
    float *logits = malloc(N * sizeof *logits), *scratch = malloc(N * sizeof *scratch);
    char *in = malloc(N), *outer = malloc(N);
    const struct {
        float temperature, top_p;
        bool flat;
    } cases[] = {{1.0f, 0.6f, false}, {0.7f, 0.6f, false}, {1.0f, 0.5f, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const double t = cases[c].temperature, top_p = cases[c].top_p;
        for (uint32_t i = 0; i < N; i++)
            logits[i] = (cases[c].flat ? 2.0f : 8.0f) * frand();
        if (!cases[c].flat)
            for (uint32_t i = 0; i < 40; i++)
                logits[(i * 7919u) % N] = 14.0f + (float)(i % 10) * 0.1f;
        /* the reference nucleus: sort, then the shortest prefix reaching top_p */
        int32_t *order = sorted_ids(logits, N);
        double mx = logits[order[0]], total = 0.0;
        for (uint32_t i = 0; i < N; i++)
            total += exp((logits[i] - mx) / t);
        memset(in, 0, N);
        memset(outer, 0, N);
        double acc = 0.0;
        uint32_t size = 0;
        for (uint32_t j = 0; j < N && acc < top_p * total; j++) {
            acc += exp((logits[order[j]] - mx) / t);
            in[order[j]] = 1;
            size++;
        }
        double outer_mass = 0.0;
        for (uint32_t j = size / 2; j < size; j++) {
            outer[order[j]] = 1;
            outer_mass += exp((logits[order[j]] - mx) / t);
        }
        const double q = outer_mass / acc;
        CHECK(size > 5 && size < N / 2);
        gpt_sampler_params p = defaults();
        p.top_p = (float)top_p;
        p.temperature = (float)t;
        p.seed = 100 + c;
        gpt_sampler *s = make(&p, N, NULL, 0);
        int outside = 0, in_outer = 0;
        for (int it = 0; s && it < DRAWS; it++) {
            int32_t id = step(s, logits, N, scratch).id;
            outside += !in[id];
            in_outer += outer[id];
        }
        CHECK_EQ_INT(outside, 0);
        const double f = (double)in_outer / DRAWS, sd = sqrt(q * (1.0 - q) / DRAWS);
        if (fabs(f - q) > 5.0 * sd + 1e-9)
            llmr_test_fail(__FILE__, __LINE__, "case %zu (nucleus of %u): outer half %.4f, expected %.4f",
                           c, size, f, q);
        gpt_sampler_free(s);
        free(order);
    }
    free(outer);
    free(in);
    free(scratch);
    free(logits);
}

TEST(min_p_drops_tokens_below_its_share_of_the_best)
{
    enum { DRAWS = 20000 };
    const float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    long counts[4];
    gpt_sampler_params p = defaults();
    p.min_p = 0.35f; /* threshold 0.175: 0.15 and 0.05 go */
    draw_counts(&p, logits, 4, DRAWS, counts);
    double e[4] = {0.625, 0.375, 0.0, 0.0};
    check_frequencies(counts, e, 4, DRAWS, __LINE__);

    p.min_p = 0.25f; /* threshold 0.125: only 0.05 goes */
    draw_counts(&p, logits, 4, DRAWS, counts);
    double e2[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0};
    check_frequencies(counts, e2, 4, DRAWS, __LINE__);

    /* after temperature: at 0.5 the shares are 0.25 : 0.09 : 0.0225 : 0.0025, and
     * min_p 0.3 (0.075) keeps the first two */
    p.temperature = 0.5f;
    p.min_p = 0.3f;
    draw_counts(&p, logits, 4, DRAWS, counts);
    double e3[4] = {0.25 / 0.34, 0.09 / 0.34, 0.0, 0.0};
    check_frequencies(counts, e3, 4, DRAWS, __LINE__);

    /* after top_p (here through the gathered path) */
    p.temperature = 1.0f;
    p.top_p = 0.9f; /* {0, 1, 2}, then min_p 0.35 leaves {0, 1} */
    p.min_p = 0.35f;
    draw_counts(&p, logits, 4, DRAWS, counts);
    check_frequencies(counts, e, 4, DRAWS, __LINE__);
}

TEST(frequencies_match_the_softmax)
{
    enum { N = 5, DRAWS = 20000 };
    const double probs[N] = {0.1, 0.2, 0.3, 0.35, 0.05};
    float logits[N];
    for (int i = 0; i < N; i++)
        logits[i] = (float)(log(probs[i]) + 3.0); /* an offset changes nothing */
    long counts[N];
    gpt_sampler_params p = defaults();
    draw_counts(&p, logits, N, DRAWS, counts);
    check_frequencies(counts, probs, N, DRAWS, __LINE__);
    /* top_k = vocabulary and top_p = 1 are off; top_k 5 of 5 through the same path */
    p.top_k = N;
    p.seed = 5;
    draw_counts(&p, logits, N, DRAWS, counts);
    check_frequencies(counts, probs, N, DRAWS, __LINE__);
    /* the gathered path with a top_p that keeps everything */
    p.top_k = 0;
    p.top_p = 0.999f;
    draw_counts(&p, logits, N, DRAWS, counts);
    check_frequencies(counts, probs, N, DRAWS, __LINE__);
}

TEST(temperature_sharpens_and_flattens)
{
    enum { DRAWS = 20000 };
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    long counts[3];
    gpt_sampler_params p = defaults();
    p.temperature = 0.5f; /* p^2: 0.25 : 0.09 : 0.04 */
    draw_counts(&p, logits, 3, DRAWS, counts);
    double e[3] = {0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38};
    check_frequencies(counts, e, 3, DRAWS, __LINE__);
    CHECK(counts[0] > DRAWS * 0.63); /* well away from the untempered 0.5 */

    p.temperature = 2.0f; /* sqrt(p) */
    draw_counts(&p, logits, 3, DRAWS, counts);
    double z = sqrt(0.5) + sqrt(0.3) + sqrt(0.2);
    double e2[3] = {sqrt(0.5) / z, sqrt(0.3) / z, sqrt(0.2) / z};
    check_frequencies(counts, e2, 3, DRAWS, __LINE__);
}

/* ---- parameters and odd logits -------------------------------------------------------- */

static void refused(gpt_sampler_params p, uint32_t vocab, const char *word, int line)
{
    const char *why = NULL;
    gpt_sampler *s = gpt_sampler_create(&p, vocab, NULL, 0, &why);
    if (s) {
        llmr_test_fail(__FILE__, line, "accepted, expected a refusal about %s", word);
        gpt_sampler_free(s);
        return;
    }
    if (!why || !strstr(why, word))
        llmr_test_fail(__FILE__, line, "refusal \"%s\" does not mention %s",
                       why ? why : "(null)", word);
    CHECK(gpt_sampler_create(&p, vocab, NULL, 0, NULL) == NULL); /* why may be NULL */
}

TEST(bad_parameters_are_refused_with_a_sentence)
{
    gpt_sampler_params p;
    p = defaults(), p.temperature = -0.1f, refused(p, 10, "temperature", __LINE__);
    p = defaults(), p.temperature = NAN, refused(p, 10, "temperature", __LINE__);
    p = defaults(), p.temperature = INFINITY, refused(p, 10, "temperature", __LINE__);
    p = defaults(), p.top_p = 0.0f, refused(p, 10, "top_p", __LINE__);
    p = defaults(), p.top_p = 1.01f, refused(p, 10, "top_p", __LINE__);
    p = defaults(), p.top_p = NAN, refused(p, 10, "top_p", __LINE__);
    p = defaults(), p.min_p = -0.01f, refused(p, 10, "min_p", __LINE__);
    p = defaults(), p.min_p = 1.5f, refused(p, 10, "min_p", __LINE__);
    p = defaults(), p.repetition_penalty = 0.0f, refused(p, 10, "repetition_penalty", __LINE__);
    p = defaults(), p.repetition_penalty = -1.0f, refused(p, 10, "repetition_penalty", __LINE__);
    p = defaults(), p.presence_penalty = 2.5f, refused(p, 10, "presence_penalty", __LINE__);
    p = defaults(), p.frequency_penalty = NAN, refused(p, 10, "frequency_penalty", __LINE__);
    p = defaults(), p.top_logprobs = 21, refused(p, 10, "top_logprobs", __LINE__);
    p = defaults(), refused(p, 0, "vocabulary", __LINE__);
    const char *why = NULL;
    CHECK(gpt_sampler_create(NULL, 10, NULL, 0, &why) == NULL);
    CHECK(why != NULL);

    /* the edges are accepted */
    p = defaults();
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    p.top_logprobs = 20;
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    p.repetition_penalty = 1e-3f;
    p.top_k = 1000000;
    gpt_sampler *s = make(&p, 10, NULL, 0);
    gpt_sampler_free(s);
    gpt_sampler_free(NULL);
}

TEST(non_finite_logits_never_make_nan)
{
    enum { N = 6 };
    const float logits[N] = {NAN, -INFINITY, 1.0f, INFINITY, INFINITY, 3.0f};
    float scratch[N];
    gpt_sampler_params p = defaults();
    p.temperature = 0.0f;
    p.logprobs = true;
    p.top_logprobs = 3;
    gpt_sampler *s = make(&p, N, NULL, 0);
    if (s) {
        gpt_sample o = step(s, logits, N, scratch);
        CHECK_EQ_INT(o.id, 3); /* the first +inf */
        CHECK(fabs(o.logprob - (float)-log(2.0)) < 1e-6); /* the two +inf share it */
        CHECK_EQ_INT(o.top_count, 2); /* 3.0 and 1.0 are -inf next to +inf */
        CHECK_EQ_INT(o.top_ids[1], 4);
    }
    gpt_sampler_free(s);

    /* sampling: only the two +inf, evenly */
    long counts[N];
    p = defaults();
    draw_counts(&p, logits, N, 20000, counts);
    double e[N] = {0, 0, 0, 0.5, 0.5, 0};
    check_frequencies(counts, e, N, 20000, __LINE__);
    p.top_p = 0.4f;
    draw_counts(&p, logits, N, 20000, counts);
    double e1[N] = {0, 0, 0, 1.0, 0, 0};
    check_frequencies(counts, e1, N, 20000, __LINE__);

    /* NaN is never chosen */
    const float some_nan[N] = {NAN, 0.0f, NAN, 0.0f, NAN, -1.0f};
    p = defaults();
    p.top_k = 4;
    draw_counts(&p, some_nan, N, 2000, counts);
    CHECK(counts[0] == 0 && counts[2] == 0 && counts[4] == 0);
    CHECK(counts[1] > 0 && counts[3] > 0 && counts[5] > 0);

    /* nothing finite: id 0 with logprob -inf, for greedy and sampling alike */
    const float none[N] = {-INFINITY, NAN, -INFINITY, NAN, NAN, -INFINITY};
    for (int mode = 0; mode < 3; mode++) {
        p = defaults();
        p.temperature = mode == 0 ? 0.0f : 1.0f;
        p.top_p = mode == 2 ? 0.5f : 1.0f;
        p.logprobs = true;
        p.top_logprobs = 2;
        p.repetition_penalty = 1.3f;
        s = make(&p, N, NULL, 0);
        if (!s)
            continue;
        gpt_sample o = step(s, none, N, scratch);
        CHECK_EQ_INT(o.id, 0);
        CHECK(isinf(o.logprob) && o.logprob < 0);
        CHECK_EQ_INT(o.top_count, 0);
        gpt_sampler_free(s);
    }
}

/* ---- gpt-oss's vocabulary ------------------------------------------------------------ */

TEST(a_step_over_201088_tokens)
{
    const uint32_t n = BIG_VOCAB;
    float *logits = malloc(n * sizeof *logits), *scratch = malloc(n * sizeof *scratch);
    /* roughly what a model gives: a broad normal-ish body and a few strong tokens */
    for (uint32_t i = 0; i < n; i++)
        logits[i] = 3.0f * (frand() + frand() + frand() - 1.5f);
    for (uint32_t i = 0; i < 30; i++)
        logits[(i * 104729u) % n] = 12.0f + 0.2f * (float)i;
    int32_t *order = sorted_ids(logits, n);
    int32_t prompt[512];
    for (int i = 0; i < 512; i++)
        prompt[i] = (int32_t)((uint32_t)i * 389u % n);

    struct {
        const char *name;
        float temperature, top_p;
        uint32_t top_k;
        bool logprobs;
    } modes[] = {
        {"greedy", 0.0f, 1.0f, 0, false},
        {"top_p 0.9", 1.0f, 0.9f, 0, false},
        {"temperature 1", 1.0f, 1.0f, 0, false},
        {"top_k 50 + top_p 0.9", 1.0f, 0.9f, 50, false},
        {"top_p 0.9 + logprobs(20)", 1.0f, 0.9f, 0, true},
        {"top_p 0.9 + penalties", 1.0f, 0.9f, 0, false},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        gpt_sampler_params p = defaults();
        p.temperature = modes[m].temperature;
        p.top_p = modes[m].top_p;
        p.top_k = modes[m].top_k;
        p.logprobs = modes[m].logprobs;
        p.top_logprobs = modes[m].logprobs ? 20 : 0;
        if (m == 5) {
            p.repetition_penalty = 1.1f;
            p.frequency_penalty = 0.2f;
            p.presence_penalty = 0.2f;
        }
        gpt_sampler *s = make(&p, n, prompt, 512);
        if (!s)
            continue;
        const int steps = 30;
        double spent = 0.0;
        for (int it = 0; it < steps; it++) {
            memcpy(scratch, logits, n * sizeof *logits);
            gpt_sample o;
            double t0 = now_ms();
            gpt_sampler_sample(s, scratch, &o);
            spent += now_ms() - t0;
            CHECK(o.id >= 0 && (uint32_t)o.id < n);
            if (m == 0)
                CHECK_EQ_INT(o.id, order[0]);
            if (modes[m].logprobs)
                CHECK(o.top_count == 20 && o.top_ids[0] == order[0] && isfinite(o.logprob));
        }
        fprintf(stderr, "  %u tokens, %-26s %.3f ms per step\n", n, modes[m].name,
                spent / steps);
        gpt_sampler_free(s);
    }
    free(order);
    free(scratch);
    free(logits);
}

int main(void)
{
    RUN(greedy_picks_the_argmax_and_ties_to_the_lowest_id);
    RUN(logprobs_are_a_double_log_softmax_and_top_logprobs_the_best_in_order);
    RUN(top_logprobs_leave_out_impossible_tokens);
    RUN(repetition_penalty_divides_positive_and_multiplies_negative_seen_logits);
    RUN(presence_and_frequency_penalties_count_generated_tokens_only);
    RUN(all_three_penalties_apply_in_vllm_order);
    RUN(the_seen_tokens_go_out_once_each_with_their_counts);
    RUN(the_same_seed_gives_the_same_sequence_and_another_seed_another);
    RUN(top_k_1_is_greedy);
    RUN(top_k_2_only_ever_gives_the_two_best);
    RUN(a_large_top_k_keeps_the_same_set);
    RUN(top_p_keeps_the_nucleus);
    RUN(top_p_over_a_large_vocabulary_matches_a_sorted_reference);
    RUN(min_p_drops_tokens_below_its_share_of_the_best);
    RUN(frequencies_match_the_softmax);
    RUN(temperature_sharpens_and_flattens);
    RUN(bad_parameters_are_refused_with_a_sentence);
    RUN(non_finite_logits_never_make_nan);
    RUN(a_step_over_201088_tokens);
    return llmr_test_finish();
}
