/* The step scheduler (engines/sched/scheduler.h), driven as an engine's step loop drives
 * it, with a stand-in for the forward pass: the token a row "samples" is a function of the
 * sequence's tokens up to it, as a greedy model's is.  So a sequence's output must not
 * depend on what ran beside it, on how its prompt was cut into chunks, or on being
 * preempted and read again; and every block must come back. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "scheduler.h"

/* The stand-in model: the next token after tokens[0..n). */
static int32_t next_token(const int32_t *tokens, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)tokens[i]) * 1099511628211ull;
    return (int32_t)(h % 50000);
}

typedef struct job {
    uint32_t prompt_len, max_tokens;
    int32_t *prompt;
    int32_t out[512];
    uint32_t n_out;
    uint32_t cancel_at;   /* the step at which it is cancelled (0: never) */
    uint32_t preemptions; /* its sequence's, when it ended */
    bool done, cancelled;
    llmr_sched_seq *seq;
} job;

static void job_init(job *j, uint32_t prompt_len, uint32_t max_tokens, uint32_t seed)
{
    memset(j, 0, sizeof *j);
    j->prompt_len = prompt_len;
    j->max_tokens = max_tokens;
    j->prompt = malloc(prompt_len * sizeof *j->prompt);
    for (uint32_t i = 0; i < prompt_len; i++)
        j->prompt[i] = (int32_t)((seed * 7919u + i * 104729u) % 50000u);
}

typedef struct stats {
    uint32_t steps, max_tokens_in_step, max_items, preempted, double_gives;
    uint32_t steps_missing_a_decoder; /* a decoding sequence left out of a step */
} stats;

/* Checks what must hold after every plan: items start where their sequence's cache ends,
 * stay inside its known tokens, fit the budget; every running sequence holds the blocks
 * for what it computed. */
static void check_plan(const llmr_sched *s, const llmr_sched_step *st, stats *t)
{
    uint32_t tokens = 0;
    for (uint32_t i = 0; i < st->n_items; i++) {
        const llmr_sched_item *it = &st->items[i];
        CHECK_EQ_INT(it->start, it->seq->computed);
        CHECK(it->count > 0);
        CHECK(it->start + it->count <= it->seq->len);
        CHECK_EQ_INT(it->sample, it->start + it->count == it->seq->len);
        uint32_t blocks = (it->start + it->count + s->p.block_tokens - 1) / s->p.block_tokens;
        if (s->p.full_blocks)
            CHECK(it->seq->n_full >= blocks);
        if (s->p.window)
            CHECK(it->seq->n_ring >= blocks);
        tokens += it->count;
    }
    CHECK_EQ_INT(tokens, st->n_tokens);
    CHECK(st->n_tokens <= s->p.token_budget);
    CHECK(st->n_items <= s->p.max_running);
    if (st->n_tokens > t->max_tokens_in_step)
        t->max_tokens_in_step = st->n_tokens;
    if (st->n_items > t->max_items)
        t->max_items = st->n_items;
    /* every running sequence that decodes is in the step unless one was preempted */
    for (uint32_t r = 0; r < s->n_running && !st->n_preempted; r++) {
        const llmr_sched_seq *q = s->running[r];
        if (q->len - q->computed != 1)
            continue;
        bool in = false;
        for (uint32_t i = 0; i < st->n_items; i++)
            in |= st->items[i].seq == q;
        if (!in)
            t->steps_missing_a_decoder++;
    }
    /* blocks held add up to the pools' count */
    uint32_t held = 0;
    for (uint32_t r = 0; r < s->n_running; r++) {
        const llmr_sched_seq *q = s->running[r];
        held += q->n_full;
        for (uint32_t b = q->ring_first; b < q->n_ring; b++)
            held += q->ring[b] != LLMR_SCHED_NO_BLOCK;
    }
    /* a waiting sequence holds no blocks, so nothing of it is in the cache: one that was
     * preempted is read again from its first token */
    for (uint32_t w = 0; w < s->n_waiting; w++) {
        CHECK_EQ_INT(s->waiting[w]->n_full + s->waiting[w]->n_ring, 0);
        CHECK_EQ_INT(s->waiting[w]->computed, 0);
    }
    CHECK_EQ_INT(held, llmr_sched_blocks_used(s));
}

