/* `llmr bench ipc`: what the hop from an engine worker to the node costs per token.
 *
 * The loopback engine generates tokens as fast as it can, first in this process (the
 * plugin opened here, its callback timing each token: the engine alone), then in a
 * worker behind the engine host (the node's path: the worker's callback, the frame
 * on the socket, the host's reader thread, the request's event callback).  It
 * reports both throughputs and the cost per token of the hop (the difference of the
 * times per token).  Flooded like that, tokens queue in the socket, so the latency
 * of a token, from the moment the engine sampled it to the node's callback (the same
 * monotonic clock in both processes), is measured apart: with the engine paced at
 * one token a millisecond, as a fast GPU engine delivers them.  Paced, the node's
 * reader thread sleeps between tokens, so what wakes it counts: the same pacing over
 * a bare socket between two processes (a child writing a timestamp each millisecond,
 * the parent reading) gives that floor of the machine for comparison.
 * The worker path includes what the worker does per token in service: the token's
 * text, decoded with the model's tokenizer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "engine_host/engine_host.h"
#include "engine_host/engine_registry.h"
#include "engine_host/host_services.h"
#include "engine_host/model_desc.h"
#include "engine_host/plugin_loader.h"
#include "models/loopback_model.h"
#include "node/node_service.h"

#define PACED_TOKENS 2000u

typedef struct timing {
    uint64_t *latency_ns; /* per token: callback time - engine time */
    uint64_t *worker_ns;  /* per token: worker's send time - engine time (worker path) */
    uint32_t count, cap;
    uint64_t first_ns, last_ns;
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    int status;
} timing;

static void timing_init(timing *t, uint32_t tokens)
{
    memset(t, 0, sizeof *t);
    t->latency_ns = calloc(tokens + 1, sizeof *t->latency_ns);
    t->worker_ns = calloc(tokens + 1, sizeof *t->worker_ns);
    t->cap = tokens + 1;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->done_cond, NULL);
}

static void timing_free(timing *t)
{
    free(t->latency_ns);
    free(t->worker_ns);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->done_cond);
}

static void record(timing *t, uint64_t engine_ns, bool last, int status)
{
    uint64_t now = llmr_now_ns();
    if (t->count == 0)
        t->first_ns = now;
    t->last_ns = now;
    if (t->count < t->cap)
        t->latency_ns[t->count++] = now > engine_ns ? now - engine_ns : 0;
    if (last) {
        pthread_mutex_lock(&t->lock);
        t->done = true;
        t->status = status;
        pthread_cond_broadcast(&t->done_cond);
        pthread_mutex_unlock(&t->lock);
    }
}

static void wait_done(timing *t)
{
    pthread_mutex_lock(&t->lock);
    while (!t->done)
        pthread_cond_wait(&t->done_cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the wake-up floor: a timestamp a millisecond over a bare socket ------------- */

static bool measure_floor(uint32_t n, timing *t)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return false;
    pid_t child = fork();
    if (child < 0) {
        close(sv[0]);
        close(sv[1]);
        return false;
    }
    if (child == 0) { /* only async-signal-safe calls here */
        close(sv[0]);
        for (uint32_t i = 0; i < n; i++) {
            struct timespec d = {0, 1000000L};
            nanosleep(&d, NULL);
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            if (write(sv[1], &ns, sizeof ns) != (ssize_t)sizeof ns)
                break;
        }
        _exit(0);
    }
    close(sv[1]);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t ns;
        if (read(sv[0], &ns, sizeof ns) != (ssize_t)sizeof ns)
            break;
        record(t, ns, i + 1 == n, 0);
    }
    close(sv[0]);
    waitpid(child, NULL, 0);
    return true;
}

/* ---- in process ---------------------------------------------------------------------- */

static int in_process_token(void *user, const llmr_engine_token *tok)
{
    record(user, tok->time_ns, tok->finish != 0, tok->status);
    return 0;
}

