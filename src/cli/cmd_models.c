/* The model lifecycle verbs against a running router (docs/router.md):
 *   llmr ps         what is loaded where (GET /v0/nodes: each node's heartbeat models)
 *   llmr stop NAME  unload now on every node, keep the files (POST /v0/models/NAME/unload)
 *   llmr rm NAME    unregister; every node unloads it and deletes its copy (DELETE)
 * stop and rm wait until every online node's heartbeat shows it done.  Owns only the
 * command lines and the table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/router_client.h"
#include "common/clock.h"

#define KEY_HELP                                                                              \
    "  --router URL    the router (default $LLMR_ROUTER, else\n"                              \
    "                  http://127.0.0.1:PORT with the configured port)\n"                     \
    "  --api-key KEY   an admin key (default $LLMR_API_KEY, else $LLMR_ADMIN_KEY, else\n"     \
    "                  for a router on this machine the key file DATA_DIR/admin.key)\n"

static void ps_help(FILE *out)
{
    fprintf(out, "usage: llmr ps [--all] [--json] [--router URL] [--api-key KEY]\n\n"
                 "Shows which models are loaded on which node of a running router (`llmr serve`\n"
                 "or `llmr router`): node, model, memory (GPU, else RAM), requests running and\n"
                 "queued, and since when it is loaded.  A model loads on its first request and\n"
                 "`llmr stop NAME` unloads it.\n\n"
                 "  --all           every model on every node, loaded or not, with its state\n"
                 "  --json          the rows as JSON: {\"models\": [{\"node\", \"node_id\", \"model\",\n"
                 "                  \"state\", \"loaded\", \"vram_bytes\", \"ram_bytes\", \"running\",\n"
                 "                  \"queued\", \"loaded_since\"}]}\n" KEY_HELP);
}

static void stop_help(FILE *out)
{
    fprintf(out, "usage: llmr stop NAME [--no-wait] [--timeout S] [--router URL] [--api-key KEY]\n\n"
                 "Unloads a model now on every node of a running router, keeping its files: the\n"
                 "next request for it loads it again.  Waits until every online node has\n"
                 "unloaded it (requests running finish first).\n\n"
                 "  --no-wait       ask and return\n"
                 "  --timeout S     wait at most S seconds (default 60)\n" KEY_HELP);
}

static void rm_help(FILE *out)
{
    fprintf(out, "usage: llmr rm NAME [--no-wait] [--timeout S] [--router URL] [--api-key KEY]\n\n"
                 "Removes a model from a running router: it is unregistered, and every node\n"
                 "unloads it and deletes its copy (a sync in progress stops and its partial\n"
                 "files are deleted).  The model's source (a directory you pulled, a Hub\n"
                 "repository) is not touched.  Waits until every online node is done.\n\n"
                 "  --no-wait       ask and return\n"
                 "  --timeout S     wait at most S seconds (default 60)\n" KEY_HELP);
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

/* GET /v0/nodes' "nodes" (owned), or NULL after printing why. */
static json_t *get_nodes(const llmr_router_client *c, const char *cmd)
{
    llmr_router_answer ans;
    if (!llmr_router_request(c, "GET", "/v0/nodes", NULL, 30, &ans))
        return NULL;
    json_t *nodes = json_object_get(ans.json, "nodes");
    if (ans.status != 200 || !json_is_array(nodes)) {
        llmr_router_print_refusal(c, &ans, "listing the nodes", true);
        nodes = NULL;
    } else {
        json_incref(nodes);
    }
    llmr_router_answer_free(&ans);
    (void)cmd;
    return nodes;
}

/* The model's entry in the node's heartbeat, or NULL. */
static const json_t *node_model(const json_t *node, const char *name)
{
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(node, "models"), i, m)
        if (!strcmp(str_or(m, "name", ""), name))
            return m;
    return NULL;
}

/* ---- ps ---------------------------------------------------------------------------- */

static json_t *ps_rows(const json_t *nodes, bool all)
{
    json_t *rows = json_array();
    size_t i, k;
    const json_t *n, *m;
    json_array_foreach(nodes, i, n)
    {
        json_array_foreach(json_object_get(n, "models"), k, m)
        {
            bool loaded = json_is_true(json_object_get(m, "loaded"));
            if (!loaded && !all)
                continue;
            json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "node", str_or(n, "name", "?"), "node_id",
                                  str_or(n, "id", "?"), "model", str_or(m, "name", "?"), "state",
                                  str_or(m, "state", "?"), "loaded", loaded, "online",
                                  json_is_true(json_object_get(n, "online")));
            static const char *const copy[] = {"vram_bytes", "ram_bytes", "running", "queued", "loaded_since",
                                               "reason"};
            for (size_t j = 0; j < sizeof copy / sizeof copy[0]; j++)
                if (json_object_get(m, copy[j]))
                    json_object_set(r, copy[j], json_object_get(m, copy[j]));
            json_array_append_new(rows, r);
        }
    }
    return rows;
}

