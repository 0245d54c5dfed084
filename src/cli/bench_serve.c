/* `llmr bench serve`: many users against a running node (or a router in front of nodes),
 * over the real HTTP API, streamed: for each concurrency level, that many clients each
 * send streamed /v1/completions requests one after another (prompts of random token ids,
 * greedy) until the level's requests are done; then output and total tokens per second,
 * time to first token and between tokens (p50/p99), per-stream speed, errors, and the
 * KV cache in use as the node's /metrics says.  Workloads (--workload): `sharegpt-like`
 * (prompt and output lengths each uniform in 32..512, from --seed) and `fixed`
 * (--prompt-len, --output-len).  The server should generate through end-of-sequence
 * tokens (a node loaded with the engine option "ignore_eos": 1), so every request gets
 * its output length; the report counts the tokens that came.  Before the first level,
 * --warmup requests (default 1, short, untimed) let a node that loads models on demand
 * load this one, so that no level's figures include the load.  One streamed request is
 * bench_serve_stream.c. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "cli/bench_serve_stream.h"
#include "cli/id_list.h"
#include "common/clock.h"
#include "net/curl_handle.h"

#define CMD "bench serve"
#define MAX_LEVELS 16
#define MAX_CONCURRENCY 4096

typedef struct serve_opts {
    char url[512];          /* base URL of the node or router */
    const char *model, *key, *json_path, *workload;
    bool router;
    int32_t *levels;
    uint32_t n_levels;
    uint32_t requests;      /* per level (0: 2 x concurrency, at least 16) */
    uint32_t prompt_len, output_len, vocab, timeout_s;
    uint32_t warmup;        /* untimed requests before the first level */
    uint64_t seed;
} serve_opts;

typedef struct shape {
    uint32_t prompt_len, output_len;
} shape;

/* splitmix64: the workload's numbers from the seed. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static shape shape_of(const serve_opts *o, uint64_t *rng)
{
    shape s = {o->prompt_len, o->output_len};
    if (strcmp(o->workload, "sharegpt-like") == 0) {
        s.prompt_len = 32 + (uint32_t)(next_random(rng) % 481);
        s.output_len = 32 + (uint32_t)(next_random(rng) % 481);
    }
    return s;
}

/* The request body: a prompt of random ids in [0, --vocab) (by default below gpt-oss's
 * special tokens, which start at 199998). */
static char *body_of(const serve_opts *o, shape s, uint64_t *rng)
{
    json_t *ids = json_array();
    for (uint32_t i = 0; i < s.prompt_len; i++)
        json_array_append_new(ids, json_integer((json_int_t)(next_random(rng) % o->vocab)));
    json_t *req = json_pack("{s:s, s:o, s:i, s:f, s:b, s:{s:b}}", "model", o->model, "prompt", ids,
                            "max_tokens", (json_int_t)s.output_len, "temperature", 0.0, "stream", 1,
                            "stream_options", "include_usage", 1);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return text;
}

/* ---- one level ------------------------------------------------------------------------- */

typedef struct level {
    const serve_opts *o;
    char url[600];
    char **bodies;
    uint32_t n_requests, concurrency;
    atomic_uint next, finished;
    bss_result *results;
} level;

static void *client(void *arg)
{
    level *l = arg;
    for (;;) {
        uint32_t i = atomic_fetch_add(&l->next, 1);
        if (i >= l->n_requests)
            return NULL;
        bss_run(l->url, l->o->key, l->bodies[i], l->o->timeout_s, &l->results[i]);
        atomic_fetch_add(&l->finished, 1);
    }
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of v[0..n), sorted in place; NAN when empty. */
static double quantile(uint64_t *v, size_t n, double q)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, compare_u64);
    size_t i = (size_t)ceil(q * (double)n);
    return (double)v[i ? i - 1 : 0];
}

/* A response body, kept whole (at most 4 MiB). */
typedef struct body_buffer {
    char *data;
    size_t len;
} body_buffer;

static size_t into_buffer(char *data, size_t size, size_t nmemb, void *user)
{
    size_t n = size * nmemb;
    body_buffer *b = user;
    if (b->len + n > (4u << 20))
        return 0;
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + b->len, data, n);
    b->len += n;
    grown[b->len] = '\0';
    b->data = grown;
    return n;
}

/* The KV cache in use, from the server's /metrics: the samples of the metric
 * llmr_kv_cache_used_tokens, summed (one per model); -1 when it has none. */
