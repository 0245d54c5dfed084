/* `llmr list`: the models a running router has registered (GET /v0/models), as a table
 * with each model's state on the nodes (GET /v0/models/NAME), or the router's JSON as
 * is.  Owns only the command line and the table (docs/router.md). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/router_client.h"

#define CMD "list"

static void help(FILE *out)
{
    fprintf(out, "usage: llmr list [--json] [--router URL] [--api-key KEY]\n\n"
                 "Lists the models registered with a running router (`llmr serve` or `llmr router`):\n"
                 "name, format, source and state (\"ready on 1/2 nodes\", or why not: syncing,\n"
                 "failed with the reason, no node registered).\n\n"
                 "  --json          print the router's GET /v0/models answer as it is\n"
                 "  --router URL    the router (default $LLMR_ROUTER, else\n"
                 "                  http://127.0.0.1:PORT with the configured port)\n"
                 "  --api-key KEY   (or --key) a node or admin key (default $LLMR_API_KEY, else\n"
                 "                  $LLMR_ADMIN_KEY, else for a router on this machine the\n"
                 "                  key file DATA_DIR/admin.key that the router wrote)\n");
}

typedef struct row {
    const char *name, *format, *source;
    llmr_strbuf state;
} row;

/* The model's state in words, from GET /v0/models/NAME. */
static void model_state(const llmr_router_client *c, const char *name, llmr_strbuf *out)
{
    char path[256];
    snprintf(path, sizeof path, "/v0/models/%s", name);
    llmr_router_answer ans;
    if (!llmr_router_request(c, "GET", path, NULL, 10, &ans)) {
        llmr_strbuf_puts(out, "unknown (no answer)");
        return;
    }
    const json_t *nodes = json_object_get(ans.json, "nodes");
    if (ans.status == 200 && json_is_array(nodes)) {
        llmr_router_describe_model(nodes, out);
    } else {
        char buf[320];
        llmr_strbuf_printf(out, "unknown (%ld: %s)", ans.status, llmr_router_answer_message(&ans, buf, sizeof buf));
    }
    llmr_router_answer_free(&ans);
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static void print_table(const llmr_router_client *c, const json_t *models)
{
    size_t n = json_array_size(models);
    row *rows = calloc(n ? n : 1, sizeof *rows);
    int w_name = 4, w_format = 6, w_source = 6;
    if (!rows) {
        llmr_cli_error(CMD, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(models, i);
        rows[i].name = str_or(m, "name", "?");
        rows[i].format = str_or(m, "format", "?");
        rows[i].source = str_or(m, "source", "?");
        llmr_strbuf_init(&rows[i].state);
        model_state(c, rows[i].name, &rows[i].state);
        int wn = (int)strlen(rows[i].name), wf = (int)strlen(rows[i].format), ws = (int)strlen(rows[i].source);
        w_name = wn > w_name ? wn : w_name;
        w_format = wf > w_format ? wf : w_format;
        w_source = ws > w_source ? ws : w_source;
    }
    w_source = w_source > 60 ? 60 : w_source;
    printf("%-*s  %-*s  %-*s  %s\n", w_name, "NAME", w_format, "FORMAT", w_source, "SOURCE", "STATE");
    for (size_t i = 0; i < n; i++) {
        printf("%-*s  %-*s  %-*s  %s\n", w_name, rows[i].name, w_format, rows[i].format, w_source, rows[i].source,
               llmr_strbuf_cstr(&rows[i].state));
        llmr_strbuf_free(&rows[i].state);
    }
    free(rows);
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    llmr_router_client c;
    llmr_router_client_init(&c, CMD);
    bool as_json = false, bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad)) {
            continue;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr list --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    if (bad || !llmr_router_client_finish(&c, cfg))
        return LLMR_EXIT_USAGE;
    llmr_router_answer ans;
    if (!llmr_router_request(&c, "GET", "/v0/models", NULL, 30, &ans))
        return LLMR_EXIT_FAILED;
    int rc = LLMR_EXIT_FAILED;
    const json_t *models = json_object_get(ans.json, "models");
    if (ans.status != 200 || !json_is_array(models)) {
        llmr_router_print_refusal(&c, &ans, "listing the models", false);
    } else if (as_json) {
        fwrite(llmr_strbuf_cstr(&ans.body), 1, ans.body.len, stdout);
        if (!ans.body.len || llmr_strbuf_cstr(&ans.body)[ans.body.len - 1] != '\n')
            putchar('\n');
        rc = LLMR_EXIT_OK;
    } else if (!json_array_size(models)) {
        printf("no models registered at %s; `llmr pull SOURCE` registers one\n", c.url);
        rc = LLMR_EXIT_OK;
    } else {
        print_table(&c, models);
        rc = LLMR_EXIT_OK;
    }
    llmr_router_answer_free(&ans);
    return rc;
}

const llmr_command llmr_cmd_list = {"list", "list the models a running router has and where they are ready",
                                    run, help};
