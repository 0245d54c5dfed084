/* `llmr model synth`: writes a synthetic snapshot of a preset.  The options are
 * read here; the work is models/synth.c (gpt-oss presets),
 * models/loopback_model.c (the loopback preset) and models/echo_model.c (the
 * gpt-oss-echo preset). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs_util.h"
#include "models/echo_model.h"
#include "models/gpt_oss_preset.h"
#include "models/loopback_model.h"
#include "models/synth.h"

#define TOKENIZER_ENV "LLMR_GPT_OSS_TOKENIZER_DIR"
#define MAX_THREADS 1024u

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr model synth --preset NAME --out DIR [--tokenizer-from DIR]\n"
            "                        [--fill random|zeros|sparse] [--seed N] [--threads N]\n"
            "                        [--max-shard-bytes N]\n\n"
            "Writes a Hugging Face-layout snapshot of a preset to DIR (which must not exist or\n"
            "be empty): config.json, generation_config.json, shards model-0000N-of-0000M\n"
            "and model.safetensors.index.json with the real tensor names, dtypes and shapes,\n"
            "the tokenizer files and chat_template.jinja.\n\n"
            "  --preset NAME         one of:");
    for (const char *const *p = llmr_gpt_oss_preset_names; *p; p++)
        fprintf(out, " %s", *p);
    fprintf(out, " loopback " LLMR_ECHO_PRESET "\n"
                 "                        (gpt-oss-120b: 36 layers, 128 experts, 65 GB;\n"
                 "                        -2l: the model's widths, two layers;\n"
                 "                        gpt-oss-tiny: small widths, the real vocabulary;\n"
                 "                        loopback: a test model the loopback engine runs,\n"
                 "                        with real data and its own tokenizer; for trying a\n"
                 "                        node without a GPU;\n"
                 "                        " LLMR_ECHO_PRESET ": a loopback model with gpt-oss's\n"
                 "                        tokenizer and chat template that answers a chat\n"
                 "                        with the last user message, special tokens and\n"
                 "                        all (its config.json opts out of request text\n"
                 "                        staying text: special_tokens_in_content), then\n"
                 "                        <|return|>: for testing harmony answers; it needs\n"
                 "                        tokenizer.json and chat_template.jinja)\n"
                 "  --fill random|zeros|sparse\n"
                 "                        random (default): weights with a trained model's\n"
                 "                        scales (normal linear weights of sigma 1/sqrt(in),\n"
                 "                        norms near 1, MXFP4 experts of rms ~1/sqrt(in)),\n"
                 "                        the same bytes for the same seed and any --threads;\n"
                 "                        gpt-oss-20b's 13.8 GB take about a minute.  zeros:\n"
                 "                        sparse files, no disk space and under a second (for\n"
                 "                        header checks).  sparse: the experts' MXFP4 blocks\n"
                 "                        zeros (sparse), their scales 2^0, which the GPU path\n"
                 "                        takes (zero scale bytes mean 2^-127), every other\n"
                 "                        tensor random (--seed): a full-size model for timing\n"
                 "                        on a small disk, whose routers spread tokens over the\n"
                 "                        experts as a trained model's do (gpt-oss-120b: 4.4 of\n"
                 "                        65 GB written)\n"
                 "  --seed N              the random fill's seed (default 0); for loopback,\n"
                 "                        the seed of its next-token table\n"
                 "  --threads N           threads generating data (default: the CPUs online)\n"
                 "  --tokenizer-from DIR  copy tokenizer.json (required), tokenizer_config.json,\n"
                 "                        special_tokens_map.json and chat_template.jinja from\n"
                 "                        DIR.  Default: the first directory holding\n"
                 "                        tokenizer.json of $" TOKENIZER_ENV ",\n"
                 "                        data/gpt-oss beside the llmr binary (where make\n"
                 "                        fetches gpt-oss's tokenizer) and ../data/gpt-oss.\n"
                 "                        Without a chat_template.jinja there, a stand-in\n"
                 "                        harmony template is written (" LLMR_ECHO_PRESET "\n"
                 "                        needs gpt-oss's own)\n"
                 "  --max-shard-bytes N   start a new shard past N bytes (default 5000000000)\n");
}

/* A whole decimal number in [min, max] (no sign, no spaces). */
static bool parse_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!v || !isdigit((unsigned char)v[0]))
        return false;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || n < min || n > max)
        return false;
    *out = n;
    return true;
}

