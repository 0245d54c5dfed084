/* `llmr bench engine` inside: what its two files share.  bench_engine.c reads the
 * command line, loads the model and reports; bench_engine_measure.c runs the timed
 * requests.  Not used elsewhere. */
#ifndef LLMR_CLI_BENCH_ENGINE_H
#define LLMR_CLI_BENCH_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/local_engine.h"
#include "cli/timed_request.h"
#include "engine_host/nvml.h"

#define LLMR_BENCH_ENGINE_CMD "bench engine" /* for llmr_cli_error */

typedef struct llmr_engine_bench_args {
    const char *dir, *options_text, *json_path;
    int32_t *prompts, *contexts; /* --prompts (each >= 1) and --contexts */
    uint32_t n_prompts, n_contexts;
    uint64_t decode_tokens, ttft_prompt, runs, context, seed;
    double temperature, top_p, min_p; /* the sampling of every request (0, 1, 0: greedy) */
    uint64_t top_k;
} llmr_engine_bench_args;

typedef struct llmr_engine_bench {
    llmr_engine_bench_args a;
    llmr_local_engine e;
    uint64_t rng, next_request;
    int32_t *prompt;   /* room for the longest prompt */
    uint32_t id_limit; /* prompt ids are below it */
    llmr_nvml *nvml;   /* NULL without NVML or a GPU */
    bool have_vram_reading;
    uint64_t peak_vram_used; /* GPU 0's used bytes, the most read */
    double *samples;   /* room for runs figures */
    json_t *skipped;   /* what did not fit the context */
} llmr_engine_bench;

/* A row of the table on stderr. */
void llmr_engine_bench_row(const char *what, double value, const char *unit, uint64_t runs);
/* Reads GPU 0's used memory into the peak (nothing without NVML). */
void llmr_engine_bench_sample_vram(llmr_engine_bench *b);
/* One request of a fresh random prompt, sampled as the args say (greedy by default);
 * false (the engine's words printed) when it failed or ended without a token. */
bool llmr_engine_bench_request(llmr_engine_bench *b, uint32_t prompt_len, uint32_t max_tokens,
                               llmr_timed_request *t);
/* Prefill per --prompts and TTFT, into out's "prefill", "ttft_ms" and "ttft_prompt". */
bool llmr_engine_bench_prefill(llmr_engine_bench *b, json_t *out);
/* Decode per --contexts, into out's "decode". */
bool llmr_engine_bench_decode(llmr_engine_bench *b, json_t *out);

#endif
