/* `llmr bench`: benchmarks measured by the project itself.  `bench inspect DIR`
 * times the whole check of a model directory (list, headers, index, config, tensor
 * checks, descriptor) in this process, over several runs; the other subcommands live
 * in bench_*.c (bench.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/utf8.h"
#include "storage/model_storage.h"
#include "tokenizer/tokenizer.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr bench inspect DIR [--runs N] [--format safetensors|gguf]\n"
            "       llmr bench tokenizer --tokenizer FILE --corpus FILE [--runs N]\n"
            "       llmr bench template (--template FILE | --default) --context FILE.json\n"
            "                  [--now \"YYYY-MM-DD HH:MM:SS\"] [--runs N]\n"
            "       llmr bench ipc [--tokens N] [--runs N]\n"
            "       llmr bench engine DIR [--prompts 128,1024,4096] [--contexts 0,4096,32768]\n"
            "                  [--decode-tokens N] [--ttft-prompt N] [--runs N] [--context N]\n"
            "                  [--temperature T] [--top-p P] [--top-k K] [--min-p P]\n"
            "                  [--options JSON] [--seed N] [--json FILE]\n"
            "       llmr bench router [--concurrency 500] [--duration 60] [--nodes 2]\n"
            "                  [--tokens 64] [--token-delay-us 20000] [--kill-node-after S]\n"
            "                  [--endpoint chat|completions] [--threads 2] [--hang-after S]\n"
            "                  [--keep] [--json]\n"
            "       llmr bench serve --model NAME [--url URL | --router URL]\n"
            "                  [--workload sharegpt-like|fixed] [--prompt-len 512] [--output-len 256]\n"
            "                  [--concurrency 1,8,32,64,128,256] [--requests N] [--seed N]\n"
            "                  [--vocab 199998] [--warmup 1] [--api-key KEY] [--timeout S]\n"
            "                  [--json FILE]\n\n"
            "inspect: times llmr inspect's work on DIR N times (default 20) in this process\n"
            "and prints the first run, min, median and max in milliseconds, as JSON.\n\n"
            "tokenizer: loads FILE N times (default 5) and encodes and decodes the whole\n"
            "corpus N times on one thread; prints load time and encode/decode throughput\n"
            "(MB of UTF-8 text per second, medians), as JSON.\n\n"
            "template: compiles a chat template once and renders the JSON context N times\n"
            "(default 2000) on one thread, timing each render (as llmr template render does,\n"
            "without the output); prints a table on stderr and, on stdout, one JSON line:\n"
            "the median, min and max render in microseconds, the compile and the output bytes.\n\n"
            "ipc: the cost per token of running an engine in a worker process: the loopback\n"
            "engine generates N tokens (default 20000) in this process, then through a\n"
            "worker behind the engine host, N runs each (default 5); prints throughputs,\n"
            "the difference per token and the latency from the engine's sampling to the\n"
            "node's callback, as JSON (and a table on stderr).  Needs the loopback plugin\n"
            "in the plugin directories.\n\n"
            "engine: loads the model in DIR in this process with the engine that would serve\n"
            "it (as llmr run does; --options are its load options, to which \"ignore_eos\":1 is\n"
            "added) and times, through the engine ABI, with requests of random token ids\n"
            "(--seed, default 1), greedy unless --temperature (with --top-p, --top-k, --min-p:\n"
            "the sampling every request asks for), after one warm-up request:\n"
            "  load      seconds from the start of the load to a loaded model;\n"
            "  prefill   P / TTFT for each prompt length P of --prompts, one token asked;\n"
            "  TTFT      from submit to the first token, --ttft-prompt tokens (default 100);\n"
            "  decode    tokens per second over --decode-tokens (default 128) tokens after\n"
            "            the first, for each context C of --contexts (prompt max(C, 16));\n"
            "  memory    what the engine says it holds (VRAM, RAM) and the peak of the GPU's\n"
            "            used memory as NVML reports it (every process on it; null on the CPU).\n"
            "Each figure is the median of --runs (default 3); prefill and TTFT first run one\n"
            "untimed prompt of each length (the first use of its shapes).  The model is\n"
            "loaded with --context tokens (default: enough for the largest prompt or context\n"
            "plus the decode tokens and 16); what does not fit is skipped and said so.  Prints\n"
            "a table on stderr and one JSON object on stdout (also to --json FILE).\n\n"
            "router: starts a router and --nodes nodes (child processes of this one, on\n"
            "loopback, in a temporary directory) serving the loopback echo engine with\n"
            "--token-delay-us between tokens, and keeps --concurrency streamed requests of\n"
            "--tokens tokens in flight through the router for --duration seconds (keep-alive\n"
            "connections on --threads event loops).  Router-added latency, per request: the\n"
            "client's time to the first body byte (from writing the request to the kernel's\n"
            "receive time) minus the node's time to first byte as the router measured it\n"
            "(its X-Llmr-Upstream-Ttfb-Us header); see docs/router.md.  Prints requests,\n"
            "tokens/s, errors by kind and the p50/p90/p99/max of router-added latency, client\n"
            "and node TTFB in microseconds, whether p99 < 2 ms, and the router process's\n"
            "threads at peak and peak memory (VmHWM) (--json: one JSON object on stdout,\n"
            "the table on stderr).  --kill-node-after S SIGKILLs one node S seconds in:\n"
            "each stream in flight must then finish or end with an error event and [DONE],\n"
            "and every later request must succeed.  Exits 1 when a request failed otherwise\n"
            "(a hang: no byte for --hang-after seconds), keeping the logs (also --keep).\n\n"
            "serve: many users against a running node (--url, default http://HOST:PORT of the\n"
            "settings) or router (--router URL; the key from --api-key or LLMR_API_KEY), over\n"
            "the OpenAI API: for each level of --concurrency, that many clients send streamed\n"
            "/v1/completions requests one after another (greedy, prompts of random token ids\n"
            "below --vocab, from --seed) until --requests are done (default: twice the\n"
            "level, at least 16).  --workload sharegpt-like: prompt and output lengths each\n"
            "uniform in 32..512; fixed: --prompt-len and --output-len.  Load the model with\n"
            "the engine option \"ignore_eos\": 1 so each request gets its output length.\n"
            "First --warmup short requests (default 1; 0: none), untimed, so that a node that\n"
            "loads the model on demand has loaded it before the first level starts (a failed\n"
            "one is reported and counts as a failed request; the levels still run).\n"
            "Reports per level: output and total (prompt + output) tokens/s, time to first\n"
            "token and between tokens (p50, p99), the median stream's tokens/s, errors, and\n"
            "the most KV cache in use the server's /metrics showed (llmr_kv_cache_used_tokens;\n"
            "n/a when it has none).  A table on stderr, one JSON object on stdout (also to\n"
            "--json FILE).  Exits 1 when a request failed.\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_inspect(int argc, char **argv)
{
    llmr_model_options options;
    llmr_model_options_default(&options);
    options.map_weights = true;
    long runs = 20;
    const char *dir = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--runs", &v, &bad)) {
            runs = bad ? 0 : strtol(v, NULL, 10);
            if (!bad && (runs < 1 || runs > 100000)) {
                llmr_cli_error("bench", "--runs takes 1 to 100000");
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--format", &v, &bad)) {
            if (!bad && !llmr_model_format_parse(v, &options.format)) {
                llmr_cli_error("bench", "--format must be safetensors or gguf");
                bad = true;
            }
        } else if (!dir && argv[i][0] != '-') {
            dir = argv[i];
        } else {
            llmr_cli_error("bench", "unexpected argument \"%s\"", argv[i]);
            bad = true;
        }
    }
    if (!bad && !dir) {
        llmr_cli_error("bench", "usage: llmr bench inspect DIR [--runs N]");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    double *ms = calloc((size_t)runs, sizeof *ms);
    if (!ms)
        return LLMR_EXIT_FAILED;
    uint64_t bytes = 0;
    for (long r = 0; r < runs; r++) {
        llmr_problems problems;
        llmr_problems_init(&problems);
        llmr_model *m;
        double t0 = now_ms();
        llmr_status st = llmr_model_open(dir, &options, &m, &problems);
        json_t *desc = st == LLMR_OK ? llmr_model_descriptor_json(m) : NULL;
        ms[r] = now_ms() - t0;
        if (st != LLMR_OK) {
            llmr_cli_error("bench", "%s does not check out:", dir);
            llmr_cli_print_problems(stderr, &problems);
            llmr_problems_free(&problems);
            free(ms);
            return LLMR_EXIT_FAILED;
        }
        bytes = m->total_bytes;
        json_decref(desc);
        llmr_model_close(m);
        llmr_problems_free(&problems);
    }
    double first = ms[0];
    qsort(ms, (size_t)runs, sizeof *ms, compare_doubles);
    json_t *result = json_pack("{s:s, s:s?, s:I, s:I, s:f, s:f, s:f, s:f}", "benchmark", "inspect",
                               "dir", llmr_utf8_valid(dir, strlen(dir), NULL) ? dir : NULL, "model_bytes",
                               (json_int_t)bytes, "runs", (json_int_t)runs, "first_ms", first,
                               "min_ms", ms[0], "median_ms", ms[runs / 2], "max_ms", ms[runs - 1]);
    char *text = result ? json_dumps(result, JSON_REAL_PRECISION(6)) : NULL;
    if (text)
        puts(text);
    free(text);
    json_decref(result);
    free(ms);
    return text ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
}

static double median_of(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return v[n / 2];
}

static int bench_tokenizer(int argc, char **argv)
{
    const char *path = NULL, *corpus_path = NULL;
    long runs = 5;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--tokenizer", &v, &bad))
            path = v;
        else if (llmr_cli_option(argc, argv, &i, "--corpus", &v, &bad))
            corpus_path = v;
        else if (llmr_cli_option(argc, argv, &i, "--runs", &v, &bad)) {
            runs = bad ? 0 : strtol(v, NULL, 10);
            if (!bad && (runs < 1 || runs > 1000)) {
                llmr_cli_error("bench", "--runs takes 1 to 1000");
                bad = true;
            }
        } else {
            llmr_cli_error("bench", "unexpected argument \"%s\"", argv[i]);
            bad = true;
        }
    }
    if (!bad && (!path || !corpus_path)) {
        llmr_cli_error("bench", "usage: llmr bench tokenizer --tokenizer FILE --corpus FILE");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    char *corpus;
    size_t len;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_read_file(corpus_path, 1u << 30, &corpus, &len, &err) != LLMR_OK) {
        llmr_cli_error("bench", "%s: %s", corpus_path, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return LLMR_EXIT_FAILED;
    }
    double *load = calloc((size_t)runs, sizeof *load), *enc = calloc((size_t)runs, sizeof *enc),
           *dec = calloc((size_t)runs, sizeof *dec);
    llmr_tokenizer *tok = NULL;
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf text = LLMR_STRBUF_INIT;
    int rc = LLMR_EXIT_FAILED;
    if (!load || !enc || !dec)
        goto done;
    for (long r = 0; r < runs; r++) {
        llmr_tokenizer_free(tok);
        tok = NULL;
        double t0 = now_ms();
        if (llmr_tokenizer_load_file(path, &tok, &err) != LLMR_OK) {
            llmr_cli_error("bench", "%s", llmr_strbuf_cstr(&err));
            goto done;
        }
        load[r] = now_ms() - t0;
    }
    for (long r = 0; r < runs; r++) {
        ids.count = 0;
        double t0 = now_ms();
        if (llmr_tokenizer_encode(tok, corpus, len, LLMR_ENCODE_PARSE_SPECIAL, &ids, &err) != LLMR_OK) {
            llmr_cli_error("bench", "encode: %s", llmr_strbuf_cstr(&err));
            goto done;
        }
        enc[r] = now_ms() - t0;
        llmr_strbuf_reset(&text);
        t0 = now_ms();
        if (llmr_tokenizer_decode(tok, ids.data, ids.count, 0, &text, NULL, &err) != LLMR_OK) {
            llmr_cli_error("bench", "decode: %s", llmr_strbuf_cstr(&err));
            goto done;
        }
        dec[r] = now_ms() - t0;
    }
    bool round_trip = text.len == len && memcmp(llmr_strbuf_cstr(&text), corpus, len) == 0;
    double mb = len / 1e6;
    size_t n_ids = ids.count;
    double load_ms = median_of(load, runs), enc_ms = median_of(enc, runs), dec_ms = median_of(dec, runs);
    printf("{\"benchmark\": \"tokenizer\", \"corpus_bytes\": %zu, \"tokens\": %zu, \"runs\": %ld, "
           "\"load_ms\": %.1f, \"encode_ms\": %.2f, \"encode_mb_per_s\": %.2f, "
           "\"decode_ms\": %.2f, \"decode_mb_per_s\": %.2f, \"round_trip\": %s}\n",
           len, n_ids, runs, load_ms, enc_ms, mb / (enc_ms / 1e3), dec_ms, mb / (dec_ms / 1e3),
           round_trip ? "true" : "false");
    rc = LLMR_EXIT_OK;
done:
    free(load);
    free(enc);
    free(dec);
    free(corpus);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&text);
    llmr_strbuf_free(&err);
    llmr_tokenizer_free(tok);
    return rc;
}

static int run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    if (argc >= 2 && strcmp(argv[1], "inspect") == 0)
        return bench_inspect(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "ipc") == 0)
        return llmr_bench_ipc(argc - 1, argv + 1, config);
    if (argc >= 2 && strcmp(argv[1], "tokenizer") == 0)
        return bench_tokenizer(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "engine") == 0)
        return llmr_bench_engine(argc - 1, argv + 1, config);
    if (argc >= 2 && strcmp(argv[1], "template") == 0)
        return llmr_bench_template(argc - 1, argv + 1, config);
    if (argc >= 2 && strcmp(argv[1], "router") == 0)
        return llmr_bench_router(argc - 1, argv + 1, config);
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return llmr_bench_serve(argc - 1, argv + 1, config);
    llmr_cli_error("bench", "which benchmark? (inspect, tokenizer, template, ipc, engine, router)");
    return LLMR_EXIT_USAGE;
}

const llmr_command llmr_cmd_bench = {"bench",
                                     "benchmarks: inspect, tokenizer, template, ipc, engine, router", run,
                                     help};
