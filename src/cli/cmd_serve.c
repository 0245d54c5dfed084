/* `llmr serve`: the router and a node in one process.  Until the HTTP services
 * exist it reports what it would serve, checking each model under DATA_DIR/models,
 * and exits. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/fs_util.h"
#include "storage/model_storage.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr serve [--host H] [--port P] [--data-dir DIR]\n\n"
            "Starts the router and a node in one process.  In this version the HTTP API is\n"
            "not built yet: serve checks every model directory under DATA_DIR/models, says\n"
            "for each whether it is ready and why not, prints the address it would listen\n"
            "on, and exits 0.\n");
}

static void report_model(const char *models_dir, const char *name)
{
    char *path = llmr_path_join(models_dir, name);
    if (!path)
        return;
    llmr_model_options options;
    llmr_model_options_default(&options);
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_model *m = NULL;
    if (llmr_model_open(path, &options, &m, &problems) != LLMR_OK) {
        printf("  %-24s not ready: %zu problem(s)\n", name, llmr_problems_total(&problems));
        llmr_cli_print_problems(stdout, &problems);
    } else if (m->runtime == LLMR_RUNTIME_NONE) {
        printf("  %-24s not ready: %s\n", name, m->unsupported_reason);
    } else {
        printf("  %-24s %s, runtime %s, %.2f GB: files check out\n", name,
               llmr_model_format_name(m->format), llmr_runtime_name(m->runtime), m->total_bytes / 1e9);
    }
    llmr_model_close(m);
    llmr_problems_free(&problems);
    free(path);
}

static int run(int argc, char **argv, const llmr_config *config)
{
    if (argc > 1) {
        llmr_cli_error("serve", "unexpected argument \"%s\"; see llmr serve --help", argv[1]);
        return LLMR_EXIT_USAGE;
    }
    const char *data_dir = llmr_config_get(config, LLMR_CONFIG_DATA_DIR);
    char *models_dir = llmr_path_join(data_dir, "models");
    if (!models_dir)
        return LLMR_EXIT_FAILED;
    printf("llmr serve: data directory %s\n", data_dir);
    DIR *d = opendir(models_dir);
    size_t n = 0;
    if (d) {
        struct dirent *de;
        printf("models in %s:\n", models_dir);
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char *p = llmr_path_join(models_dir, de->d_name);
            struct stat st;
            if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                report_model(models_dir, de->d_name);
                n++;
            }
            free(p);
        }
        closedir(d);
    }
    if (n == 0)
        printf("no models in %s (put a model directory there, or check one with llmr inspect DIR)\n",
               models_dir);
    printf("llmr serve: would listen on http://%s:%u/v1; the HTTP API is not part of this "
           "version, so serve stops here\n",
           llmr_config_get(config, LLMR_CONFIG_HOST), llmr_config_port(config));
    free(models_dir);
    return LLMR_EXIT_OK;
}

const llmr_command llmr_cmd_serve = {"serve", "check the models it would serve (no HTTP API yet)",
                                     run, help};
