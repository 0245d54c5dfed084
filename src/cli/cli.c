/* Shared helpers of the command line: see cli.h. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
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

bool llmr_cli_http_limit(int argc, char **argv, int *i, const char *cmd, llmr_http_limits *l,
                         bool *bad)
{
    static const struct {
        const char *name;
        size_t offset;
        unsigned long max;
    } flags[] = {
        {"--max-connections", offsetof(llmr_http_limits, max_connections), 1000000},
        {"--max-connections-per-client", offsetof(llmr_http_limits, max_connections_per_client),
         1000000},
        {"--header-timeout", offsetof(llmr_http_limits, header_timeout_s), 86400},
        {"--body-timeout", offsetof(llmr_http_limits, body_timeout_s), 86400},
    };
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (strcmp(argv[*i], flags[k].name) != 0)
            continue;
        const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
        char *end = NULL;
        unsigned long n = v ? strtoul(v, &end, 10) : 0;
        if (!v || !*v || *end || *v == '-' || n < 1 || n > flags[k].max) {
            llmr_cli_error(cmd, "%s takes a whole number from 1 to %lu%s", flags[k].name,
                           flags[k].max, strstr(flags[k].name, "timeout") ? " (seconds)" : "");
            *bad = true;
        }
        else
            *(unsigned *)(void *)((char *)l + flags[k].offset) = (unsigned)n;
        *i += v ? 1 : 0;
        return true;
    }
    return false;
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