/* Runs jobs[0..n) to the end; job k arrives at step arrive[k] (NULL: all at once). */
static void run_jobs(llmr_sched *s, job *jobs, uint32_t n, const uint32_t *arrive, stats *t)
{
    memset(t, 0, sizeof *t);
    llmr_sched_step st = {0};
    int32_t picked[1024];
    uint32_t added = 0, finished = 0;
    for (uint32_t step = 0; finished < n && step < 100000; step++) {
        for (uint32_t k = 0; k < n; k++) {
            if (jobs[k].seq || jobs[k].done || (arrive && arrive[k] != step))
                continue;
            char err[LLMR_SCHED_ERR_MAX];
            llmr_status rc = llmr_sched_add(s, k, &jobs[k], jobs[k].prompt, jobs[k].prompt_len,
                                            jobs[k].max_tokens, &jobs[k].seq, err);
            CHECK_EQ_INT(rc, LLMR_OK);
            added++;
        }
        for (uint32_t k = 0; k < n; k++) /* cancels, in whatever state the sequence is */
            if (jobs[k].seq && jobs[k].cancel_at && jobs[k].cancel_at <= step) {
                jobs[k].preemptions = jobs[k].seq->preemptions;
                llmr_sched_finish(s, jobs[k].seq);
                jobs[k].seq = NULL;
                jobs[k].done = jobs[k].cancelled = true;
                finished++;
            }
        if (!llmr_sched_plan(s, &st)) {
            CHECK(!"plan ran out of memory");
            break;
        }
        t->preempted += st.n_preempted;
        check_plan(s, &st, t);
        if (!st.n_items) {
            CHECK(added < n || s->n_running + s->n_waiting == 0);
            continue;
        }
        t->steps++;
        CHECK(st.n_items <= sizeof picked / sizeof picked[0]);
        for (uint32_t i = 0; i < st.n_items; i++) {
            const llmr_sched_item *it = &st.items[i];
            picked[i] = it->sample ? next_token(it->seq->tokens, it->seq->len) : -1;
        }
        llmr_sched_commit(s, &st, picked);
        for (uint32_t i = 0; i < st.n_items; i++) {
            llmr_sched_seq *q = st.items[i].seq;
            job *j = q->user;
            if (!st.items[i].sample)
                continue;
            /* a sequence read again after preemption samples the token it had not run
             * yet: only tokens past what the job has seen are new */
            uint32_t generated = q->len - q->prompt_len;
            if (generated > j->n_out && j->n_out < 512)
                j->out[j->n_out++] = q->tokens[q->len - 1];
            if (llmr_sched_at_length(q)) {
                j->preemptions = q->preemptions;
                llmr_sched_finish(s, q);
                j->seq = NULL;
                j->done = true;
                finished++;
            }
        }
    }
    CHECK_EQ_INT(finished, n);
    llmr_sched_step_free(&st);
}

static llmr_sched_params params(uint32_t budget, uint32_t full_blocks, uint32_t window,
                                uint32_t window_blocks)
{
    llmr_sched_params p = {0};
    p.token_budget = budget;
    p.max_running = 64;
    p.block_tokens = 16;
    p.full_blocks = full_blocks;
    p.window = window;
    p.window_blocks = window_blocks;
    p.max_context = 131072;
    return p;
}