static double kv_used_tokens(const serve_opts *o)
{
    char url[600];
    snprintf(url, sizeof url, "%s/metrics", o->url);
    CURL *curl = llmr_curl_new();
    if (!curl)
        return -1;
    body_buffer buf = {0};
    struct curl_slist *headers = NULL;
    char auth[512];
    if (o->key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->key);
        headers = curl_slist_append(NULL, auth);
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, into_buffer);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    double used = -1;
    static const char name[] = "llmr_kv_cache_used_tokens";
    if (curl_easy_perform(curl) == CURLE_OK && buf.data) {
        for (const char *p = buf.data; (p = strstr(p, name)); p += sizeof name - 1) {
            if (p != buf.data && p[-1] != '\n')
                continue; /* inside a comment or another name */
            const char *v = strchr(p, ' ');
            if (v)
                used = (used < 0 ? 0 : used) + strtod(v + 1, NULL);
        }
    }
    free(buf.data);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return used;
}

typedef struct level_report {
    uint32_t concurrency, requests, errors;
    double seconds, output_tps, total_tps;
    double ttft_p50_ms, ttft_p99_ms, tbt_p50_ms, tbt_p99_ms, stream_tps_p50;
    uint64_t output_tokens, prompt_tokens;
    double kv_used_max;
    char first_error[160];
} level_report;

static json_t *number_or_null(double v)
{
    return isnan(v) || v < 0 ? json_null() : json_real(v);
}

