/* `llmr inspect DIR`: checks a model directory and prints its descriptor as JSON, or
 * lists every problem (each naming its file) and exits 1. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json_util.h"
#include "storage/model_storage.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr inspect DIR [--format safetensors|gguf] [--file NAME.gguf]\n\n"
            "Checks the model in DIR (a Hugging Face snapshot or a directory of .gguf files)\n"
            "and prints its descriptor as JSON: format, runtime, architecture, primary file,\n"
            "files with sizes, total bytes, and the config fields the engine uses.  Only\n"
            "headers are read, so a model of any size is checked in well under a second.\n\n"
            "  --format F   the format the model is registered as.  Without it the format\n"
            "               comes from the files, and a directory holding both .safetensors\n"
            "               and .gguf files is an error.\n"
            "  --file NAME  which .gguf file is the model when DIR holds several (the first\n"
            "               part of a split model brings the other parts).\n\n"
            "Exit status: 0 when the model is sound (a model no engine runs is sound: its\n"
            "\"runtime\" is null and \"unsupported_reason\" says why), 1 when it has problems,\n"
            "all of which are listed on stderr, 2 for a wrong command line.\n");
}

static int run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    llmr_model_options options;
    llmr_model_options_default(&options);
    options.map_weights = true;
    const char *dir = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *value;
        if (llmr_cli_option(argc, argv, &i, "--format", &value, &bad)) {
            if (!bad && !llmr_model_format_parse(value, &options.format)) {
                llmr_cli_error("inspect", "--format must be safetensors or gguf, not \"%s\"", value);
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--file", &value, &bad)) {
            options.gguf_file = value;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            llmr_cli_error("inspect", "unknown option \"%s\"; see llmr inspect --help", argv[i]);
            bad = true;
        } else if (dir) {
            llmr_cli_error("inspect", "one directory at a time (got \"%s\" and \"%s\")", dir, argv[i]);
            bad = true;
        } else {
            dir = argv[i];
        }
    }
    if (!bad && !dir) {
        llmr_cli_error("inspect", "which directory? usage: llmr inspect DIR");
        bad = true;
    }
    if (bad)
        return LLMR_EXIT_USAGE;

    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_model *model;
    if (llmr_model_open(dir, &options, &model, &problems) != LLMR_OK) {
        fprintf(stderr, "llmr inspect: %s: %zu problem%s\n", dir, llmr_problems_total(&problems),
                llmr_problems_total(&problems) == 1 ? "" : "s");
        llmr_cli_print_problems(stderr, &problems);
        llmr_problems_free(&problems);
        return LLMR_EXIT_FAILED;
    }
    json_t *desc = llmr_model_descriptor_json(model);
    char *text = desc ? llmr_json_pretty(desc) : NULL;
    int rc = LLMR_EXIT_OK;
    if (text) {
        puts(text);
    } else {
        llmr_cli_error("inspect", "out of memory");
        rc = LLMR_EXIT_FAILED;
    }
    if (model->runtime == LLMR_RUNTIME_NONE)
        fprintf(stderr, "llmr inspect: note: no engine runs this model: %s\n",
                model->unsupported_reason ? model->unsupported_reason : "unknown reason");
    free(text);
    json_decref(desc);
    llmr_model_close(model);
    return rc;
}

const llmr_command llmr_cmd_inspect = {"inspect", "check a model directory and print its descriptor",
                                       run, help};
