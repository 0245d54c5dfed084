/* Batching changes no answer on the gpt-oss engine's CPU path (engines/gpt_oss, compiled
 * in, through its ABI, on a synthetic gpt-oss-tiny model with random weights): sixteen
 * greedy requests of different prompt (3 to 700 tokens) and output (4 to 19) lengths, submitted at once and served
 * together by the step loop, each produce exactly the tokens they produce alone; so does
 * a long prompt read in chunks while others decode.  Cancelling some of them mid-way
 * ends those with CANCELLED and leaves the others' tokens as they were, and an unload
 * with requests running gives each its last event.  The step trace (LLMR_STEP_TRACE)
 * of the sixteen adds up to their tokens. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/clock.h"
#include "engine_host/host_services.h"
#include "engine_host/model_desc.h"
#include "fixture.h"
#include "llmr/engine.h"
#include "models/synth.h"

#define N 16
#define MAX_OUT 20

static llmr_host_api host_api;
static const llmr_engine_api *api;
static llmr_model_desc_owner desc;

typedef struct run {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    uint32_t count, late, cancel_at;
    int32_t ids[MAX_OUT + 1];
    uint32_t finish;
} run;

static int on_token(void *user, const llmr_engine_token *t)
{
    run *r = user;
    pthread_mutex_lock(&r->lock);
    if (r->done || r->count > MAX_OUT) {
        r->late++;
    } else {
        r->ids[r->count++] = t->id;
        if (t->finish != LLMR_ENGINE_FINISH_NONE) {
            r->finish = t->finish;
            r->done = true;
            pthread_cond_broadcast(&r->cond);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return 0;
}

static void wait_done(run *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

static llmr_engine_model *load(uint32_t max_batch)
{
    llmr_engine_load_params p = llmr_engine_load_default_params();
    p.context_length = 1024;
    p.threads = 2;
    p.max_batch = max_batch;
    llmr_engine_model *m = NULL;
    if (api->load(&desc.desc, &p, &m) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "load: %s", api->last_error(NULL));
    return m;
}

/* Request k: a prompt of 3 + 23k tokens (the last one 700: two steps' worth of the CPU
 * loop's budget of 512), 4 + (3k mod 16) tokens out.  Each sampled token costs a row of
 * the 201,088-token lm_head: kept few, so that the sanitizer build runs this in time. */
static int32_t prompts[N][700];
static uint32_t prompt_len(uint32_t k)
{
    return k == N - 1 ? 700 : 3 + 23 * k;
}
static uint32_t out_len(uint32_t k)
{
    return 4 + (3 * k) % 16;
}

static void submit(llmr_engine_model *m, uint32_t k, uint64_t id, run *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.request_id = id;
    p.prompt = prompts[k];
    p.prompt_len = prompt_len(k);
    p.max_tokens = out_len(k);
    p.temperature = 0.0f;
    llmr_status st = api->submit(m, &p, on_token, r);
    if (st != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "submit %u: %s", k, api->last_error(m));
        r->done = true;
    }
}

static run solo[N];

TEST(each_request_alone)
{
    llmr_engine_model *m = load(1);
    if (!m)
        return;
    for (uint32_t k = 0; k < N; k++) {
        submit(m, k, 100 + k, &solo[k]);
        wait_done(&solo[k]);
        CHECK_EQ_INT(solo[k].finish, LLMR_ENGINE_FINISH_LENGTH);
        CHECK_EQ_INT(solo[k].count, out_len(k));
    }
    api->unload(m);
}

/* The step trace (LLMR_STEP_TRACE, step_trace.h) of a run: every step's line, whose
 * tokens add up to what the requests read (each prompt, and each sampled token but the
 * last fed back) and whose decode items to the tokens fed back. */
