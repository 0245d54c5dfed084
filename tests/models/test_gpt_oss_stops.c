/* How a gpt-oss generation ends, on the engine's CPU path (engines/gpt_oss, compiled
 * in): the stop set the engine builds (generation_config.json's eos_token_id, a
 * number or a list, else the checked config's ids; and <|return|> and <|call|>
 * always, listed or not), and requests through the engine ABI on a synthetic
 * gpt-oss-tiny model with random weights.  Greedy decoding of that model is the same
 * every time, so a first run learns the tokens it picks; then making one of them an
 * EOS id (generation_config.json of a copy of the model) or a request's stop id must
 * end the request right there with finish STOP, and max_tokens ends it with LENGTH. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "engine_host/model_desc.h"
#include "fixture.h"
#include "llmr/engine.h"
#include "model.h"
#include "models/synth.h"

#define RETURN_ID 200002 /* <|return|> in o200k_harmony */
#define CALL_ID 200012   /* <|call|> */

/* ---- the stop set ------------------------------------------------------------------- */

/* gpt_config_read on a model in dir whose checked config has vocab_size `vocab` and
 * eos_token_ids [checked_eos]. */
static llmr_status read_config(const char *dir, uint32_t vocab, int checked_eos, gpt_config *c)
{
    char config[1024];
    snprintf(config, sizeof config,
             "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
             "\"num_key_value_heads\":2,\"head_dim\":16,\"vocab_size\":%u,"
             "\"num_local_experts\":4,\"num_experts_per_tok\":2,\"intermediate_size\":64,"
             "\"sliding_window\":4,\"max_position_embeddings\":4096,\"rope_theta\":150000.0,"
             "\"rms_norm_eps\":1e-05,\"swiglu_limit\":7.0,"
             "\"layer_types\":[\"sliding_attention\",\"full_attention\"],"
             "\"eos_token_ids\":[%d]}",
             vocab, checked_eos);
    llmr_engine_model_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = "test";
    d.dir = dir;
    d.format = "safetensors";
    d.runtime = "gpt_oss";
    d.checked_config_json = config;
    char err[512] = "";
    llmr_status st = gpt_config_read(c, &d, err);
    if (st != LLMR_OK)
        fprintf(stderr, "    gpt_config_read: %s\n", err);
    return st;
}

/* The config's stop set is exactly want[0..n), in any order. */
static bool eos_set_is(const gpt_config *c, const int32_t *want, uint32_t n)
{
    bool same = c->n_eos == n;
    for (uint32_t i = 0; same && i < n; i++) {
        bool found = false;
        for (uint32_t j = 0; j < c->n_eos; j++)
            found |= c->eos[j] == want[i];
        same = found;
    }
    if (!same) {
        fprintf(stderr, "    the stop set is {");
        for (uint32_t j = 0; j < c->n_eos; j++)
            fprintf(stderr, "%s%d", j ? ", " : "", c->eos[j]);
        fprintf(stderr, "}\n");
    }
    return same;
}

#define VOCAB 201088u /* gpt-oss's */

