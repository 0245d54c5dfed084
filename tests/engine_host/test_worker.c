/* The engine worker on its own: a real `llmr engine-worker` process with the
 * loopback plugin and a loopback model, driven through worker_client.h.  Checks the
 * wire end to end: the tokens are the model's table, the text is the tokenizer's
 * decoding, stop ids and stop strings end requests, cancel works, each request's
 * buffer is released when it ends, and a garbled request is refused. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "engine_host/worker_client.h"
#include "fixture.h"
#include "models/loopback_model.h"
#include "tokenizer/tokenizer.h"

#define MAX_EVENTS 4096

typedef struct collected {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int count;
    int32_t ids[MAX_EVENTS];
    char text[65536];
    size_t text_len;
    uint32_t finish;
    int32_t status;
    char message[512];
    uint32_t completion_tokens;
    bool done;
    llmr_wire_pong pong;
    bool have_pong;
    bool exited;
    int wait_status;
} collected;

static collected got = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static void on_event(void *ctx, llmr_worker *w, uint64_t id, const llmr_wire_event *ev)
{
    (void)ctx;
    (void)w;
    (void)id;
    pthread_mutex_lock(&got.lock);
    if (ev->id >= 0 && got.count < MAX_EVENTS)
        got.ids[got.count++] = ev->id;
    if (got.text_len + ev->text_len < sizeof got.text) {
        memcpy(got.text + got.text_len, ev->text, ev->text_len);
        got.text_len += ev->text_len;
    }
    if (ev->finish) {
        got.finish = ev->finish;
        got.status = ev->status;
        snprintf(got.message, sizeof got.message, "%.*s", (int)ev->message_len,
                 ev->message ? ev->message : "");
        got.completion_tokens = ev->completion_tokens;
        got.done = true;
        pthread_cond_broadcast(&got.changed);
    }
    pthread_mutex_unlock(&got.lock);
}

static void on_pong(void *ctx, llmr_worker *w, const llmr_wire_pong *p)
{
    (void)ctx;
    (void)w;
    pthread_mutex_lock(&got.lock);
    got.pong = *p;
    got.have_pong = true;
    pthread_cond_broadcast(&got.changed);
    pthread_mutex_unlock(&got.lock);
}

static void on_exit_cb(void *ctx, llmr_worker *w, int status)
{
    (void)ctx;
    (void)w;
    pthread_mutex_lock(&got.lock);
    got.exited = true;
    got.wait_status = status;
    pthread_cond_broadcast(&got.changed);
    pthread_mutex_unlock(&got.lock);
}

static void reset(void)
{
    pthread_mutex_lock(&got.lock);
    got.count = 0;
    got.text_len = 0;
    got.finish = 0;
    got.status = 0;
    got.message[0] = 0;
    got.done = false;
    got.have_pong = false;
    pthread_mutex_unlock(&got.lock);
}

/* Waits for `flag` (a field of got) up to 10 s. */
#define WAIT_FOR(flag)                                                    \
    do {                                                                  \
        uint64_t until_ = llmr_now_ms() + 10000;                          \
        pthread_mutex_lock(&got.lock);                                    \
        while (!got.flag && llmr_now_ms() < until_) {                     \
            pthread_mutex_unlock(&got.lock);                              \
            llmr_sleep_ms(2);                                             \
            pthread_mutex_lock(&got.lock);                                \
        }                                                                 \
        pthread_mutex_unlock(&got.lock);                                  \
        CHECK(got.flag);                                                  \
    } while (0)

static const llmr_worker_callbacks callbacks = {NULL, on_event, on_pong, on_exit_cb};

static llmr_loopback_model_options model_options;
static char *model_dir;
static const char *plugin_lib;

static llmr_status submit(llmr_worker *w, uint64_t id, const int32_t *prompt, uint32_t n,
                          uint32_t max_tokens, const char *stop, const int32_t *stop_ids,
                          uint32_t n_stop_ids)
{
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.prompt = prompt;
    p.prompt_len = n;
    p.max_tokens = max_tokens;
    p.temperature = 0;
    p.stop_ids = stop_ids;
    p.stop_id_count = n_stop_ids;
    size_t stop_len = stop ? strlen(stop) : 0;
    llmr_strbuf payload = LLMR_STRBUF_INIT;
    CHECK(llmr_wire_submit_encode(&p, stop ? &stop : NULL, &stop_len, stop ? 1 : 0, false,
                                  &payload));
    llmr_status st = llmr_worker_send(w, LLMR_WIRE_SUBMIT, id, payload.data, payload.len);
    llmr_strbuf_free(&payload);
    return st;
}

