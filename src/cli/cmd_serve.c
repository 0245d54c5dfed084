/* `llmr serve`: the router and a node in one process, the default for one machine.
 * On first start without models it writes the tiny synthetic gpt-oss model and
 * registers it, so that a fresh machine serves a chat end to end (and says that the
 * model is a synthetic demo).  With --tls-cert and --tls-key the router's port speaks
 * HTTPS only; the node stays plain HTTP on loopback and reaches the router at a loopback
 * listener of its own (llmr_router_listen_local).  `llmr serve --check` only reports
 * what it would serve. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "node/node_service.h"
#include "router/dashboard_assets.h"
#include "router/router.h"
#include "router/store.h"
#include "storage/model_storage.h"

#define DEMO_NAME "gpt-oss-tiny-demo"

extern char **environ;

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr serve [--host H] [--port P] [--node-port P] [--data-dir DIR] [--no-auth]\n"
            "                  [--cors-origins LIST] [--tls-cert FILE --tls-key FILE]\n"
            "                  [--log-format text|json] [--check]\n\n"
            "Runs the router on --host and --port (the OpenAI API at /v1, docs/router.md)\n"
            "and a node in the same process that registers with it (docs/node.md).  The\n"
            "router keeps its store in DATA_DIR/router.db, the node its models in\n"
            "DATA_DIR/node/models.  On first start the admin key is printed and kept in\n"
            "DATA_DIR/admin.key (mode 0600), where `llmr list`, `llmr keys` and `llmr pull`\n"
            "on this machine find it; LLMR_ADMIN_KEY sets it instead (and replaces it when\n"
            "set later).  The local node is accepted without a GPU.\n\n"
            "With no model registered, serve writes the tiny synthetic gpt-oss model (random\n"
            "weights: its answers are noise) to DATA_DIR/demo and registers it as\n"
            DEMO_NAME ", so that a fresh machine serves a chat end to end.  Register real\n"
            "models with `llmr pull REPO|DIR` (or POST /v0/models); `llmr list` shows them.\n\n"
            "At start it prints every address it listens on: the router (the OpenAI API, the\n"
            "dashboard, its /metrics) and the node (on 127.0.0.1, with its own /metrics;\n"
            "its /v1 answers only the router, so every request passes the router's keys).\n"
            "Each answer writes an access line to the log (router and node, one request id).\n\n"
            "  --no-auth   no keys checked (only on a loopback address)\n"
            "  --cors-origins LIST  origins a browser app may call the router from,\n"
            "              comma-separated, or * (or LLMR_CORS_ORIGINS); default: none (the\n"
            "              local node takes no browser calls)\n"
            "  --node-port P  the node's port on 127.0.0.1 (default 0: any free port)\n"
            "  --tls-cert FILE --tls-key FILE  the router speaks HTTPS only, with this\n"
            "              certificate (chain) and key (PEM; LLMR_TLS_CERT, LLMR_TLS_KEY); the\n"
            "              node stays plain HTTP on 127.0.0.1 and reaches the router at a\n"
            "              loopback listener that takes only its key (docs/security.md)\n"
            "  --log-format json  log lines as JSON objects, one a line (default text)\n"
            "  LLMR_ENGINE_OPTIONS  a JSON object of load options for every model the node\n"
            "              loads, as for `llmr node --engine-options`\n"
            "  --check     report the models under DATA_DIR/models and exit\n"
            "SIGINT or SIGTERM stops it gracefully: no new request is taken, running ones\n"
            "have 30 s to finish, then end (a stream with an error event; a second signal\n"
            "stops at once).\n");
}

/* ---- --check: the report ---------------------------------------------------------- */

static void report_model(const char *models_dir, const char *name)
{
    char *path = llmr_path_join(models_dir, name);
    if (!path)
        return;
    llmr_model_options options;
    llmr_model_options_default(&options);
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_model *m = NULL;
    if (llmr_model_open(path, &options, &m, &problems) != LLMR_OK) {
        printf("  %-24s not ready: %zu problem(s)\n", name, llmr_problems_total(&problems));
        llmr_cli_print_problems(stdout, &problems);
    } else if (m->runtime == LLMR_RUNTIME_NONE) {
        printf("  %-24s not ready: %s\n", name, m->unsupported_reason);
    } else {
        printf("  %-24s %s, runtime %s, %.2f GB: files check out\n", name,
               llmr_model_format_name(m->format), llmr_runtime_name(m->runtime), m->total_bytes / 1e9);
    }
    llmr_model_close(m);
    llmr_problems_free(&problems);
    free(path);
}

