/* `llmr bench engine`: the timed requests, and the figures made of them (see the
 * definitions at the top of bench_engine.c). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/bench_engine.h"
#include "cli/cli.h"

#define CMD LLMR_BENCH_ENGINE_CMD
#define MIN_DECODE_PROMPT 16u

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void llmr_engine_bench_sample_vram(llmr_engine_bench *b)
{
    llmr_gpu_reading g;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (b->nvml && llmr_nvml_read(b->nvml, 0, &g, &err) == LLMR_OK) {
        b->have_vram_reading = true;
        if (g.used_bytes > b->peak_vram_used)
            b->peak_vram_used = g.used_bytes;
    }
    llmr_strbuf_free(&err);
}

bool llmr_engine_bench_request(llmr_engine_bench *b, uint32_t prompt_len, uint32_t max_tokens,
                               llmr_timed_request *t)
{
    for (uint32_t i = 0; i < prompt_len; i++)
        b->prompt[i] = (int32_t)(splitmix64(&b->rng) % b->id_limit);
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.request_id = ++b->next_request;
    p.prompt = b->prompt;
    p.prompt_len = prompt_len;
    p.max_tokens = max_tokens;
    p.temperature = (float)b->a.temperature;
    p.top_p = (float)b->a.top_p;
    p.top_k = (uint32_t)b->a.top_k;
    p.min_p = (float)b->a.min_p;
    p.seed = b->a.seed;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_timed_request_run(&b->e, &p, t, &err);
    llmr_engine_bench_sample_vram(b);
    if (st == LLMR_OK && t->tokens == 0) {
        st = LLMR_INTERNAL;
        llmr_strbuf_puts(&err, "the request ended without a token");
    }
    if (st != LLMR_OK)
        llmr_cli_error(CMD, "%u prompt tokens, %u to generate: %s", prompt_len, max_tokens,
                       llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return st == LLMR_OK;
}

/* b - a in seconds, at least a nanosecond (figures are divided by it). */
static double seconds_between(uint64_t a, uint64_t b)
{
    return b > a ? (double)(b - a) / 1e9 : 1e-9;
}

static int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, uint64_t n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void llmr_engine_bench_row(const char *what, double value, const char *unit, uint64_t runs)
{
    fprintf(stderr, "%-28s %14.3f %-8s %5llu\n", what, value, unit, (unsigned long long)runs);
}

/* Whether a measurement (kind "prefill", "ttft" or "decode" of size tokens, the table's
 * row `what`) needing `tokens` of context fits the loaded context; if not, says so in
 * the table and in the JSON's "skipped". */
static bool fits(llmr_engine_bench *b, const char *kind, const char *what, uint32_t size,
                 uint64_t tokens)
{
    uint32_t context = b->e.info.context_length;
    if (tokens <= context)
        return true;
    fprintf(stderr, "%-28s skipped: needs %llu tokens of context, loaded with %u\n", what,
            (unsigned long long)tokens, context);
    json_array_append_new(b->skipped, json_pack("{s:s, s:I, s:I}", "what", kind, "size",
                                                (json_int_t)size, "needs", (json_int_t)tokens));
    return false;
}

/* The median TTFT in ms over runs prompts of prompt_len tokens into *ms, after one
 * untimed prompt of that length: a length's first prompt pays for the kernels and
 * buffers its shapes use first (an engine's lazily loaded GPU code, its library's
 * choice of algorithm), which a median of two runs would otherwise half include. */
static bool ttft_ms(llmr_engine_bench *b, uint32_t prompt_len, double *ms)
{
    llmr_timed_request first;
    if (!llmr_engine_bench_request(b, prompt_len, 1, &first))
        return false;
    for (uint64_t r = 0; r < b->a.runs; r++) {
        llmr_timed_request t;
        if (!llmr_engine_bench_request(b, prompt_len, 1, &t))
            return false;
        b->samples[r] = seconds_between(t.submit_ns, t.first_ns) * 1e3;
    }
    *ms = median(b->samples, b->a.runs);
    return true;
}

bool llmr_engine_bench_prefill(llmr_engine_bench *b, json_t *out)
{
    json_t *list = json_array();
    json_object_set_new(out, "prefill", list);
    for (uint32_t i = 0; i < b->a.n_prompts; i++) {
        uint32_t n = (uint32_t)b->a.prompts[i];
        char what[64];
        snprintf(what, sizeof what, "prefill %u", n);
        double ms;
        if (!fits(b, "prefill", what, n, (uint64_t)n + 1))
            continue;
        if (!ttft_ms(b, n, &ms))
            return false;
        double tok_s = n / (ms / 1e3);
        llmr_engine_bench_row(what, tok_s, "tok/s", b->a.runs);
        json_array_append_new(list, json_pack("{s:I, s:f, s:f}", "prompt", (json_int_t)n,
                                              "tok_s", tok_s, "ttft_ms", ms));
    }
    char what[64];
    uint32_t n = (uint32_t)b->a.ttft_prompt;
    snprintf(what, sizeof what, "TTFT, %u-token prompt", n);
    double ms = 0;
    bool fit = fits(b, "ttft", what, n, (uint64_t)n + 1);
    if (fit && !ttft_ms(b, n, &ms))
        return false;
    if (fit)
        llmr_engine_bench_row(what, ms, "ms", b->a.runs);
    json_object_set_new(out, "ttft_ms", fit ? json_real(ms) : json_null());
    json_object_set_new(out, "ttft_prompt", json_integer(n));
    return true;
}

bool llmr_engine_bench_decode(llmr_engine_bench *b, json_t *out)
{
    json_t *list = json_array();
    json_object_set_new(out, "decode", list);
    uint32_t new_tokens = (uint32_t)b->a.decode_tokens;
    for (uint32_t i = 0; i < b->a.n_contexts; i++) {
        uint32_t c = (uint32_t)b->a.contexts[i];
        uint32_t prompt_len = c > MIN_DECODE_PROMPT ? c : MIN_DECODE_PROMPT;
        char what[64];
        snprintf(what, sizeof what, "decode at %u", c);
        if (!fits(b, "decode", what, c, (uint64_t)prompt_len + new_tokens + 1))
            continue;
        for (uint64_t r = 0; r < b->a.runs; r++) {
            llmr_timed_request t;
            if (!llmr_engine_bench_request(b, prompt_len, new_tokens + 1, &t))
                return false;
            if (t.tokens < 2) {
                llmr_cli_error(CMD, "%s: the engine stopped after %u token(s)", what, t.tokens);
                return false;
            }
            if (t.tokens < new_tokens + 1)
                fprintf(stderr, "%s: the engine stopped after %u of %u tokens (a stop id?)\n",
                        what, t.tokens, new_tokens + 1);
            b->samples[r] = (t.tokens - 1) / seconds_between(t.first_ns, t.last_ns);
        }
        double tok_s = median(b->samples, b->a.runs);
        llmr_engine_bench_row(what, tok_s, "tok/s", b->a.runs);
        json_array_append_new(list, json_pack("{s:I, s:f, s:f}", "context", (json_int_t)c,
                                              "tok_s", tok_s, "ms_per_token", 1e3 / tok_s));
    }
    return true;
}
