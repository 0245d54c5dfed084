/* The EngineHost with real worker processes and real plugins: the loopback engine and
 * its variants (tests/engines/CMakeLists.txt).  Memory readings come from a fake
 * reader the tests set, so memory limits are tested without filling the machine.
 *
 *   plugin variants     each accepted or refused with the right code
 *   generation          tokens, per-request buffers released, cancel, bad requests
 *   crash on load       LOAD_FAILED naming the signal; the node goes on
 *   watchdog            a hung request ends TIMEOUT, its worker is killed, the next
 *                       request succeeds
 *   crash and hang      restart with backoff; health checks catch a frozen worker
 *   leak                a worker holding memory while idle is replaced
 *   memory              LRU unloading above the threshold, refusal of a load that
 *                       does not fit (RAM, VRAM, per-plugin budget), room made by
 *                       unloading idle models
 *   hot reload          a new plugin version under continuous load: no request fails
 *   echo mode           the answer is the prompt's last user message, then the return
 *                       id unless it ends in a turn end */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "engine_host/engine_host.h"
#include "fixture.h"
#include "models/loopback_model.h"

/* ---- fake memory readings ------------------------------------------------------ */

static struct {
    pthread_mutex_t lock;
    uint64_t ram_total, ram_used;
    bool gpu;
    uint64_t gpu_total, gpu_used;
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fake_set(uint64_t ram_used, uint64_t gpu_used)
{
    pthread_mutex_lock(&fake.lock);
    fake.ram_used = ram_used;
    fake.gpu_used = gpu_used;
    pthread_mutex_unlock(&fake.lock);
}

static llmr_status fake_read(void *ctx, llmr_resource_snapshot *out, llmr_strbuf *err)
{
    (void)ctx;
    (void)err;
    pthread_mutex_lock(&fake.lock);
    out->have_ram = true;
    out->ram.total_bytes = fake.ram_total;
    out->ram.used_bytes = fake.ram_used;
    out->ram.available_bytes = fake.ram_total - fake.ram_used;
    if (fake.gpu) {
        out->have_gpus = true;
        out->gpu_count = 1;
        snprintf(out->gpus[0].name, sizeof out->gpus[0].name, "Test GPU");
        out->gpus[0].total_bytes = fake.gpu_total;
        out->gpus[0].used_bytes = fake.gpu_used;
        out->gpus[0].free_bytes = fake.gpu_total - fake.gpu_used;
        out->gpus[0].cc_major = 9;
        out->gpus[0].cc_minor = 0;
    } else {
        snprintf(out->gpu_note, sizeof out->gpu_note, "no GPU in this test");
    }
    pthread_mutex_unlock(&fake.lock);
    return LLMR_OK;
}

#define GB 1000000000ull

/* ---- hosts and models -------------------------------------------------------------- */

static const char *tmp;

/* A host over plugin directories, with fake readings and short backoffs.  problems
 * (may be NULL) receives the refused plugins. */
static llmr_engine_host *host_on(const char *const *dirs, size_t n,
                                 void (*tweak)(llmr_engine_host_options *), llmr_problems *problems)
{
    llmr_engine_host_options o;
    llmr_engine_host_options_default(&o);
    o.plugin_dirs = dirs;
    o.plugin_dir_count = n;
    o.worker_exe = LLMR_BINARY;
    o.reader = (llmr_resource_reader){NULL, fake_read};
    o.monitor_no_thread = true;
    o.monitor_interval_ms = 1;
    o.restart_backoff_ms = 100;
    o.health_interval_ms = 100;
    if (tweak)
        tweak(&o);
    llmr_engine_host *h = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_create(&o, &h, problems, &err), LLMR_OK);
    if (err.len)
        fprintf(stderr, "host: %s\n", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return h;
}

/* A host over test plugin variants (directories under LLMR_TEST_PLUGIN_DIR). */
static llmr_engine_host *host_with(const char *const *variants, size_t n,
                                   void (*tweak)(llmr_engine_host_options *))
{
    char *dirs[16];
    for (size_t i = 0; i < n; i++)
        dirs[i] = llmr_path_join(LLMR_TEST_PLUGIN_DIR, variants[i]);
    llmr_engine_host *h = host_on((const char *const *)dirs, n, tweak, NULL);
    for (size_t i = 0; i < n; i++)
        free(dirs[i]);
    return h;
}

static int model_counter;

/* Writes a loopback model and adds it under `name` with engine options. */
static void add_model(llmr_engine_host *h, const char *name, const char *options)
{
    char sub[32];
    snprintf(sub, sizeof sub, "model%d", model_counter++);
    char *dir = llmr_path_join(tmp, sub);
    llmr_loopback_model_options mo;
    llmr_loopback_model_options_default(&mo);
    mo.context_length = 256;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_loopback_model_write(dir, &mo, &err), LLMR_OK);
    llmr_model_spec spec = {name, dir, "safetensors", NULL, 0, options};
    CHECK_EQ_INT(llmr_engine_host_add_model(h, &spec, &err), LLMR_OK);
    if (err.len)
        fprintf(stderr, "add_model: %s\n", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(dir);
}

/* The status of one model (a new reference). */
static json_t *model_status(llmr_engine_host *h, const char *name)
{
    json_t *s = llmr_engine_host_status(h);
    json_t *found = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(s, "models"), i, m)
        if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
            found = json_incref(m);
    json_decref(s);
    return found;
}

