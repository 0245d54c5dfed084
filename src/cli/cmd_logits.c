/* `llmr logits DIR --ids 1,2,3`: the model's logits for a sequence of token ids, from
 * the engine that would serve it, run in this process.  For checks against other
 * implementations (tests/gpu/check_gpt_oss.py). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/id_list.h"
#include "cli/local_engine.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr logits DIR --ids 1,2,3 [--top K] [--all FILE] [--context N]\n"
            "                   [--options JSON]\n\n"
            "Runs the token ids through the model in DIR with the engine that would serve it\n"
            "(loaded in this process; the engine must offer logits) and prints the logits of\n"
            "the last position, one number per line (vocab_size lines), or with --top K the K\n"
            "largest as \"id logit\" lines.  --all FILE writes the logits of every position\n"
            "instead: little-endian float32, ids x vocab_size, row by row.\n\n"
            "  --context N     tokens of context to load the model with (default: the model's)\n"
            "  --options JSON  the engine's load options, a JSON object; for gpt-oss e.g.\n"
            "                  '{\"cpu\":1}' (the CPU path even with a GPU), '{\"threads\":8}'\n");
}

typedef struct scored {
    int32_t id;
    float logit;
} scored;

static int by_logit(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    const char *dir = NULL, *ids_text = NULL, *all_path = NULL, *options_text = NULL;
    long top = 0, context = 0;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_option(argc, argv, &i, "--ids", &v, &bad))
            ids_text = v;
        else if (llmr_cli_option(argc, argv, &i, "--all", &v, &bad))
            all_path = v;
        else if (llmr_cli_option(argc, argv, &i, "--top", &v, &bad))
            top = strtol(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--context", &v, &bad))
            context = strtol(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--options", &v, &bad))
            options_text = v;
        else if (!bad && argv[i][0] != '-' && !dir)
            dir = argv[i];
        else if (!bad) {
            llmr_cli_error("logits", "unexpected argument \"%s\"; see llmr logits --help", argv[i]);
            bad = true;
        }
    }
    uint32_t n = 0;
    int32_t *ids = NULL;
    if (!bad && (!dir || !ids_text)) {
        llmr_cli_error("logits", "DIR and --ids are required; see llmr logits --help");
        bad = true;
    }
    if (!bad && !(ids = llmr_id_list_parse(ids_text, &n))) {
        llmr_cli_error("logits", "--ids takes token ids like 1,2,3");
        bad = true;
    }
    if (!bad && (top < 0 || context < 0 || context > INT32_MAX)) {
        llmr_cli_error("logits", "--top and --context take whole numbers");
        bad = true;
    }
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *options = NULL;
    if (!bad && llmr_local_engine_options(options_text, NULL, &options, &err) != LLMR_OK) {
        llmr_cli_error("logits", "--options: %s", llmr_strbuf_cstr(&err));
        bad = true;
    }
    if (bad) {
        llmr_strbuf_free(&err);
        free(ids);
        return LLMR_EXIT_USAGE;
    }
    llmr_local_engine e;
    int rc = LLMR_EXIT_FAILED;
    llmr_status opened = llmr_local_engine_open(cfg, dir, options, (uint32_t)context, &e, &err);
    free(options);
    if (opened != LLMR_OK) {
        llmr_cli_error("logits", "%s: %s", llmr_status_name(opened), llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        free(ids);
        return LLMR_EXIT_FAILED;
    }
    uint32_t vocab = e.info.vocab_size, first = all_path ? 0 : n - 1;
    float *out = NULL;
    if (!e.plugin.has_logits) {
        llmr_cli_error("logits", "the engine %s does not offer logits", e.plugin_name);
    } else if (!(out = malloc((size_t)(n - first) * vocab * sizeof *out))) {
        llmr_cli_error("logits", "out of memory for %u x %u logits", n - first, vocab);
    } else if (e.plugin.api->logits(e.model, ids, n, first, out) != LLMR_OK) {
        llmr_cli_error("logits", "%s", e.plugin.api->last_error(e.model));
    } else if (all_path) {
        FILE *f = fopen(all_path, "wb");
        size_t count = (size_t)n * vocab;
        if (!f || fwrite(out, sizeof *out, count, f) != count || fclose(f) != 0) {
            llmr_cli_error("logits", "cannot write %s: %s", all_path, strerror(errno));
        } else {
            fprintf(stderr, "wrote %s: %u positions x %u logits, float32 (%s)\n", all_path, n,
                    vocab, e.plugin_name);
            rc = LLMR_EXIT_OK;
        }
    } else if (top > 0) {
        scored *s = malloc(vocab * sizeof *s);
        for (uint32_t i = 0; s && i < vocab; i++)
            s[i] = (scored){(int32_t)i, out[i]};
        if (s) {
            qsort(s, vocab, sizeof *s, by_logit);
            for (long i = 0; i < top && i < (long)vocab; i++)
                printf("%d %.9g\n", s[i].id, s[i].logit);
            rc = LLMR_EXIT_OK;
        }
        free(s);
    } else {
        for (uint32_t i = 0; i < vocab; i++)
            printf("%.9g\n", out[i]);
        rc = LLMR_EXIT_OK;
    }
    free(out);
    free(ids);
    llmr_local_engine_close(&e);
    llmr_strbuf_free(&err);
    return rc;
}

const llmr_command llmr_cmd_logits = {"logits", "a model's logits for token ids (checks)", run,
                                      help};
