/* The llama.cpp engine plugin on the CPU, through its ABI table as the worker uses it:
 * load, model info and estimate, greedy generation (deterministic, streamed token by
 * token), seeded sampling, logprobs, stop ids, logits, cancel (by call and by the
 * callback's answer), two requests at once on contexts of their own, unload with a request
 * running, bad requests, and bad files (wrong shape, missing tensor, unknown
 * architecture, truncated) refused with MODEL_CORRUPT / UNSUPPORTED and the reason.
 *
 * The models come from make_tiny_gguf.sh (ctest fixture llama_tiny) in
 * LLMR_LLAMA_TINY_DIR: tiny/, bad-wrong-shape/, bad-missing-tensor/,
 * bad-unknown-arch/, truncated/. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/utf8.h"
#include "engine_host/host_services.h"
#include "engine_host/model_desc.h"
#include "engine_host/plugin_loader.h"

#define MAX_EVENTS 4096

static llmr_host_api host;
static llmr_plugin plugin;
static const char *models;

/* ---- one request's events, collected --------------------------------------------- */

typedef struct run {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int32_t ids[MAX_EVENTS];
    uint64_t times[MAX_EVENTS];
    uint32_t indexes[MAX_EVENTS];
    uint32_t count;      /* events */
    char text[65536];
    size_t text_len;
    bool text_valid;
    bool done;
    uint32_t finish, prompt_tokens;
    int32_t status;
    char message[512];
    float logprob[MAX_EVENTS];
    uint32_t top_count;
    int32_t top_ids[20];
    float top_logprobs[20];
    int stop_after;     /* >0: the callback answers "stop" at this event count */
} run;

static void run_init(run *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    r->text_valid = true;
}

static int on_token(void *user, const llmr_engine_token *t)
{
    run *r = user;
    pthread_mutex_lock(&r->lock);
    if (r->count < MAX_EVENTS) {
        r->ids[r->count] = t->id;
        r->times[r->count] = t->time_ns;
        r->indexes[r->count] = t->index;
        r->logprob[r->count] = t->logprob;
    }
    if (t->top_count && r->count == 0) {
        r->top_count = t->top_count;
        memcpy(r->top_ids, t->top_ids, t->top_count * sizeof *t->top_ids);
        memcpy(r->top_logprobs, t->top_logprobs, t->top_count * sizeof *t->top_logprobs);
    }
    r->count++;
    if (t->text_len) {
        if (!llmr_utf8_valid(t->text, t->text_len, NULL))
            r->text_valid = false;
        if (r->text_len + t->text_len < sizeof r->text) {
            memcpy(r->text + r->text_len, t->text, t->text_len);
            r->text_len += t->text_len;
        }
    }
    if (t->finish != LLMR_ENGINE_FINISH_NONE) {
        r->done = true;
        r->finish = t->finish;
        r->status = t->status;
        r->prompt_tokens = t->prompt_tokens;
        snprintf(r->message, sizeof r->message, "%s", t->message ? t->message : "");
    }
    int stop = r->stop_after && (int)r->count >= r->stop_after;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    return stop;
}

/* Waits until the request ended (or `events` events came, when events > 0), at most
 * 60 s; false on the timeout. */
static bool wait_for(run *r, uint32_t events)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&r->lock);
    while (!r->done && !(events && r->count >= events))
        if (pthread_cond_timedwait(&r->changed, &r->lock, &until) != 0)
            break;
    bool ok = r->done || (events && r->count >= events);
    pthread_mutex_unlock(&r->lock);
    return ok;
}

/* ---- models ---------------------------------------------------------------------- */

typedef struct loaded {
    llmr_model_desc_owner desc;
    llmr_engine_model *model;
} loaded;

static char *model_dir(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", models, name);
    return path;
}

