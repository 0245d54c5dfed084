/* The command line's side of a running router's /v0 API: see router_client.h.  Owns
 * the libcurl handle of each request (made and freed within the call). */
#include "cli/router_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "net/curl_handle.h"
#include "router/router.h"

void llmr_router_client_init(llmr_router_client *c, const char *cmd)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
}

bool llmr_router_client_option(llmr_router_client *c, int argc, char **argv, int *i, bool *bad)
{
    return llmr_cli_option(argc, argv, i, "--router", &c->flag_url, bad) ||
           llmr_cli_option(argc, argv, i, "--api-key", &c->flag_key, bad) ||
           llmr_cli_option(argc, argv, i, "--key", &c->flag_key, bad);
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Whether the URL's host is this machine: an IPv4 literal in 127/8, localhost or ::1,
 * as libcurl will read the URL (so "http://127.0.0.1@elsewhere/" is elsewhere), with no
 * user info at all. */
static bool llmr_url_is_loopback(const char *url)
{
    CURLU *u = curl_url();
    char *host = NULL, *user = NULL;
    bool loop = false;
    if (u && curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_NO_USER &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        struct in_addr v4;
        loop = strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0 ||
               (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
    }
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
    return loop;
}

/* The admin key in the data directory's key file, for a router on this machine. */
static void key_from_file(llmr_router_client *c, const llmr_config *cfg)
{
    const char *data_dir = llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR);
    char *path = llmr_router_key_file_path(data_dir), *key = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (path)
        snprintf(c->key_file, sizeof c->key_file, "%s", path);
    llmr_status st = path ? llmr_router_read_key_file(data_dir, &key, &err) : LLMR_OOM_RAM;
    if (st == LLMR_OK && strlen(key) < sizeof c->file_key) {
        memcpy(c->file_key, key, strlen(key) + 1);
        c->key = c->file_key;
        c->key_from = c->key_file;
    } else if (st != LLMR_OK && st != LLMR_NOT_FOUND) {
        llmr_cli_error(c->cmd, "%s (going on without a key)", llmr_strbuf_cstr(&err));
    }
    if (key) {
        memset(key, 0, strlen(key));
        free(key);
    }
    llmr_strbuf_free(&err);
    free(path);
}

bool llmr_router_client_finish(llmr_router_client *c, const llmr_config *cfg)
{
    const char *url = c->flag_url ? c->flag_url : nonempty_env("LLMR_ROUTER");
    const char *from = c->flag_url ? "--router" : "LLMR_ROUTER";
    if (!url) {
        snprintf(c->url, sizeof c->url, "http://127.0.0.1:%u", llmr_config_port(cfg));
    } else if (!strstr(url, "://")) { /* "host:port" */
        if ((size_t)snprintf(c->url, sizeof c->url, "http://%s", url) >= sizeof c->url)
            goto too_long;
    } else if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
        llmr_cli_error(c->cmd, "%s \"%s\" is not an http:// or https:// URL", from, url);
        return false;
    } else if ((size_t)snprintf(c->url, sizeof c->url, "%s", url) >= sizeof c->url) {
        goto too_long;
    }
    for (size_t n = strlen(c->url); n > 0 && c->url[n - 1] == '/'; n--)
        c->url[n - 1] = 0;
    static const char *const key_env[] = {"LLMR_API_KEY", "LLMR_ADMIN_KEY"};
    c->key = c->flag_key;
    c->key_from = "--api-key";
    for (size_t i = 0; !c->key && i < 2; i++) {
        c->key = nonempty_env(key_env[i]);
        c->key_from = key_env[i];
    }
    if (!c->key && llmr_url_is_loopback(c->url))
        key_from_file(c, cfg);
    return true;
too_long:
    llmr_cli_error(c->cmd, "%s is longer than %zu bytes", from, sizeof c->url - 1);
    return false;
}

