/* Shared helpers of the command line: see cli.h. */
#include "cli/cli.h"

#include <stdarg.h>
#include <string.h>

bool llmr_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

bool llmr_cli_option(int argc, char **argv, int *i, const char *name, const char **value,
                     bool *bad)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return false;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0')
        return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "llmr %s: %s needs a value\n", argv[0], name);
        *bad = true;
        return true;
    }
    *value = argv[++*i];
    return true;
}

void llmr_cli_error(const char *cmd, const char *fmt, ...)
{
    fprintf(stderr, "llmr %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void llmr_cli_print_problems(FILE *out, const llmr_problems *p)
{
    for (size_t i = 0; i < p->count; i++) {
        if (p->items[i].file)
            fprintf(out, "  %s: %s\n", p->items[i].file, p->items[i].message);
        else
            fprintf(out, "  %s\n", p->items[i].message);
    }
    if (p->dropped)
        fprintf(out, "  ... and %zu more problems not shown\n", p->dropped);
}
