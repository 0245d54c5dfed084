/* `llmr keys list|create|revoke`: a running router's API keys through its /v0/keys
 * (docs/router.md), with an admin key found as router_client.h says (for a router on
 * this machine, the key file it wrote).  Owns only the command line and what it prints:
 * the router makes, checks and revokes the keys. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/router_client.h"

#define CMD "keys"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr keys list [--all] [--json]\n"
            "       llmr keys create NAME [--scopes LIST] [LIMITS] [--json]\n"
            "       llmr keys limits ID|NAME LIMITS [--json]\n"
            "       llmr keys revoke ID|NAME\n"
            "       (each also takes --router URL and --api-key KEY)\n\n"
            "Manages the API keys of a running router (`llmr serve` or `llmr router`).\n\n"
            "  list     id, name, scopes, when created and last used (never the secret);\n"
            "           --all shows revoked keys too\n"
            "  create   a key named NAME with the scopes in LIST, comma-separated:\n"
            "           inference (/v1, the default), node (a node of this router) and/or\n"
            "           admin (everything).  The secret is printed once: keep it\n"
            "  limits   changes the limits of the key of that id, or of the one live key\n"
            "           of that name (the limits not given stay as they are)\n"
            "  LIMITS   --rpm N (requests per minute), --concurrent N (requests at once,\n"
            "           waiting ones included), --tpm N (prompt and completion tokens per\n"
            "           minute); N is a count, 0 for no limit, or \"default\" for the\n"
            "           router's (llmr router --key-rpm ...).  Over a limit a request gets\n"
            "           429 rate_limit_exceeded with Retry-After\n"
            "  revoke   the key of that id (key_...), or the one live key of that name;\n"
            "           requests with it get 401 from then on\n"
            "  --json          print the router's answer as it is\n"
            "  --router URL    the router (default $LLMR_ROUTER, else\n"
            "                  http://127.0.0.1:PORT with the configured port)\n"
            "  --api-key KEY   (or --key) an admin key (default $LLMR_API_KEY, else\n"
            "                  $LLMR_ADMIN_KEY, else for a router on this machine the key\n"
            "                  file DATA_DIR/admin.key that the router wrote)\n\n"
            "Exit status: 0 done; 1 refused or failed; 2 a wrong command line.\n");
}

static void print_body(const llmr_router_answer *a)
{
    fwrite(llmr_strbuf_cstr(&a->body), 1, a->body.len, stdout);
    if (!a->body.len || llmr_strbuf_cstr(&a->body)[a->body.len - 1] != '\n')
        putchar('\n');
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

/* Unix seconds as local "YYYY-MM-DD HH:MM", or dflt for null. */
static const char *when(const json_t *v, const char *dflt, char *buf, size_t size)
{
    if (!json_is_integer(v))
        return dflt;
    time_t t = (time_t)json_integer_value(v);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M", &tm))
        return "?";
    return buf;
}

/* GET /v0/keys: the "keys" array (a new reference), or NULL after printing why. */
static json_t *fetch_keys(const llmr_router_client *c, llmr_router_answer *ans)
{
    if (!llmr_router_request(c, "GET", "/v0/keys", NULL, 30, ans))
        return NULL;
    json_t *keys = json_object_get(ans->json, "keys");
    if (ans->status != 200 || !json_is_array(keys)) {
        llmr_router_print_refusal(c, ans, "listing the keys", true);
        llmr_router_answer_free(ans);
        return NULL;
    }
    return json_incref(keys);
}

