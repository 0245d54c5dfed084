/* `llmr node`: see node_service.h. */
#include "node/node_service.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "node/node_prompt.h"
#include "node/control_server.h"
#include "node/model_check.h"
#include "node/model_hasher.h"
#include "node/node_http.h"
#include "node/router_link.h"

#define COMPONENT "node"

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool push(char ***dirs, size_t *n, const char *path)
{
    char **d = realloc(*dirs, (*n + 2) * sizeof *d);
    if (!d)
        return false;
    *dirs = d;
    d[*n] = strdup(path);
    if (!d[*n])
        return false;
    d[++*n] = NULL;
    return true;
}

char **llmr_node_plugin_dirs(const llmr_config *cfg, size_t *count)
{
    char **dirs = NULL;
    size_t n = 0;
    const char *given = llmr_config_get(cfg, LLMR_CONFIG_PLUGIN_DIRS);
    if (given && *given) {
        char *copy = strdup(given), *save = NULL;
        for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
            push(&dirs, &n, p);
        free(copy);
    } else {
        char *own = llmr_path_join(llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR), "engines");
        if (own)
            push(&dirs, &n, own);
        free(own);
        /* Beside the binary: <bin>/engines (a build tree) and <bin>/../lib/llmr/engines
         * (an installation). */
        char exe[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            exe[len] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = '\0';
            char *a = llmr_path_join(exe, "engines");
            char *b = llmr_path_join(exe, "../lib/llmr/engines");
            if (a && is_dir(a))
                push(&dirs, &n, a);
            if (b && is_dir(b))
                push(&dirs, &n, b);
            free(a);
            free(b);
        }
    }
    *count = n;
    return dirs;
}

void llmr_node_plugin_dirs_free(char **dirs)
{
    for (size_t i = 0; dirs && dirs[i]; i++)
        free(dirs[i]);
    free(dirs);
}

/* The engine host's check before each load: the synced files are as recorded. */
static llmr_status check_model_files(void *user, const char *model_dir, llmr_strbuf *why)
{
    (void)user;
    return llmr_model_files_check(model_dir, why);
}

void llmr_node_host_options(const llmr_config *cfg, char **plugin_dirs, size_t count,
                            llmr_engine_host_options *o)
{
    llmr_engine_host_options_default(o);
    o->plugin_dirs = (const char *const *)plugin_dirs;
    o->plugin_dir_count = count;
    o->request_timeout_ms =
        (unsigned)(llmr_config_number(cfg, LLMR_CONFIG_REQUEST_TIMEOUT) * 1000.0);
    o->cpu_request_timeout_ms =
        (unsigned)(llmr_config_number(cfg, LLMR_CONFIG_CPU_REQUEST_TIMEOUT) * 1000.0);
    o->cancel_grace_ms = (unsigned)(llmr_config_number(cfg, LLMR_CONFIG_CANCEL_GRACE) * 1000.0);
    o->memory_threshold = llmr_config_number(cfg, LLMR_CONFIG_MEMORY_THRESHOLD);
    const char *budgets = llmr_config_get(cfg, LLMR_CONFIG_VRAM_BUDGETS);
    o->vram_budgets = budgets && *budgets ? budgets : NULL;
    o->check_files = check_model_files;
}

/* Adds every model directory under DATA_DIR/models, each with the engine options
 * (a JSON object, or NULL), and queues each for the background hash; returns how many
 * were added. */
static size_t add_models(llmr_engine_host *h, llmr_model_hasher *hasher, const char *models_dir,
                         const char *engine_options)
{
    DIR *d = opendir(models_dir);
    size_t added = 0;
    if (!d) {
        llmr_log_info(COMPONENT, "no models yet: %s does not exist (put model directories "
                                 "there)",
                      models_dir);
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *path = llmr_path_join(models_dir, de->d_name);
        if (path && is_dir(path)) {
            llmr_model_spec spec = {de->d_name, path, NULL, NULL, 0, engine_options};
            llmr_strbuf err = LLMR_STRBUF_INIT;
            if (llmr_engine_host_add_model(h, &spec, &err) == LLMR_OK) {
                added++;
                llmr_model_hasher_add(hasher, de->d_name, path);
                llmr_model_dir_special_in_content(de->d_name, path, true); /* logs the opt-out */
            }
            else
                llmr_log_error(COMPONENT, "model %s is not served: %s", de->d_name,
                               llmr_strbuf_cstr(&err));
            llmr_strbuf_free(&err);
        }
        free(path);
    }
    closedir(d);
    return added;
}

static void log_reload(json_t *report)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(report, "models"), i, m)
    {
        const char *result = json_string_value(json_object_get(m, "result"));
        if (result)
            llmr_log_info(COMPONENT, "reload: model %s: %s", json_string_value(json_object_get(m, "model")),
                          result);
    }
    llmr_log_info(COMPONENT, "reload: %zu plugin(s) ready, %zu refused",
                  json_array_size(json_object_get(report, "after")),
                  json_array_size(json_object_get(report, "refused")));
}