static llmr_worker *start_loaded_worker(const char *options_json)
{
    llmr_worker *w = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_worker_start(LLMR_BINARY, "loop", &callbacks, NULL, &w, &err), LLMR_OK);
    if (!w)
        return NULL;
    json_t *open = json_pack("{s:s, s:s, s:s, s:s}", "plugin", plugin_lib, "model_dir",
                             model_dir, "model_name", "loop", "format", "safetensors");
    json_t *reply = NULL;
    CHECK_EQ_INT(llmr_worker_call(w, LLMR_WIRE_OPEN, open, 10000, &reply, &err), LLMR_OK);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(reply, "engine"), "name")),
                 "loopback");
    CHECK(json_is_true(json_object_get(reply, "tokenizer")));
    json_decref(reply);
    json_decref(open);
    json_t *params = json_pack("{s:i, s:o}", "context_length", 256, "options",
                               json_loads(options_json, 0, NULL));
    CHECK_EQ_INT(llmr_worker_call(w, LLMR_WIRE_ESTIMATE, params, 10000, &reply, &err), LLMR_OK);
    CHECK(json_integer_value(json_object_get(reply, "ram_bytes")) > 0);
    json_decref(reply);
    CHECK_EQ_INT(llmr_worker_call(w, LLMR_WIRE_LOAD, params, 10000, &reply, &err), LLMR_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(reply, "context_length")), 256);
    CHECK_EQ_INT(json_integer_value(json_object_get(reply, "vocab_size")), 512);
    json_decref(reply);
    json_decref(params);
    if (err.len)
        fprintf(stderr, "worker: %s\n", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return w;
}

static void stop_worker(llmr_worker *w)
{
    llmr_worker_send(w, LLMR_WIRE_EXIT, 0, NULL, 0);
    WAIT_FOR(exited);
    CHECK(WIFEXITED(got.wait_status) && WEXITSTATUS(got.wait_status) == 0);
    llmr_worker_free(w, 5000);
    got.exited = false;
}

/* The text the model's tokenizer gives for ids. */
static char *decode(const int32_t *ids, int n)
{
    char *path = llmr_path_join(model_dir, "tokenizer.json");
    llmr_tokenizer *tok = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_tokenizer_load_file(path, &tok, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_tokenizer_decode(tok, (const uint32_t *)ids, (size_t)n, 0, &out, NULL, &err),
                 LLMR_OK);
    llmr_tokenizer_free(tok);
    llmr_strbuf_free(&err);
    free(path);
    return llmr_strbuf_take(&out);
}

