/* `llmr bench engine DIR`: how fast the engine that would serve the model in DIR
 * runs it, loaded in this process as `llmr run` loads it (local_engine.h) and measured
 * through the engine ABI alone: load time, prefill throughput per prompt length,
 * time to first token, decode throughput per context length, and the memory the
 * engine says it holds.  Prompts are pseudo-random token ids from a seeded generator;
 * decoding is greedy unless sampling options say otherwise, and runs through EOS ids
 * (the load option "ignore_eos").
 *
 * Definitions (the peer script tests/gpu/bench_transformers.py uses the same):
 *   TTFT         the first token event's time_ns minus the clock just before submit;
 *   prefill      P / TTFT of a P-token prompt with max_tokens 1;
 *   decode       N / (last token's time_ns - first token's time_ns) of a request with
 *                a max(C, 16)-token prompt and max_tokens N + 1;
 * each the median over --runs, after one warm-up request (16 prompt tokens, 8 more); the
 * prompts of each length (prefill, TTFT) after one more of that length, untimed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/bench_engine.h"
#include "cli/id_list.h"
#include "common/clock.h"
#include "common/utf8.h"

#define CMD LLMR_BENCH_ENGINE_CMD
#define WARMUP_PROMPT 16u
#define WARMUP_TOKENS 8u
#define ID_LIMIT 199998u /* ids below gpt-oss's special tokens */

static bool parse_whole(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!v || *v < '0' || *v > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

static bool parse_args(int argc, char **argv, llmr_engine_bench_args *a)
{
    struct {
        const char *name;
        uint64_t lo, hi, *value;
    } numbers[] = {{"--decode-tokens", 1, 1000000, &a->decode_tokens},
                   {"--ttft-prompt", 1, INT32_MAX, &a->ttft_prompt},
                   {"--runs", 1, 1000, &a->runs},
                   {"--context", 1, INT32_MAX, &a->context},
                   {"--seed", 0, INT64_MAX, &a->seed},
                   {"--top-k", 0, INT32_MAX, &a->top_k}};
    struct {
        const char *name;
        double lo, hi, *value;
    } reals[] = {{"--temperature", 0.0, 100.0, &a->temperature},
                 {"--top-p", 0.0, 1.0, &a->top_p},
                 {"--min-p", 0.0, 1.0, &a->min_p}};
    const char *prompts = "128,1024,4096", *contexts = "0,4096,32768";
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v = NULL;
        bool number = false;
        for (size_t k = 0; k < sizeof numbers / sizeof numbers[0] && !number; k++) {
            if (!llmr_cli_option(argc, argv, &i, numbers[k].name, &v, &bad))
                continue;
            number = true;
            if (!bad && !parse_whole(v, numbers[k].lo, numbers[k].hi, numbers[k].value)) {
                llmr_cli_error(CMD, "%s takes a whole number from %llu to %llu",
                               numbers[k].name, (unsigned long long)numbers[k].lo,
                               (unsigned long long)numbers[k].hi);
                bad = true;
            }
        }
        for (size_t k = 0; k < sizeof reals / sizeof reals[0] && !number; k++) {
            if (!llmr_cli_option(argc, argv, &i, reals[k].name, &v, &bad))
                continue;
            number = true;
            char *end = NULL;
            double x = bad ? 0.0 : strtod(v, &end);
            if (!bad && (end == v || *end || !(x >= reals[k].lo && x <= reals[k].hi) ||
                         (reals[k].value == &a->top_p && x == 0.0))) {
                llmr_cli_error(CMD, "%s takes a number %s%g to %g", reals[k].name,
                               reals[k].value == &a->top_p ? "above " : "from ", reals[k].lo,
                               reals[k].hi);
                bad = true;
            }
            if (!bad)
                *reals[k].value = x;
        }
        if (number)
            continue;
        if (llmr_cli_option(argc, argv, &i, "--prompts", &v, &bad))
            prompts = v;
        else if (llmr_cli_option(argc, argv, &i, "--contexts", &v, &bad))
            contexts = v;
        else if (llmr_cli_option(argc, argv, &i, "--options", &v, &bad))
            a->options_text = v;
        else if (llmr_cli_option(argc, argv, &i, "--json", &v, &bad))
            a->json_path = v;
        else if (!bad && argv[i][0] != '-' && !a->dir)
            a->dir = argv[i];
        else if (!bad) {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr bench --help", argv[i]);
            bad = true;
        }
    }
    if (bad)
        return false;
    if (!a->dir) {
        llmr_cli_error(CMD, "which model?  usage: llmr bench engine DIR [options]");
        return false;
    }
    a->prompts = llmr_id_list_parse(prompts, &a->n_prompts);
    a->contexts = llmr_id_list_parse(contexts, &a->n_contexts);
    for (uint32_t i = 0; a->prompts && i < a->n_prompts; i++)
        if (a->prompts[i] < 1) {
            free(a->prompts);
            a->prompts = NULL;
        }
    if (!a->prompts || !a->contexts) {
        llmr_cli_error(CMD, "--prompts takes token counts of at least 1 like 128,1024,4096, "
                            "--contexts counts like 0,4096,32768");
        return false;
    }
    return true;
}

