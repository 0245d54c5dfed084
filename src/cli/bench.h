/* `llmr bench` subcommands that live in files of their own. */
#ifndef LLMR_CLI_BENCH_H
#define LLMR_CLI_BENCH_H

#include "cli/cli.h"

/* `llmr bench ipc`: bench_ipc.c.  argv[0] is "ipc". */
int llmr_bench_ipc(int argc, char **argv, const llmr_config *cfg);
/* `llmr bench engine DIR`: bench_engine.c.  argv[0] is "engine". */
int llmr_bench_engine(int argc, char **argv, const llmr_config *cfg);
/* `llmr bench template`: bench_template.c.  argv[0] is "template". */
int llmr_bench_template(int argc, char **argv, const llmr_config *cfg);
/* `llmr bench router`: bench_router.c.  argv[0] is "router". */
int llmr_bench_router(int argc, char **argv, const llmr_config *cfg);
/* `llmr bench serve`: bench_serve.c.  argv[0] is "serve". */
int llmr_bench_serve(int argc, char **argv, const llmr_config *cfg);

#endif
