/* `llmr config`: prints each setting, its value, and where the value came from. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json_util.h"

static void help(FILE *out)
{
    fprintf(out, "usage: llmr config [--json]\n\n"
                 "Prints every setting with its value and its source: flag, env (an LLMR_*\n"
                 "variable) or default.  --json prints the same as a JSON object.\n\n"
                 "settings:\n");
    llmr_config_print_help(out);
}

static int run(int argc, char **argv, const llmr_config *config)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            llmr_cli_error("config", "unexpected argument \"%s\"", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    if (!json) {
        llmr_config_print(config, stdout);
        return LLMR_EXIT_OK;
    }
    json_t *o = llmr_config_to_json(config);
    char *text = o ? llmr_json_pretty(o) : NULL;
    json_decref(o);
    if (!text) {
        llmr_cli_error("config", "out of memory");
        return LLMR_EXIT_FAILED;
    }
    puts(text);
    free(text);
    return LLMR_EXIT_OK;
}

const llmr_command llmr_cmd_config = {"config", "print the settings and where each comes from",
                                      run, help};