TEST(eos_ids_come_from_generation_config_as_a_number_or_a_list)
{
    gpt_config c;
    const char *dir = fx_tmpdir();
    fx_write_text(dir, "generation_config.json", "{\"eos_token_id\": 7}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){7, RETURN_ID, CALL_ID}, 3));

    fx_write_text(dir, "generation_config.json", "{\"eos_token_id\": [7, 9, 11]}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){7, 9, 11, RETURN_ID, CALL_ID}, 5));

    /* without eos_token_id there, or without the file: the checked config's ids */
    fx_write_text(dir, "generation_config.json", "{\"bos_token_id\": 199998}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){5, RETURN_ID, CALL_ID}, 3));
    CHECK_EQ_INT(read_config(fx_tmpdir(), VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){5, RETURN_ID, CALL_ID}, 3));
}

TEST(return_and_call_always_end_a_turn)
{
    gpt_config c;
    const char *dir = fx_tmpdir();
    /* listed: once each */
    fx_write_text(dir, "generation_config.json", "{\"eos_token_id\": [200002, 199999, 200012]}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){RETURN_ID, 199999, CALL_ID}, 3));
    /* one listed, the other not */
    fx_write_text(dir, "generation_config.json", "{\"eos_token_id\": 200012}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){CALL_ID, RETURN_ID}, 2));
    /* an empty list */
    fx_write_text(dir, "generation_config.json", "{\"eos_token_id\": []}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    CHECK(eos_set_is(&c, (const int32_t[]){RETURN_ID, CALL_ID}, 2));
    /* a long list of other ids still leaves room for them */
    fx_write_text(dir, "generation_config.json",
                  "{\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}");
    CHECK_EQ_INT(read_config(dir, VOCAB, 5, &c), LLMR_OK);
    bool ret = false, call = false;
    for (uint32_t j = 0; j < c.n_eos; j++) {
        ret |= c.eos[j] == RETURN_ID;
        call |= c.eos[j] == CALL_ID;
    }
    CHECK(ret && call);
}

/* ---- requests through the ABI --------------------------------------------------------- */

static void host_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level >= LLMR_ENGINE_LOG_WARN)
        fprintf(stderr, "    engine: %s\n", message);
}

static void *host_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static uint64_t host_now(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const llmr_host_api host_api = {sizeof host_api, LLMR_ENGINE_ABI_MAJOR, LLMR_ENGINE_ABI_MINOR,
                                       NULL, host_log, host_alloc, host_free, host_now};
static const llmr_engine_api *api;

#define MAX_EVENTS 64

/* The events of one request. */
typedef struct run {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    uint32_t count;        /* events */
    int32_t ids[MAX_EVENTS];
    uint32_t index[MAX_EVENTS];
    uint32_t finish;       /* of the last event */
    int32_t status;
    int late;              /* events after the last one, or beyond MAX_EVENTS */
} run;

static int on_token(void *user, const llmr_engine_token *t)
{
    run *r = user;
    pthread_mutex_lock(&r->lock);
    if (r->done || r->count == MAX_EVENTS) {
        r->late++;
    } else {
        r->ids[r->count] = t->id;
        r->index[r->count] = t->index;
        r->count++;
        if (t->finish != LLMR_ENGINE_FINISH_NONE) {
            r->finish = t->finish;
            r->status = t->status;
            r->done = true;
            pthread_cond_broadcast(&r->done_cond);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return 0;
}

/* A loaded model and the files it is mapped from. */
typedef struct loaded {
    llmr_model_desc_owner desc;
    llmr_engine_model *model;
} loaded;

static bool load(const char *dir, loaded *l)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_model_desc_open("tiny", dir, "safetensors", NULL, &l->desc, &err);
    if (st != LLMR_OK) {
        fprintf(stderr, "    opening %s: %s\n", dir, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return false;
    }
    llmr_strbuf_free(&err);
    llmr_engine_load_params p = llmr_engine_load_default_params();
    p.context_length = 64;
    p.threads = 2;
    st = api->load(&l->desc.desc, &p, &l->model);
    if (st != LLMR_OK) {
        fprintf(stderr, "    load: %s\n", api->last_error(NULL));
        llmr_model_desc_close(&l->desc);
        return false;
    }
    return true;
}

static void unload(loaded *l)
{
    api->unload(l->model);
    llmr_model_desc_close(&l->desc);
}

static const int32_t prompt[] = {5, 17, 300};

/* A greedy request of max_tokens with the given stop ids, run to its last event. */
static void generate(const loaded *l, uint32_t max_tokens, const int32_t *stop_ids,
                     uint32_t stop_count, run *r)
{
    static uint64_t next_id = 1;
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->done_cond, NULL);
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.request_id = next_id++;
    p.prompt = prompt;
    p.prompt_len = sizeof prompt / sizeof prompt[0];
    p.max_tokens = max_tokens;
    p.temperature = 0.0f;
    p.stop_ids = stop_ids;
    p.stop_id_count = stop_count;
    llmr_status st = api->submit(l->model, &p, on_token, r);
    if (st != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "submit: %s", api->last_error(l->model));
        r->finish = LLMR_ENGINE_FINISH_ERROR;
        return;
    }
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->done_cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* nothing may follow the last event */
    CHECK_EQ_INT(r->late, 0);
    for (uint32_t i = 0; i < r->count; i++)
        CHECK_EQ_INT(r->index[i], i);
}

/* A copy of model dir `base` (links to its files) with generation_config.json `gen`. */
static const char *copy_with_generation_config(const char *base, const char *gen)
{
    const char *dir = fx_tmpdir();
    DIR *d = opendir(base);
    CHECK(d != NULL);
    for (struct dirent *ent; d && (ent = readdir(d));) {
        if (ent->d_name[0] == '.' || strcmp(ent->d_name, "generation_config.json") == 0)
            continue;
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/%s", base, ent->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, ent->d_name);
        CHECK(symlink(from, to) == 0);
    }
    if (d)
        closedir(d);
    fx_write_text(dir, "generation_config.json", gen);
    return dir;
}

static const char *base_model;
#define LEARNED 8
static int32_t greedy[LEARNED]; /* the tokens greedy decoding picks after `prompt` */

TEST(max_tokens_ends_a_request_with_length)
{
    loaded l;
    CHECK(load(base_model, &l));
    if (!l.model)
        return;
    run r;
    generate(&l, LEARNED, NULL, 0, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(r.count, LEARNED);
    for (uint32_t i = 0; i < r.count && i < LEARNED; i++) {
        greedy[i] = r.ids[i];
        CHECK(greedy[i] >= 0);
    }
    /* the same again, and a shorter limit gives the same first tokens */
    generate(&l, 3, NULL, 0, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(r.count, 3);
    for (uint32_t i = 0; i < r.count; i++)
        CHECK_EQ_INT(r.ids[i], greedy[i]);
    unload(&l);
}

TEST(a_requests_stop_ids_end_it_with_stop)
{
    loaded l;
    CHECK(load(base_model, &l));
    if (!l.model)
        return;
    run r;
    /* the first token: one event, that token, STOP (before LENGTH, with max_tokens 1 too) */
    int32_t first = greedy[0], other = 3;
    generate(&l, LEARNED, (const int32_t[]){other, first}, 2, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK_EQ_INT(r.count, 1);
    CHECK_EQ_INT(r.ids[0], first);
    generate(&l, 1, &first, 1, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK_EQ_INT(r.count, 1);
    /* a later token: generation goes on to its first appearance and stops there */
    uint32_t at = 0;
    for (uint32_t i = 1; i < LEARNED && !at; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i; j++)
            seen |= greedy[j] == greedy[i];
        if (!seen)
            at = i;
    }
    if (at) {
        generate(&l, LEARNED, &greedy[at], 1, &r);
        CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_STOP);
        CHECK_EQ_INT(r.count, at + 1);
        for (uint32_t i = 0; i < r.count; i++)
            CHECK_EQ_INT(r.ids[i], greedy[i]);
    } else {
        fprintf(stderr, "    greedy decoding repeats one token; no later stop id to try\n");
    }
    /* stop ids of other requests do not stay with the model */
    generate(&l, 3, NULL, 0, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(r.count, 3);
    unload(&l);
}

/* generation_config.json making the greedy first token an EOS id, as `gen` formats it. */
static void check_eos_of_generation_config(const char *fmt)
{
    char gen[256];
    snprintf(gen, sizeof gen, fmt, greedy[0]);
    loaded l;
    CHECK(load(copy_with_generation_config(base_model, gen), &l));
    if (!l.model)
        return;
    run r;
    generate(&l, LEARNED, NULL, 0, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK_EQ_INT(r.count, 1);
    CHECK_EQ_INT(r.ids[0], greedy[0]);
    /* and the stop set of this model, as the host describes it, keeps the turn ends */
    gpt_config c;
    char err[512] = "";
    CHECK_EQ_INT(gpt_config_read(&c, &l.desc.desc, err), LLMR_OK);
    bool has = false, ret = false, call = false;
    for (uint32_t j = 0; j < c.n_eos; j++) {
        has |= c.eos[j] == greedy[0];
        ret |= c.eos[j] == RETURN_ID;
        call |= c.eos[j] == CALL_ID;
    }
    CHECK(has && ret && call);
    unload(&l);
}

TEST(eos_ids_of_generation_config_end_a_request_with_stop)
{
    CHECK(greedy[0] != RETURN_ID && greedy[0] != CALL_ID && greedy[0] != 199999);
    check_eos_of_generation_config("{\"eos_token_id\": %d}");
    check_eos_of_generation_config("{\"eos_token_id\": [3, %d]}");
    /* the model as synthesized (EOS ids 200002, 199999, 200012): the same tokens, to
     * the limit */
    loaded l;
    CHECK(load(base_model, &l));
    if (!l.model)
        return;
    run r;
    generate(&l, LEARNED, NULL, 0, &r);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(r.count, LEARNED);
    unload(&l);
}

int main(void)
{
    RUN(eos_ids_come_from_generation_config_as_a_number_or_a_list);
    RUN(return_and_call_always_end_a_turn);

    CHECK_EQ_INT(llmr_engine_negotiate(&host_api, &api), LLMR_OK);
    const char *tok = fx_tmpdir();
    fx_write_text(tok, "tokenizer.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}");
    const char *dir = fx_path(fx_tmpdir(), "tiny");
    static char model_dir[4096];
    snprintf(model_dir, sizeof model_dir, "%s", dir);
    llmr_synth_options o = {.preset = "gpt-oss-tiny", .out_dir = model_dir, .tokenizer_from = tok,
                            .fill = LLMR_SYNTH_FILL_RANDOM, .seed = 1};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_synth_snapshot(&o, &err) != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "synth: %s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return llmr_test_finish();
    }
    llmr_strbuf_free(&err);
    base_model = model_dir;
    RUN(max_tokens_ends_a_request_with_length);
    RUN(a_requests_stop_ids_end_it_with_stop);
    RUN(eos_ids_of_generation_config_end_a_request_with_stop);
    return llmr_test_finish();
}