static llmr_status load_model(const char *name, llmr_engine_load_params *p, loaded *out)
{
    memset(out, 0, sizeof *out);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_model_desc_open(name, model_dir(name), "gguf", NULL, &out->desc, &err);
    if (st != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "opening %s: %s", name, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st;
    }
    llmr_strbuf_free(&err);
    llmr_engine_load_params d = llmr_engine_load_default_params();
    st = plugin.api->load(&out->desc.desc, p ? p : &d, &out->model);
    if (st != LLMR_OK)
        llmr_model_desc_close(&out->desc);
    return st;
}

static void unload_model(loaded *l)
{
    plugin.api->unload(l->model);
    llmr_model_desc_close(&l->desc);
}

static const int32_t prompt[] = {13225, 11, 1495, 553, 481, 30, 357, 939, 261, 1746};
#define PROMPT_LEN (uint32_t)(sizeof prompt / sizeof prompt[0])

static llmr_engine_request_params greedy(uint64_t id, uint32_t max_tokens)
{
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.request_id = id;
    p.prompt = prompt;
    p.prompt_len = PROMPT_LEN;
    p.max_tokens = max_tokens;
    p.temperature = 0.0f;
    return p;
}

static bool generate(llmr_engine_model *m, const llmr_engine_request_params *p, run *r)
{
    run_init(r);
    llmr_status st = plugin.api->submit(m, p, on_token, r);
    if (st != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "submit: %s: %s", llmr_status_name(st),
                       plugin.api->last_error(m));
        return false;
    }
    if (!wait_for(r, 0)) {
        llmr_test_fail(__FILE__, __LINE__, "the request did not end within 60 s");
        return false;
    }
    return true;
}

/* ---- tests ------------------------------------------------------------------------- */

TEST(describes_itself)
{
    CHECK_EQ_STR(plugin.info.name, "llama.cpp-cpu");
    CHECK(plugin.info.capabilities & LLMR_ENGINE_CAP_CPU);
    CHECK(plugin.info.capabilities & LLMR_ENGINE_CAP_TEXT);
    CHECK(plugin.info.capabilities & LLMR_ENGINE_CAP_CANCEL);
    CHECK_EQ_INT(plugin.info.max_top_logprobs, 20);
    CHECK(plugin.has_estimate && plugin.has_cancel && plugin.has_memory && plugin.has_logits);
}

TEST(loads_and_reports)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "load: %s", plugin.api->last_error(NULL));
        return;
    }
    llmr_engine_model_info info;
    CHECK_EQ_INT(plugin.api->model_info(l.model, &info), LLMR_OK);
    CHECK_EQ_INT(info.context_length, 2048); /* the GGUF's llama.context_length */
    CHECK_EQ_INT(info.vocab_size, 200019);   /* gpt-oss's tokenizer: 199998 + specials */
    CHECK_EQ_INT(info.max_batch, 1);         /* the CPU's default */
    llmr_engine_memory mem, est;
    CHECK_EQ_INT(plugin.api->memory(l.model, &mem), LLMR_OK);
    CHECK_EQ_INT(mem.vram_bytes, 0);
    CHECK(mem.ram_bytes > 0);
    llmr_engine_load_params p = llmr_engine_load_default_params();
    CHECK_EQ_INT(plugin.api->estimate(&l.desc.desc, &p, &est), LLMR_OK);
    CHECK(est.ram_bytes >= l.desc.desc.total_bytes);
    CHECK_EQ_INT(est.vram_bytes, 0);
    unload_model(&l);
}

TEST(refuses_a_load_over_the_ram_budget)
{
    llmr_engine_load_params p = llmr_engine_load_default_params();
    p.ram_budget = 1u << 20;
    loaded l;
    CHECK_EQ_INT(load_model("tiny", &p, &l), LLMR_OOM_RAM);
    CHECK_CONTAINS(plugin.api->last_error(NULL), "MiB of RAM; the budget is 1 MiB");
    if (l.model)
        unload_model(&l);
    else
        llmr_model_desc_close(&l.desc);
}