static uint32_t longest_prompt(const llmr_engine_bench_args *a)
{
    uint64_t n = a->ttft_prompt > WARMUP_PROMPT ? a->ttft_prompt : WARMUP_PROMPT;
    for (uint32_t i = 0; i < a->n_prompts; i++)
        n = (uint64_t)a->prompts[i] > n ? (uint64_t)a->prompts[i] : n;
    for (uint32_t i = 0; i < a->n_contexts; i++)
        n = (uint64_t)a->contexts[i] > n ? (uint64_t)a->contexts[i] : n;
    return (uint32_t)n;
}

static void bytes_row(const char *what, uint64_t bytes)
{
    bool gb = bytes >= 1000000000u;
    llmr_engine_bench_row(what, bytes / (gb ? 1e9 : 1e6), gb ? "GB" : "MB", 1);
}

static json_t *bytes_or_null(bool have, uint64_t bytes)
{
    return have ? json_integer((json_int_t)bytes) : json_null();
}

/* Memory the engine holds and the device it ran on, into out.  The model is on the
 * GPU when the engine says it holds VRAM (or, without memory(), when it is a CUDA
 * engine and there is a GPU: the host gives it GPU 0 then). */
static void report_memory(llmr_engine_bench *b, json_t *out)
{
    llmr_engine_memory m = {.struct_size = sizeof m};
    bool have = b->e.plugin.has_memory && b->e.plugin.api->memory(b->e.model, &m) == LLMR_OK;
    bool on_gpu = have ? m.vram_bytes > 0
                       : b->nvml && (b->e.plugin.info.capabilities & LLMR_ENGINE_CAP_CUDA);
    bool peak = on_gpu && b->have_vram_reading;
    llmr_gpu_reading g = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    snprintf(g.name, sizeof g.name, "%s", on_gpu ? "GPU 0" : "cpu");
    if (on_gpu && b->nvml && llmr_nvml_read(b->nvml, 0, &g, &err) != LLMR_OK)
        snprintf(g.name, sizeof g.name, "GPU 0");
    llmr_strbuf_free(&err);
    json_object_set_new(out, "device", json_string(g.name));
    json_object_set_new(out, "vram_bytes", bytes_or_null(have, m.vram_bytes));
    json_object_set_new(out, "ram_bytes", bytes_or_null(have, m.ram_bytes));
    json_object_set_new(out, "peak_vram_used_bytes", bytes_or_null(peak, b->peak_vram_used));
    if (have) {
        bytes_row("VRAM the engine holds", m.vram_bytes);
        bytes_row("RAM the engine holds", m.ram_bytes);
    }
    if (peak)
        bytes_row("GPU memory used, peak", b->peak_vram_used);
    fprintf(stderr, "device: %s\n", g.name);
}

static const char *base_name(const char *dir, char *buf, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    snprintf(buf, cap, "%.*s", (int)(n - start), dir + start);
    return buf;
}

static bool emit(const llmr_engine_bench_args *a, json_t *out)
{
    char *text = json_dumps(out, JSON_REAL_PRECISION(6));
    if (!text)
        return false;
    puts(text);
    fflush(stdout);
    bool ok = true;
    if (a->json_path) {
        FILE *f = fopen(a->json_path, "w");
        ok = f && fprintf(f, "%s\n", text) >= 0;
        ok = (f && fclose(f) == 0) && ok;
        if (!ok)
            llmr_cli_error(CMD, "cannot write %s: %s", a->json_path, strerror(errno));
    }
    free(text);
    return ok;
}