/* The directory of the running binary, in buf; false when unknown. */
static bool exe_dir(char *buf, size_t size)
{
    ssize_t len = readlink("/proc/self/exe", buf, size - 1);
    if (len <= 0 || (size_t)len >= size - 1)
        return false;
    buf[len] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return false;
    *slash = '\0';
    return true;
}

/* The gpt-oss-echo preset: the tokenizer files from --tokenizer-from, else the first
 * directory of the search (as for the gpt-oss presets) that holds tokenizer.json. */
static llmr_status write_echo(const llmr_synth_options *o, llmr_strbuf *err)
{
    if (o->tokenizer_from)
        return llmr_echo_model_write(o->out_dir, o->tokenizer_from, err);
    char *search[3] = {NULL, NULL, NULL};
    size_t k = 0;
    const char *env = getenv(TOKENIZER_ENV);
    if (env && *env)
        search[k++] = strdup(env);
    char dir[PATH_MAX];
    if (exe_dir(dir, sizeof dir)) {
        search[k++] = llmr_path_join(dir, "data/gpt-oss");
        search[k++] = llmr_path_join(dir, "../data/gpt-oss");
    }
    llmr_status st = LLMR_NOT_FOUND;
    const char *found = NULL;
    for (size_t j = 0; j < k && !found; j++) {
        char *tj = search[j] ? llmr_path_join(search[j], "tokenizer.json") : NULL;
        if (tj && access(tj, R_OK) == 0)
            found = search[j];
        free(tj);
    }
    if (found) {
        st = llmr_echo_model_write(o->out_dir, found, err);
        if (st == LLMR_NOT_FOUND)
            llmr_strbuf_puts(err, "; pass --tokenizer-from DIR, a directory with both (make puts "
                                  "gpt-oss's chat template beside the tokenizer when it builds "
                                  "llama.cpp, whose source carries it)");
    } else {
        llmr_strbuf_puts(err, "no gpt-oss tokenizer found: looked for tokenizer.json in");
        for (size_t j = 0; j < k; j++)
            llmr_strbuf_printf(err, "%s %s", j ? "," : "", search[j] ? search[j] : "?");
        if (!k)
            llmr_strbuf_puts(err, " (nowhere)");
        llmr_strbuf_printf(err, "; pass --tokenizer-from DIR, a directory with gpt-oss's "
                                "tokenizer.json and chat_template.jinja (or set $%s)",
                           TOKENIZER_ENV);
    }
    for (size_t j = 0; j < k; j++)
        free(search[j]);
    return st;
}

