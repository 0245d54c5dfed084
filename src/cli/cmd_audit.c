/* `llmr audit`: a running router's audit log of admin actions through GET /v0/audit
 * (docs/router.md, "The audit log"), with an admin key found as router_client.h says.
 * Owns only the command line and what it prints. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/router_client.h"

#define CMD "audit"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr audit [--limit N] [--json] [--router URL] [--api-key KEY]\n\n"
            "Prints a running router's audit log of admin actions, the newest first: when,\n"
            "who (the key id; - without keys), what (method and path, and what it made:\n"
            "a new key's id, a registered model's name) and the answer's status.\n\n"
            "  --limit N       how many (default 100, at most 1000)\n"
            "  --json          print the router's answer as it is\n"
            "  --router URL    the router (default $LLMR_ROUTER, else\n"
            "                  http://127.0.0.1:PORT with the configured port)\n"
            "  --api-key KEY   an admin key (default $LLMR_API_KEY, else $LLMR_ADMIN_KEY,\n"
            "                  else for a router on this machine DATA_DIR/admin.key)\n\n"
            "Exit status: 0 done; 1 refused or failed; 2 a wrong command line.\n");
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    llmr_router_client c;
    llmr_router_client_init(&c, CMD);
    bool as_json = false, bad = false;
    const char *limit = NULL;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad) ||
            llmr_cli_option(argc, argv, &i, "--limit", &limit, &bad))
            continue;
        if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr audit --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    char *end = NULL;
    unsigned long n = limit ? strtoul(limit, &end, 10) : 100;
    if (limit && (!*limit || *end || *limit == '-' || n < 1 || n > 1000)) {
        llmr_cli_error(CMD, "--limit takes a whole number from 1 to 1000, not \"%s\"", limit);
        return LLMR_EXIT_USAGE;
    }
    if (!llmr_router_client_finish(&c, cfg))
        return LLMR_EXIT_USAGE;
    char path[64];
    snprintf(path, sizeof path, "/v0/audit?limit=%lu", n);
    llmr_router_answer ans;
    if (!llmr_router_request(&c, "GET", path, NULL, 30, &ans))
        return LLMR_EXIT_FAILED;
    json_t *rows = json_object_get(ans.json, "audit"), *row;
    int rc = LLMR_EXIT_FAILED;
    if (ans.status != 200 || !json_is_array(rows)) {
        llmr_router_print_refusal(&c, &ans, "reading the audit log", true);
    } else if (as_json) {
        fwrite(llmr_strbuf_cstr(&ans.body), 1, ans.body.len, stdout);
        if (!ans.body.len || llmr_strbuf_cstr(&ans.body)[ans.body.len - 1] != '\n')
            putchar('\n');
        rc = LLMR_EXIT_OK;
    } else if (!json_array_size(rows)) {
        printf("no admin actions at %s\n", c.url);
        rc = LLMR_EXIT_OK;
    } else {
        printf("%-19s  %-20s  %-6s  %s\n", "WHEN", "WHO", "STATUS", "WHAT");
        size_t i;
        json_array_foreach(rows, i, row)
        {
            time_t t = (time_t)(json_integer_value(json_object_get(row, "time_ms")) / 1000);
            struct tm tm;
            char when[32] = "?";
            if (localtime_r(&t, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            const char *target = str_or(row, "target", NULL);
            printf("%-19s  %-20s  %-6lld  %s %s%s%s\n", when, str_or(row, "key_id", "-"),
                   (long long)json_integer_value(json_object_get(row, "status")), str_or(row, "method", "?"),
                   str_or(row, "path", "?"), target ? " -> " : "", target ? target : "");
        }
        rc = LLMR_EXIT_OK;
    }
    llmr_router_answer_free(&ans);
    return rc;
}

const llmr_command llmr_cmd_audit = {"audit", "print a running router's audit log of admin actions", run, help};