void llmr_node_options_default(llmr_node_options *o)
{
    memset(o, 0, sizeof *o);
    o->origin_allowlist = "huggingface.co,hf.co";
    o->heartbeat_ms = 5000;
    o->shutdown_grace_s = 30;
}

/* Writes the HTTP port to DATA_DIR/run/http.port (for scripts that started the node
 * on port 0). */
static void write_port_file(const char *data_dir, unsigned port)
{
    char *run_dir = llmr_path_join(data_dir, "run");
    char *path = run_dir ? llmr_path_join(run_dir, "http.port") : NULL;
    char text[16];
    int n = snprintf(text, sizeof text, "%u\n", port);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (!path || llmr_write_file_atomic(path, text, (size_t)n, &err) != LLMR_OK)
        llmr_log_warn(COMPONENT, "cannot write the HTTP port file: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    free(path);
    free(run_dir);
}

/* The engine options must be a JSON object ({"max_batch": 64}); NULL is none. */
static bool check_engine_options(const char *text, llmr_strbuf *err)
{
    if (!text)
        return true;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    json_t *v = llmr_json_parse(text, strlen(text), &why);
    bool ok = json_is_object(v);
    if (!ok) {
        llmr_strbuf_puts(err, "the engine options (--engine-options or LLMR_ENGINE_OPTIONS) must be a JSON "
                              "object such as {\"max_batch\": 64}: ");
        if (v) {
            llmr_strbuf_puts(err, "got ");
            llmr_json_describe(err, v);
        } else {
            llmr_strbuf_puts(err, llmr_strbuf_cstr(&why));
        }
    }
    json_decref(v);
    llmr_strbuf_free(&why);
    return ok;
}

struct llmr_node {
    llmr_engine_host *host;
    llmr_model_hasher *hasher; /* the full hash of large synced files (model_hasher.h) */
    llmr_control_server *ctl;
    llmr_node_http *http;
    llmr_router_link *link;
    char **dirs;
    char *socket_path;
};

/* A model whose file the background hash found changed: unloaded now (its record is
 * marked, so that its next load is refused by name). */
static void on_hash_mismatch(void *user, const char *name, const char *why)
{
    llmr_node *n = user;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    (void)why;
    llmr_engine_host_unload(n->host, name, &err);
    llmr_strbuf_free(&err);
}

void llmr_node_stop(llmr_node *n)
{
    if (!n)
        return;
    llmr_router_link_stop(n->link);
    llmr_node_http_stop(n->http);
    llmr_control_server_stop(n->ctl);
    llmr_model_hasher_stop(n->hasher);
    llmr_engine_host_free(n->host);
    llmr_node_plugin_dirs_free(n->dirs);
    free(n->socket_path);
    free(n);
}

llmr_status llmr_node_start(const llmr_config *cfg, const llmr_node_options *no, llmr_node **out,
                            llmr_strbuf *err)
{
    *out = NULL;
    if (!check_engine_options(no->engine_options, err))
        return LLMR_INVALID_ARGUMENT;
    /* Engine workers read their settings from the environment: pass the log level on. */
    setenv("LLMR_LOG_LEVEL", llmr_config_get(cfg, LLMR_CONFIG_LOG_LEVEL), 1);
    const char *data_dir = llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR);
    llmr_node *n = calloc(1, sizeof *n);
    if (!n) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    if (!(n->socket_path = llmr_control_socket_path(data_dir, err))) {
        st = LLMR_INVALID_ARGUMENT;
        goto fail;
    }
    size_t n_dirs = 0;
    n->dirs = llmr_node_plugin_dirs(cfg, &n_dirs);
    llmr_engine_host_options o;
    llmr_node_host_options(cfg, n->dirs, n_dirs, &o);
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_strbuf e = LLMR_STRBUF_INIT;
    st = llmr_engine_host_create(&o, &n->host, &problems, &e);
    llmr_problems_free(&problems);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "cannot start the engine host: %s", llmr_strbuf_cstr(&e));
        llmr_strbuf_free(&e);
        goto fail;
    }
    llmr_strbuf_free(&e);
    char *models_dir = llmr_path_join(data_dir, "models");
    n->hasher = llmr_model_hasher_start(on_hash_mismatch, n);
    size_t models = models_dir ? add_models(n->host, n->hasher, models_dir, no->engine_options) : 0;
    free(models_dir);
    if ((st = llmr_control_server_start(n->socket_path, n->host, &n->ctl, err)) != LLMR_OK)
        goto fail;
    char hostname[256] = "llmr";
    gethostname(hostname, sizeof hostname - 1);
    const char *node_name = no->node_name ? no->node_name : hostname;
    if (!no->no_http) {
        llmr_node_http_options ho = {.host = llmr_config_get(cfg, LLMR_CONFIG_HOST),
                                     .port = llmr_config_port(cfg),
                                     .api_key = no->api_key,
                                     .router_linked = no->router_url != NULL,
                                     .node_name = node_name,
                                     .cors_origins = llmr_config_get(cfg, LLMR_CONFIG_CORS_ORIGINS),
                                     .default_max_tokens = no->default_max_tokens,
                                     .shutdown_grace_s = no->shutdown_grace_s,
                                     .limits = no->http_limits};
        llmr_strbuf he = LLMR_STRBUF_INIT;
        st = llmr_node_http_start(&ho, n->host, &n->http, &he);
        if (st != LLMR_OK) {
            llmr_strbuf_printf(err, "cannot start the HTTP API: %s", llmr_strbuf_cstr(&he));
            llmr_strbuf_free(&he);
            goto fail;
        }
        llmr_strbuf_free(&he);
        llmr_log_info(COMPONENT, "HTTP API listening on %s://%s:%u",
                      no->http_limits.tls_cert_pem ? "https" : "http", llmr_config_get(cfg, LLMR_CONFIG_HOST),
                      llmr_node_http_port(n->http));
        write_port_file(data_dir, llmr_node_http_port(n->http));
    }
    if (no->router_url) {
        char node_url[512];
        if (no->node_url)
            snprintf(node_url, sizeof node_url, "%s", no->node_url);
        else { /* an IPv6 address in brackets; 0.0.0.0 and [::] the link replaces (router_link.c) */
            const char *host = llmr_config_get(cfg, LLMR_CONFIG_HOST);
            bool six = strchr(host, ':') != NULL;
            snprintf(node_url, sizeof node_url, "%s://%s%s%s:%u", no->http_limits.tls_cert_pem ? "https" : "http",
                     six ? "[" : "", host, six ? "]" : "", n->http ? llmr_node_http_port(n->http) : 0);
        }
        llmr_router_link_options lo = {no->router_url, no->node_key, node_url, node_name, data_dir,
                                       no->origin_allowlist, no->prefer_origin, no->local_dirs, no->allow_cpu,
                                       no->heartbeat_ms, no->engine_options, n->hasher};
        llmr_strbuf le = LLMR_STRBUF_INIT;
        st = llmr_router_link_start(&lo, n->host, n->http, &n->link, &le);
        if (st != LLMR_OK) {
            llmr_strbuf_printf(err, "cannot start the router link: %s", llmr_strbuf_cstr(&le));
            llmr_strbuf_free(&le);
            goto fail;
        }
        llmr_strbuf_free(&le);
    }
    json_t *status = llmr_engine_host_status(n->host);
    llmr_log_info(COMPONENT, "node running (pid %d): %zu model(s), %zu engine plugin(s), %zu "
                             "refused; control socket %s; SIGHUP or `llmr node reload-plugins` "
                             "reloads plugins",
                  (int)getpid(), models, json_array_size(json_object_get(status, "plugins")),
                  json_array_size(json_object_get(status, "refused_plugins")), n->socket_path);
    json_decref(status);
    *out = n;
    return LLMR_OK;
