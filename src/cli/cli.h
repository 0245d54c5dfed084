/* The `llmr` command line: the table of subcommands and what they share.  Each
 * subcommand lives in its own cmd_*.c file and returns the process exit code:
 * 0 success, 1 the work failed (the reasons are printed), 2 the command line was
 * wrong. */
#ifndef LLMR_CLI_CLI_H
#define LLMR_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "common/config.h"
#include "common/problems.h"
#include "http/http_server.h"

#define LLMR_EXIT_OK 0
#define LLMR_EXIT_FAILED 1
#define LLMR_EXIT_USAGE 2

typedef struct llmr_command {
    const char *name;
    const char *summary;
    /* argv[0] is the command's name; config flags are already removed. */
    int (*run)(int argc, char **argv, const llmr_config *config);
    void (*help)(FILE *out);
} llmr_command;

extern const llmr_command llmr_cmd_serve;
extern const llmr_command llmr_cmd_inspect;
extern const llmr_command llmr_cmd_config;
extern const llmr_command llmr_cmd_model;
extern const llmr_command llmr_cmd_bench;
extern const llmr_command llmr_cmd_tokenize;
extern const llmr_command llmr_cmd_detokenize;
extern const llmr_command llmr_cmd_template;
extern const llmr_command llmr_cmd_node;
extern const llmr_command llmr_cmd_router;
extern const llmr_command llmr_cmd_pull;
extern const llmr_command llmr_cmd_list;
extern const llmr_command llmr_cmd_ps;
extern const llmr_command llmr_cmd_stop;
extern const llmr_command llmr_cmd_rm;
extern const llmr_command llmr_cmd_keys;
extern const llmr_command llmr_cmd_audit;
extern const llmr_command llmr_cmd_run;
extern const llmr_command llmr_cmd_logits;

/* True when argv holds -h or --help. */
bool llmr_cli_wants_help(int argc, char **argv);

/* Reads "--name value" or "--name=value" at argv[*i]; advances *i past the value.
 * False when argv[*i] is not that option.  A missing value prints an error and sets
 * *bad. */
bool llmr_cli_option(int argc, char **argv, int *i, const char *name, const char **value,
                     bool *bad);

/* The options of a server's connections (llmr_http_limits): --max-connections N,
 * --max-connections-per-client N, --header-timeout SECONDS, --body-timeout SECONDS.
 * True when argv[*i] is one of them (*i then moves past its value); *bad is set, with
 * a message for cmd, when the value is not a whole number from 1 to 1000000 (86400
 * for the timeouts). */
bool llmr_cli_http_limit(int argc, char **argv, int *i, const char *cmd, llmr_http_limits *l,
                         bool *bad);

/* A server's TLS from the settings tls_cert and tls_key (--tls-cert FILE, LLMR_TLS_CERT, ...):
 * both PEM files read into l->tls_cert_pem and l->tls_key_pem (free them with
 * llmr_cli_tls_free), or neither set (l unchanged).  False, with a message for cmd, when
 * only one is set or a file cannot be read. */
bool llmr_cli_tls_read(const llmr_config *cfg, const char *cmd, llmr_http_limits *l);
void llmr_cli_tls_free(llmr_http_limits *l);
/* "https" when l carries TLS, else "http": the scheme of the server's own URLs. */
const char *llmr_cli_scheme(const llmr_http_limits *l);

/* Prints "llmr CMD: " + message to stderr. */
void llmr_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints every problem, one per line, "  file: message", then a count of those not
 * shown. */
void llmr_cli_print_problems(FILE *out, const llmr_problems *problems);

#endif