static llmr_status run_in_process(const llmr_plugin *p, llmr_engine_model *model, uint32_t tokens,
                                  timing *t)
{
    int32_t prompt[1] = {1};
    llmr_engine_request_params rp = llmr_engine_request_default_params();
    rp.prompt = prompt;
    rp.prompt_len = 1;
    rp.max_tokens = tokens;
    rp.temperature = 0;
    rp.request_id = 1;
    llmr_status st = p->api->submit(model, &rp, in_process_token, t);
    if (st == LLMR_OK)
        wait_done(t);
    return st;
}

/* ---- through a worker -------------------------------------------------------------------- */

static void host_event(void *user, const llmr_gen_event *ev)
{
    timing *t = user;
    if (t->count < t->cap && ev->sent_ns >= ev->time_ns)
        t->worker_ns[t->count] = ev->sent_ns - ev->time_ns;
    record(t, ev->time_ns, ev->finish != 0, ev->status);
}

static llmr_status run_in_worker(llmr_engine_host *h, const char *model, uint32_t tokens,
                                 timing *t, llmr_strbuf *err)
{
    int32_t prompt[1] = {1};
    llmr_gen_request req;
    memset(&req, 0, sizeof req);
    req.model = model;
    req.params = llmr_engine_request_default_params();
    req.params.prompt = prompt;
    req.params.prompt_len = 1;
    req.params.max_tokens = tokens;
    req.params.temperature = 0;
    llmr_status st = llmr_engine_host_submit(h, &req, host_event, t, NULL, err);
    if (st == LLMR_OK)
        wait_done(t);
    return st;
}

/* ---- the report -------------------------------------------------------------------------- */

typedef struct summary {
    double ns_per_token;  /* median over runs */
    double p50_us, p99_us, max_us; /* latency, over every token of every run */
    double worker_p50_us;          /* of which in the worker: sampled to sent */
    double tokens_per_s;
} summary;

static double median_us(uint64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, compare_u64);
    return (double)v[n / 2] / 1e3;
}

static void summarize(timing *runs, uint32_t n_runs, summary *s)
{
    *s = (summary){0}; /* no latencies (none recorded, or no memory): zeros, not garbage */
    double per[64];
    size_t total = 0;
    for (uint32_t r = 0; r < n_runs; r++) {
        per[r] = (double)(runs[r].last_ns - runs[r].first_ns) /
                 (double)(runs[r].count > 1 ? runs[r].count - 1 : 1);
        total += runs[r].count;
    }
    qsort(per, n_runs, sizeof per[0], compare_double);
    s->ns_per_token = per[n_runs / 2];
    s->tokens_per_s = 1e9 / s->ns_per_token;
    uint64_t *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (uint32_t r = 0; all && r < n_runs; r++)
        for (uint32_t i = 0; i < runs[r].count; i++)
            all[k++] = runs[r].worker_ns[i];
    s->worker_p50_us = all ? median_us(all, k) : 0;
    k = 0;
    for (uint32_t r = 0; all && r < n_runs; r++)
        for (uint32_t i = 0; i < runs[r].count; i++)
            all[k++] = runs[r].latency_ns[i];
    if (all && k) {
        qsort(all, k, sizeof *all, compare_u64);
        s->p50_us = (double)all[k / 2] / 1e3;
        s->p99_us = (double)all[(k * 99) / 100] / 1e3;
        s->max_us = (double)all[k - 1] / 1e3;
    }
    free(all);
}

static json_t *summary_json(const summary *s)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "ns_per_token", s->ns_per_token,
                     "tokens_per_s", s->tokens_per_s, "latency_p50_us", s->p50_us,
                     "latency_p99_us", s->p99_us, "latency_max_us", s->max_us,
                     "in_worker_p50_us", s->worker_p50_us);
}

static const llmr_plugin_manifest *find_loopback(llmr_engine_registry *reg, const llmr_config *cfg)
{
    size_t n = 0;
    char **dirs = llmr_node_plugin_dirs(cfg, &n);
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_engine_registry_scan(reg, (const char *const *)dirs, n, &problems);
    llmr_problems_free(&problems);
    llmr_node_plugin_dirs_free(dirs);
    return llmr_engine_registry_find(reg, "loopback");
}