static int check(const llmr_config *config)
{
    const char *data_dir = llmr_config_get(config, LLMR_CONFIG_DATA_DIR);
    char *models_dir = llmr_path_join(data_dir, "models");
    if (!models_dir)
        return LLMR_EXIT_FAILED;
    printf("llmr serve: data directory %s\n", data_dir);
    DIR *d = opendir(models_dir);
    size_t n = 0;
    if (d) {
        struct dirent *de;
        printf("models in %s:\n", models_dir);
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char *p = llmr_path_join(models_dir, de->d_name);
            struct stat st;
            if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                report_model(models_dir, de->d_name);
                n++;
            }
            free(p);
        }
        closedir(d);
    }
    if (n == 0)
        printf("no models in %s (put a model directory there, or check one with llmr inspect DIR)\n",
               models_dir);
    const char *cert = llmr_config_get(config, LLMR_CONFIG_TLS_CERT);
    const char *key = llmr_config_get(config, LLMR_CONFIG_TLS_KEY);
    printf("llmr serve: would listen on %s://%s:%u/v1\n", cert && *cert && key && *key ? "https" : "http",
           llmr_config_get(config, LLMR_CONFIG_HOST), llmr_config_port(config));
    free(models_dir);
    return LLMR_EXIT_OK;
}

/* ---- serving -------------------------------------------------------------------------- */

/* Writes the tiny synthetic gpt-oss model with this binary's `model synth`. */
static bool synth_demo(const char *dir)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return false;
    exe[len] = 0;
    char *argv[] = {exe, "model", "synth", "--preset", "gpt-oss-tiny", "--fill", "random", "--out", (char *)dir, NULL};
    pid_t pid;
    /* its progress lines are not log lines: kept out of a JSON log */
    posix_spawn_file_actions_t quiet;
    bool json = llmr_log_get_format() == LLMR_LOG_FORMAT_JSON;
    if (posix_spawn_file_actions_init(&quiet) != 0)
        return false;
    if (json) {
        posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&quiet, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
    int spawned = posix_spawn(&pid, exe, &quiet, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&quiet);
    if (spawned != 0)
        return false;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A line for the operator: "llmr serve: ..." on stderr, or, with --log-format json, a
 * log line (so that the log stays one JSON object a line). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (llmr_log_get_format() == LLMR_LOG_FORMAT_JSON)
        llmr_log_write(LLMR_LOG_INFO, "serve", "%s", line);
    else
        fprintf(stderr, "llmr serve: %s\n", line);
}

static void demo_model(llmr_router *r, const char *data_dir)
{
    if (llmr_router_model_count(r) > 0)
        return;
    char *demo = llmr_path_join(data_dir, "demo");
    char *dir = demo ? llmr_path_join(demo, "gpt-oss-tiny") : NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    struct stat st;
    if (!dir) {
        /* out of memory: serve without the demo */
    } else if (stat(dir, &st) != 0 && (llmr_mkdir_p(demo, &err) != LLMR_OK || !synth_demo(dir))) {
        llmr_log_warn("serve", "cannot write the demo model to %s (%s): serving without it; register a "
                               "model with llmr pull",
                      dir, err.len ? llmr_strbuf_cstr(&err) : "llmr model synth failed");
    } else if (llmr_router_register_local(r, dir, "safetensors", DEMO_NAME, &err) != LLMR_OK) {
        llmr_log_warn("serve", "cannot register the demo model: %s", llmr_strbuf_cstr(&err));
    } else if (llmr_log_get_format() == LLMR_LOG_FORMAT_JSON) {
        llmr_log_warn("serve", "no model was registered, so this serves a SYNTHETIC DEMO model, \"%s\": the real "
                               "gpt-oss shapes at a tiny size with random weights; its answers are noise. Register "
                               "real models with `llmr pull REPO|DIR`",
                      DEMO_NAME);
    } else {
        fprintf(stderr,
                "\n  llmr: no model was registered, so this serves a SYNTHETIC DEMO model, \"%s\":\n"
                "  the real gpt-oss shapes at a tiny size with random weights.  Its answers are\n"
                "  noise; it shows the whole path working.  Register real models with\n"
                "  `llmr pull REPO|DIR` (docs/router.md); `llmr list` shows them.\n\n",
                DEMO_NAME);
    }
    llmr_strbuf_free(&err);
    free(dir);
    free(demo);
}