static int cmd_list(const llmr_router_client *c, bool all, bool as_json)
{
    llmr_router_answer ans;
    json_t *keys = fetch_keys(c, &ans), *k;
    if (!keys)
        return LLMR_EXIT_FAILED;
    if (as_json) {
        print_body(&ans);
    } else {
        int w_id = 2, w_name = 4, w_scopes = 6;
        size_t i, shown = 0;
        json_array_foreach(keys, i, k)
        {
            if (!all && json_is_true(json_object_get(k, "revoked")))
                continue;
            int a = (int)strlen(str_or(k, "id", "?")), b = (int)strlen(str_or(k, "name", "")),
                s = (int)strlen(str_or(k, "scopes", "?"));
            w_id = a > w_id ? a : w_id;
            w_name = b > w_name ? (b > 40 ? 40 : b) : w_name;
            w_scopes = s > w_scopes ? s : w_scopes;
            shown++;
        }
        if (!shown) {
            printf("no %skeys at %s\n", all ? "" : "live ", c->url);
        } else {
            printf("%-*s  %-*s  %-*s  %-16s  %-*s%s\n", w_id, "ID", w_name, "NAME", w_scopes, "SCOPES", "CREATED",
                   all ? 16 : 0, "LAST USED", all ? "  STATE" : "");
            json_array_foreach(keys, i, k)
            {
                bool revoked = json_is_true(json_object_get(k, "revoked"));
                if (!all && revoked)
                    continue;
                char b1[32], b2[32];
                printf("%-*s  %-*.40s  %-*s  %-16s  %-*s%s\n", w_id, str_or(k, "id", "?"), w_name,
                       str_or(k, "name", ""), w_scopes, str_or(k, "scopes", "?"),
                       when(json_object_get(k, "created"), "?", b1, sizeof b1), all ? 16 : 0,
                       when(json_object_get(k, "last_used"), "never", b2, sizeof b2),
                       all ? (revoked ? "  revoked" : "  live") : "");
            }
        }
    }
    json_decref(keys);
    llmr_router_answer_free(&ans);
    return LLMR_EXIT_OK;
}

/* "inference,node" as a JSON array of the names (the router says which one is wrong). */
static json_t *scopes_array(const char *list)
{
    json_t *a = json_array();
    const char *p = list;
    while (a) {
        size_t n = strcspn(p, ",");
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        size_t m = n;
        while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        json_array_append_new(a, json_stringn(p, m));
        if (!p[n])
            break;
        p += n + 1;
    }
    return a;
}

/* --rpm, --concurrent, --tpm: what was given of them as a "limits" object, or NULL
 * when none was. */
typedef struct limit_args {
    const char *v[3];
} limit_args;
static const char *const LIMIT_FLAGS[] = {"--rpm", "--concurrent", "--tpm"};
static const char *const LIMIT_NAMES[] = {"requests_per_minute", "concurrent_requests", "tokens_per_minute"};

/* false after printing why (a value that is not a count nor "default"). */
static bool limits_object(const limit_args *l, json_t **out)
{
    *out = NULL;
    for (int i = 0; i < 3; i++) {
        if (!l->v[i])
            continue;
        if (!*out)
            *out = json_object();
        char *end = NULL;
        long long n = strtoll(l->v[i], &end, 10);
        if (!strcmp(l->v[i], "default")) {
            json_object_set_new(*out, LIMIT_NAMES[i], json_null());
        } else if (*l->v[i] && !*end && n >= 0 && n <= 1000000000) {
            json_object_set_new(*out, LIMIT_NAMES[i], json_integer(n));
        } else {
            llmr_cli_error(CMD, "%s takes a count (0: no limit) or \"default\", not \"%s\"", LIMIT_FLAGS[i],
                           l->v[i]);
            json_decref(*out);
            *out = NULL;
            return false;
        }
    }
    return true;
}