int llmr_bench_ipc(int argc, char **argv, const llmr_config *cfg)
{
    uint32_t tokens = 20000, runs = 5;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--tokens", &v, &bad))
            tokens = (uint32_t)strtoul(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--runs", &v, &bad))
            runs = (uint32_t)strtoul(v, NULL, 10);
        else if (!bad) {
            llmr_cli_error("bench ipc", "unexpected argument \"%s\"; see llmr bench --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && (tokens < 10 || tokens > 10000000 || runs < 1 || runs > 64)) {
        llmr_cli_error("bench ipc", "--tokens takes 10 to 10000000, --runs 1 to 64");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    llmr_log_set_level(LLMR_LOG_WARN);
    setenv("LLMR_LOG_LEVEL", "warn", 1); /* for the workers */
    int rc = LLMR_EXIT_FAILED;
    timing floor;
    timing_init(&floor, PACED_TOKENS);
    bool have_floor = measure_floor(PACED_TOKENS, &floor); /* before any thread starts */
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const char *tmp_root = getenv("TMPDIR");
    char *tmpl = llmr_path_join(tmp_root && *tmp_root ? tmp_root : "/tmp", "llmr-bench-ipc-XXXXXX");
    char *tmp = tmpl ? mkdtemp(tmpl) : NULL;
    char *model_dir = tmp ? llmr_path_join(tmp, "loopback") : NULL;
    llmr_loopback_model_options mo;
    llmr_loopback_model_options_default(&mo);
    mo.context_length = tokens + 16;
    llmr_engine_registry *reg = llmr_engine_registry_create();
    const llmr_plugin_manifest *loopback = reg ? find_loopback(reg, cfg) : NULL;
    if (!tmp || !loopback) {
        llmr_cli_error("bench ipc", "%s", !tmp ? "cannot make a temporary directory"
                                               : "the loopback engine plugin is not installed "
                                                 "in the plugin directories (--plugin-dirs)");
        goto done;
    }
    if (llmr_loopback_model_write(model_dir, &mo, &err) != LLMR_OK) {
        llmr_cli_error("bench ipc", "%s", llmr_strbuf_cstr(&err));
        goto done;
    }

    /* The engine alone, in this process. */
    timing inproc[64];
    llmr_host_api host;
    llmr_host_services_init(&host, "bench");
    llmr_plugin plugin;
    llmr_model_desc_owner desc;
    llmr_engine_model *model = NULL;
    llmr_engine_load_params lp = llmr_engine_load_default_params();
    if (llmr_plugin_open(loopback->library_path, &host, &plugin, &err) != LLMR_OK ||
        llmr_model_desc_open("loopback", model_dir, "safetensors", NULL, &desc, &err) != LLMR_OK) {
        llmr_cli_error("bench ipc", "%s", llmr_strbuf_cstr(&err));
        goto done;
    }
    if (plugin.api->load(&desc.desc, &lp, &model) != LLMR_OK) {
        llmr_cli_error("bench ipc", "loading: %s", plugin.api->last_error(NULL));
        llmr_model_desc_close(&desc);
        goto done;
    }
    for (uint32_t r = 0; r < runs; r++) {
        timing_init(&inproc[r], tokens);
        run_in_process(&plugin, model, tokens, &inproc[r]);
    }
    plugin.api->unload(model);
    llmr_model_desc_close(&desc);
    llmr_plugin_close(&plugin);

    /* Through a worker. */
    size_t n_dirs = 0;
    char **dirs = llmr_node_plugin_dirs(cfg, &n_dirs);
    llmr_engine_host_options o;
    llmr_node_host_options(cfg, dirs, n_dirs, &o);
    llmr_engine_host *h = NULL;
    timing hop[64], paced;
    if (llmr_engine_host_create(&o, &h, NULL, &err) != LLMR_OK) {
        llmr_cli_error("bench ipc", "%s", llmr_strbuf_cstr(&err));
        llmr_node_plugin_dirs_free(dirs);
        goto done;
    }
    llmr_model_spec spec = {"loopback", model_dir, "safetensors", NULL, 0, NULL};
    llmr_model_spec paced_spec = {"paced", model_dir, "safetensors", NULL, 0,
                                  "{\"token_delay_us\": 1000}"};
    if (llmr_engine_host_add_model(h, &spec, &err) != LLMR_OK ||
        llmr_engine_host_add_model(h, &paced_spec, &err) != LLMR_OK ||
        llmr_engine_host_load(h, "loopback", &err) != LLMR_OK ||
        llmr_engine_host_load(h, "paced", &err) != LLMR_OK) {
        llmr_cli_error("bench ipc", "%s", llmr_strbuf_cstr(&err));
        llmr_engine_host_free(h);
        llmr_node_plugin_dirs_free(dirs);
        goto done;
    }
    for (uint32_t r = 0; r < runs; r++) {
        timing_init(&hop[r], tokens);
        run_in_worker(h, "loopback", tokens, &hop[r], &err);
    }
    timing_init(&paced, PACED_TOKENS);
    run_in_worker(h, "paced", PACED_TOKENS, &paced, &err);
    llmr_engine_host_free(h);
    llmr_node_plugin_dirs_free(dirs);

    summary a, b, c, fl;
    memset(&fl, 0, sizeof fl);
    summarize(inproc, runs, &a);
    summarize(hop, runs, &b);
    summarize(&paced, 1, &c);
    if (have_floor)
        summarize(&floor, 1, &fl);
    json_t *out = json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:f}", "benchmark", "ipc",
                            "tokens", (int)tokens, "runs", (int)runs, "in_process",
                            summary_json(&a), "worker", summary_json(&b), "worker_paced_1ms",
                            summary_json(&c), "socket_floor_paced_1ms", summary_json(&fl),
                            "hop_us_per_token", (b.ns_per_token - a.ns_per_token) / 1e3);
    char *j = json_dumps(out, JSON_COMPACT);
    printf("%s\n", j ? j : "{}");
    free(j);
    json_decref(out);
    fprintf(stderr,
            "%-20s %12s %14s %12s %12s %12s\n"
            "%-20s %12.0f %14.2f %12.1f %12.1f %12.1f\n"
            "%-20s %12.0f %14.2f %12.1f %12.1f %12.1f\n"
            "%-20s %12.0f %14.2f %12.1f %12.1f %12.1f\n"
            "%-20s %12.0f %14.2f %12.1f %12.1f %12.1f\n"
            "cost of the hop per token: %.2f us (goal: under 20 us); latency of one token "
            "at 1 ms pacing: p50 %.1f us (%.1f us of it in the worker), p99 %.1f us (a bare "
            "socket: p50 %.1f us)\n",
            "path", "tokens/s", "us per token", "latency p50", "p99 (us)", "max (us)",
            "engine in process", a.tokens_per_s, a.ns_per_token / 1e3, a.p50_us, a.p99_us,
            a.max_us, "through a worker", b.tokens_per_s, b.ns_per_token / 1e3, b.p50_us, b.p99_us,
            b.max_us, "worker, 1 ms pacing", c.tokens_per_s, c.ns_per_token / 1e3, c.p50_us,
            c.p99_us, c.max_us, "bare socket, 1 ms", fl.tokens_per_s, fl.ns_per_token / 1e3,
            fl.p50_us, fl.p99_us, fl.max_us, (b.ns_per_token - a.ns_per_token) / 1e3, c.p50_us,
            c.worker_p50_us, c.p99_us, fl.p50_us);
    for (uint32_t r = 0; r < runs; r++) {
        timing_free(&inproc[r]);
        timing_free(&hop[r]);
    }
    timing_free(&paced);
    rc = LLMR_EXIT_OK;
done:
    timing_free(&floor);
    llmr_engine_registry_free(reg);
    if (tmp) {
        const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
        for (int f = 0; model_dir && f < 3; f++) {
            char *p = llmr_path_join(model_dir, files[f]);
            if (p)
                unlink(p);
            free(p);
        }
        if (model_dir)
            rmdir(model_dir);
        rmdir(tmp);
    }
    free(model_dir);
    free(tmpl);
    llmr_strbuf_free(&err);
    return rc;
}