/* ---- one request ------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    return llmr_strbuf_append(user, data, size * n) ? size * n : 0;
}

void llmr_router_print_unreachable(const llmr_router_client *c, int curl_code, const char *detail,
                                   long timeout_s)
{
    switch ((CURLcode)curl_code) {
    case CURLE_COULDNT_CONNECT:
        llmr_cli_error(c->cmd,
                       "no router answers at %s (%s).\n  Start one with `llmr serve` (a router and a node on "
                       "this machine) or `llmr router`,\n  or point --router URL or LLMR_ROUTER at yours.",
                       c->url, detail);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        llmr_cli_error(c->cmd, "cannot find the router's host in %s (%s); check --router or LLMR_ROUTER", c->url,
                       detail);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        llmr_cli_error(c->cmd, "the router at %s did not answer within %ld s (%s)", c->url, timeout_s, detail);
        break;
    default:
        llmr_cli_error(c->cmd, "no answer from the router at %s: %s", c->url, detail);
    }
}

bool llmr_router_request(const llmr_router_client *c, const char *method, const char *path,
                         const json_t *body, long timeout_s, llmr_router_answer *a)
{
    static bool curl_ready;
    memset(a, 0, sizeof *a);
    llmr_strbuf_init(&a->body);
    if (!curl_ready && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        llmr_cli_error(c->cmd, "libcurl could not start");
        return false;
    }
    curl_ready = true;
    char *json = body ? json_dumps(body, JSON_COMPACT) : NULL;
    llmr_strbuf url = LLMR_STRBUF_INIT, auth = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&url, "%s%s", c->url, path);
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
    if (json)
        headers = curl_slist_append(headers, "Content-Type: application/json");
    if (c->key) {
        llmr_strbuf_printf(&auth, "Authorization: Bearer %s", c->key);
        headers = curl_slist_append(headers, llmr_strbuf_cstr(&auth));
    }
    CURL *h = llmr_curl_new();
    char detail[CURL_ERROR_SIZE] = "";
    bool ok = false;
    if (!h || !headers || (body && !json) || llmr_strbuf_failed(&url) || llmr_strbuf_failed(&auth)) {
        llmr_cli_error(c->cmd, "out of memory");
        goto done;
    }
    curl_easy_setopt(h, CURLOPT_URL, llmr_strbuf_cstr(&url));
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (json) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s > 0 ? timeout_s : 30L);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        llmr_router_print_unreachable(c, (int)rc, detail[0] ? detail : curl_easy_strerror(rc), timeout_s);
        goto done;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    a->json = json_loadb(a->body.len ? llmr_strbuf_cstr(&a->body) : "", a->body.len, 0, NULL);
    ok = true;
done:
    if (h)
        curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    llmr_strbuf_free(&url);
    llmr_strbuf_free(&auth);
    free(json);
    if (!ok)
        llmr_router_answer_free(a);
    return ok;
}

void llmr_router_answer_free(llmr_router_answer *a)
{
    llmr_strbuf_free(&a->body);
    json_decref(a->json);
    a->json = NULL;
}

const char *llmr_router_answer_message(const llmr_router_answer *a, char *buf, size_t size)
{
    const char *m = json_string_value(json_object_get(json_object_get(a->json, "error"), "message"));
    if (m)
        return m;
    snprintf(buf, size, "%.*s", (int)(a->body.len < 300 ? a->body.len : 300),
             a->body.len ? llmr_strbuf_cstr(&a->body) : "");
    return buf[0] ? buf : "(no message)";
}

void llmr_router_print_refusal(const llmr_router_client *c, const llmr_router_answer *a, const char *what,
                               bool need_admin)
{
    const char *needed = need_admin ? "an admin key" : "a key with the node or admin scope";
    if (a->status == 401 && !c->key) {
        llmr_cli_error(c->cmd,
                       "the router at %s wants a key (401): %s needs %s.\n  Pass --api-key KEY or set "
                       "LLMR_API_KEY (the admin key `llmr serve` or `llmr router` printed\n  on first start, "
                       "kept in DATA_DIR/%s on its machine%s%s%s).",
                       c->url, what, needed, LLMR_ROUTER_KEY_FILE, c->key_file[0] ? "; there is no " : "",
                       c->key_file, c->key_file[0] ? " here" : "");
    } else if (a->status == 401) {
        llmr_cli_error(c->cmd,
                       "the router at %s refused the key from %s (401: unknown or revoked); %s needs %s",
                       c->url, c->key_from, what, needed);
    } else if (a->status == 403) {
        llmr_cli_error(c->cmd, "the key from %s lacks the scope for this (403): %s needs %s", c->key_from,
                       what, needed);
    } else {
        char buf[320];
        llmr_cli_error(c->cmd, "%s: the router at %s answered %ld: %s", what, c->url, a->status,
                       llmr_router_answer_message(a, buf, sizeof buf));
    }
}

/* ---- states in words --------------------------------------------------------------- */