#define NODE_KEY_NAME "serve: the local node"

/* Revokes the local node's keys of earlier runs (a serve that was killed left its
 * key behind): only this run's node uses the name. */
static void revoke_old_node_keys(llmr_router *r)
{
    json_t *keys = llmr_router_list_keys(r), *k;
    size_t i, n = 0;
    json_array_foreach(keys, i, k)
    {
        const char *name = json_string_value(json_object_get(k, "name"));
        const char *id = json_string_value(json_object_get(k, "id"));
        if (name && id && !strcmp(name, NODE_KEY_NAME) && !json_is_true(json_object_get(k, "revoked"))) {
            llmr_router_revoke_key(r, id);
            n++;
        }
    }
    if (n)
        llmr_log_info("serve", "revoked %zu local node key(s) left by an earlier run", n);
    json_decref(keys);
}

static int serve(const llmr_config *config, bool no_auth, const char *node_port)
{
    sigset_t waited;
    sigemptyset(&waited);
    sigaddset(&waited, SIGHUP);
    sigaddset(&waited, SIGINT);
    sigaddset(&waited, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &waited, NULL);
    const char *data_dir = llmr_config_get(config, LLMR_CONFIG_DATA_DIR);
    llmr_router_options ro;
    llmr_router_options_default(&ro);
    /* --tls-cert and --tls-key: the router's listener speaks HTTPS; the node beside it
     * stays plain HTTP on loopback, and reaches the router at a loopback listener of
     * its own (a certificate for the public name does not cover 127.0.0.1) */
    if (!llmr_cli_tls_read(config, "serve", &ro.http_limits))
        return LLMR_EXIT_FAILED;
    const char *scheme = llmr_cli_scheme(&ro.http_limits);
    bool tls = strcmp(scheme, "https") == 0;
    ro.host = llmr_config_get(config, LLMR_CONFIG_HOST);
    ro.port = llmr_config_port(config);
    ro.data_dir = data_dir;
    ro.no_auth = no_auth;
    ro.admin_key = getenv("LLMR_ADMIN_KEY");
    ro.cors_origins = llmr_config_get(config, LLMR_CONFIG_CORS_ORIGINS); /* the router's only */
    ro.heartbeat_s = 1;
    llmr_router *r = NULL;
    llmr_node *node = NULL;
    char *key_id = NULL, *key = NULL, *node_dir = llmr_path_join(data_dir, "node");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    int rc = LLMR_EXIT_FAILED;
    if (!node_dir || llmr_router_start(&ro, &r, &err) != LLMR_OK) {
        llmr_cli_error("serve", "%s", err.len ? llmr_strbuf_cstr(&err) : "out of memory");
        goto done;
    }
    demo_model(r, data_dir);
    revoke_old_node_keys(r);
    if (!no_auth && llmr_router_create_key(r, NODE_KEY_NAME, LLMR_SCOPE_NODE, &key_id, &key, &err) != LLMR_OK) {
        llmr_cli_error("serve", "cannot make the local node's key: %s", llmr_strbuf_cstr(&err));
        goto done;
    }
    /* the node: the same settings but its own data directory, on loopback, any port */
    llmr_config node_cfg = *config;
    node_cfg.value[LLMR_CONFIG_DATA_DIR] = node_dir;
    node_cfg.value[LLMR_CONFIG_HOST] = "127.0.0.1";
    node_cfg.value[LLMR_CONFIG_PORT] = (char *)node_port;
    /* no CORS on the local node: browsers go through the router, and a page of another
     * origin must not reach the node past the router's keys */
    node_cfg.value[LLMR_CONFIG_CORS_ORIGINS] = NULL;
    node_cfg.value[LLMR_CONFIG_TLS_CERT] = NULL;
    node_cfg.value[LLMR_CONFIG_TLS_KEY] = NULL;
    unsigned router_port = llmr_router_port(r);
    if (tls && llmr_router_listen_local(r, key, &router_port, &err) != LLMR_OK) {
        llmr_cli_error("serve", "cannot listen for the local node: %s", llmr_strbuf_cstr(&err));
        goto done;
    }
    char router_url[64];
    snprintf(router_url, sizeof router_url, "http://127.0.0.1:%u", router_port);
    llmr_node_options no;
    llmr_node_options_default(&no);
    no.router_url = router_url;
    no.node_key = key;
    no.node_name = "local";
    no.allow_cpu = true;
    no.local_dirs = "/"; /* the router beside it registers directories of this machine */
    no.heartbeat_ms = 1000;
    no.shutdown_grace_s = 0; /* the router's grace covers its node's requests */
    /* the engines' load options, as `llmr node` takes them from the environment */
    const char *engine_options = getenv("LLMR_ENGINE_OPTIONS");
    no.engine_options = engine_options && *engine_options ? engine_options : NULL;
    if (llmr_mkdir_p(node_dir, &err) != LLMR_OK || llmr_node_start(&node_cfg, &no, &node, &err) != LLMR_OK) {
        llmr_cli_error("serve", "cannot start the local node: %s", llmr_strbuf_cstr(&err));
        goto done;
    }
    say("the OpenAI API at %s://%s:%u/v1%s; the node syncs the registered models (GET /v1/models shows them "
        "when ready)",
        scheme, ro.host, llmr_router_port(r), no_auth ? " (no keys checked)" : "");
    say("the dashboard at %s://%s:%u/dashboard%s", scheme, ro.host, llmr_router_port(r),
        llmr_dashboard_asset_count ? " (sign in with the admin key)" : ": not built into this binary (docs/dashboard.md)");
    say("the router's metrics at %s://%s:%u/metrics", scheme, ro.host, llmr_router_port(r));
    say("the node at http://127.0.0.1:%u (its metrics at http://127.0.0.1:%u/metrics)", llmr_node_port(node),
        llmr_node_port(node));
    if (tls)
        say("the node reaches the router at %s (loopback, plain HTTP, the node's key only)", router_url);
    for (;;) {
        int sig = 0;
        if (sigwait(&waited, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            llmr_node_reload(node);
            continue;
        }
        llmr_log_info("serve", "%s: stopping; running requests have %u s to finish (a second signal stops at once)",
                      sig == SIGINT ? "SIGINT" : "SIGTERM", ro.shutdown_grace_s);
        break;
    }
    /* gracefully: the router takes no new request, the running ones finish or the
     * grace ends (docs/router.md, "Stopping") */
    llmr_router_drain(r);
    struct timespec poll = {0, 100 * 1000000L};
    for (unsigned waited_ms = 0; !llmr_router_idle(r, 0) && waited_ms < ro.shutdown_grace_s * 1000u;
         waited_ms += 100)
        if (sigtimedwait(&waited, NULL, &poll) > 0)
            break;
    rc = LLMR_EXIT_OK;
done:
    llmr_node_stop(node);
    if (key_id)
        llmr_router_revoke_key(r, key_id);
    llmr_router_stop(r);
    free(key_id);
    free(key);
    free(node_dir);
    llmr_strbuf_free(&err);
    llmr_cli_tls_free(&ro.http_limits);
    return rc;
}

static int run(int argc, char **argv, const llmr_config *config)
{
    bool no_auth = false, only_check = false;
    const char *node_port = "0";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--node-port") || !strncmp(argv[i], "--node-port=", 12)) {
            node_port = argv[i][11] == '=' ? argv[i] + 12 : i + 1 < argc ? argv[++i] : NULL;
            char *end = NULL;
            long v = node_port ? strtol(node_port, &end, 10) : -1;
            if (!node_port || !*node_port || *end || v < 0 || v > 65535) {
                llmr_cli_error("serve", "--node-port takes a TCP port, 0 (any free port) to 65535");
                return LLMR_EXIT_USAGE;
            }
        } else if (!strcmp(argv[i], "--no-auth")) {
            no_auth = true;
        } else if (!strcmp(argv[i], "--check")) {
            only_check = true;
        } else {
            llmr_cli_error("serve", "unexpected argument \"%s\"; see llmr serve --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    return only_check ? check(config) : serve(config, no_auth, node_port);
}

const llmr_command llmr_cmd_serve = {"serve", "run the router and a node in one process", run, help};