static void since_text(json_int_t since, char *buf, size_t size)
{
    if (since <= 0) {
        snprintf(buf, size, "-");
        return;
    }
    time_t t = (time_t)since;
    struct tm tm;
    localtime_r(&t, &tm);
    long ago = (long)(time(NULL) - t);
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    if (ago < 120)
        snprintf(buf, size, "%s (%ld s ago)", when, ago < 0 ? 0 : ago);
    else if (ago < 7200)
        snprintf(buf, size, "%s (%ld min ago)", when, ago / 60);
    else
        snprintf(buf, size, "%s (%ld h ago)", when, ago / 3600);
}

static void ps_table(const json_t *rows, bool all)
{
    int w_node = 4, w_model = 5;
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r)
    {
        int a = (int)strlen(str_or(r, "node", "")), b = (int)strlen(str_or(r, "model", ""));
        w_node = a > w_node ? a : w_node;
        w_model = b > w_model ? b : w_model;
    }
    if (all)
        printf("%-*s  %-*s  %-10s  %-9s  %7s  %6s  %s\n", w_node, "NODE", w_model, "MODEL", "STATE", "MEMORY",
               "RUNNING", "QUEUED", "LOADED SINCE");
    else
        printf("%-*s  %-*s  %-9s  %7s  %6s  %s\n", w_node, "NODE", w_model, "MODEL", "MEMORY", "RUNNING", "QUEUED",
               "LOADED SINCE");
    json_array_foreach(rows, i, r)
    {
        char mem[32] = "-", since[64];
        double vram = (double)json_integer_value(json_object_get(r, "vram_bytes"));
        double ram = (double)json_integer_value(json_object_get(r, "ram_bytes"));
        if (json_is_true(json_object_get(r, "loaded")))
            llmr_router_format_bytes(vram > 0 ? vram : ram, mem, sizeof mem);
        since_text(json_integer_value(json_object_get(r, "loaded_since")), since, sizeof since);
        const char *node = str_or(r, "node", "?");
        char node_buf[160];
        if (!json_is_true(json_object_get(r, "online"))) {
            snprintf(node_buf, sizeof node_buf, "%s (offline)", node);
            node = node_buf;
        }
        if (all)
            printf("%-*s  %-*s  %-10s  %-9s  %7lld  %6lld  %s\n", w_node, node, w_model, str_or(r, "model", "?"),
                   str_or(r, "state", "?"), mem, (long long)json_integer_value(json_object_get(r, "running")),
                   (long long)json_integer_value(json_object_get(r, "queued")), since);
        else
            printf("%-*s  %-*s  %-9s  %7lld  %6lld  %s\n", w_node, node, w_model, str_or(r, "model", "?"), mem,
                   (long long)json_integer_value(json_object_get(r, "running")),
                   (long long)json_integer_value(json_object_get(r, "queued")), since);
    }
}

