/* What `llmr template render` and `llmr bench template` share (cmd_template.c): the
 * options that name a template and a context, reading both, and compiling the
 * template.  Each function that fails prints why to stderr as "llmr CMD: FILE: why". */
#ifndef LLMR_CLI_CMD_TEMPLATE_H
#define LLMR_CLI_CMD_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "template/template.h"

#include <time.h>

typedef struct llmr_cli_template_args {
    const char *template_path; /* --template FILE */
    const char *context_path;  /* --context FILE.json */
    bool use_default;          /* --default: llmr_template_default_source() */
    const char *now_text;      /* --now "YYYY-MM-DD HH:MM:SS": strftime_now's clock */
    struct tm now;             /* now_text, parsed by llmr_cli_template_args_check */
} llmr_cli_template_args;

/* The render options the arguments ask for (the defaults, with --now's clock). */
llmr_template_options llmr_cli_template_options(const llmr_cli_template_args *a);

/* Takes --template FILE, --context FILE, --now TIME or --default at argv[*i] (advancing *i past a
 * value); false when argv[*i] is none of them.  A missing value sets *bad. */
bool llmr_cli_template_option(int argc, char **argv, int *i, llmr_cli_template_args *a,
                              bool *bad);

/* True when exactly one of --template and --default and a --context were given (and
 * --now, if given, is a time); otherwise says what is wrong. */
bool llmr_cli_template_args_check(const char *cmd, llmr_cli_template_args *a);

/* The template's name in messages: its path, or "the default template". */
const char *llmr_cli_template_name(const llmr_cli_template_args *a);

/* The template's source, malloc'd and NUL-terminated (not counted in *len). */
char *llmr_cli_template_read_source(const char *cmd, const llmr_cli_template_args *a,
                                    size_t *len);

/* The context: the JSON object in --context (a new reference). */
json_t *llmr_cli_template_read_context(const char *cmd, const llmr_cli_template_args *a);

/* Compiles the source; NULL after printing the compile error. */
llmr_template *llmr_cli_template_compile(const char *cmd, const llmr_cli_template_args *a,
                                         const char *src, size_t len);

/* Prints a render error: the template, the context and the renderer's message. */
void llmr_cli_template_render_error(const char *cmd, const llmr_cli_template_args *a,
                                    const char *err);

#endif