static const char *state_of(llmr_engine_host *h, const char *name, char *buf, size_t n)
{
    json_t *m = model_status(h, name);
    snprintf(buf, n, "%s", m ? json_string_value(json_object_get(m, "state")) : "?");
    json_decref(m);
    return buf;
}

static int worker_pid(llmr_engine_host *h, const char *name)
{
    json_t *m = model_status(h, name);
    int pid = (int)json_integer_value(json_object_get(json_object_get(m, "worker"), "pid"));
    json_decref(m);
    return pid;
}

/* Waits up to ms for the model to reach `state`. */
static bool wait_state(llmr_engine_host *h, const char *name, const char *state, unsigned ms)
{
    char buf[32];
    uint64_t until = llmr_now_ms() + ms;
    while (strcmp(state_of(h, name, buf, sizeof buf), state) != 0) {
        if (llmr_now_ms() > until)
            return false;
        llmr_sleep_ms(5);
    }
    return true;
}

/* ---- requests ------------------------------------------------------------------- */

typedef struct run {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int tokens;
    int32_t ids[512];
    uint32_t finish;
    llmr_status status;
    char message[512];
    bool done;
} run;

static void run_init(run *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
}

static void run_free(run *r)
{
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->changed);
}

static void on_event(void *user, const llmr_gen_event *ev)
{
    run *r = user;
    pthread_mutex_lock(&r->lock);
    CHECK(!r->done); /* nothing after the final event */
    if (ev->id >= 0 && r->tokens < 512)
        r->ids[r->tokens++] = ev->id;
    if (ev->finish) {
        r->finish = ev->finish;
        r->status = ev->status;
        snprintf(r->message, sizeof r->message, "%s", ev->message ? ev->message : "");
        r->done = true;
        pthread_cond_broadcast(&r->changed);
    }
    pthread_mutex_unlock(&r->lock);
}

static bool run_wait(run *r, unsigned ms)
{
    uint64_t until = llmr_now_ms() + ms;
    pthread_mutex_lock(&r->lock);
    while (!r->done && llmr_now_ms() < until) {
        pthread_mutex_unlock(&r->lock);
        llmr_sleep_ms(2);
        pthread_mutex_lock(&r->lock);
    }
    bool done = r->done;
    pthread_mutex_unlock(&r->lock);
    return done;
}

static const int32_t prompt[2] = {3, 4};

static llmr_status submit(llmr_engine_host *h, const char *model, uint32_t max_tokens, run *r,
                          uint64_t *id, llmr_strbuf *err)
{
    llmr_gen_request req;
    memset(&req, 0, sizeof req);
    req.model = model;
    req.params = llmr_engine_request_default_params();
    req.params.prompt = prompt;
    req.params.prompt_len = 2;
    req.params.max_tokens = max_tokens;
    req.params.temperature = 0;
    return llmr_engine_host_submit(h, &req, on_event, r, id, err);
}

/* Submits and waits; returns the final status. */
static llmr_status generate(llmr_engine_host *h, const char *model, uint32_t max_tokens, run *r)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = submit(h, model, max_tokens, r, NULL, &err);
    if (st != LLMR_OK) {
        snprintf(r->message, sizeof r->message, "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st;
    }
    llmr_strbuf_free(&err);
    CHECK(run_wait(r, 20000));
    return r->status;
}

/* Submits ids as the prompt and waits; returns the final status. */
static llmr_status generate_from(llmr_engine_host *h, const char *model, const int32_t *ids,
                                 uint32_t n, uint32_t max_tokens, run *r)
{
    llmr_gen_request req;
    memset(&req, 0, sizeof req);
    req.model = model;
    req.params = llmr_engine_request_default_params();
    req.params.prompt = ids;
    req.params.prompt_len = n;
    req.params.max_tokens = max_tokens;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_engine_host_submit(h, &req, on_event, r, NULL, &err);
    llmr_strbuf_free(&err);
    if (st != LLMR_OK)
        return st;
    CHECK(run_wait(r, 20000));
    return r->status;
}

/* ---- tests ------------------------------------------------------------------------ */

static const char *refused_status(json_t *status, const char *needle, char *message, size_t n)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(status, "refused_plugins"), i, p)
    {
        if (strstr(json_string_value(json_object_get(p, "manifest")), needle)) {
            snprintf(message, n, "%s", json_string_value(json_object_get(p, "message")));
            return json_string_value(json_object_get(p, "status"));
        }
    }
    return NULL;
}

static bool accepted(json_t *status, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(status, "plugins"), i, p)
        if (strcmp(json_string_value(json_object_get(p, "id")), id) == 0)
            return json_is_object(json_object_get(p, "engine"));
    return false;
}

/* A plugin directory holding a copy of the good plugin under a manifest `text`. */
static const char *bad_manifest_dir(const char *name, const char *text)
{
    char *root = llmr_path_join(tmp, "bad-plugins");
    char *dir = llmr_path_join(root, name);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_mkdir_p(dir, &err);
    fx_write_text(dir, "manifest.json", text);
    char *lib_src = llmr_path_join(LLMR_TEST_PLUGIN_DIR, "good/loopback/libllmr_engine_test_plugin_good.so");
    char *data = NULL;
    size_t len = 0;
    CHECK_EQ_INT(llmr_read_file(lib_src, 64u << 20, &data, &len, &err), LLMR_OK);
    fx_write(dir, "libgood.so", data, len);
    free(data);
    free(lib_src);
    free(dir);
    llmr_strbuf_free(&err);
    static char out[512];
    snprintf(out, sizeof out, "%s", root);
    free(root);
    return out;
}