TEST(tokens_follow_the_table_and_text_is_decoded)
{
    llmr_worker *w = start_loaded_worker("{}");
    if (!w)
        return;
    reset();
    int32_t prompt[3] = {5, 6, 7};
    CHECK_EQ_INT(submit(w, 1, prompt, 3, 40, NULL, NULL, 0), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(got.count, 40);
    CHECK_EQ_INT(got.completion_tokens, 40);
    int32_t prev = 7;
    for (int i = 0; i < got.count; i++) {
        CHECK_EQ_INT(got.ids[i], llmr_loopback_model_next(&model_options, prev));
        prev = got.ids[i];
    }
    char *expect = decode(got.ids, got.count);
    CHECK_EQ_INT(got.text_len, strlen(expect));
    CHECK(memcmp(got.text, expect, got.text_len) == 0);
    free(expect);
    stop_worker(w);
}

TEST(stop_ids_and_stop_strings_end_a_request)
{
    llmr_worker *w = start_loaded_worker("{}");
    if (!w)
        return;
    int32_t prompt[1] = {9};
    /* the 5th token as a stop id */
    int32_t seq[8], prev = 9;
    for (int i = 0; i < 8; i++)
        prev = seq[i] = llmr_loopback_model_next(&model_options, prev);
    reset();
    CHECK_EQ_INT(submit(w, 2, prompt, 1, 100, NULL, &seq[4], 1), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK_EQ_INT(got.count, 5);
    /* a stop string made of the text of tokens 3 and 4: the text ends before it */
    char *before = decode(seq, 3);
    char *through = decode(seq, 5);
    char stop[64];
    snprintf(stop, sizeof stop, "%s", through + strlen(before));
    reset();
    CHECK_EQ_INT(submit(w, 3, prompt, 1, 100, stop, NULL, 0), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK_EQ_INT(got.text_len, strlen(before));
    CHECK(memcmp(got.text, before, strlen(before)) == 0);
    free(before);
    free(through);
    stop_worker(w);
}

TEST(cancel_ends_a_request_and_its_buffer_is_released)
{
    llmr_worker *w = start_loaded_worker("{\"token_delay_us\": 2000, \"kv_bytes_per_token\": 4096}");
    if (!w)
        return;
    reset();
    llmr_worker_send(w, LLMR_WIRE_PING, 0, NULL, 0);
    WAIT_FOR(have_pong);
    uint64_t idle_alloc = got.pong.host_alloc_bytes;
    uint64_t idle_ram = got.pong.ram_bytes;
    CHECK_EQ_INT(got.pong.in_flight, 0);
    int32_t prompt[2] = {1, 2};
    CHECK_EQ_INT(submit(w, 4, prompt, 2, 200, NULL, NULL, 0), LLMR_OK);
    llmr_sleep_ms(30);
    reset();
    llmr_worker_send(w, LLMR_WIRE_PING, 0, NULL, 0);
    WAIT_FOR(have_pong);
    CHECK_EQ_INT(got.pong.in_flight, 1);
    CHECK_EQ_INT(got.pong.host_alloc_bytes - idle_alloc, 202 * 4096);
    CHECK(got.pong.ram_bytes > idle_ram);
    CHECK_EQ_INT(llmr_worker_send(w, LLMR_WIRE_CANCEL, 4, NULL, 0), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_CANCELLED);
    CHECK(got.count < 200);
    /* The last event is sent from inside the engine's callback; the engine frees the
     * request's buffer once that callback returns, so the release is seen a moment
     * later: ask again until it shows (or 5 s pass). */
    uint64_t until = llmr_now_ms() + 5000;
    do {
        reset();
        llmr_worker_send(w, LLMR_WIRE_PING, 0, NULL, 0);
        WAIT_FOR(have_pong);
        if (got.pong.in_flight == 0 && got.pong.host_alloc_bytes == idle_alloc)
            break;
        llmr_sleep_ms(5);
    } while (llmr_now_ms() < until);
    CHECK_EQ_INT(got.pong.in_flight, 0);
    CHECK_EQ_INT(got.pong.host_alloc_bytes, idle_alloc);
    CHECK_EQ_INT(got.pong.ram_bytes, idle_ram);
    stop_worker(w);
}

TEST(bad_requests_get_an_error_event)
{
    llmr_worker *w = start_loaded_worker("{}");
    if (!w)
        return;
    reset();
    uint8_t junk[7] = {1, 2, 3, 4, 5, 6, 7};
    CHECK_EQ_INT(llmr_worker_send(w, LLMR_WIRE_SUBMIT, 5, junk, sizeof junk), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_ERROR);
    CHECK_EQ_INT(got.status, LLMR_INTERNAL);
    CHECK_CONTAINS(got.message, "does not add up");
    /* a prompt longer than the context: the engine refuses it */
    reset();
    int32_t *long_prompt = calloc(300, sizeof *long_prompt);
    CHECK_EQ_INT(submit(w, 6, long_prompt, 300, 1, NULL, NULL, 0), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.finish, LLMR_ENGINE_FINISH_ERROR);
    CHECK_EQ_INT(got.status, LLMR_UNSUPPORTED);
    CHECK_CONTAINS(got.message, "the context holds 256");
    free(long_prompt);
    /* the worker still serves */
    reset();
    int32_t prompt[1] = {3};
    CHECK_EQ_INT(submit(w, 7, prompt, 1, 3, NULL, NULL, 0), LLMR_OK);
    WAIT_FOR(done);
    CHECK_EQ_INT(got.count, 3);
    stop_worker(w);
}

TEST(open_failures_are_reported)
{
    llmr_worker *w = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_worker_start(LLMR_BINARY, "x", &callbacks, NULL, &w, &err), LLMR_OK);
    if (!w)
        return;
    json_t *open = json_pack("{s:s, s:s, s:s, s:s}", "plugin", "/nonexistent/libnothing.so",
                             "model_dir", model_dir, "model_name", "x", "format", "safetensors");
    CHECK_EQ_INT(llmr_worker_call(w, LLMR_WIRE_OPEN, open, 10000, NULL, &err), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "cannot open the plugin library");
    json_decref(open);
    stop_worker(w);
    llmr_strbuf_free(&err);
}

int main(void)
{
    const char *tmp = fx_tmpdir();
    model_dir = llmr_path_join(tmp, "loop");
    llmr_loopback_model_options_default(&model_options);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_loopback_model_write(model_dir, &model_options, &err) != LLMR_OK) {
        fprintf(stderr, "cannot write the model: %s\n", llmr_strbuf_cstr(&err));
        return 1;
    }
    llmr_strbuf_free(&err);
    plugin_lib = LLMR_PLUGIN_DIR "/loopback/libllmr_engine_loopback.so";
    RUN(tokens_follow_the_table_and_text_is_decoded);
    RUN(stop_ids_and_stop_strings_end_a_request);
    RUN(cancel_ends_a_request_and_its_buffer_is_released);
    RUN(bad_requests_get_an_error_event);
    RUN(open_failures_are_reported);
    free(model_dir);
    return llmr_test_finish();
}