TEST(greedy_is_deterministic_and_streams)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run a, b;
    llmr_engine_request_params p = greedy(1, 12);
    if (generate(l.model, &p, &a) && generate(l.model, &p, &b)) {
        CHECK_EQ_INT(a.count, 12);
        CHECK_EQ_INT(a.finish, LLMR_ENGINE_FINISH_LENGTH);
        CHECK_EQ_INT(a.prompt_tokens, PROMPT_LEN);
        CHECK(a.text_valid);
        CHECK(a.text_len > 0);
        for (uint32_t i = 0; i < a.count && i < MAX_EVENTS; i++) {
            CHECK_EQ_INT(a.indexes[i], i);
            CHECK(a.ids[i] >= 0 && a.ids[i] < 200019);
            CHECK_EQ_INT(a.ids[i], b.ids[i]);
            if (i)
                CHECK(a.times[i] >= a.times[i - 1]);
        }
        /* one event per token, each stamped when it was sampled: the stream spans time */
        CHECK(a.times[a.count - 1] > a.times[0]);
        CHECK_EQ_STR(a.text, b.text);
    }
    unload_model(&l);
}

TEST(seeded_sampling_repeats_and_logprobs_add_up)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run a, b, c, g;
    llmr_engine_request_params p = greedy(2, 8);
    p.temperature = 1.0f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.min_p = 0.01f;
    p.repetition_penalty = 1.1f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.5f;
    p.seed = 7;
    if (generate(l.model, &p, &a) && generate(l.model, &p, &b)) {
        CHECK_EQ_INT(a.count, 8);
        for (uint32_t i = 0; i < 8; i++)
            CHECK_EQ_INT(a.ids[i], b.ids[i]);
    }
    /* The random model is sharp (tied embeddings favour repeating a token): a high
     * temperature with nothing filtered makes the draw matter. */
    p = greedy(2, 8);
    p.temperature = 10.0f;
    p.seed = 7;
    if (!generate(l.model, &p, &a))
        return;
    bool differs = false;
    for (int attempt = 0; attempt < 4 && !differs; attempt++) {
        p.seed = 8 + (uint64_t)attempt;
        if (generate(l.model, &p, &c))
            for (uint32_t i = 0; i < 8; i++)
                differs |= c.ids[i] != a.ids[i];
    }
    CHECK(differs); /* another seed, another draw */
    llmr_engine_request_params q = greedy(3, 1);
    q.logprobs = 1;
    q.top_logprobs = 5;
    if (generate(l.model, &q, &g)) {
        CHECK_EQ_INT(g.top_count, 5);
        CHECK_EQ_INT(g.top_ids[0], g.ids[0]); /* greedy takes the most likely */
        CHECK(g.logprob[0] <= 0.0f);
        CHECK(fabsf(g.logprob[0] - g.top_logprobs[0]) < 1e-5f);
        for (uint32_t i = 1; i < g.top_count; i++)
            CHECK(g.top_logprobs[i] <= g.top_logprobs[i - 1]);
    }
    unload_model(&l);
}

TEST(stops_on_a_stop_id)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run a, s;
    llmr_engine_request_params p = greedy(4, 6);
    if (generate(l.model, &p, &a)) {
        int32_t stop = a.ids[3];
        uint32_t first = 0;
        while (a.ids[first] != stop)
            first++;
        p.stop_ids = &stop;
        p.stop_id_count = 1;
        if (generate(l.model, &p, &s)) {
            CHECK_EQ_INT(s.finish, LLMR_ENGINE_FINISH_STOP);
            CHECK_EQ_INT(s.count, first + 1); /* the stop id is the last event's */
            CHECK_EQ_INT(s.ids[s.count - 1], stop);
        }
    }
    unload_model(&l);
}