static bool run_level(const serve_opts *o, uint32_t concurrency, uint64_t *rng, level_report *rep)
{
    memset(rep, 0, sizeof *rep);
    level l = {.o = o, .concurrency = concurrency};
    snprintf(l.url, sizeof l.url, "%s/v1/completions", o->url);
    l.n_requests = o->requests ? o->requests : (concurrency * 2 > 16 ? concurrency * 2 : 16);
    l.bodies = calloc(l.n_requests, sizeof *l.bodies);
    l.results = calloc(l.n_requests, sizeof *l.results);
    pthread_t *threads = calloc(concurrency, sizeof *threads);
    bool ok = l.bodies && l.results && threads;
    for (uint32_t i = 0; ok && i < l.n_requests; i++)
        ok = (l.bodies[i] = body_of(o, shape_of(o, rng), rng)) != NULL;
    uint32_t started = 0;
    uint64_t t0 = llmr_now_ns();
    for (; ok && started < concurrency; started++)
        if (pthread_create(&threads[started], NULL, client, &l) != 0)
            break;
    if (ok && started < concurrency)
        fprintf(stderr, "bench serve: only %u of %u clients could start (threads)\n", started,
                concurrency);
    /* the KV cache in use, sampled while requests run */
    rep->kv_used_max = -1;
    while (ok && started && atomic_load(&l.finished) < l.n_requests) {
        double kv = kv_used_tokens(o);
        if (kv > rep->kv_used_max)
            rep->kv_used_max = kv;
        llmr_sleep_ms(200);
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    /* the level's time: from the first request's start to the last one's end */
    uint64_t t1 = t0;
    for (uint32_t i = 0; ok && i < l.n_requests; i++)
        if (l.results[i].end_ns > t1)
            t1 = l.results[i].end_ns;
    if (!ok || started == 0) {
        llmr_cli_error(CMD, "out of memory or threads for %u clients", concurrency);
        ok = false;
    }
    uint64_t *ttft = calloc(l.n_requests + 1, sizeof *ttft), *speed = calloc(l.n_requests + 1, sizeof *speed);
    size_t n_gaps = 0, n_ttft = 0, n_speed = 0;
    for (uint32_t i = 0; ok && i < l.n_requests; i++)
        n_gaps += l.results[i].n_gaps;
    uint64_t *gaps = calloc(n_gaps + 1, sizeof *gaps);
    ok = ok && ttft && speed && gaps;
    n_gaps = 0;
    for (uint32_t i = 0; ok && i < l.n_requests; i++) {
        bss_result *r = &l.results[i];
        if (!r->ok) {
            if (!rep->errors++)
                snprintf(rep->first_error, sizeof rep->first_error, "%s", r->error);
            continue;
        }
        uint32_t out = r->completion_tokens ? r->completion_tokens : r->chunks;
        rep->output_tokens += out;
        rep->prompt_tokens += r->prompt_tokens;
        if (r->first_ns)
            ttft[n_ttft++] = r->first_ns - r->start_ns;
        memcpy(gaps + n_gaps, r->gaps_ns, r->n_gaps * sizeof *gaps);
        n_gaps += r->n_gaps;
        if (r->first_ns && out > 1 && r->end_ns > r->first_ns) /* tokens/s x 1000, as integers */
            speed[n_speed++] = (uint64_t)((out - 1) * 1e12 / (double)(r->end_ns - r->first_ns));
    }
    rep->concurrency = started; /* the clients that ran */
    rep->requests = l.n_requests;
    rep->seconds = (double)(t1 - t0) / 1e9;
    rep->output_tps = rep->output_tokens / rep->seconds;
    rep->total_tps = (rep->output_tokens + rep->prompt_tokens) / rep->seconds;
    rep->ttft_p50_ms = quantile(ttft, n_ttft, 0.50) / 1e6;
    rep->ttft_p99_ms = quantile(ttft, n_ttft, 0.99) / 1e6;
    rep->tbt_p50_ms = quantile(gaps, n_gaps, 0.50) / 1e6;
    rep->tbt_p99_ms = quantile(gaps, n_gaps, 0.99) / 1e6;
    rep->stream_tps_p50 = quantile(speed, n_speed, 0.50) / 1e3;
    for (uint32_t i = 0; l.results && i < l.n_requests; i++)
        bss_result_free(&l.results[i]);
    for (uint32_t i = 0; l.bodies && i < l.n_requests; i++)
        free(l.bodies[i]);
    free(l.bodies);
    free(l.results);
    free(threads);
    free(ttft);
    free(speed);
    free(gaps);
    return ok;
}

/* ---- the warm-up ------------------------------------------------------------------------ */

typedef struct warmup_report {
    double seconds;
    uint32_t errors;
    char first_error[160];
} warmup_report;

/* o->warmup short requests, one after another, untimed: the first one waits for a model
 * that the node loads on demand.  Their prompts come from their own random numbers, so
 * the levels' workload is the same with or without them.  A failed one is counted in
 * *rep (the command then exits 1, as for a failed request of a level) and the levels
 * still run, their own errors saying what is wrong. */
static void warm_up(const serve_opts *o, warmup_report *rep)
{
    memset(rep, 0, sizeof *rep);
    if (!o->warmup)
        return;
    fprintf(stderr, "bench serve: %u warm-up request%s (a model the node has not loaded yet loads now)...\n",
            o->warmup, o->warmup == 1 ? "" : "s");
    char url[600];
    snprintf(url, sizeof url, "%s/v1/completions", o->url);
    uint64_t rng = o->seed ^ 0x5741524d55500000ull; /* "WARMUP" */
    uint64_t t0 = llmr_now_ns();
    for (uint32_t i = 0; i < o->warmup; i++) {
        shape s = {16, 4};
        char *body = body_of(o, s, &rng);
        bss_result r;
        memset(&r, 0, sizeof r);
        if (body)
            bss_run(url, o->key, body, o->timeout_s, &r);
        if (!body || !r.ok) {
            const char *why = body ? r.error : "out of memory";
            fprintf(stderr, "bench serve: warm-up request %u failed: %s\n", i + 1, why);
            if (!rep->errors++)
                snprintf(rep->first_error, sizeof rep->first_error, "%s", why);
        }
        bss_result_free(&r);
        free(body);
    }
    rep->seconds = (double)(llmr_now_ns() - t0) / 1e9;
    fprintf(stderr, "bench serve: warm-up took %.2f s\n", rep->seconds);
}

/* ---- the command ----------------------------------------------------------------------- */

static bool parse_number(const char *name, const char *v, uint64_t lo, uint64_t hi, uint32_t *out)
{
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (!end || end == v || *end || n < lo || n > hi || v[0] == '-') {
        llmr_cli_error(CMD, "%s takes a whole number from %llu to %llu, not \"%s\"", name,
                       (unsigned long long)lo, (unsigned long long)hi, v);
        return false;
    }
    *out = (uint32_t)n;
    return true;
}

static bool parse_args(int argc, char **argv, const llmr_config *cfg, serve_opts *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->url, sizeof o->url, "http://%s:%u", llmr_config_get(cfg, LLMR_CONFIG_HOST),
             llmr_config_port(cfg));
    o->workload = "sharegpt-like";
    o->prompt_len = 512;
    o->output_len = 256;
    o->vocab = 199998;
    o->timeout_s = 600;
    o->warmup = 1;
    o->seed = 1;
    o->key = getenv("LLMR_API_KEY");
    const char *levels = "1,8,32,64,128,256";
    uint32_t seed = 1;
    const char *url = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v = NULL;
        if (llmr_cli_option(argc, argv, &i, "--url", &v, &bad)) {
            url = v;
            o->router = false;
        } else if (llmr_cli_option(argc, argv, &i, "--router", &v, &bad)) {
            url = v;
            o->router = true;
        } else if (llmr_cli_option(argc, argv, &i, "--model", &v, &bad)) {
            o->model = v;
        } else if (llmr_cli_option(argc, argv, &i, "--workload", &v, &bad)) {
            o->workload = v;
            if (!bad && strcmp(v, "sharegpt-like") != 0 && strcmp(v, "fixed") != 0) {
                llmr_cli_error(CMD, "--workload is sharegpt-like or fixed, not \"%s\"", v);
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--concurrency", &v, &bad)) {
            levels = v;
        } else if (llmr_cli_option(argc, argv, &i, "--requests", &v, &bad)) {
            bad = bad || !parse_number("--requests", v, 1, 1000000, &o->requests);
        } else if (llmr_cli_option(argc, argv, &i, "--prompt-len", &v, &bad)) {
            bad = bad || !parse_number("--prompt-len", v, 1, 1000000, &o->prompt_len);
        } else if (llmr_cli_option(argc, argv, &i, "--output-len", &v, &bad)) {
            bad = bad || !parse_number("--output-len", v, 1, 1000000, &o->output_len);
        } else if (llmr_cli_option(argc, argv, &i, "--seed", &v, &bad)) {
            bad = bad || !parse_number("--seed", v, 0, UINT32_MAX, &seed);
        } else if (llmr_cli_option(argc, argv, &i, "--vocab", &v, &bad)) {
            bad = bad || !parse_number("--vocab", v, 1, 100000000, &o->vocab);
        } else if (llmr_cli_option(argc, argv, &i, "--warmup", &v, &bad)) {
            bad = bad || !parse_number("--warmup", v, 0, 1000, &o->warmup);
        } else if (llmr_cli_option(argc, argv, &i, "--timeout", &v, &bad)) {
            bad = bad || !parse_number("--timeout", v, 1, 86400, &o->timeout_s);
        } else if (llmr_cli_option(argc, argv, &i, "--json", &v, &bad)) {
            o->json_path = v;
        } else if (llmr_cli_option(argc, argv, &i, "--api-key", &v, &bad)) {
            o->key = v;
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr bench --help", argv[i]);
            bad = true;
        }
    }
    if (bad)
        return false;
    if (url) {
        snprintf(o->url, sizeof o->url, "%s", url);
        size_t n = strlen(o->url);
        while (n && o->url[n - 1] == '/')
            o->url[--n] = '\0';
    }
    o->seed = seed;
    if (!o->model) {
        llmr_cli_error(CMD, "which model?  usage: llmr bench serve --model NAME [--url URL | --router URL]");
        return false;
    }
    o->levels = llmr_id_list_parse(levels, &o->n_levels);
    bool good = o->levels && o->n_levels >= 1 && o->n_levels <= MAX_LEVELS;
    for (uint32_t i = 0; good && i < o->n_levels; i++)
        good = o->levels[i] >= 1 && o->levels[i] <= MAX_CONCURRENCY;
    if (!good) {
        llmr_cli_error(CMD, "--concurrency takes up to %d levels of 1 to %d clients, like 1,8,64",
                       MAX_LEVELS, MAX_CONCURRENCY);
        free(o->levels);
        o->levels = NULL;
        return false;
    }
    return true;
}