static int synth(int argc, char **argv)
{
    llmr_synth_options o = {0};
    o.progress = stderr;
    o.fill = LLMR_SYNTH_FILL_RANDOM;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        uint64_t n;
        if (llmr_cli_option(argc, argv, &i, "--preset", &v, &bad)) {
            o.preset = v;
        } else if (llmr_cli_option(argc, argv, &i, "--out", &v, &bad)) {
            o.out_dir = v;
        } else if (llmr_cli_option(argc, argv, &i, "--tokenizer-from", &v, &bad)) {
            o.tokenizer_from = v;
        } else if (llmr_cli_option(argc, argv, &i, "--fill", &v, &bad)) {
            if (!bad && strcmp(v, "random") == 0) {
                o.fill = LLMR_SYNTH_FILL_RANDOM;
            } else if (!bad && strcmp(v, "zeros") == 0) {
                o.fill = LLMR_SYNTH_FILL_ZEROS;
            } else if (!bad && strcmp(v, "sparse") == 0) {
                o.fill = LLMR_SYNTH_FILL_SPARSE;
            } else if (!bad) {
                llmr_cli_error("model synth", "--fill is random, zeros or sparse, not \"%s\"", v);
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--seed", &v, &bad)) {
            if (!bad && !parse_u64(v, 0, UINT64_MAX, &o.seed)) {
                llmr_cli_error("model synth", "--seed takes a whole number from 0 to %" PRIu64
                               ", not \"%s\"", UINT64_MAX, v);
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--threads", &v, &bad)) {
            if (!bad && !parse_u64(v, 1, MAX_THREADS, &n)) {
                llmr_cli_error("model synth", "--threads takes a whole number from 1 to %u, "
                               "not \"%s\"", MAX_THREADS, v);
                bad = true;
            }
            o.threads = bad ? 0 : (unsigned)n;
        } else if (llmr_cli_option(argc, argv, &i, "--max-shard-bytes", &v, &bad)) {
            if (!bad && !parse_u64(v, 1, UINT64_MAX, &o.max_shard_bytes)) {
                llmr_cli_error("model synth", "--max-shard-bytes takes a positive whole number");
                bad = true;
            }
        } else {
            llmr_cli_error("model synth", "unexpected argument \"%s\"; see llmr model --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && (!o.preset || !o.out_dir)) {
        llmr_cli_error("model synth", "--preset and --out are required");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st;
    if (strcmp(o.preset, "loopback") == 0) {
        llmr_loopback_model_options lo;
        llmr_loopback_model_options_default(&lo);
        if (o.seed)
            lo.seed = o.seed; /* another table: a model that answers differently */
        st = llmr_loopback_model_write(o.out_dir, &lo, &err);
        if (st == LLMR_OK) {
            fprintf(stderr, "wrote %s (preset loopback: vocabulary %u, context %u)\n", o.out_dir,
                    lo.vocab_size, lo.context_length);
            llmr_strbuf_free(&err);
            return LLMR_EXIT_OK;
        }
    } else if (strcmp(o.preset, LLMR_ECHO_PRESET) == 0) {
        st = write_echo(&o, &err);
        if (st == LLMR_OK) {
            fprintf(stderr, "wrote %s (preset %s: the loopback engine answers a chat with "
                            "its last user message)\n", o.out_dir, o.preset);
            llmr_strbuf_free(&err);
            return LLMR_EXIT_OK;
        }
    } else {
        /* Where the tokenizer is looked for without --tokenizer-from: the variable,
         * then beside the binary: <bin>/data/gpt-oss (a build tree, where make fetches
         * it) and <bin>/../data/gpt-oss (a bundle with the binary in bin/). */
        char *search[4] = {NULL, NULL, NULL, NULL};
        size_t k = 0;
        const char *env = getenv(TOKENIZER_ENV);
        if (env && *env)
            search[k++] = strdup(env);
        char dir[PATH_MAX];
        if (exe_dir(dir, sizeof dir)) {
            search[k++] = llmr_path_join(dir, "data/gpt-oss");
            search[k++] = llmr_path_join(dir, "../data/gpt-oss");
        }
        bool oom = false;
        for (size_t j = 0; j < k; j++)
            oom |= search[j] == NULL;
        o.tokenizer_search = (const char *const *)search;
        if (oom) {
            llmr_strbuf_puts(&err, "out of memory");
            st = LLMR_OOM_RAM;
        } else {
            st = llmr_synth_snapshot(&o, &err);
        }
        for (size_t j = 0; j < k; j++)
            free(search[j]);
    }
    if (st != LLMR_OK) {
        llmr_cli_error("model synth", "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st == LLMR_INVALID_ARGUMENT ? LLMR_EXIT_USAGE : LLMR_EXIT_FAILED;
    }
    llmr_strbuf_free(&err);
    fprintf(stderr, "wrote %s (preset %s, %s fill)\n", o.out_dir, o.preset,
            o.fill == LLMR_SYNTH_FILL_RANDOM ? "random" : o.fill == LLMR_SYNTH_FILL_SPARSE ? "sparse" : "zeros");
    return LLMR_EXIT_OK;
}

static int run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    if (argc >= 2 && strcmp(argv[1], "synth") == 0)
        return synth(argc - 1, argv + 1);
    llmr_cli_error("model", argc < 2 ? "which subcommand? (synth)" : "unknown subcommand \"%s\" (synth)",
                   argc < 2 ? "" : argv[1]);
    return LLMR_EXIT_USAGE;
}

const llmr_command llmr_cmd_model = {"model", "model tools: synth (write a synthetic snapshot)", run,
                                     help};