TEST(cancels_by_call_and_by_callback)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run a, b;
    llmr_engine_request_params p = greedy(5, 0); /* until the context is full */
    run_init(&a);
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &a), LLMR_OK);
    CHECK(wait_for(&a, 3));
    CHECK_EQ_INT(plugin.api->cancel(l.model, 5), LLMR_OK);
    CHECK(wait_for(&a, 0));
    CHECK_EQ_INT(a.finish, LLMR_ENGINE_FINISH_CANCELLED);
    CHECK_EQ_INT(a.status, LLMR_CANCELLED);
    CHECK(a.count < 200);
    CHECK_EQ_INT(a.ids[a.count - 1], -1); /* the last event carries no token */
    CHECK_EQ_INT(plugin.api->cancel(l.model, 999), LLMR_OK); /* unknown: not an error */

    p.request_id = 6;
    run_init(&b);
    b.stop_after = 2;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &b), LLMR_OK);
    CHECK(wait_for(&b, 0));
    CHECK_EQ_INT(b.finish, LLMR_ENGINE_FINISH_CANCELLED);
    CHECK_EQ_INT(b.count, 3);
    unload_model(&l);
}

TEST(two_requests_at_once_have_their_own_contexts)
{
    llmr_engine_load_params lp = llmr_engine_load_default_params();
    lp.max_batch = 2;
    lp.threads = 1;
    loaded l;
    if (load_model("tiny", &lp, &l) != LLMR_OK)
        return;
    static run solo, a, b;
    llmr_engine_request_params p = greedy(7, 16);
    if (!generate(l.model, &p, &solo)) {
        unload_model(&l);
        return;
    }
    run_init(&a);
    run_init(&b);
    p.request_id = 8;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &a), LLMR_OK);
    p.request_id = 9;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &b), LLMR_OK);
    CHECK(wait_for(&a, 0) && wait_for(&b, 0));
    CHECK_EQ_INT(a.count, 16);
    CHECK_EQ_INT(b.count, 16);
    for (uint32_t i = 0; i < 16; i++) {
        CHECK_EQ_INT(a.ids[i], solo.ids[i]);
        CHECK_EQ_INT(b.ids[i], solo.ids[i]);
    }
    llmr_engine_memory mem;
    CHECK_EQ_INT(plugin.api->memory(l.model, &mem), LLMR_OK);
    unload_model(&l);
}

TEST(unload_ends_a_running_request)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run a;
    llmr_engine_request_params p = greedy(10, 0);
    run_init(&a);
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &a), LLMR_OK);
    CHECK(wait_for(&a, 2));
    unload_model(&l);
    CHECK(a.done); /* the last event came before unload returned */
    CHECK_EQ_INT(a.finish, LLMR_ENGINE_FINISH_CANCELLED);
    CHECK_CONTAINS(a.message, "unloaded");
}

TEST(logits_agree_with_generation)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run g;
    enum { VOCAB = 200019 };
    float *rows = malloc(2 * (size_t)VOCAB * sizeof *rows);
    llmr_engine_request_params p = greedy(14, 1);
    CHECK(plugin.has_logits);
    if (rows && generate(l.model, &p, &g)) {
        /* the last two positions of the prompt */
        CHECK_EQ_INT(plugin.api->logits(l.model, prompt, PROMPT_LEN, PROMPT_LEN - 2, rows), LLMR_OK);
        const float *last = rows + VOCAB;
        int32_t best = 0;
        for (int32_t i = 1; i < VOCAB; i++)
            if (last[i] > last[best])
                best = i;
        CHECK_EQ_INT(best, g.ids[0]); /* greedy's first token is the last row's argmax */
        CHECK(memcmp(rows, last, VOCAB * sizeof *rows) != 0); /* two different rows */
        CHECK_EQ_INT(plugin.api->logits(l.model, prompt, PROMPT_LEN, PROMPT_LEN, rows),
                     LLMR_UNSUPPORTED);
    }
    free(rows);
    unload_model(&l);
}