/* The outputs of each job run alone in a roomy scheduler. */
static void solo_outputs(job *jobs, uint32_t n, job *solo)
{
    for (uint32_t k = 0; k < n; k++) {
        llmr_sched s;
        char err[LLMR_SCHED_ERR_MAX];
        llmr_sched_params p = params(8192, 4096, 128, 4096);
        CHECK(llmr_sched_init(&s, &p, err));
        job_init(&solo[k], jobs[k].prompt_len, jobs[k].max_tokens, 0);
        memcpy(solo[k].prompt, jobs[k].prompt, jobs[k].prompt_len * sizeof *jobs[k].prompt);
        stats t;
        run_jobs(&s, &solo[k], 1, NULL, &t);
        CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
        llmr_sched_free(&s);
    }
}

static void free_jobs(job *jobs, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        free(jobs[k].prompt);
}

/* ---- tests ------------------------------------------------------------------------ */

TEST(sixteen_sequences_together_give_their_solo_outputs)
{
    enum { N = 16 };
    job jobs[N], solo[N];
    for (uint32_t k = 0; k < N; k++)
        job_init(&jobs[k], 5 + k * 37, 20 + (k * 13) % 50, k + 1);
    solo_outputs(jobs, N, solo);
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(256, 4096, 128, 4096);
    CHECK(llmr_sched_init(&s, &p, err));
    stats t;
    run_jobs(&s, jobs, N, NULL, &t);
    for (uint32_t k = 0; k < N; k++) {
        CHECK_EQ_INT(jobs[k].n_out, jobs[k].max_tokens);
        CHECK(memcmp(jobs[k].out, solo[k].out, jobs[k].n_out * sizeof(int32_t)) == 0);
    }
    CHECK_EQ_INT(t.preempted, 0);
    CHECK(t.max_items > 8); /* they really ran together */
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    llmr_sched_free(&s);
    free_jobs(jobs, N);
    free_jobs(solo, N);
}

TEST(a_long_prompt_is_read_in_chunks_and_never_holds_decoders_back)
{
    enum { N = 9 };
    job jobs[N];
    uint32_t arrive[N];
    for (uint32_t k = 0; k < N - 1; k++) {
        job_init(&jobs[k], 10, 200, k + 1);
        arrive[k] = 0;
    }
    job_init(&jobs[N - 1], 20000, 4, 99); /* arrives while the others decode */
    arrive[N - 1] = 20;
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(2048, 8192, 128, 8192);
    CHECK(llmr_sched_init(&s, &p, err));
    stats t;
    run_jobs(&s, jobs, N, arrive, &t);
    CHECK_EQ_INT(t.steps_missing_a_decoder, 0);
    CHECK_EQ_INT(t.max_tokens_in_step, 2048);
    for (uint32_t k = 0; k < N; k++)
        CHECK_EQ_INT(jobs[k].n_out, jobs[k].max_tokens);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    llmr_sched_free(&s);
    free_jobs(jobs, N);
}

TEST(when_blocks_run_out_the_youngest_is_preempted_and_its_output_is_unchanged)
{
    enum { N = 6 };
    job jobs[N], solo[N];
    for (uint32_t k = 0; k < N; k++)
        job_init(&jobs[k], 40 + k, 300, k + 11);
    solo_outputs(jobs, N, solo);
    /* 64 blocks of 16: 1024 positions for six sequences that grow to 340 each */
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(512, 64, 0, 0);
    CHECK(llmr_sched_init(&s, &p, err));
    CHECK_EQ_INT(llmr_sched_capacity(&s), 1024);
    stats t;
    run_jobs(&s, jobs, N, NULL, &t);
    CHECK(t.preempted > 0);
    CHECK(s.preemptions == t.preempted);
    /* the oldest is never the one preempted: it always goes on */
    CHECK_EQ_INT(jobs[0].preemptions, 0);
    uint32_t preempted_jobs = 0;
    for (uint32_t k = 0; k < N; k++)
        preempted_jobs += jobs[k].preemptions > 0;
    CHECK(preempted_jobs > 0);
    for (uint32_t k = 0; k < N; k++) {
        CHECK_EQ_INT(jobs[k].n_out, 300);
        CHECK(memcmp(jobs[k].out, solo[k].out, 300 * sizeof(int32_t)) == 0);
    }
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    llmr_sched_free(&s);
    free_jobs(jobs, N);
    free_jobs(solo, N);
}

