/* `llmr run MODEL`, MODEL a name the running router serves (not a directory): a chat in
 * the terminal, or one answer for a script with a prompt given.  See cmd_run.c for the
 * command line of both forms of `llmr run`. */
#ifndef LLMR_CLI_RUN_CHAT_H
#define LLMR_CLI_RUN_CHAT_H

#include <stdio.h>

#include "common/config.h"

/* argv as `llmr run` got it (argv[0] "run"); an exit code. */
int llmr_run_chat(int argc, char **argv, const llmr_config *cfg);

/* The chat's part of `llmr run --help`. */
void llmr_run_chat_help(FILE *out);

#endif