static const char *state_of(const json_t *node)
{
    const char *s = json_string_value(json_object_get(node, "state"));
    return s ? s : "absent";
}

void llmr_router_count_nodes(const json_t *nodes, llmr_router_node_counts *n)
{
    memset(n, 0, sizeof *n);
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node)
    {
        const char *s = state_of(node);
        bool online = json_is_true(json_object_get(node, "online"));
        n->total++;
        n->offline += !online;
        n->ready += online && !strcmp(s, "ready");
        n->dead += !strcmp(s, "failed") || !strcmp(s, "not_ready");
    }
}

void llmr_router_format_bytes(double bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
    size_t u = 0;
    while (bytes >= 1000 && u < 4) {
        bytes /= 1000;
        u++;
    }
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

static void describe_sync(const json_t *sync, bool coarse, llmr_strbuf *out)
{
    const char *state = json_string_value(json_object_get(sync, "state"));
    const char *file = json_string_value(json_object_get(sync, "file"));
    json_int_t files_done = json_integer_value(json_object_get(sync, "files_done"));
    json_int_t files_total = json_integer_value(json_object_get(sync, "files_total"));
    json_int_t done = json_integer_value(json_object_get(sync, "bytes_done"));
    json_int_t total = json_integer_value(json_object_get(sync, "bytes_total"));
    if (state)
        llmr_strbuf_printf(out, ", %s", state);
    if (file)
        llmr_strbuf_printf(out, " %s", file);
    if (files_total > 0)
        llmr_strbuf_printf(out, ": %lld/%lld files", (long long)files_done, (long long)files_total);
    if (!coarse && total > 0) {
        char a[32], b[32];
        llmr_router_format_bytes((double)done, a, sizeof a);
        llmr_router_format_bytes((double)total, b, sizeof b);
        llmr_strbuf_printf(out, ", %s of %s (%d%%)", a, b, (int)(100.0 * (double)done / (double)total));
    }
}

void llmr_router_describe_node(const json_t *node, bool coarse, llmr_strbuf *out)
{
    const char *name = json_string_value(json_object_get(node, "node_name"));
    const char *id = json_string_value(json_object_get(node, "node"));
    const char *state = state_of(node);
    const char *reason = json_string_value(json_object_get(node, "reason"));
    llmr_strbuf_printf(out, "%s%s: ", name && *name ? name : id ? id : "?",
                       json_is_true(json_object_get(node, "online")) ? "" : " (offline)");
    if (!strcmp(state, "absent")) {
        llmr_strbuf_puts(out, "waiting for the node to take it up");
    } else if (!strcmp(state, "syncing")) {
        llmr_strbuf_puts(out, "syncing");
        describe_sync(json_object_get(node, "sync"), coarse, out);
    } else if (!strcmp(state, "not_ready")) {
        llmr_strbuf_printf(out, "not ready: %s", reason ? reason : "no reason given");
    } else {
        llmr_strbuf_printf(out, "%s%s%s", state, reason ? ": " : "", reason ? reason : "");
    }
}

void llmr_router_describe_model(const json_t *nodes, llmr_strbuf *out)
{
    llmr_router_node_counts n;
    llmr_router_count_nodes(nodes, &n);
    if (n.ready) {
        llmr_strbuf_printf(out, "ready on %zu/%zu node%s", n.ready, n.total, n.total == 1 ? "" : "s");
        return;
    }
    if (!n.total) {
        llmr_strbuf_puts(out, "not ready: no node registered");
        return;
    }
    llmr_strbuf_puts(out, "not ready: ");
    llmr_router_describe_nodes(nodes, false, out);
}

void llmr_router_describe_nodes(const json_t *nodes, bool coarse, llmr_strbuf *out)
{
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node)
    {
        if (i)
            llmr_strbuf_puts(out, "; ");
        llmr_router_describe_node(node, coarse, out);
    }
}