TEST(sequences_wait_for_free_blocks_first_come_first_served)
{
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(8192, 8, 0, 0); /* 128 positions */
    CHECK(llmr_sched_init(&s, &p, err));
    int32_t prompt[100];
    for (int i = 0; i < 100; i++)
        prompt[i] = i;
    llmr_sched_seq *a, *b;
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 100, 10, &a, err), LLMR_OK);
    CHECK_EQ_INT(llmr_sched_add(&s, 2, NULL, prompt, 100, 10, &b, err), LLMR_OK);
    llmr_sched_step st = {0};
    CHECK(llmr_sched_plan(&s, &st));
    /* a takes 7 blocks; b's first chunk gets the one left (16 positions) */
    CHECK_EQ_INT(st.n_items, 2);
    CHECK(st.items[0].seq == a && st.items[0].count == 100);
    CHECK(st.items[1].seq == b && st.items[1].count == 16);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 8);
    int32_t picked[2] = {7, -1};
    llmr_sched_commit(&s, &st, picked);
    CHECK_EQ_INT(a->len, 101);
    CHECK_EQ_INT(b->computed, 16);
    /* a decodes; b cannot grow without a's blocks and waits its turn (no preemption of
     * a for b's prompt) */
    CHECK(llmr_sched_plan(&s, &st));
    CHECK_EQ_INT(st.n_items, 1);
    CHECK(st.items[0].seq == a && st.items[0].count == 1);
    llmr_sched_finish(&s, a);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 1);
    llmr_sched_finish(&s, b);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    llmr_sched_step_free(&st);
    llmr_sched_free(&s);
}

TEST(a_request_that_cannot_fit_alone_is_refused_with_what_fits)
{
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(8192, 64, 0, 0); /* 1024 positions */
    p.max_context = 4096;
    CHECK(llmr_sched_init(&s, &p, err));
    static int32_t prompt[5000];
    llmr_sched_seq *q;
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 2000, 10, &q, err), LLMR_OOM_VRAM);
    CHECK_CONTAINS(err, "the prompt has 2000 tokens; the KV cache holds at most 1023 tokens");
    CHECK(q == NULL);
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 4096, 10, &q, err), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(err, "the context holds 4096");
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 0, 10, &q, err), LLMR_UNSUPPORTED);
    /* one that fits is capped where the cache ends: it will finish with LENGTH there */
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 1000, 0, &q, err), LLMR_OK);
    CHECK_EQ_INT(q->max_len, 1024);
    CHECK_EQ_INT(s.n_waiting, 1);
    llmr_sched_free(&s);
}

TEST(sliding_window_blocks_go_back_as_the_window_moves)
{
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    /* only sliding layers: a window of 128 positions, 20 blocks of 16 */
    llmr_sched_params p = params(64, 0, 128, 20);
    CHECK(llmr_sched_init(&s, &p, err));
    CHECK_EQ_INT(llmr_sched_capacity(&s), 131072);
    job j;
    job_init(&j, 1000, 500, 5);
    stats t;
    uint32_t peak = 0;
    /* run it by hand to watch the pool */
    llmr_sched_step st = {0};
    CHECK_EQ_INT(llmr_sched_add(&s, 1, &j, j.prompt, j.prompt_len, j.max_tokens, &j.seq, err), LLMR_OK);
    int32_t picked[4];
    while (j.seq && llmr_sched_plan(&s, &st) && st.n_items) {
        check_plan(&s, &st, &t);
        if (llmr_sched_blocks_used(&s) > peak)
            peak = llmr_sched_blocks_used(&s);
        picked[0] = st.items[0].sample ? next_token(j.seq->tokens, j.seq->len) : -1;
        llmr_sched_commit(&s, &st, picked);
        if (llmr_sched_at_length(j.seq)) {
            llmr_sched_finish(&s, j.seq);
            j.seq = NULL;
        }
    }
    CHECK(j.seq == NULL);
    /* the window (8 blocks), a chunk of 64 (4) and the block a position straddles */
    CHECK(peak <= 14);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    llmr_sched_step_free(&st);
    llmr_sched_free(&s);
    free(j.prompt);
}