fail:
    llmr_node_stop(n);
    return st;
}

unsigned llmr_node_port(const llmr_node *n)
{
    return n->http ? llmr_node_http_port(n->http) : 0;
}

void llmr_node_reload(llmr_node *n)
{
    llmr_log_info(COMPONENT, "SIGHUP: reloading engine plugins");
    json_t *report = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_engine_host_reload_plugins(n->host, &report, &err) == LLMR_OK)
        log_reload(report);
    else
        llmr_log_error(COMPONENT, "reload failed: %s", llmr_strbuf_cstr(&err));
    json_decref(report);
    llmr_strbuf_free(&err);
}

int llmr_node_run(const llmr_config *cfg, const llmr_node_options *no)
{
    /* SIGHUP, SIGINT and SIGTERM are taken with sigwait below; every thread started
     * from here inherits them blocked. */
    sigset_t waited;
    sigemptyset(&waited);
    sigaddset(&waited, SIGHUP);
    sigaddset(&waited, SIGINT);
    sigaddset(&waited, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &waited, NULL);
    llmr_node *n = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_node_start(cfg, no, &n, &err) != LLMR_OK) {
        llmr_log_error(COMPONENT, "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return 1;
    }
    llmr_strbuf_free(&err);
    for (;;) {
        int sig = 0;
        if (sigwait(&waited, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            llmr_node_reload(n);
            continue;
        }
        llmr_log_info(COMPONENT, "%s: stopping; running requests have %u s to finish",
                      sig == SIGINT ? "SIGINT" : "SIGTERM", no->shutdown_grace_s);
        break;
    }
    llmr_node_stop(n);
    return 0;
}