/* Loads, measures and reports; the exit code. */
static int bench_run(llmr_engine_bench *b, const llmr_config *cfg)
{
    llmr_engine_bench_args *a = &b->a;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *options = NULL;
    json_t *add = json_pack("{s:i}", "ignore_eos", 1);
    llmr_status st = llmr_local_engine_options(a->options_text, add, &options, &err);
    json_decref(add);
    if (st != LLMR_OK) {
        llmr_cli_error(CMD, "--options: %s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st == LLMR_INVALID_ARGUMENT ? LLMR_EXIT_USAGE : LLMR_EXIT_FAILED;
    }
    uint32_t longest = longest_prompt(a);
    if (!a->context)
        a->context = (uint64_t)longest + a->decode_tokens + 16;
    b->prompt = malloc((size_t)longest * sizeof *b->prompt);
    b->samples = calloc((size_t)a->runs, sizeof *b->samples);
    b->skipped = json_array();
    b->rng = a->seed;
    b->nvml = llmr_nvml_open(NULL, &err); /* NULL without a GPU: no readings */
    llmr_strbuf_reset(&err);
    if (llmr_nvml_device_count(b->nvml) == 0) {
        llmr_nvml_close(b->nvml);
        b->nvml = NULL;
    }
    llmr_engine_bench_sample_vram(b);
    uint64_t t0 = llmr_now_ns();
    st = llmr_local_engine_open(cfg, a->dir, options, (uint32_t)a->context, &b->e, &err);
    double load_s = (double)(llmr_now_ns() - t0) / 1e9;
    free(options);
    if (st != LLMR_OK) {
        llmr_cli_error(CMD, "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return LLMR_EXIT_FAILED;
    }
    llmr_strbuf_free(&err);
    llmr_engine_bench_sample_vram(b);
    int rc = LLMR_EXIT_FAILED;
    json_t *out = json_object();
    char name[256];
    uint32_t context = b->e.info.context_length, vocab = b->e.info.vocab_size;
    b->id_limit = vocab < ID_LIMIT ? vocab : ID_LIMIT;
    if (!b->prompt || !b->samples || !b->skipped || !out || b->id_limit == 0 || context < 2) {
        llmr_cli_error(CMD, "%s", b->id_limit == 0 || context < 2
                                      ? "the engine reports no vocabulary or no context"
                                      : "out of memory");
        goto done;
    }
    base_name(a->dir, name, sizeof name);
    json_object_set_new(out, "benchmark", json_string("engine"));
    bool printable = llmr_utf8_valid(name, strlen(name), NULL);
    json_object_set_new(out, "model", printable ? json_string(name) : json_null());
    json_object_set_new(out, "engine", json_string(b->e.plugin_name));
    json_object_set_new(out, "device", json_null()); /* report_memory knows */
    json_object_set_new(out, "load_s", json_real(load_s));
    json_object_set_new(out, "context", json_integer(context));
    fprintf(stderr, "%s with %s, context %u\n%-28s %14s %-8s %5s\n", name, b->e.plugin_name,
            context, "what", "value", "unit", "runs");
    llmr_engine_bench_row("load", load_s, "s", 1);
    llmr_timed_request t;
    bool roomy = context >= WARMUP_PROMPT + WARMUP_TOKENS;
    uint32_t warm_prompt = roomy ? WARMUP_PROMPT : context / 2;
    uint32_t warm_tokens = roomy ? WARMUP_TOKENS : context - warm_prompt;
    if (!llmr_engine_bench_request(b, warm_prompt, warm_tokens, &t) ||
        !llmr_engine_bench_prefill(b, out) || !llmr_engine_bench_decode(b, out))
        goto done;
    report_memory(b, out);
    json_object_set_new(out, "runs", json_integer((json_int_t)a->runs));
    json_object_set_new(out, "decode_tokens", json_integer((json_int_t)a->decode_tokens));
    json_object_set_new(out, "seed", json_integer((json_int_t)a->seed));
    json_object_set_new(out, "sampling",
                        json_pack("{s:f, s:f, s:I, s:f}", "temperature", a->temperature, "top_p", a->top_p,
                                  "top_k", (json_int_t)a->top_k, "min_p", a->min_p));
    json_object_set_new(out, "skipped", json_incref(b->skipped));
    rc = emit(a, out) ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
done:
    json_decref(out);
    llmr_local_engine_close(&b->e);
    return rc;
}

int llmr_bench_engine(int argc, char **argv, const llmr_config *cfg)
{
    llmr_engine_bench b = {.a = {.decode_tokens = 128, .ttft_prompt = 100, .runs = 3, .seed = 1,
                                 .top_p = 1.0}};
    int rc = parse_args(argc, argv, &b.a) ? bench_run(&b, cfg) : LLMR_EXIT_USAGE;
    free(b.a.prompts);
    free(b.a.contexts);
    free(b.prompt);
    free(b.samples);
    json_decref(b.skipped);
    llmr_nvml_close(b.nvml);
    return rc;
}