static int cmd_create(const llmr_router_client *c, const char *name, const char *scopes, json_t *limits,
                      bool as_json)
{
    json_t *body = json_pack("{s:s, s:o}", "name", name, "scopes", scopes_array(scopes));
    if (body && limits)
        json_object_set(body, "limits", limits);
    llmr_router_answer ans;
    bool answered = body && llmr_router_request(c, "POST", "/v0/keys", body, 30, &ans);
    json_decref(body);
    if (!answered)
        return LLMR_EXIT_FAILED;
    int rc = LLMR_EXIT_FAILED;
    const char *secret = json_string_value(json_object_get(ans.json, "secret"));
    if (ans.status != 201 || !secret) {
        llmr_router_print_refusal(c, &ans, "creating a key", true);
    } else if (as_json) {
        print_body(&ans);
        rc = LLMR_EXIT_OK;
    } else {
        printf("id:      %s\nname:    %s\nscopes:  %s\nsecret:  %s\n", str_or(ans.json, "id", "?"),
               str_or(ans.json, "name", ""), str_or(ans.json, "scopes", "?"), secret);
        fprintf(stderr, "llmr keys: the secret is shown this once: keep it (send it as \"Authorization: "
                        "Bearer SECRET\")\n");
        rc = LLMR_EXIT_OK;
    }
    llmr_router_answer_free(&ans);
    return rc;
}

/* The id of the key named by what: an id of the list, else the one live key of that
 * name.  NULL after printing why. */
static const char *find_key(const json_t *keys, const char *what)
{
    const json_t *k, *found = NULL;
    size_t i, named = 0;
    json_array_foreach(keys, i, k)
    {
        if (!strcmp(str_or(k, "id", ""), what))
            return str_or(k, "id", "");
    }
    llmr_strbuf ids = LLMR_STRBUF_INIT;
    json_array_foreach(keys, i, k)
    {
        if (strcmp(str_or(k, "name", ""), what) != 0 || json_is_true(json_object_get(k, "revoked")))
            continue;
        llmr_strbuf_printf(&ids, "%s%s", named ? ", " : "", str_or(k, "id", "?"));
        found = k;
        named++;
    }
    if (named == 0)
        llmr_cli_error(CMD, "no live key has the id or name \"%s\"; `llmr keys list` shows them", what);
    else if (named > 1)
        llmr_cli_error(CMD, "%zu live keys are named \"%s\" (%s): revoke one by its id", named, what,
                       llmr_strbuf_cstr(&ids));
    llmr_strbuf_free(&ids);
    return named == 1 ? str_or(found, "id", NULL) : NULL;
}

static int cmd_revoke(const llmr_router_client *c, const char *what)
{
    llmr_router_answer ans, del;
    json_t *keys = fetch_keys(c, &ans);
    if (!keys)
        return LLMR_EXIT_FAILED;
    int rc = LLMR_EXIT_FAILED;
    const char *id = find_key(keys, what);
    char path[320];
    if (id && (size_t)snprintf(path, sizeof path, "/v0/keys/%s", id) < sizeof path &&
        llmr_router_request(c, "DELETE", path, NULL, 30, &del)) {
        if (del.status == 200) {
            printf("revoked key %s\n", id);
            rc = LLMR_EXIT_OK;
        } else {
            llmr_router_print_refusal(c, &del, "revoking the key", true);
        }
        llmr_router_answer_free(&del);
    }
    json_decref(keys);
    llmr_router_answer_free(&ans);
    return rc;
}