TEST(plugin_variants_are_accepted_or_refused_with_the_right_code)
{
    static const char *const base =
        "{\"id\": \"%s\", \"version\": \"1.0.0\", \"abi_version\": \"%s\", \"runtimes\": "
        "[\"loopback\"], \"formats\": [\"safetensors\"], \"architectures\": [\"*\"], "
        "\"gpu_targets\": [\"%s\"], \"library\": \"%s\"}";
    char text[512];
    snprintf(text, sizeof text, base, "bad-abi", "2.0", "cpu", "libgood.so");
    bad_manifest_dir("bad-abi", text);
    snprintf(text, sizeof text, base, "bad-target", "1.0", "sm_9x", "libgood.so");
    bad_manifest_dir("bad-target", text);
    snprintf(text, sizeof text, base, "bad-library", "1.0", "cpu", "../libgood.so");
    bad_manifest_dir("bad-library", text);
    snprintf(text, sizeof text, base, "missing-library", "1.0", "cpu", "libabsent.so");
    const char *bad_root = bad_manifest_dir("missing-library", text);
    /* bad_root is a plugin directory of its own; the variants are the others */
    static const char *const variants[] = {"good",    "wrong_major",   "newer_minor",
                                           "null_optional", "crash_on_load", "hang",
                                           "leak",    "no_symbol"};
    char *dirs[9];
    for (size_t i = 0; i < 8; i++)
        dirs[i] = llmr_path_join(LLMR_TEST_PLUGIN_DIR, variants[i]);
    dirs[8] = strdup(bad_root);
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_engine_host *h = host_on((const char *const *)dirs, 9, NULL, &problems);
    for (size_t i = 0; i < 9; i++)
        free(dirs[i]);
    if (!h) {
        llmr_problems_free(&problems);
        return;
    }
    json_t *s = llmr_engine_host_status(h);
    CHECK(accepted(s, "loopback"));
    CHECK(accepted(s, "loopback-newer-minor"));
    CHECK(accepted(s, "loopback-null-optional"));
    CHECK(accepted(s, "loopback-crash-on-load")); /* it crashes at load, not at probe */
    CHECK(accepted(s, "loopback-hang"));
    CHECK(accepted(s, "loopback-leak"));
    char msg[512] = "";
    CHECK_EQ_STR(refused_status(s, "wrong_major", msg, sizeof msg), "ABI_MISMATCH");
    char wrong[64];
    snprintf(wrong, sizeof wrong, "built for engine ABI %d.%d", LLMR_ENGINE_ABI_MAJOR + 1, LLMR_ENGINE_ABI_MINOR);
    CHECK_CONTAINS(msg, wrong);
    CHECK_EQ_STR(refused_status(s, "no_symbol", msg, sizeof msg), "LOAD_FAILED");
    CHECK_CONTAINS(msg, "does not export llmr_engine_negotiate");
    CHECK_EQ_STR(refused_status(s, "bad-abi", msg, sizeof msg), "ABI_MISMATCH");
    CHECK_EQ_STR(refused_status(s, "bad-target", msg, sizeof msg), "LOAD_FAILED");
    CHECK_CONTAINS(msg, "gpu_targets");
    CHECK_EQ_STR(refused_status(s, "bad-library", msg, sizeof msg), "LOAD_FAILED");
    CHECK_CONTAINS(msg, "library");
    CHECK_EQ_STR(refused_status(s, "missing-library", msg, sizeof msg), "LOAD_FAILED");
    CHECK_CONTAINS(msg, "libabsent.so");
    CHECK(llmr_problems_total(&problems) >= 6);
    json_decref(s);
    llmr_problems_free(&problems);
    llmr_engine_host_free(h);
}

static void check_generation(const char *variant)
{
    const char *v[] = {variant};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "m", NULL);
    run r;
    run_init(&r);
    CHECK_EQ_INT(generate(h, "m", 12, &r), LLMR_OK);
    CHECK_EQ_INT(r.finish, LLMR_ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(r.tokens, 12);
    llmr_loopback_model_options mo;
    llmr_loopback_model_options_default(&mo);
    mo.context_length = 256;
    int32_t prev = prompt[1];
    for (int i = 0; i < r.tokens; i++) {
        CHECK_EQ_INT(r.ids[i], llmr_loopback_model_next(&mo, prev));
        prev = r.ids[i];
    }
    run_free(&r);
    char buf[32];
    CHECK_EQ_STR(state_of(h, "m", buf, sizeof buf), "ready");
    llmr_engine_host_free(h);
}

TEST(the_good_newer_minor_and_null_optional_plugins_generate)
{
    check_generation("good");
    check_generation("newer_minor");
    check_generation("null_optional");
}

