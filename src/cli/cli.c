/* Shared helpers of the command line: see cli.h. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"

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

bool llmr_cli_tls_read(const llmr_config *cfg, const char *cmd, llmr_http_limits *l)
{
    const char *cert = llmr_config_get(cfg, LLMR_CONFIG_TLS_CERT);
    const char *key = llmr_config_get(cfg, LLMR_CONFIG_TLS_KEY);
    bool has_cert = cert && *cert, has_key = key && *key;
    if (!has_cert && !has_key)
        return true;
    if (has_cert != has_key) {
        llmr_cli_error(cmd, "%s is set but %s is not: give both (--tls-cert FILE --tls-key FILE) for "
                            "HTTPS, or neither",
                       has_cert ? "tls_cert" : "tls_key", has_cert ? "tls_key" : "tls_cert");
        return false;
    }
    char *pem[2] = {NULL, NULL};
    const char *paths[2] = {cert, key}, *names[2] = {"tls_cert", "tls_key"};
    for (int i = 0; i < 2; i++) {
        size_t len = 0;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_read_file(paths[i], 1u << 20, &pem[i], &len, &err) != LLMR_OK) {
            llmr_cli_error(cmd, "%s: cannot read %s: %s", names[i], paths[i], llmr_strbuf_cstr(&err));
            llmr_strbuf_free(&err);
            free(pem[0]);
            free(pem[1]);
            return false;
        }
        llmr_strbuf_free(&err);
    }
    l->tls_cert_pem = pem[0];
    l->tls_key_pem = pem[1];
    return true;
}

void llmr_cli_tls_free(llmr_http_limits *l)
{
    free((char *)l->tls_cert_pem);
    free((char *)l->tls_key_pem);
    l->tls_cert_pem = l->tls_key_pem = NULL;
}

const char *llmr_cli_scheme(const llmr_http_limits *l)
{
    return l && l->tls_cert_pem && l->tls_key_pem ? "https" : "http";
}