/* A table cell: the number, or "-" when there is none. */
static const char *cell(char buf[16], double v, const char *fmt)
{
    if (isnan(v))
        return "-";
    snprintf(buf, 16, fmt, v);
    return buf;
}

static void print_table(const serve_opts *o, const level_report *r, uint32_t n)
{
    fprintf(stderr, "%s, model %s, %s workload", o->url, o->model, o->workload);
    if (strcmp(o->workload, "fixed") == 0)
        fprintf(stderr, " (%u prompt, %u output tokens)", o->prompt_len, o->output_len);
    fprintf(stderr, ", seed %llu\n", (unsigned long long)o->seed);
    fprintf(stderr, "%7s %8s %11s %11s %9s %9s %8s %8s %10s %6s %9s\n", "streams", "requests",
            "output t/s", "total t/s", "TTFT p50", "TTFT p99", "TBT p50", "TBT p99", "stream t/s",
            "errors", "KV used");
    for (uint32_t i = 0; i < n; i++) {
        char kv[32] = "n/a", t50[16], t99[16], b50[16], b99[16], st[16];
        if (r[i].kv_used_max >= 0)
            snprintf(kv, sizeof kv, "%.0f", r[i].kv_used_max);
        fprintf(stderr, "%7u %8u %11.1f %11.1f %9s %9s %8s %8s %10s %6u %9s\n", r[i].concurrency,
                r[i].requests, r[i].output_tps, r[i].total_tps, cell(t50, r[i].ttft_p50_ms, "%.1fms"),
                cell(t99, r[i].ttft_p99_ms, "%.1fms"), cell(b50, r[i].tbt_p50_ms, "%.2fms"),
                cell(b99, r[i].tbt_p99_ms, "%.2fms"), cell(st, r[i].stream_tps_p50, "%.1f"), r[i].errors, kv);
        if (r[i].errors)
            fprintf(stderr, "        first error: %s\n", r[i].first_error);
    }
}