TEST(requests_release_their_memory_and_can_be_cancelled)
{
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "m", "{\"token_delay_us\": 3000, \"kv_bytes_per_token\": 65536}");
    run r;
    run_init(&r);
    CHECK_EQ_INT(generate(h, "m", 4, &r), LLMR_OK);
    run_free(&r);
    llmr_sleep_ms(300); /* pongs: the idle baseline */
    json_t *m = model_status(h, "m");
    uint64_t idle = (uint64_t)json_integer_value(json_object_get(json_object_get(m, "worker"),
                                                                 "ram_bytes"));
    json_decref(m);
    /* several at once, one cancelled */
    run rs[4];
    uint64_t ids[4];
    llmr_strbuf err = LLMR_STRBUF_INIT;
    for (int i = 0; i < 4; i++) {
        run_init(&rs[i]);
        CHECK_EQ_INT(submit(h, "m", 60, &rs[i], &ids[i], &err), LLMR_OK);
    }
    llmr_sleep_ms(50);
    CHECK_EQ_INT(llmr_engine_host_cancel(h, ids[2]), LLMR_OK);
    for (int i = 0; i < 4; i++) {
        CHECK(run_wait(&rs[i], 10000));
        if (i == 2) {
            CHECK_EQ_INT(rs[i].status, LLMR_CANCELLED);
            CHECK(rs[i].tokens < 60);
        } else {
            CHECK_EQ_INT(rs[i].status, LLMR_OK);
            CHECK_EQ_INT(rs[i].tokens, 60);
        }
        run_free(&rs[i]);
    }
    CHECK_EQ_INT(llmr_engine_host_cancel(h, ids[2]), LLMR_NOT_FOUND);
    llmr_sleep_ms(300);
    m = model_status(h, "m");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(m, "worker"), "ram_bytes")),
                 idle);
    json_decref(m);
    /* bad requests are refused at once */
    run r2;
    run_init(&r2);
    CHECK_EQ_INT(submit(h, "nope", 1, &r2, NULL, &err), LLMR_NOT_FOUND);
    llmr_gen_request req;
    memset(&req, 0, sizeof req);
    req.model = "m";
    req.params = llmr_engine_request_default_params();
    CHECK_EQ_INT(llmr_engine_host_submit(h, &req, on_event, &r2, NULL, &err), LLMR_INVALID_ARGUMENT);
    req.params.prompt = prompt;
    req.params.prompt_len = 2;
    const char *stops[] = {""};
    size_t lens[] = {0};
    req.stop_strings = stops;
    req.stop_lens = lens;
    req.stop_count = 1;
    CHECK_EQ_INT(llmr_engine_host_submit(h, &req, on_event, &r2, NULL, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "stop string 0 is empty");
    run_free(&r2);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

TEST(a_plugin_that_crashes_on_load_fails_the_load_not_the_node)
{
    const char *v[] = {"crash_on_load"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "m", NULL);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_LOAD_FAILED);
    /* "killed by signal 11 (SIGSEGV)"; under a sanitizer, which catches the signal,
     * "exited with status 1" or "signal 6" */
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "the engine worker");
    CHECK(strstr(llmr_strbuf_cstr(&err), "signal") || strstr(llmr_strbuf_cstr(&err), "status"));
    /* within the backoff a request is refused at once, with the reason */
    run r;
    run_init(&r);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(submit(h, "m", 1, &r, NULL, &err), LLMR_LOAD_FAILED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "tries again");
    run_free(&r);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

TEST(a_failed_load_is_idle_again_once_its_backoff_is_over)
{
    const char *v[] = {"crash_on_load"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "m", NULL);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_LOAD_FAILED);
    /* the backoff is 100 ms here: after it, the model says the next request may load it
     * (a router routes to it again), and keeps the reason of the last failure */
    llmr_sleep_ms(400);
    json_t *m = model_status(h, "m");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "state")), "idle");
    CHECK_CONTAINS(json_string_value(json_object_get(m, "reason")), "tries again");
    CHECK(json_real_value(json_object_get(m, "retry_in_s")) == 0.0);
    json_decref(m);
    /* and the next request does try: it fails with the load's reason, not the backoff's */
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_LOAD_FAILED);
    m = model_status(h, "m"); /* a second failure: the backoff doubled */
    CHECK_EQ_STR(json_string_value(json_object_get(m, "state")), "failed");
    CHECK_CONTAINS(json_string_value(json_object_get(m, "reason")), "tries again after 0.2 s");
    json_decref(m);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

TEST(a_removed_model_is_gone_and_its_name_free)
{
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "m", NULL);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_OK);
    CHECK_EQ_INT(llmr_engine_host_remove_model(h, "m", &err), LLMR_OK);
    json_t *m = model_status(h, "m");
    CHECK(m == NULL);
    json_decref(m);
    run r;
    run_init(&r);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(submit(h, "m", 1, &r, NULL, &err), LLMR_NOT_FOUND);
    run_free(&r);
    CHECK_EQ_INT(llmr_engine_host_remove_model(h, "m", &err), LLMR_NOT_FOUND);
    /* the name can be added again (other files) and serves */
    add_model(h, "m", NULL);
    run r2;
    run_init(&r2);
    CHECK_EQ_INT(generate(h, "m", 2, &r2), LLMR_OK);
    run_free(&r2);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

static void short_watchdog(llmr_engine_host_options *o)
{
    o->request_timeout_ms = 400;
    o->cpu_request_timeout_ms = 400;
    o->cancel_grace_ms = 200;
}

/* A model on the CPU (the loopback engine runs there) gets cpu_request_timeout, not the
 * GPU's request_timeout: a slow prefill is not killed at the GPU's limit. */