/* PATCH /v0/keys/ID with the limits given. */
static int cmd_limits(const llmr_router_client *c, const char *what, json_t *limits, bool as_json)
{
    llmr_router_answer ans, up;
    json_t *keys = fetch_keys(c, &ans);
    if (!keys)
        return LLMR_EXIT_FAILED;
    int rc = LLMR_EXIT_FAILED;
    const char *id = find_key(keys, what);
    char path[320];
    json_t *body = json_pack("{s:O}", "limits", limits);
    if (id && body && (size_t)snprintf(path, sizeof path, "/v0/keys/%s", id) < sizeof path &&
        llmr_router_request(c, "PATCH", path, body, 30, &up)) {
        if (up.status != 200) {
            llmr_router_print_refusal(c, &up, "changing the key's limits", true);
        } else if (as_json) {
            print_body(&up);
            rc = LLMR_EXIT_OK;
        } else {
            json_t *l = json_object_get(up.json, "limits");
            printf("key %s:", id);
            for (int i = 0; i < 3; i++) {
                json_t *v = json_object_get(l, LIMIT_NAMES[i]);
                if (json_is_integer(v))
                    printf(" %s %lld", LIMIT_FLAGS[i] + 2, (long long)json_integer_value(v));
                else
                    printf(" %s default", LIMIT_FLAGS[i] + 2);
            }
            putchar('\n');
            rc = LLMR_EXIT_OK;
        }
        llmr_router_answer_free(&up);
    }
    json_decref(body);
    json_decref(keys);
    llmr_router_answer_free(&ans);
    return rc;
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    const char *sub = argc > 1 ? argv[1] : NULL;
    if (!sub || (strcmp(sub, "list") && strcmp(sub, "create") && strcmp(sub, "revoke") && strcmp(sub, "limits"))) {
        if (sub)
            llmr_cli_error(CMD, "unknown subcommand \"%s\"; see llmr keys --help", sub);
        else
            llmr_cli_error(CMD, "say list, create, limits or revoke; see llmr keys --help");
        return LLMR_EXIT_USAGE;
    }
    llmr_router_client c;
    llmr_router_client_init(&c, CMD);
    bool all = false, as_json = false, bad = false;
    const char *scopes = NULL, *arg = NULL;
    limit_args la = {{NULL, NULL, NULL}};
    bool takes_limits = !strcmp(sub, "create") || !strcmp(sub, "limits");
    for (int i = 2; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad) ||
            (!strcmp(sub, "create") && llmr_cli_option(argc, argv, &i, "--scopes", &scopes, &bad)) ||
            (takes_limits && (llmr_cli_option(argc, argv, &i, "--rpm", &la.v[0], &bad) ||
                              llmr_cli_option(argc, argv, &i, "--concurrent", &la.v[1], &bad) ||
                              llmr_cli_option(argc, argv, &i, "--tpm", &la.v[2], &bad)))) {
            continue;
        } else if (!strcmp(argv[i], "--json") && strcmp(sub, "revoke")) {
            as_json = true;
        } else if (!strcmp(argv[i], "--all") && !strcmp(sub, "list")) {
            all = true;
        } else if (argv[i][0] != '-' && !arg && strcmp(sub, "list")) {
            arg = argv[i];
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr keys --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    if (strcmp(sub, "list") && (!arg || !*arg)) {
        llmr_cli_error(CMD, "%s needs %s; see llmr keys --help", sub,
                       !strcmp(sub, "create") ? "a NAME" : "an ID or NAME");
        return LLMR_EXIT_USAGE;
    }
    if (scopes && !*scopes) {
        llmr_cli_error(CMD, "--scopes needs one or more of inference, node and admin");
        return LLMR_EXIT_USAGE;
    }
    json_t *limits = NULL;
    if (!limits_object(&la, &limits))
        return LLMR_EXIT_USAGE;
    if (!strcmp(sub, "limits") && !limits) {
        llmr_cli_error(CMD, "limits needs one or more of --rpm, --concurrent and --tpm");
        return LLMR_EXIT_USAGE;
    }
    int rc;
    if (!llmr_router_client_finish(&c, cfg))
        rc = LLMR_EXIT_USAGE;
    else if (!strcmp(sub, "list"))
        rc = cmd_list(&c, all, as_json);
    else if (!strcmp(sub, "create"))
        rc = cmd_create(&c, arg, scopes ? scopes : "inference", limits, as_json);
    else if (!strcmp(sub, "limits"))
        rc = cmd_limits(&c, arg, limits, as_json);
    else
        rc = cmd_revoke(&c, arg);
    json_decref(limits);
    return rc;
}

const llmr_command llmr_cmd_keys = {"keys", "list, create, limit or revoke a running router's API keys", run, help};
