/* `llmr`: one binary, subcommands.  Reads the configuration (flags > LLMR_*
 * environment > defaults), sets the log level, and hands the rest of the command
 * line to the subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "engine_host/worker_main.h"
#include "net/curl_handle.h"

#ifndef LLMR_VERSION
#define LLMR_VERSION "0.0.0-dev"
#endif

static const llmr_command *const commands[] = {
    &llmr_cmd_serve,    &llmr_cmd_router,     &llmr_cmd_node,       &llmr_cmd_pull,     &llmr_cmd_list,
    &llmr_cmd_ps,       &llmr_cmd_stop,       &llmr_cmd_rm,         &llmr_cmd_keys,     &llmr_cmd_audit,
    &llmr_cmd_run,      &llmr_cmd_inspect,
    &llmr_cmd_tokenize, &llmr_cmd_detokenize, &llmr_cmd_template, &llmr_cmd_model,
    &llmr_cmd_bench,    &llmr_cmd_logits,     &llmr_cmd_config,
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "llmr %s: serve large language models from your own GPUs behind one\n"
                 "OpenAI-compatible endpoint.\n\n"
                 "usage: llmr COMMAND [ARGS] [SETTINGS]\n\ncommands:\n",
            LLMR_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "  %-9s %s\n", "version", "print the version");
    fprintf(out, "  %-9s %s\n", "help", "this text, or `llmr help COMMAND` for one command");
    fprintf(out, "\nsettings (any command; a flag beats the environment, which beats the default):\n");
    llmr_config_print_help(out);
}

static const llmr_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    llmr_config config;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_config_load(&config, &argc, argv, &err) != LLMR_OK) {
        fprintf(stderr, "llmr: %s\n", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return LLMR_EXIT_USAGE;
    }
    llmr_strbuf_free(&err);
    llmr_log_level level = LLMR_LOG_INFO;
    llmr_log_level_parse(llmr_config_get(&config, LLMR_CONFIG_LOG_LEVEL), &level);
    llmr_log_set_level(level);
    llmr_log_format format = LLMR_LOG_FORMAT_TEXT;
    const char *format_text = llmr_config_get(&config, LLMR_CONFIG_LOG_FORMAT);
    llmr_log_format_parse(format_text, &format);
    llmr_log_set_format(format);
    llmr_curl_set_ca_file(llmr_config_get(&config, LLMR_CONFIG_TLS_CA));
    /* the node's engine workers (processes of their own) log the same way */
    if (format_text)
        setenv("LLMR_LOG_FORMAT", format_text, 1);

    int rc;
    if (argc >= 2 && strcmp(argv[1], LLMR_WORKER_COMMAND) == 0) {
        /* Internal: the node starts its engine workers this way (not listed). */
        rc = llmr_engine_worker_cli(argc - 1, argv + 1);
    } else if (argc < 2) {
        usage(stderr);
        rc = LLMR_EXIT_USAGE;
    } else if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
               strcmp(argv[1], "-h") == 0) {
        const llmr_command *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (c)
            c->help(stdout);
        else
            usage(stdout);
        rc = argc > 2 && !c ? LLMR_EXIT_USAGE : LLMR_EXIT_OK;
    } else if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("llmr %s\n", LLMR_VERSION);
        rc = LLMR_EXIT_OK;
    } else {
        const llmr_command *c = find_command(argv[1]);
        if (!c) {
            fprintf(stderr, "llmr: unknown command \"%s\"; `llmr help` lists them\n", argv[1]);
            rc = LLMR_EXIT_USAGE;
        } else if (llmr_cli_wants_help(argc - 1, argv + 1)) {
            c->help(stdout);
            rc = LLMR_EXIT_OK;
        } else {
            rc = c->run(argc - 1, argv + 1, &config);
        }
    }
    llmr_config_free(&config);
    return rc;
}