static void cpu_allowance(llmr_engine_host_options *o)
{
    o->request_timeout_ms = 300;
    o->cpu_request_timeout_ms = 1500;
    o->cancel_grace_ms = 200;
}

TEST(the_watchdog_kills_a_stuck_request_and_the_next_one_succeeds)
{
    const char *v[] = {"hang"};
    llmr_engine_host *h = host_with(v, 1, short_watchdog);
    if (!h)
        return;
    add_model(h, "m", NULL);
    run r;
    run_init(&r);
    uint64_t t0 = llmr_now_ms();
    CHECK_EQ_INT(generate(h, "m", 50, &r), LLMR_TIMEOUT);
    uint64_t took = llmr_now_ms() - t0;
    CHECK(took >= 600 && took < 5000);
    CHECK_EQ_INT(r.tokens, 2);
    CHECK_CONTAINS(r.message, "made no progress");
    /* the message names the setting to raise and its value */
    CHECK_CONTAINS(r.message, "request_timeout = 0.4 s");
    CHECK_CONTAINS(r.message, "request-timeout or LLMR_");
    run_free(&r);
    /* the variant hangs at its third token: two tokens finish */
    run r2;
    run_init(&r2);
    CHECK_EQ_INT(generate(h, "m", 2, &r2), LLMR_OK);
    CHECK_EQ_INT(r2.tokens, 2);
    run_free(&r2);
    json_t *m = model_status(h, "m");
    CHECK_EQ_INT(json_integer_value(json_object_get(m, "restarts")), 1);
    json_decref(m);
    llmr_engine_host_free(h);
}

TEST(the_watchdog_gives_a_model_on_the_cpu_its_own_longer_limit)
{
    const char *v[] = {"hang"};
    llmr_engine_host *h = host_with(v, 1, cpu_allowance);
    if (!h)
        return;
    add_model(h, "m", NULL);
    run r;
    run_init(&r);
    uint64_t t0 = llmr_now_ms();
    CHECK_EQ_INT(generate(h, "m", 50, &r), LLMR_TIMEOUT);
    uint64_t took = llmr_now_ms() - t0;
    json_t *st = model_status(h, "m");
    CHECK(json_object_get(st, "gpu") != NULL);
    bool on_cpu = json_is_null(json_object_get(st, "gpu"));
    json_decref(st);
    if (on_cpu) {
        CHECK(took >= 1500 && took < 8000);
        CHECK_CONTAINS(r.message, "cpu_request_timeout = 1.5 s, the limit for a model on the CPU");
        CHECK_CONTAINS(r.message, "--cpu-request-timeout or LLMR_CPU_REQUEST_TIMEOUT");
    }
    run_free(&r);
    llmr_engine_host_free(h);
}

/* A request that waits its turn inside the engine while the worker streams tokens for
 * another is not stuck: the watchdog leaves it alone (issue: a continuous-batching
 * engine's queue), and a hung engine is still caught (the test above). */
TEST(the_watchdog_lets_a_request_wait_its_turn_inside_the_engine)
{
    const char *v[] = {"serial"};
    llmr_engine_host *h = host_with(v, 1, short_watchdog);
    if (!h)
        return;
    add_model(h, "m", "{\"token_delay_us\": 10000}"); /* 120 tokens: 1.2 s each request */
    run a, b;
    run_init(&a);
    run_init(&b);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(submit(h, "m", 120, &a, NULL, &err), LLMR_OK);
    CHECK_EQ_INT(submit(h, "m", 120, &b, NULL, &err), LLMR_OK);
    CHECK(run_wait(&a, 20000));
    CHECK(run_wait(&b, 20000));
    /* one of them waited 1.2 s for its first token, three times the watchdog's 400 ms */
    CHECK_EQ_INT(a.status, LLMR_OK);
    CHECK_EQ_INT(b.status, LLMR_OK);
    CHECK_EQ_INT(a.tokens, 120);
    CHECK_EQ_INT(b.tokens, 120);
    llmr_strbuf_free(&err);
    run_free(&a);
    run_free(&b);
    llmr_engine_host_free(h);
}

static void quick_health(llmr_engine_host_options *o)
{
    o->health_timeout_ms = 1500;
}

TEST(a_crashed_worker_restarts_after_its_backoff_and_a_frozen_one_is_killed)
{
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, quick_health);
    if (!h)
        return;
    add_model(h, "m", "{\"token_delay_us\": 2000}");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_OK);
    int pid = worker_pid(h, "m");
    run r;
    run_init(&r);
    CHECK_EQ_INT(submit(h, "m", 200, &r, NULL, &err), LLMR_OK);
    llmr_sleep_ms(30);
    kill(pid, SIGSEGV);
    CHECK(run_wait(&r, 5000));
    CHECK_EQ_INT(r.status, LLMR_INTERNAL);
    CHECK_CONTAINS(r.message, "the engine worker of model m");
    CHECK(strstr(r.message, "signal") || strstr(r.message, "status"));
    run_free(&r);
    CHECK(wait_state(h, "m", "ready", 5000)); /* restarted on its own */
    int pid2 = worker_pid(h, "m");
    CHECK(pid2 != pid && pid2 > 0);
    /* frozen: no pongs; the health check kills it and it comes back */
    kill(pid2, SIGSTOP);
    uint64_t until = llmr_now_ms() + 20000;
    while (worker_pid(h, "m") == pid2 && llmr_now_ms() < until)
        llmr_sleep_ms(20);
    CHECK(wait_state(h, "m", "ready", 20000));
    CHECK(worker_pid(h, "m") != pid2);
    run r2;
    run_init(&r2);
    CHECK_EQ_INT(generate(h, "m", 3, &r2), LLMR_OK);
    run_free(&r2);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

