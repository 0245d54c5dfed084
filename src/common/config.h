/* Process configuration: every setting comes from a command-line flag, else from an
 * LLMR_* environment variable, else from its default, in that order.
 *
 * The settings are listed once, in LLMR_CONFIG_LIST; the flag (--data-dir), the
 * variable (LLMR_DATA_DIR) and `llmr config`'s output all derive from it.  A config
 * owns its strings; load it once at start and read it from anywhere after. */
#ifndef LLMR_COMMON_CONFIG_H
#define LLMR_COMMON_CONFIG_H

#include <jansson.h>
#include <stdio.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* X(KEY, name, default, description).  A NULL default is computed at load time
 * (data_dir: $XDG_DATA_HOME/llmr, else $HOME/.local/share/llmr, else ./llmr-data). */
#define LLMR_CONFIG_LIST(X)                                                              \
    X(HOST, host, "127.0.0.1", "address the HTTP server listens on")                     \
    X(PORT, port, "8080", "TCP port of the HTTP server, 1 to 65535 (0: any free port)")                     \
    X(DATA_DIR, data_dir, NULL, "directory that holds models, the database and state")   \
    X(LOG_LEVEL, log_level, "info", "least severe log level shown: debug, info, warn, error, off") \
    X(LOG_FORMAT, log_format, "text",                                                    \
      "log line format: text, or json (one JSON object per line, access lines included)") \
    X(PLUGIN_DIRS, plugin_dirs, "",                                                      \
      "engine plugin directories, ':'-separated (default: DATA_DIR/engines, then the "    \
      "engines installed with llmr)")                                                     \
    X(REQUEST_TIMEOUT, request_timeout, "30",                                            \
      "seconds a request of a model on a GPU may go without a token before the "          \
      "watchdog ends it")                                                                \
    X(CPU_REQUEST_TIMEOUT, cpu_request_timeout, "600",                                   \
      "seconds a request of a model on the CPU may go without a token (its prompt's "     \
      "prefill included) before the watchdog ends it")                                   \
    X(CANCEL_GRACE, cancel_grace, "5",                                                   \
      "seconds a timed-out request has to stop before its engine worker is killed")      \
    X(MEMORY_THRESHOLD, memory_threshold, "0.90",                                        \
      "fraction of RAM or of a GPU's memory above which idle models are unloaded and "    \
      "loads that would cross it are refused")                                           \
    X(VRAM_BUDGETS, vram_budgets, "",                                                    \
      "GPU memory per engine plugin when several share a GPU: PLUGIN-ID=SIZE,... "        \
      "(e.g. gpt-oss-cuda=60GiB)")                                                       \
    X(CORS_ORIGINS, cors_origins, "",                                                    \
      "origins a browser app may call the HTTP API from, comma-separated "                \
      "(https://app.example.com,http://localhost:3000), or * for any; empty: no CORS")    \
    X(TLS_CERT, tls_cert, "",                                                            \
      "PEM file of the certificate (chain) the HTTP server presents; with tls_key it "    \
      "speaks HTTPS only")                                                               \
    X(TLS_KEY, tls_key, "", "PEM file of the private key of tls_cert")                   \
    X(TLS_CA, tls_ca, "",                                                                \
      "PEM file of CA certificates that llmr's own HTTPS connections (to a router, a "    \
      "node, or a proxy in front of one) trust besides the system's")

typedef enum llmr_config_key {
#define LLMR_CONFIG_ENUM(key, name, def, desc) LLMR_CONFIG_##key,
    LLMR_CONFIG_LIST(LLMR_CONFIG_ENUM)
#undef LLMR_CONFIG_ENUM
    LLMR_CONFIG_KEY_COUNT
} llmr_config_key;

typedef enum llmr_config_source {
    LLMR_CONFIG_FROM_DEFAULT,
    LLMR_CONFIG_FROM_ENV,
    LLMR_CONFIG_FROM_FLAG
} llmr_config_source;

typedef struct llmr_config {
    char *value[LLMR_CONFIG_KEY_COUNT];
    llmr_config_source source[LLMR_CONFIG_KEY_COUNT];
} llmr_config;

/* Fills cfg from argv, the environment and the defaults, and checks every value.
 * Flags may stand anywhere before a "--" as "--name value" or "--name=value"; the
 * ones it takes are removed from argv (*argc shrinks; argv[0] stays), leaving the
 * subcommand's own arguments in order.  On error nothing needs freeing and err
 * names the flag or variable and what is wrong with it (INVALID_ARGUMENT). */
llmr_status llmr_config_load(llmr_config *cfg, int *argc, char **argv, llmr_strbuf *err);
void llmr_config_free(llmr_config *cfg);

const char *llmr_config_get(const llmr_config *cfg, llmr_config_key key);
/* The port as a number (the value was checked at load). */
unsigned llmr_config_port(const llmr_config *cfg);
/* A numeric setting (request_timeout, cancel_grace, memory_threshold) as a number;
 * the value was checked at load. */
double llmr_config_number(const llmr_config *cfg, llmr_config_key key);

const char *llmr_config_name(llmr_config_key key);        /* "data_dir" */
const char *llmr_config_description(llmr_config_key key);
const char *llmr_config_source_name(llmr_config_source source); /* "default", "env", "flag" */
/* Writes "--data-dir" / "LLMR_DATA_DIR" into sb. */
void llmr_config_flag_name(llmr_config_key key, llmr_strbuf *sb);
void llmr_config_env_name(llmr_config_key key, llmr_strbuf *sb);

/* {"host": {"value": ..., "source": ..., "flag": ..., "env": ...}, ...} */
json_t *llmr_config_to_json(const llmr_config *cfg);
/* One aligned line per setting, for `llmr config`. */
void llmr_config_print(const llmr_config *cfg, FILE *out);
/* The --help lines that describe the settings. */
void llmr_config_print_help(FILE *out);

#endif