static int ps_run(int argc, char **argv, const llmr_config *cfg)
{
    llmr_router_client c;
    llmr_router_client_init(&c, "ps");
    bool as_json = false, all = false, bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad)) {
            continue;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else {
            llmr_cli_error("ps", "unexpected argument \"%s\"; see llmr ps --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    if (bad || !llmr_router_client_finish(&c, cfg))
        return LLMR_EXIT_USAGE;
    json_t *nodes = get_nodes(&c, "ps");
    if (!nodes)
        return LLMR_EXIT_FAILED;
    json_t *rows = ps_rows(nodes, all);
    if (as_json) {
        json_t *o = json_pack("{s:O}", "models", rows);
        char *text = json_dumps(o, JSON_INDENT(2));
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(o);
    } else if (!json_array_size(nodes)) {
        printf("no node is registered at %s\n", c.url);
    } else if (!json_array_size(rows)) {
        printf("no model is %s on the %zu node%s of %s%s\n", all ? "known" : "loaded", json_array_size(nodes),
               json_array_size(nodes) == 1 ? "" : "s", c.url, all ? "" : " (a model loads on its first request)");
    } else {
        ps_table(rows, all);
    }
    json_decref(rows);
    json_decref(nodes);
    return LLMR_EXIT_OK;
}

/* ---- stop and rm ------------------------------------------------------------------- */

/* How many online nodes still have the model (loaded, for stop; at all, for rm). */
static size_t pending(const json_t *nodes, const char *name, bool need_gone, llmr_strbuf *which)
{
    size_t left = 0, i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        if (!json_is_true(json_object_get(n, "online")))
            continue;
        const json_t *m = node_model(n, name);
        if (m && (need_gone || json_is_true(json_object_get(m, "loaded")))) {
            llmr_strbuf_printf(which, "%s%s", left ? ", " : "", str_or(n, "name", "?"));
            left++;
        }
    }
    return left;
}

static int lifecycle(int argc, char **argv, const llmr_config *cfg, bool remove)
{
    const char *cmd = remove ? "rm" : "stop";
    llmr_router_client c;
    llmr_router_client_init(&c, cmd);
    bool wait = true, bad = false;
    double timeout = 60;
    const char *name = NULL;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad)) {
            continue;
        } else if (!strcmp(argv[i], "--no-wait")) {
            wait = false;
        } else if (!strcmp(argv[i], "--timeout")) {
            char *end = NULL;
            timeout = i + 1 < argc ? strtod(argv[++i], &end) : 0;
            if (!end || *end || timeout <= 0) {
                llmr_cli_error(cmd, "--timeout takes a number of seconds above 0");
                return LLMR_EXIT_USAGE;
            }
        } else if (argv[i][0] == '-' || name) {
            llmr_cli_error(cmd, "unexpected argument \"%s\"; see llmr %s --help", argv[i], cmd);
            return LLMR_EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (!bad && !name) {
        llmr_cli_error(cmd, "which model? usage: llmr %s NAME (llmr list names them)", cmd);
        return LLMR_EXIT_USAGE;
    }
    if (bad || !llmr_router_client_finish(&c, cfg))
        return LLMR_EXIT_USAGE;
    char path[400];
    snprintf(path, sizeof path, remove ? "/v0/models/%s" : "/v0/models/%s/unload", name);
    llmr_router_answer ans;
    if (!llmr_router_request(&c, remove ? "DELETE" : "POST", path, NULL, 30, &ans))
        return LLMR_EXIT_FAILED;
    if (ans.status != 200) {
        char what[300];
        snprintf(what, sizeof what, "%s %s", remove ? "removing" : "unloading", name);
        llmr_router_print_refusal(&c, &ans, what, true);
        llmr_router_answer_free(&ans);
        return LLMR_EXIT_FAILED;
    }
    llmr_router_answer_free(&ans);
    if (!wait) {
        printf(remove ? "%s removed; the nodes delete their copies\n" : "%s: the nodes unload it\n", name);
        return LLMR_EXIT_OK;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        json_t *nodes = get_nodes(&c, cmd);
        if (!nodes)
            return LLMR_EXIT_FAILED;
        llmr_strbuf which = LLMR_STRBUF_INIT;
        size_t left = pending(nodes, name, remove, &which);
        size_t total = json_array_size(nodes);
        json_decref(nodes);
        if (!left) {
            llmr_strbuf_free(&which);
            if (remove)
                printf("%s removed: no node has it any more (%zu node%s)\n", name, total, total == 1 ? "" : "s");
            else
                printf("%s unloaded on every node; its files are kept (%zu node%s)\n", name, total,
                       total == 1 ? "" : "s");
            return LLMR_EXIT_OK;
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > timeout) {
            llmr_cli_error(cmd, "%s: after %.0f s, %zu node%s still %s it: %s (they act on their next "
                                "heartbeat; a node with requests running finishes them first)",
                           name, timeout, left, left == 1 ? "" : "s", remove ? "have" : "have loaded",
                           llmr_strbuf_cstr(&which));
            llmr_strbuf_free(&which);
            return LLMR_EXIT_FAILED;
        }
        llmr_strbuf_free(&which);
        llmr_sleep_ms(200);
    }
}

static int stop_run(int argc, char **argv, const llmr_config *cfg)
{
    return lifecycle(argc, argv, cfg, false);
}

static int rm_run(int argc, char **argv, const llmr_config *cfg)
{
    return lifecycle(argc, argv, cfg, true);
}

const llmr_command llmr_cmd_ps = {"ps", "show which models are loaded on which node", ps_run, ps_help};
const llmr_command llmr_cmd_stop = {"stop", "unload a model on every node, keeping its files", stop_run,
                                    stop_help};
const llmr_command llmr_cmd_rm = {"rm", "remove a model: unregister it, nodes delete their copies", rm_run,
                                  rm_help};