TEST(a_worker_that_keeps_memory_after_its_requests_is_replaced)
{
    const char *v[] = {"leak"};
    llmr_engine_host *h = host_with(v, 1, quick_health);
    if (!h)
        return;
    add_model(h, "m", "{\"kv_bytes_per_token\": 1048576}");
    run r;
    run_init(&r);
    CHECK_EQ_INT(generate(h, "m", 1, &r), LLMR_OK); /* the first idle pong is the baseline */
    run_free(&r);
    llmr_sleep_ms(300);
    int pid = worker_pid(h, "m");
    run r2;
    run_init(&r2);
    CHECK_EQ_INT(generate(h, "m", 2, &r2), LLMR_OK); /* leaks 4 MiB */
    run_free(&r2);
    uint64_t until = llmr_now_ms() + 10000;
    while (worker_pid(h, "m") == pid && llmr_now_ms() < until)
        llmr_sleep_ms(10);
    CHECK(worker_pid(h, "m") != pid);
    llmr_strbuf out = LLMR_STRBUF_INIT;
    llmr_engine_host_metrics(h, &out);
    CHECK_CONTAINS(llmr_strbuf_cstr(&out), "llmr_engine_leaks_total 1");
    llmr_strbuf_free(&out);
    run r3;
    run_init(&r3);
    CHECK_EQ_INT(generate(h, "m", 3, &r3), LLMR_OK);
    run_free(&r3);
    llmr_engine_host_free(h);
}

/* Each model's estimate: batch 8 x context 256 x bytes per token = 10.24 GB. */
#define TEN_GB_OPTIONS "{\"kv_bytes_per_token\": 5000000}"

TEST(above_the_threshold_idle_models_are_unloaded_least_recently_used_first)
{
    fake_set(50 * GB, 0);
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    const char *names[] = {"a", "b", "c"};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    for (int i = 0; i < 3; i++) {
        add_model(h, names[i], TEN_GB_OPTIONS);
        CHECK_EQ_INT(llmr_engine_host_load(h, names[i], &err), LLMR_OK);
        run r;
        run_init(&r);
        CHECK_EQ_INT(generate(h, names[i], 1, &r), LLMR_OK);
        run_free(&r);
        llmr_sleep_ms(20);
    }
    llmr_sleep_ms(50);
    /* 95% in use: one model's 10 GB brings it under 90% */
    fake_set(95 * GB, 0);
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(llmr_engine_host_monitor(h), &err), LLMR_OK);
    char buf[32];
    CHECK(wait_state(h, "a", "idle", 2000));
    CHECK_EQ_STR(state_of(h, "b", buf, sizeof buf), "ready");
    CHECK_EQ_STR(state_of(h, "c", buf, sizeof buf), "ready");
    /* an unloaded model loads again for its next request */
    fake_set(60 * GB, 0);
    run r;
    run_init(&r);
    CHECK_EQ_INT(generate(h, "a", 2, &r), LLMR_OK);
    run_free(&r);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
    fake_set(0, 0);
}

TEST(a_load_that_does_not_fit_is_refused_with_the_numbers)
{
    fake_set(85 * GB, 0);
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    add_model(h, "big", TEN_GB_OPTIONS);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_engine_host_load(h, "big", &err), LLMR_OOM_RAM);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "needs 10.24 GB of host memory");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "85.00 of 100.00 GB");
    /* with an idle model to unload, the load makes room and goes on */
    fake_set(70 * GB, 0);
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(llmr_engine_host_monitor(h), &err), LLMR_OK);
    add_model(h, "idle", TEN_GB_OPTIONS);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_load(h, "idle", &err), LLMR_OK);
    llmr_sleep_ms(20);
    fake_set(85 * GB, 0);
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(llmr_engine_host_monitor(h), &err), LLMR_OK);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_load(h, "big", &err), LLMR_OK);
    char buf[32];
    CHECK_EQ_STR(state_of(h, "idle", buf, sizeof buf), "idle");
    CHECK_EQ_STR(state_of(h, "big", buf, sizeof buf), "ready");
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
    fake_set(0, 0);
}

static void gpu_budget(llmr_engine_host_options *o)
{
    o->vram_budgets = "loopback-gpu=15GB";
}

TEST(gpu_memory_and_per_plugin_budgets_are_checked_before_loading)
{
    fake.gpu = true;
    fake_set(10 * GB, 65 * GB);
    const char *v[] = {"fake_gpu", "good"};
    llmr_engine_host *h = host_with(v, 2, gpu_budget);
    if (!h) {
        fake.gpu = false;
        return;
    }
    add_model(h, "g1", TEN_GB_OPTIONS);
    add_model(h, "g2", TEN_GB_OPTIONS);
    json_t *m = model_status(h, "g1");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "engine")), "loopback-gpu 1.0.0");
    CHECK_EQ_INT(json_integer_value(json_object_get(m, "gpu")), 0);
    json_decref(m);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    /* 65 + 10.24 of 80 GB is above 90% (72 GB) */
    CHECK_EQ_INT(llmr_engine_host_load(h, "g1", &err), LLMR_OOM_VRAM);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "GPU 0 (Test GPU)");
    fake_set(10 * GB, 20 * GB);
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(llmr_engine_host_monitor(h), &err), LLMR_OK);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_load(h, "g1", &err), LLMR_OK);
    /* the GPU has room, the plugin's 15 GB budget does not */
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_load(h, "g2", &err), LLMR_OOM_VRAM);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "budget of 15.00 GB");
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
    fake.gpu = false;
    fake_set(0, 0);
}