static void check_trace(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    char line[256];
    unsigned long long start, step_us, last_start = 0;
    unsigned items, decoding, tokens, waiting, running;
    uint64_t sum_tokens = 0, sum_decoding = 0, want_tokens = 0, want_decoding = 0, lines = 0;
    CHECK(fgets(line, sizeof line, f) && line[0] == '#');
    while (fgets(line, sizeof line, f)) {
        int got = sscanf(line, "%llu %u %u %u %u %u %llu", &start, &items, &decoding, &tokens,
                         &waiting, &running, &step_us);
        CHECK_EQ_INT(got, 7);
        CHECK(items >= 1 && items <= N && decoding <= items && tokens >= items);
        CHECK(start >= last_start);
        last_start = start;
        sum_tokens += tokens;
        sum_decoding += decoding;
        lines++;
    }
    fclose(f);
    for (uint32_t k = 0; k < N; k++) {
        want_tokens += prompt_len(k) + out_len(k) - 1;
        want_decoding += out_len(k) - 1;
    }
    CHECK(lines > 1);
    CHECK_EQ_INT(sum_tokens, want_tokens);
    CHECK_EQ_INT(sum_decoding, want_decoding);
}

TEST(sixteen_requests_together_give_exactly_their_solo_tokens)
{
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", fx_path(fx_tmpdir(), "steps.trace"));
    setenv("LLMR_STEP_TRACE", trace, 1);
    llmr_engine_model *m = load(N);
    unsetenv("LLMR_STEP_TRACE");
    if (!m)
        return;
    llmr_engine_model_info info = {.struct_size = sizeof info};
    CHECK_EQ_INT(api->model_info(m, &info), LLMR_OK);
    CHECK_EQ_INT(info.max_batch, N);
    CHECK(info.kv_capacity_tokens >= (uint64_t)N * 700); /* ABI 1.2: the cache's positions */
    static run together[N];
    for (uint32_t k = 0; k < N; k++)
        submit(m, k, 200 + k, &together[k]);
    /* the positions in use show while they run (memory(), ABI 1.2) */
    uint64_t most_used = 0;
    for (int i = 0; i < 2000 && most_used == 0; i++) {
        llmr_engine_memory mem = {.struct_size = sizeof mem};
        CHECK_EQ_INT(api->memory(m, &mem), LLMR_OK);
        most_used = mem.kv_used_tokens;
        if (!most_used)
            llmr_sleep_ms(1);
    }
    CHECK(most_used > 0 && most_used <= info.kv_capacity_tokens);
    for (uint32_t k = 0; k < N; k++) {
        wait_done(&together[k]);
        CHECK_EQ_INT(together[k].finish, LLMR_ENGINE_FINISH_LENGTH);
        CHECK_EQ_INT(together[k].count, solo[k].count);
        bool same = memcmp(together[k].ids, solo[k].ids, solo[k].count * sizeof(int32_t)) == 0;
        if (!same)
            llmr_test_fail(__FILE__, __LINE__, "request %u: batched tokens differ from its solo run", k);
    }
    /* every block back once they end */
    uint64_t used = 1;
    for (int i = 0; i < 1000 && used; i++) {
        llmr_engine_memory mem = {.struct_size = sizeof mem};
        CHECK_EQ_INT(api->memory(m, &mem), LLMR_OK);
        used = mem.kv_used_tokens;
        if (used)
            llmr_sleep_ms(1);
    }
    CHECK_EQ_INT(used, 0);
    api->unload(m);
    for (uint32_t k = 0; k < N; k++)
        CHECK_EQ_INT(together[k].late, 0);
    check_trace(trace);
}

static int cancel_on_token(void *user, const llmr_engine_token *t)
{
    run *r = user;
    on_token(user, t);
    return r->cancel_at && r->count >= r->cancel_at; /* "stop" from the callback */
}