static json_t *report_json(const serve_opts *o, const warmup_report *w, const level_report *r, uint32_t n)
{
    json_t *levels = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(levels, json_pack(
            "{s:I, s:I, s:I, s:f, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
            "concurrency", (json_int_t)r[i].concurrency, "requests", (json_int_t)r[i].requests,
            "errors", (json_int_t)r[i].errors, "seconds", r[i].seconds,
            "output_tokens", (json_int_t)r[i].output_tokens, "prompt_tokens", (json_int_t)r[i].prompt_tokens,
            "output_tok_s", number_or_null(r[i].output_tps), "total_tok_s", number_or_null(r[i].total_tps),
            "ttft_p50_ms", number_or_null(r[i].ttft_p50_ms), "ttft_p99_ms", number_or_null(r[i].ttft_p99_ms),
            "tbt_p50_ms", number_or_null(r[i].tbt_p50_ms), "tbt_p99_ms", number_or_null(r[i].tbt_p99_ms),
            "stream_tok_s_p50", number_or_null(r[i].stream_tps_p50),
            "kv_used_tokens_max", number_or_null(r[i].kv_used_max),
            "first_error", r[i].errors ? json_string(r[i].first_error) : json_null()));
    return json_pack("{s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:I, s:{s:I, s:f, s:I, s:o}, s:o}", "benchmark",
                     "serve", "url", o->url, "router", o->router, "model", o->model, "workload", o->workload,
                     "prompt_len", (json_int_t)o->prompt_len, "output_len", (json_int_t)o->output_len,
                     "seed", (json_int_t)o->seed, "warmup", "requests", (json_int_t)o->warmup, "seconds",
                     w->seconds, "errors", (json_int_t)w->errors, "first_error",
                     w->errors ? json_string(w->first_error) : json_null(), "levels", levels);
}

int llmr_bench_serve(int argc, char **argv, const llmr_config *cfg)
{
    serve_opts o;
    if (!parse_args(argc, argv, cfg, &o))
        return 2;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        llmr_cli_error(CMD, "libcurl would not start");
        free(o.levels);
        return 1;
    }
    level_report reports[MAX_LEVELS];
    uint64_t rng = o.seed;
    int rc = 0;
    uint32_t done = 0;
    warmup_report warmup;
    warm_up(&o, &warmup);
    if (warmup.errors)
        rc = 1;
    for (; done < o.n_levels; done++) {
        fprintf(stderr, "bench serve: %u concurrent streams...\n", o.levels[done]);
        if (!run_level(&o, o.levels[done], &rng, &reports[done])) {
            rc = 1;
            break;
        }
        if (reports[done].errors)
            rc = 1;
    }
    print_table(&o, reports, done);
    json_t *j = report_json(&o, &warmup, reports, done);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) {
        printf("%s\n", text);
        FILE *f = o.json_path ? fopen(o.json_path, "w") : NULL;
        bool written = f && fprintf(f, "%s\n", text) >= 0;
        if (f && fclose(f) != 0)
            written = false;
        if (o.json_path && !written) {
            llmr_cli_error(CMD, "cannot write %s", o.json_path);
            rc = 1;
        }
    }
    if (!text) {
        llmr_cli_error(CMD, "could not write the report as JSON (out of memory?); the table above has it");
        rc = 1;
    }
    free(text);
    json_decref(j);
    free(o.levels);
    curl_global_cleanup();
    return rc;
}