TEST(the_directml_skeleton_refuses_with_the_library_named)
{
    const char *dirs[] = {LLMR_PLUGIN_DIR};
    llmr_engine_host *h = host_on(dirs, 1, NULL, NULL);
    if (!h)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *dir = llmr_path_join(tmp, "dml");
    llmr_mkdir_p(dir, &err);
    fx_write_text(dir, "model.dml.bin", "not really a model");
    llmr_model_spec spec = {"dml", dir, "directml", NULL, 0,
                            "{\"library\": \"/nonexistent/DirectML.dll\"}"};
    CHECK_EQ_INT(llmr_engine_host_add_model(h, &spec, &err), LLMR_OK);
    json_t *m = model_status(h, "dml");
    CHECK_EQ_STR(json_string_value(json_object_get(m, "engine")), "directml 0.1.0");
    json_decref(m);
    CHECK_EQ_INT(llmr_engine_host_load(h, "dml", &err), LLMR_UNSUPPORTED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "/nonexistent/DirectML.dll");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "Windows");
    /* a directory without the DirectML file is refused, naming the files it wants */
    char *empty = llmr_path_join(tmp, "dml-empty");
    llmr_mkdir_p(empty, &err);
    llmr_model_spec spec2 = {"dml2", empty, "directml", NULL, 0, NULL};
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_engine_host_add_model(h, &spec2, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "model.directml.bin");
    free(empty);
    free(dir);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

/* ---- hot reload ---------------------------------------------------------------------- */

static void install_plugin(const char *root, const char *variant)
{
    char *src_dir = llmr_path_join(LLMR_TEST_PLUGIN_DIR, variant);
    char *src = llmr_path_join(src_dir, "loopback");
    char *dst = llmr_path_join(root, "loopback");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_mkdir_p(dst, &err);
    char lib[128];
    snprintf(lib, sizeof lib, "libllmr_engine_test_plugin_%s.so", variant);
    const char *files[] = {lib, "manifest.json"};
    /* the library first (a new name, renamed into place), then the manifest */
    for (int i = 0; i < 2; i++) {
        char *from = llmr_path_join(src, files[i]);
        char *to = llmr_path_join(dst, files[i]);
        char *data = NULL;
        size_t len = 0;
        CHECK_EQ_INT(llmr_read_file(from, 64u << 20, &data, &len, &err), LLMR_OK);
        CHECK_EQ_INT(llmr_write_file_atomic(to, data, len, &err), LLMR_OK);
        free(data);
        free(from);
        free(to);
    }
    llmr_strbuf_free(&err);
    free(src_dir);
    free(src);
    free(dst);
}

typedef struct load_gen {
    llmr_engine_host *h;
    atomic_bool stop;
    atomic_int ok, failed;
    char first_failure[1024];
} load_gen;

static void *keep_generating(void *arg)
{
    load_gen *g = arg;
    while (!atomic_load(&g->stop)) {
        run r;
        run_init(&r);
        llmr_status st = generate(g->h, "m", 8, &r);
        if (st == LLMR_OK && r.tokens == 8) {
            atomic_fetch_add(&g->ok, 1);
        } else {
            if (atomic_fetch_add(&g->failed, 1) == 0)
                snprintf(g->first_failure, sizeof g->first_failure, "%s: %s",
                         llmr_status_name(st), r.message);
        }
        run_free(&r);
    }
    return NULL;
}

TEST(a_reload_under_continuous_load_fails_no_request)
{
    char *root = llmr_path_join(tmp, "reload-plugins");
    install_plugin(root, "good");
    const char *dirs[] = {root};
    llmr_engine_host *h = host_on(dirs, 1, NULL, NULL);
    if (!h)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    add_model(h, "m", "{\"token_delay_us\": 1000}");
    CHECK_EQ_INT(llmr_engine_host_load(h, "m", &err), LLMR_OK);
    int pid = worker_pid(h, "m");
    load_gen g = {.h = h};
    pthread_t clients[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&clients[i], NULL, keep_generating, &g);
    llmr_sleep_ms(200);
    int before = atomic_load(&g.ok);
    install_plugin(root, "v110");
    json_t *report = NULL;
    CHECK_EQ_INT(llmr_engine_host_reload_plugins(h, &report, &err), LLMR_OK);
    json_t *entry = json_array_get(json_object_get(report, "models"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(entry, "result")), "switched");
    CHECK_EQ_STR(json_string_value(json_object_get(entry, "from")), "loopback 1.0.0");
    CHECK_EQ_STR(json_string_value(json_object_get(entry, "engine")), "loopback 1.1.0");
    json_decref(report);
    llmr_sleep_ms(200);
    atomic_store(&g.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(clients[i], NULL);
    CHECK(before > 3);
    CHECK(atomic_load(&g.ok) > before + 3);
    CHECK_EQ_INT(atomic_load(&g.failed), 0);
    if (atomic_load(&g.failed))
        fprintf(stderr, "first failure: %s\n", g.first_failure);
    CHECK(worker_pid(h, "m") != pid);
    json_t *m = model_status(h, "m");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(m, "worker"), "engine")),
                 "loopback 1.1.0");
    json_decref(m);
    /* the old worker has exited (its last requests done, then its unload and exit: under
     * the sanitizers' exit-time leak check on a loaded 2-core machine this took over 5 s
     * once, so the same 20 s as the wait for a frozen worker above) */
    uint64_t until = llmr_now_ms() + 20000;
    while (kill(pid, 0) == 0 && llmr_now_ms() < until)
        llmr_sleep_ms(10);
    CHECK(kill(pid, 0) != 0);
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
    free(root);
}