TEST(cancelled_requests_end_and_the_others_keep_their_tokens)
{
    llmr_engine_model *m = load(N);
    if (!m)
        return;
    static run r[N];
    for (uint32_t k = 0; k < N; k++) {
        memset(&r[k], 0, sizeof r[k]);
        pthread_mutex_init(&r[k].lock, NULL);
        pthread_cond_init(&r[k].cond, NULL);
        r[k].cancel_at = k % 3 == 1 ? 2 : 0; /* a third stop themselves after 2 tokens */
        llmr_engine_request_params p = llmr_engine_request_default_params();
        p.request_id = 300 + k;
        p.prompt = prompts[k];
        p.prompt_len = prompt_len(k);
        p.max_tokens = out_len(k);
        p.temperature = 0.0f;
        CHECK_EQ_INT(api->submit(m, &p, cancel_on_token, &r[k]), LLMR_OK);
    }
    CHECK_EQ_INT(api->cancel(m, 300 + 2), LLMR_OK); /* and one by call */
    for (uint32_t k = 0; k < N; k++) {
        wait_done(&r[k]);
        if (k % 3 == 1 && out_len(k) > 2) {
            CHECK_EQ_INT(r[k].finish, LLMR_ENGINE_FINISH_CANCELLED);
        } else if (k != 2) {
            CHECK_EQ_INT(r[k].finish, LLMR_ENGINE_FINISH_LENGTH);
            CHECK(memcmp(r[k].ids, solo[k].ids, solo[k].count * sizeof(int32_t)) == 0);
        }
        /* every token before the end is the solo run's */
        uint32_t tokens = r[k].finish == LLMR_ENGINE_FINISH_CANCELLED ? r[k].count - 1 : r[k].count;
        CHECK(memcmp(r[k].ids, solo[k].ids, tokens * sizeof(int32_t)) == 0);
    }
    api->unload(m);
}

TEST(an_unload_gives_every_running_request_its_last_event)
{
    llmr_engine_model *m = load(4);
    if (!m)
        return;
    static run r[8];
    for (uint32_t k = 0; k < 8; k++)
        submit(m, N - 1 - k % 2, 400 + k, &r[k]);
    api->unload(m); /* returns once each has had its last event */
    uint32_t cancelled = 0;
    for (uint32_t k = 0; k < 8; k++) {
        CHECK(r[k].done);
        CHECK(r[k].finish == LLMR_ENGINE_FINISH_CANCELLED || r[k].finish == LLMR_ENGINE_FINISH_LENGTH);
        cancelled += r[k].finish == LLMR_ENGINE_FINISH_CANCELLED;
    }
    /* eight prompts of 600-700 tokens take several steps each: the unload ends some */
    CHECK(cancelled > 0);
}

/* logits() checks its ids itself: on the GPU its ids share a step with other requests,
 * which a bad id must not fail. */
TEST(logits_refuses_an_id_outside_the_vocabulary)
{
    llmr_engine_model *m = load(N);
    if (!m)
        return;
    int32_t ids[3] = {5, -1, 7};
    static float out[3 * 201088];
    CHECK_EQ_INT(api->logits(m, ids, 3, 2, out), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(api->last_error(m), "outside the vocabulary");
    ids[1] = 17;
    CHECK_EQ_INT(api->logits(m, ids, 3, 2, out), LLMR_OK);
    api->unload(m);
}

int main(void)
{
    llmr_host_services_init(&host_api, "test");
    CHECK_EQ_INT(llmr_engine_negotiate(&host_api, &api), LLMR_OK);
    for (uint32_t k = 0; k < N; k++)
        for (uint32_t i = 0; i < sizeof prompts[k] / sizeof prompts[k][0]; i++)
            prompts[k][i] = (int32_t)((k * 7919u + i * 104729u) % 199990u);
    const char *tok = fx_tmpdir();
    fx_write_text(tok, "tokenizer.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}");
    static char model_dir[4096];
    snprintf(model_dir, sizeof model_dir, "%s", fx_path(fx_tmpdir(), "tiny"));
    llmr_synth_options o = {.preset = "gpt-oss-tiny", .out_dir = model_dir, .tokenizer_from = tok,
                            .fill = LLMR_SYNTH_FILL_RANDOM, .seed = 3};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_synth_snapshot(&o, &err) != LLMR_OK ||
        llmr_model_desc_open("tiny", model_dir, "safetensors", NULL, &desc, &err) != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "the tiny model: %s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return llmr_test_finish();
    }
    llmr_strbuf_free(&err);
    RUN(each_request_alone);
    RUN(sixteen_requests_together_give_exactly_their_solo_tokens);
    RUN(cancelled_requests_end_and_the_others_keep_their_tokens);
    RUN(an_unload_gives_every_running_request_its_last_event);
    RUN(logits_refuses_an_id_outside_the_vocabulary);
    llmr_model_desc_close(&desc);
    return llmr_test_finish();
}