TEST(refuses_bad_requests)
{
    loaded l;
    if (load_model("tiny", NULL, &l) != LLMR_OK)
        return;
    static run r;
    run_init(&r);
    llmr_engine_request_params p = greedy(11, 4);
    int32_t bad[] = {1, 250000};
    p.prompt = bad;
    p.prompt_len = 2;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &r), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(plugin.api->last_error(l.model), "outside the vocabulary");
    p = greedy(12, 4);
    p.top_p = 0.0f;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &r), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(plugin.api->last_error(l.model), "top_p");
    static int32_t long_prompt[2048];
    p = greedy(13, 4);
    p.prompt = long_prompt;
    p.prompt_len = 2048;
    CHECK_EQ_INT(plugin.api->submit(l.model, &p, on_token, &r), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(plugin.api->last_error(l.model), "1 to 2047");
    CHECK_EQ_INT(r.count, 0); /* no event for a refused request */
    unload_model(&l);
}

/* A model whose GGUF header is sound but which llama.cpp refuses. */
static void check_refused(const char *name, llmr_status want, const char *reason)
{
    loaded l;
    llmr_status st = load_model(name, NULL, &l);
    CHECK_EQ_INT(st, want);
    CHECK_CONTAINS(plugin.api->last_error(NULL), reason);
    if (st == LLMR_OK)
        unload_model(&l);
}

TEST(refuses_bad_files_with_the_reason)
{
    check_refused("bad-wrong-shape", LLMR_MODEL_CORRUPT, "'blk.1.ffn_down.weight' has wrong shape");
    check_refused("bad-missing-tensor", LLMR_MODEL_CORRUPT, "'blk.1.ffn_down.weight' not found");
    check_refused("bad-unknown-arch", LLMR_UNSUPPORTED, "unknown model architecture: 'llmr-unknown'");

    /* Truncated: the host's checks refuse it first ... */
    llmr_model_desc_owner d;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_model_desc_open("t", model_dir("truncated"), "gguf", NULL, &d, &err),
                 LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "truncated");
    llmr_strbuf_free(&err);
    /* ... and the engine on its own says the same of it (a description of the sound
     * model pointed at the truncated copy). */
    loaded l;
    memset(&l, 0, sizeof l);
    err = (llmr_strbuf)LLMR_STRBUF_INIT;
    if (llmr_model_desc_open("t", model_dir("tiny"), "gguf", NULL, &l.desc, &err) == LLMR_OK) {
        llmr_engine_model_desc desc = l.desc.desc;
        desc.dir = model_dir("truncated");
        llmr_engine_load_params p = llmr_engine_load_default_params();
        CHECK_EQ_INT(plugin.api->load(&desc, &p, &l.model), LLMR_MODEL_CORRUPT);
        CHECK_CONTAINS(plugin.api->last_error(NULL), "model.gguf");
        CHECK(l.model == NULL);
        llmr_model_desc_close(&l.desc);
    }
    llmr_strbuf_free(&err);
}

int main(void)
{
    models = getenv("LLMR_LLAMA_TINY_DIR");
    if (!models) {
        fprintf(stderr, "LLMR_LLAMA_TINY_DIR is not set (ctest sets it)\n");
        return 1;
    }
    llmr_host_services_init(&host, "test");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_plugin_open(LLMR_LLAMA_CPP_PLUGIN, &host, &plugin, &err) != LLMR_OK) {
        fprintf(stderr, "cannot open %s: %s\n", LLMR_LLAMA_CPP_PLUGIN, llmr_strbuf_cstr(&err));
        return 1;
    }
    llmr_strbuf_free(&err);
    RUN(describes_itself);
    RUN(loads_and_reports);
    RUN(refuses_a_load_over_the_ram_budget);
    RUN(greedy_is_deterministic_and_streams);
    RUN(seeded_sampling_repeats_and_logprobs_add_up);
    RUN(stops_on_a_stop_id);
    RUN(cancels_by_call_and_by_callback);
    RUN(two_requests_at_once_have_their_own_contexts);
    RUN(unload_ends_a_running_request);
    RUN(logits_agree_with_generation);
    RUN(refuses_bad_requests);
    RUN(refuses_bad_files_with_the_reason);
    int rc = llmr_test_finish();
    llmr_plugin_close(&plugin);
    return rc;
}