/* The echo mode on the byte-level vocabulary: user header 1 2 3, end 4, return 5,
 * turn ends 5 6 4. */
TEST(the_echo_mode_answers_with_the_last_user_message)
{
    const char *v[] = {"good"};
    llmr_engine_host *h = host_with(v, 1, NULL);
    if (!h)
        return;
    llmr_loopback_echo echo = {{1, 2, 3}, 3, 4, 5, {5, 6, 4}, 3};
    llmr_loopback_model_options mo;
    llmr_loopback_model_options_default(&mo);
    mo.context_length = 256;
    mo.echo = &echo;
    char *dir = llmr_path_join(tmp, "echo");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_loopback_model_write(dir, &mo, &err), LLMR_OK);
    llmr_model_spec spec = {"echo", dir, "safetensors", NULL, 0, NULL};
    CHECK_EQ_INT(llmr_engine_host_add_model(h, &spec, &err), LLMR_OK);
    static const struct {
        int32_t prompt[24];
        uint32_t prompt_len, max_tokens;
        int32_t want[12];
        int want_len;
        uint32_t finish;
    } cases[] = {
        /* the last of two user messages, with <|end|> inside it, then return */
        {{1, 2, 3, 70, 4, 1, 2, 3, 80, 81, 4, 82, 4, 1, 9}, 15, 0, {80, 81, 4, 82, 5}, 5,
         LLMR_ENGINE_FINISH_STOP},
        /* it ends in a turn end already (6, the call): nothing added */
        {{1, 2, 3, 90, 6, 4, 1, 9}, 8, 0, {90, 6}, 2, LLMR_ENGINE_FINISH_STOP},
        /* no user message: only the return */
        {{7, 8, 9}, 3, 0, {5}, 1, LLMR_ENGINE_FINISH_STOP},
        /* max_tokens cuts it */
        {{1, 2, 3, 10, 11, 12, 4}, 7, 2, {10, 11}, 2, LLMR_ENGINE_FINISH_LENGTH},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run r;
        run_init(&r);
        CHECK_EQ_INT(generate_from(h, "echo", cases[c].prompt, cases[c].prompt_len,
                                   cases[c].max_tokens, &r),
                     LLMR_OK);
        CHECK_EQ_INT(r.finish, cases[c].finish);
        CHECK_EQ_INT(r.tokens, cases[c].want_len);
        for (int i = 0; i < r.tokens && i < cases[c].want_len; i++)
            CHECK_EQ_INT(r.ids[i], cases[c].want[i]);
        run_free(&r);
    }
    llmr_strbuf_free(&err);
    free(dir);
    llmr_engine_host_free(h);
}

static void quiet_log(void *ctx, llmr_log_level level, const char *line)
{
    (void)ctx;
    if (level >= LLMR_LOG_WARN && getenv("LLMR_TEST_VERBOSE"))
        fprintf(stderr, "%s\n", line);
}

int main(void)
{
    tmp = fx_tmpdir();
    fake.ram_total = 100 * GB;
    fake.gpu_total = 80 * GB;
    if (!getenv("LLMR_TEST_VERBOSE"))
        llmr_log_set_sink(quiet_log, NULL);
    RUN(plugin_variants_are_accepted_or_refused_with_the_right_code);
    RUN(the_good_newer_minor_and_null_optional_plugins_generate);
    RUN(requests_release_their_memory_and_can_be_cancelled);
    RUN(a_plugin_that_crashes_on_load_fails_the_load_not_the_node);
    RUN(a_failed_load_is_idle_again_once_its_backoff_is_over);
    RUN(a_removed_model_is_gone_and_its_name_free);
    RUN(the_watchdog_kills_a_stuck_request_and_the_next_one_succeeds);
    RUN(the_watchdog_gives_a_model_on_the_cpu_its_own_longer_limit);
    RUN(the_watchdog_lets_a_request_wait_its_turn_inside_the_engine);
    RUN(a_crashed_worker_restarts_after_its_backoff_and_a_frozen_one_is_killed);
    RUN(a_worker_that_keeps_memory_after_its_requests_is_replaced);
    RUN(above_the_threshold_idle_models_are_unloaded_least_recently_used_first);
    RUN(a_load_that_does_not_fit_is_refused_with_the_numbers);
    RUN(gpu_memory_and_per_plugin_budgets_are_checked_before_loading);
    RUN(the_directml_skeleton_refuses_with_the_library_named);
    RUN(a_reload_under_continuous_load_fails_no_request);
    RUN(the_echo_mode_answers_with_the_last_user_message);
    return llmr_test_finish();
}
