/* `llmr model synth`: writes a synthetic snapshot of a preset. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "models/gpt_oss_preset.h"
#include "models/loopback_model.h"
#include "models/synth.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr model synth --preset NAME --out DIR [--tokenizer-from DIR]\n"
            "                        [--max-shard-bytes N]\n\n"
            "Writes a Hugging Face-layout snapshot of a preset to DIR (which must not exist or\n"
            "be empty): config.json, generation_config.json, shards model-0000N-of-0000M\n"
            "and model.safetensors.index.json, with the real tensor names, dtypes and shapes.\n"
            "The tensor data is zeros, written as sparse files: a 13 GB gpt-oss-20b snapshot\n"
            "takes no disk space and under a second.\n\n"
            "  --preset NAME         one of:");
    for (const char *const *p = llmr_gpt_oss_preset_names; *p; p++)
        fprintf(out, " %s", *p);
    fprintf(out, " loopback\n"
                 "                        (loopback: a test model the loopback engine runs,\n"
                 "                        with real data and its own tokenizer; for trying a\n"
                 "                        node without a GPU)\n"
                 "  --tokenizer-from DIR  copy tokenizer.json, tokenizer_config.json,\n"
                 "                        special_tokens_map.json and chat_template.jinja from DIR\n"
                 "                        (without it the snapshot has no tokenizer, which a\n"
                 "                        safetensors model needs)\n"
                 "  --max-shard-bytes N   start a new shard past N bytes (default 5000000000)\n");
}

static int synth(int argc, char **argv)
{
    llmr_synth_options o = {0};
    o.progress = stderr;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--preset", &v, &bad)) {
            o.preset = v;
        } else if (llmr_cli_option(argc, argv, &i, "--out", &v, &bad)) {
            o.out_dir = v;
        } else if (llmr_cli_option(argc, argv, &i, "--tokenizer-from", &v, &bad)) {
            o.tokenizer_from = v;
        } else if (llmr_cli_option(argc, argv, &i, "--max-shard-bytes", &v, &bad)) {
            char *end;
            o.max_shard_bytes = bad ? 0 : strtoull(v, &end, 10);
            if (!bad && (*end || o.max_shard_bytes == 0 || v[0] == '-')) {
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
        st = llmr_loopback_model_write(o.out_dir, &lo, &err);
        if (st == LLMR_OK) {
            fprintf(stderr, "wrote %s (preset loopback: vocabulary %u, context %u)\n", o.out_dir,
                    lo.vocab_size, lo.context_length);
            llmr_strbuf_free(&err);
            return LLMR_EXIT_OK;
        }
    } else {
        st = llmr_synth_snapshot(&o, &err);
    }
    if (st != LLMR_OK) {
        llmr_cli_error("model synth", "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st == LLMR_INVALID_ARGUMENT ? LLMR_EXIT_USAGE : LLMR_EXIT_FAILED;
    }
    fprintf(stderr, "wrote %s (preset %s)%s\n", o.out_dir, o.preset,
            o.tokenizer_from ? "" : "; no tokenizer files: pass --tokenizer-from to add them");
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