TEST(a_cancelled_sequence_gives_its_blocks_back_in_any_state)
{
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(64, 100, 128, 100);
    CHECK(llmr_sched_init(&s, &p, err));
    int32_t prompt[300] = {0};
    llmr_sched_seq *a, *b, *c;
    CHECK_EQ_INT(llmr_sched_add(&s, 1, NULL, prompt, 300, 5, &a, err), LLMR_OK);
    CHECK_EQ_INT(llmr_sched_add(&s, 2, NULL, prompt, 10, 5, &b, err), LLMR_OK);
    CHECK_EQ_INT(llmr_sched_add(&s, 3, NULL, prompt, 10, 5, &c, err), LLMR_OK);
    llmr_sched_step st = {0};
    CHECK(llmr_sched_plan(&s, &st)); /* a's first chunk takes the whole budget */
    CHECK_EQ_INT(st.n_items, 1);
    int32_t picked[1] = {0};
    llmr_sched_commit(&s, &st, picked);
    CHECK(llmr_sched_blocks_used(&s) > 0);
    llmr_sched_finish(&s, a); /* mid-prompt */
    llmr_sched_finish(&s, c); /* waiting */
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    CHECK_EQ_INT(s.n_running + s.n_waiting, 1);
    llmr_sched_finish(&s, b);
    CHECK_EQ_INT(s.n_running + s.n_waiting, 0);
    llmr_sched_step_free(&st);
    llmr_sched_free(&s);
}

/* Random arrivals, lengths and cancels against a small pool, both kinds of layer. */
TEST(random_traffic_keeps_every_invariant_and_every_block)
{
    enum { N = 60 };
    uint64_t rng = 12345;
    job jobs[N];
    uint32_t arrive[N];
    for (uint32_t k = 0; k < N; k++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        job_init(&jobs[k], 1 + (uint32_t)(rng >> 33) % 700, 1 + (uint32_t)(rng >> 45) % 300, k);
        arrive[k] = (uint32_t)(rng >> 20) % 400;
        if (k % 5 == 0) /* a fifth are cancelled, waiting, reading or decoding */
            jobs[k].cancel_at = arrive[k] + (uint32_t)(rng >> 10) % 60;
    }
    llmr_sched s;
    char err[LLMR_SCHED_ERR_MAX];
    llmr_sched_params p = params(300, 160, 128, 120);
    p.max_running = 12;
    CHECK(llmr_sched_init(&s, &p, err));
    stats t;
    run_jobs(&s, jobs, N, arrive, &t);
    CHECK(t.max_items <= 12);
    CHECK_EQ_INT(llmr_sched_blocks_used(&s), 0);
    uint32_t cancelled = 0;
    for (uint32_t k = 0; k < N; k++) {
        CHECK(jobs[k].done);
        cancelled += jobs[k].cancelled;
    }
    CHECK(cancelled > 0);
    llmr_sched_free(&s);
    free_jobs(jobs, N);
}

int main(void)
{
    RUN(sixteen_sequences_together_give_their_solo_outputs);
    RUN(a_long_prompt_is_read_in_chunks_and_never_holds_decoders_back);
    RUN(when_blocks_run_out_the_youngest_is_preempted_and_its_output_is_unchanged);
    RUN(sequences_wait_for_free_blocks_first_come_first_served);
    RUN(a_request_that_cannot_fit_alone_is_refused_with_what_fits);
    RUN(sliding_window_blocks_go_back_as_the_window_moves);
    RUN(a_cancelled_sequence_gives_its_blocks_back_in_any_state);
    RUN(random_traffic_keeps_every_invariant_and_every_block);
    return llmr_test_finish();
}
