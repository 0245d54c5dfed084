/* The node's link to its router: see router_link.h and docs/node-router-protocol.md.
 *
 * Two threads: the link thread registers (again after a 404 on a heartbeat: the
 * router restarted), sends heartbeats and reads the router's model list (acting on
 * removals, new versions and unloads at once, except a model being synced: its sync
 * is told to stop and the sync thread cleans up after it); the sync
 * thread fetches the models that list names, one at a time, so that a long download
 * never delays a heartbeat.  The state both share (registration, each model's sync
 * progress and outcome) sits under one lock. */
#include "node/router_link.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "common/sha256.h"
#include "net/curl_handle.h"
#include "node/node_prompt.h"
#include "node/model_sync.h"

#define COMPONENT "router-link"
#define MAX_RESPONSE (8u << 20)
#define MAX_MODELS 1024

/* A model the router lists, and what this node did about it. */
typedef struct synced {
    char *name;
    char *state;        /* "queued", "syncing", "ready" (added to the host), "failed" */
    char *reason;       /* when failed */
    llmr_sync_progress progress;
    char *file;         /* progress.file, owned */
    uint64_t retry_at_ms; /* a failed sync is tried again after this */
    char *version;      /* the router's version of the model (NULL: it gives none) */
    json_int_t unloads; /* the router's count of unloads asked (llmr stop) */
    bool cancel;        /* stop the sync in progress */
    bool deleted;       /* ...because the router no longer lists the model (else its
                           version changed: it is synced again) */
} synced;

struct llmr_router_link {
    llmr_router_link_options o;   /* strings owned */
    char *auth;                   /* "Authorization: Bearer KEY" or NULL */
    llmr_engine_host *host;
    llmr_node_http *http;
    pthread_t link_thread, sync_thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;          /* stop, or new work for the sync thread */
    bool stopping;
    bool beat_now;                /* a model changed state: heartbeat without waiting */
    char *node_id;                /* NULL until registered */
    char local_ip[64];            /* this end's address of the last request to the router */
    json_t *proofs;               /* answers to the router's challenges, for the next heartbeat */
    unsigned interval_ms;
    synced *models;
    size_t n_models;
    uint64_t last_progress_ms;
};

/* ---- HTTP with JSON --------------------------------------------------------------- */

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    llmr_strbuf *sb = user;
    if (sb->len + size * n > MAX_RESPONSE)
        return 0;
    llmr_strbuf_append(sb, data, size * n);
    return size * n;
}

/* method url [body] -> the HTTP status (0: no answer, err says why) and the parsed
 * answer when it is JSON. */
static long request(llmr_router_link *l, const char *method, const char *path, const json_t *body,
                    json_t **answer, llmr_strbuf *err)
{
    *answer = NULL;
    CURL *c = llmr_curl_new();
    if (!c) {
        llmr_strbuf_puts(err, "cannot start an HTTP client");
        return 0;
    }
    char *url = NULL;
    llmr_strbuf u = LLMR_STRBUF_INIT, got = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&u, "%s%s", l->o.router_url, path);
    url = llmr_strbuf_take(&u);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (l->auth)
        headers = curl_slist_append(headers, l->auth);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (text)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    char *ip = NULL;
    if (rc == CURLE_OK && curl_easy_getinfo(c, CURLINFO_LOCAL_IP, &ip) == CURLE_OK && ip && *ip) {
        pthread_mutex_lock(&l->lock);
        snprintf(l->local_ip, sizeof l->local_ip, "%s", ip);
        pthread_mutex_unlock(&l->lock);
    }
    if (rc != CURLE_OK) {
        llmr_strbuf_printf(err, "%s %s: %s", method, url ? url : path, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        *answer = json_loadb(got.data ? got.data : "", got.len, 0, NULL);
        if (status >= 400) {
            const json_t *e = json_object_get(*answer, "error");
            const char *msg = json_string_value(json_object_get(e, "message"));
            const char *code = json_string_value(json_object_get(e, "code"));
            llmr_strbuf_printf(err, "%s %s answered %ld%s%s%s: %s", method, url ? url : path, status,
                               code ? " (" : "", code ? code : "", code ? ")" : "",
                               msg ? msg : "(no error message)");
        }
    }
    free(text);
    free(url);
    llmr_strbuf_free(&got);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return status;
}

/* ---- what the node tells the router ---------------------------------------------- */

/* The URL the router reaches this node at.  A node bound to every address
 * (http://0.0.0.0:PORT, http://[::]:PORT, or https) is reached at the address it reaches the
 * router from, the one the router sees its registration come from. */
static char *node_url(llmr_router_link *l)
{
    const char *u = l->o.node_url;
    bool tls = !strncmp(u, "https://", 8);
    const char *rest = u + (tls ? 8 : 7); /* after the scheme */
    const char *wild = !strncmp(rest, "0.0.0.0:", 8) ? rest + 7 : !strncmp(rest, "[::]:", 5) ? rest + 4 : NULL;
    if (strncmp(u, "http://", 7) && !tls)
        wild = NULL;
    char ip[64];
    pthread_mutex_lock(&l->lock);
    snprintf(ip, sizeof ip, "%s", l->local_ip);
    pthread_mutex_unlock(&l->lock);
    if (!wild || !ip[0])
        return strdup(u);
    llmr_strbuf b = LLMR_STRBUF_INIT;
    bool six = strchr(ip, ':') != NULL;
    llmr_strbuf_printf(&b, "%s://%s%s%s%s", tls ? "https" : "http", six ? "[" : "", ip, six ? "]" : "", wild);
    return llmr_strbuf_take(&b);
}

static json_t *registration(llmr_router_link *l)
{
    json_t *status = llmr_engine_host_status(l->host);
    json_t *res = json_object_get(status, "resources");
    json_t *gpus = json_array(), *g;
    size_t i;
    json_array_foreach(json_object_get(res, "gpus"), i, g)
        json_array_append_new(gpus, json_pack("{s:O, s:O}", "name", json_object_get(g, "name"),
                                              "vram_total", json_object_get(g, "total_bytes")));
    char *url = node_url(l);
    json_t *o = json_pack("{s:s, s:s, s:s, s:b, s:b, s:o}", "name", l->o.node_name, "url", url ? url : l->o.node_url,
                          "version", LLMR_VERSION, "has_gpu", json_array_size(gpus) > 0, "allow_cpu",
                          l->o.allow_cpu, "gpus", gpus);
    json_t *ram = json_object_get(json_object_get(res, "ram"), "total_bytes");
    if (ram)
        json_object_set(o, "ram_total", ram);
    json_decref(status);
    free(url);
    return o;
}

static json_t *sync_json(const synced *m)
{
    const llmr_sync_progress *p = &m->progress;
    json_t *s = json_pack("{s:s, s:I, s:I, s:i, s:i}", "state", p->state ? p->state : "checking",
                          "bytes_done", (json_int_t)p->bytes_done, "bytes_total",
                          (json_int_t)p->bytes_total, "files_done", (int)p->files_done, "files_total",
                          (int)p->files_total);
    if (m->file)
        json_object_set_new(s, "file", json_string(m->file));
    return s;
}

/* Caller holds the lock. */
static synced *find_synced(llmr_router_link *l, const char *name)
{
    for (size_t i = 0; i < l->n_models; i++)
        if (strcmp(l->models[i].name, name) == 0)
            return &l->models[i];
    return NULL;
}

static json_t *heartbeat(llmr_router_link *l)
{
    json_t *status = llmr_engine_host_status(l->host);
    json_t *res = json_object_get(status, "resources"), *models = json_array(), *m, *g;
    size_t i;
    uint64_t vram_used = 0, vram_total = 0;
    json_array_foreach(json_object_get(res, "gpus"), i, g)
    {
        vram_used += (uint64_t)json_integer_value(json_object_get(g, "used_bytes"));
        vram_total += (uint64_t)json_integer_value(json_object_get(g, "total_bytes"));
    }
    pthread_mutex_lock(&l->lock);
    json_array_foreach(json_object_get(status, "models"), i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *state = json_string_value(json_object_get(m, "state"));
        bool ready = state && (!strcmp(state, "ready") || !strcmp(state, "idle") || !strcmp(state, "loading"));
        json_t *e = json_pack("{s:s, s:s}", "name", name, "state", ready ? "ready" : state && !strcmp(state, "failed") ? "failed" : "not_ready");
        json_t *reason = json_object_get(m, "reason");
        if (!ready && reason)
            json_object_set(e, "reason", reason);
        /* what `llmr ps` shows: loaded or not, memory, requests, since when */
        json_t *w = json_object_get(m, "worker");
        json_object_set_new(e, "loaded", json_boolean(w != NULL));
        json_object_set(e, "queued", json_object_get(m, "queued"));
        if (w) {
            json_object_set(e, "vram_bytes", json_object_get(w, "vram_bytes"));
            json_object_set(e, "ram_bytes", json_object_get(w, "ram_bytes"));
            json_object_set(e, "running", json_object_get(w, "in_flight"));
            json_object_set(e, "loaded_since", json_object_get(m, "loaded_since"));
            json_object_set(e, "engine", json_object_get(w, "engine"));
        }
        json_array_append_new(models, e);
    }
    for (size_t k = 0; k < l->n_models; k++) {
        synced *s = &l->models[k];
        if (!strcmp(s->state, "ready"))
            continue; /* the host's entry above says it */
        json_t *e = json_pack("{s:s, s:s}", "name", s->name, "state",
                              !strcmp(s->state, "failed") ? "failed" : "syncing");
        if (s->reason)
            json_object_set_new(e, "reason", json_string(s->reason));
        else
            json_object_set_new(e, "sync", sync_json(s));
        json_array_append_new(models, e);
    }
    json_t *proofs = l->proofs;
    l->proofs = NULL;
    pthread_mutex_unlock(&l->lock);
    json_t *ram = json_object_get(res, "ram");
    json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:o}", "in_flight",
                          (int)(l->http ? llmr_node_http_in_flight(l->http) : 0), "ram_used",
                          json_integer_value(json_object_get(ram, "used_bytes")), "ram_total",
                          json_integer_value(json_object_get(ram, "total_bytes")), "vram_used",
                          (json_int_t)vram_used, "vram_total", (json_int_t)vram_total, "models", models);
    if (proofs)
        json_object_set_new(o, "proofs", proofs);
    json_decref(status);
    return o;
}

/* ---- proofs: the router's challenges (docs/node-router-protocol.md, "Proofs") -------- */

/* The SHA-256 of the nonce and the byte range of the model's file, as hex; false
 * when the file is not here (no answer: the model stays unproven). */
static bool answer_challenge(llmr_router_link *l, const json_t *c, char out[65])
{
    const char *model = json_string_value(json_object_get(c, "model"));
    const char *nonce = json_string_value(json_object_get(c, "nonce"));
    const char *file = json_string_value(json_object_get(c, "file"));
    json_int_t offset = json_integer_value(json_object_get(c, "offset"));
    json_int_t length = json_integer_value(json_object_get(c, "length"));
    if (!model || !nonce || !file || !llmr_file_name_is_safe(model) || file[0] == '/' || strstr(file, "..") ||
        offset < 0 || length <= 0 || length > 65536)
        return false;
    char *models = llmr_path_join(l->o.data_dir, "models");
    char *dir = models ? llmr_path_join(models, model) : NULL;
    char *path = dir ? llmr_path_join(dir, file) : NULL;
    unsigned char *bytes = malloc((size_t)length);
    int fd = path && bytes ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    bool ok = fd >= 0 && pread(fd, bytes, (size_t)length, (off_t)offset) == (ssize_t)length;
    if (fd >= 0)
        close(fd);
    if (ok) {
        llmr_sha256 h;
        uint8_t digest[32];
        llmr_sha256_init(&h);
        llmr_sha256_update(&h, nonce, strlen(nonce));
        llmr_sha256_update(&h, bytes, (size_t)length);
        llmr_sha256_final(&h, digest);
        llmr_sha256_hex(digest, out);
    }
    free(bytes);
    free(path);
    free(dir);
    free(models);
    return ok;
}

/* The heartbeat answer's challenges: answered with the next heartbeat, sent at once. */
static void take_challenges(llmr_router_link *l, const json_t *answer)
{
    size_t i;
    json_t *c;
    json_t *proofs = json_array();
    json_array_foreach(json_object_get(answer, "challenges"), i, c)
    {
        char sha[65];
        if (i < 64 && answer_challenge(l, c, sha))
            json_array_append_new(proofs, json_pack("{s:O, s:O, s:s}", "model", json_object_get(c, "model"), "nonce",
                                                    json_object_get(c, "nonce"), "sha256", sha));
        else
            llmr_log_warn(COMPONENT, "cannot answer the router's challenge for model %s",
                          json_string_value(json_object_get(c, "model")));
    }
    if (!json_array_size(proofs)) {
        json_decref(proofs);
        return;
    }
    pthread_mutex_lock(&l->lock);
    json_decref(l->proofs);
    l->proofs = proofs;
    l->beat_now = true;
    pthread_mutex_unlock(&l->lock);
}

/* ---- the link thread ------------------------------------------------------------------ */

static bool do_register(llmr_router_link *l, llmr_strbuf *err)
{
    json_t *answer = NULL;
    pthread_mutex_lock(&l->lock);
    bool know_ip = l->local_ip[0] != 0;
    pthread_mutex_unlock(&l->lock);
    if (!know_ip) { /* this end's address, for a node bound to every address */
        request(l, "GET", "/health", NULL, &answer, err);
        json_decref(answer);
        answer = NULL;
        llmr_strbuf_reset(err);
    }
    json_t *body = registration(l);
    long st = request(l, "POST", "/v0/nodes", body, &answer, err);
    json_decref(body);
    const char *id = json_string_value(json_object_get(answer, "node_id"));
    const char *secret = json_string_value(json_object_get(answer, "node_secret"));
    bool ok = st == 200 && id && secret && *secret;
    if (st == 200 && !ok)
        llmr_strbuf_puts(err, "the router's registration answer has no node_id or node_secret");
    if (ok) {
        /* the credential the router presents on every request it sends here */
        if (l->http)
            llmr_node_http_set_router_secret(l->http, secret);
        json_t *iv = json_object_get(answer, "heartbeat_interval_s");
        pthread_mutex_lock(&l->lock);
        free(l->node_id);
        l->node_id = strdup(id);
        if (json_is_number(iv) && json_number_value(iv) >= 0.1 && json_number_value(iv) <= 3600)
            l->interval_ms = (unsigned)(json_number_value(iv) * 1000);
        pthread_mutex_unlock(&l->lock);
        llmr_log_info(COMPONENT, "registered with %s as %s", l->o.router_url, id);
    }
    json_decref(answer);
    return ok;
}

static void free_synced(synced *s)
{
    free(s->name);
    free(s->state);
    free(s->reason);
    free(s->file);
    free(s->version);
}

/* Caller holds the lock: takes models[i] out of the list. */
static void drop_synced(llmr_router_link *l, size_t i)
{
    free_synced(&l->models[i]);
    memmove(&l->models[i], &l->models[i + 1], (l->n_models - i - 1) * sizeof *l->models);
    l->n_models--;
}

/* Takes the model off the engine host and forgets its tokenizer and template. */
static bool take_off_host(llmr_router_link *l, const char *name)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    bool was = llmr_engine_host_remove_model(l->host, name, &err) == LLMR_OK;
    llmr_node_http_forget_model(l->http, name);
    llmr_strbuf_free(&err);
    return was;
}

/* The model is gone from the router: off the engine host, its files deleted. */
static void forget_model(llmr_router_link *l, const char *name)
{
    bool served = take_off_host(l, name);
    bool clean = llmr_sync_remove_model(l->o.data_dir, name);
    if (clean)
        llmr_log_info(COMPONENT, "model %s: the router no longer lists it: %sits files are deleted", name,
                      served ? "unloaded and " : "");
    else
        llmr_log_warn(COMPONENT, "model %s: the router no longer lists it, but some of its files could "
                                 "not be deleted (the log above says which)",
                      name);
}

/* Names collected under the lock, acted on after it. */
typedef struct name_list {
    char **v;
    size_t n;
} name_list;

static void name_add(name_list *nl, const char *name)
{
    char **grown = realloc(nl->v, (nl->n + 1) * sizeof *grown);
    if (!grown)
        return;
    nl->v = grown;
    if ((nl->v[nl->n] = strdup(name)) != NULL)
        nl->n++;
}

static void name_list_free(name_list *nl)
{
    for (size_t i = 0; i < nl->n; i++)
        free(nl->v[i]);
    free(nl->v);
}

static const json_t *listed(const json_t *list, const char *name)
{
    size_t i;
    const json_t *m;
    json_array_foreach(list, i, m)
    {
        const char *n = json_string_value(json_object_get(m, "name"));
        if (n && !strcmp(n, name))
            return m;
    }
    return NULL;
}

/* Reads the router's model list: queues the models this node does not have yet, syncs
 * again a model whose version changed (never serving the old copy meanwhile), unloads
 * a model whose unload count went up (llmr stop), and deletes what the router no
 * longer lists (llmr rm), stopping its sync when one is in progress. */
static void read_models(llmr_router_link *l)
{
    json_t *answer = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    long st = request(l, "GET", "/v0/models", NULL, &answer, &err);
    json_t *list = json_object_get(answer, "models"), *m;
    size_t i;
    if (st != 200 || !json_is_array(list)) {
        llmr_log_warn(COMPONENT, "cannot read the router's models: %s",
                      err.len ? llmr_strbuf_cstr(&err) : "no \"models\" array in the answer");
        goto done;
    }
    name_list take_off = {0}, unload = {0}, forget = {0};
    /* Models synced by an earlier run, on disk and served, that the router dropped
     * while this node was away. */
    json_t *status = llmr_engine_host_status(l->host), *hm;
    json_array_foreach(json_object_get(status, "models"), i, hm)
    {
        const char *name = json_string_value(json_object_get(hm, "name"));
        if (name && llmr_file_name_is_safe(name) && !listed(list, name) &&
            llmr_sync_has_marker(l->o.data_dir, name)) {
            pthread_mutex_lock(&l->lock);
            bool known = find_synced(l, name) != NULL;
            pthread_mutex_unlock(&l->lock);
            if (!known)
                name_add(&forget, name);
        }
    }
    json_decref(status);
    pthread_mutex_lock(&l->lock);
    bool added = false;
    for (size_t k = 0; k < l->n_models;) {
        synced *s = &l->models[k];
        if (listed(list, s->name)) {
            k++;
        } else if (!strcmp(s->state, "syncing")) {
            s->cancel = s->deleted = true; /* the sync thread cleans up when it stops */
            k++;
        } else {
            name_add(&forget, s->name);
            drop_synced(l, k);
        }
    }
    json_array_foreach(list, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *version = json_string_value(json_object_get(m, "version"));
        json_int_t unloads = json_integer_value(json_object_get(m, "unloads"));
        synced *known = name ? find_synced(l, name) : NULL;
        if (known) {
            if (version && (!known->version || strcmp(version, known->version) != 0)) {
                char *v = strdup(version);
                if (v) {
                    llmr_log_info(COMPONENT, "model %s: the router has another version (%s, was %s): "
                                             "syncing it again",
                                  name, version, known->version ? known->version : "none");
                    free(known->version);
                    known->version = v;
                    if (!strcmp(known->state, "syncing")) {
                        known->cancel = true;
                    } else {
                        free(known->state);
                        known->state = strdup("queued");
                        free(known->reason);
                        known->reason = NULL;
                        added = true;
                    }
                    name_add(&take_off, name);
                }
            }
            if (unloads != known->unloads) {
                /* a lower count: the router restarted; only a higher one asks */
                if (unloads > known->unloads)
                    name_add(&unload, name);
                known->unloads = unloads;
            }
            continue;
        }
        if (!name || !llmr_file_name_is_safe(name) || l->n_models >= MAX_MODELS)
            continue;
        synced *grown = realloc(l->models, (l->n_models + 1) * sizeof *grown);
        if (!grown)
            break;
        l->models = grown;
        synced *s = &l->models[l->n_models];
        memset(s, 0, sizeof *s);
        s->name = strdup(name);
        s->state = strdup("queued");
        s->version = version ? strdup(version) : NULL;
        s->unloads = unloads;
        if (!s->name || !s->state) {
            free_synced(s);
            break;
        }
        l->n_models++;
        added = true;
    }
    if (added)
        pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    llmr_strbuf why = LLMR_STRBUF_INIT;
    for (size_t k = 0; k < take_off.n; k++) /* the old copy is served no more */
        take_off_host(l, take_off.v[k]);
    for (size_t k = 0; k < unload.n; k++) {
        llmr_strbuf_reset(&why);
        if (llmr_engine_host_unload(l->host, unload.v[k], &why) == LLMR_OK)
            llmr_log_info(COMPONENT, "model %s: unloaded as the router asked (its files stay)", unload.v[k]);
    }
    for (size_t k = 0; k < forget.n; k++)
        forget_model(l, forget.v[k]);
    llmr_strbuf_free(&why);
    name_list_free(&take_off);
    name_list_free(&unload);
    name_list_free(&forget);
done:
    json_decref(answer);
    llmr_strbuf_free(&err);
}

/* Waits ms or until stopped; true when stopping. */
static bool wait_ms(llmr_router_link *l, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->lock);
    while (!l->stopping && !l->beat_now && pthread_cond_timedwait(&l->wake, &l->lock, &ts) == 0)
        ;
    l->beat_now = false;
    bool stop = l->stopping;
    pthread_mutex_unlock(&l->lock);
    return stop;
}

static void *link_main(void *arg)
{
    llmr_router_link *l = arg;
    uint64_t backoff = 500;
    char last_error[512] = "";
    for (;;) {
        llmr_strbuf err = LLMR_STRBUF_INIT;
        pthread_mutex_lock(&l->lock);
        bool registered = l->node_id != NULL;
        pthread_mutex_unlock(&l->lock);
        if (!registered) {
            if (!do_register(l, &err)) {
                /* the same failure is logged once, not every try */
                if (strcmp(last_error, llmr_strbuf_cstr(&err)) != 0) {
                    llmr_log_warn(COMPONENT, "cannot register with the router (trying again): %s",
                                  llmr_strbuf_cstr(&err));
                    snprintf(last_error, sizeof last_error, "%s", llmr_strbuf_cstr(&err));
                }
                llmr_strbuf_free(&err);
                if (wait_ms(l, backoff))
                    break;
                backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
                continue;
            }
            backoff = 500;
            last_error[0] = 0;
        } else {
            json_t *body = heartbeat(l), *answer = NULL;
            char path[300];
            pthread_mutex_lock(&l->lock);
            snprintf(path, sizeof path, "/v0/nodes/%s/heartbeat", l->node_id);
            pthread_mutex_unlock(&l->lock);
            long st = request(l, "POST", path, body, &answer, &err);
            json_decref(body);
            if (st == 200)
                take_challenges(l, answer);
            json_decref(answer);
            if (st == 404) { /* the router forgot this node: register again now */
                llmr_log_info(COMPONENT, "the router does not know this node any more; registering again");
                pthread_mutex_lock(&l->lock);
                free(l->node_id);
                l->node_id = NULL;
                pthread_mutex_unlock(&l->lock);
                llmr_strbuf_free(&err);
                continue;
            }
            if (st != 200)
                llmr_log_warn(COMPONENT, "heartbeat failed: %s", llmr_strbuf_cstr(&err));
        }
        llmr_strbuf_free(&err);
        read_models(l);
        pthread_mutex_lock(&l->lock);
        unsigned interval = l->interval_ms;
        pthread_mutex_unlock(&l->lock);
        if (wait_ms(l, interval))
            break;
    }
    return NULL;
}

/* ---- the sync thread ----------------------------------------------------------------- */

static bool on_progress(void *user, const llmr_sync_progress *p)
{
    llmr_router_link *l = user;
    pthread_mutex_lock(&l->lock);
    synced *s = find_synced(l, p->model);
    if (s) {
        s->progress = *p;
        s->progress.model = NULL;
        s->progress.file = NULL;
        if (!s->file || !p->file || strcmp(s->file, p->file) != 0) {
            free(s->file);
            s->file = p->file ? strdup(p->file) : NULL;
        }
    }
    bool stop = l->stopping || (s && s->cancel);
    pthread_mutex_unlock(&l->lock);
    return !stop;
}

static void set_state(llmr_router_link *l, const char *name, const char *state, const char *reason)
{
    pthread_mutex_lock(&l->lock);
    synced *s = find_synced(l, name);
    if (s) {
        free(s->state);
        s->state = strdup(state);
        free(s->reason);
        s->reason = reason ? strdup(reason) : NULL;
        if (!strcmp(state, "failed"))
            s->retry_at_ms = llmr_now_ms() + 60000;
    }
    l->beat_now = true; /* the router hears of it at once */
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
}

static bool host_has(llmr_router_link *l, const char *name)
{
    json_t *status = llmr_engine_host_status(l->host), *m;
    size_t i;
    bool found = false;
    json_array_foreach(json_object_get(status, "models"), i, m)
        found |= !strcmp(json_string_value(json_object_get(m, "name")), name);
    json_decref(status);
    return found;
}

/* Whether the router dropped (*deleted) or changed the model since its sync began. */
static bool sync_cancelled(llmr_router_link *l, const char *name, bool *deleted)
{
    pthread_mutex_lock(&l->lock);
    synced *s = find_synced(l, name);
    bool cancelled = s && s->cancel;
    *deleted = s && s->deleted;
    pthread_mutex_unlock(&l->lock);
    return cancelled;
}

/* After a failed sync or manifest read: when the router no longer lists the model (it
 * was removed meanwhile, so its files answer 404), the failure is no error: the entry
 * is marked for the sync thread to clean up.  True then. */
static bool dropped_meanwhile(llmr_router_link *l, const char *name)
{
    json_t *answer = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    long st = request(l, "GET", "/v0/models", NULL, &answer, &err);
    const json_t *list = json_object_get(answer, "models");
    bool gone = st == 200 && json_is_array(list) && !listed(list, name);
    json_decref(answer);
    llmr_strbuf_free(&err);
    if (!gone)
        return false;
    pthread_mutex_lock(&l->lock);
    synced *s = find_synced(l, name);
    if (s)
        s->cancel = s->deleted = true;
    pthread_mutex_unlock(&l->lock);
    llmr_log_info(COMPONENT, "model %s: sync stopped (the router no longer lists it)", name);
    return true;
}

static void sync_one(llmr_router_link *l, const char *name)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *manifest = NULL, *skipped = NULL;
    char path[400];
    snprintf(path, sizeof path, "/v0/models/%s/manifest", name);
    long st = request(l, "GET", path, NULL, &manifest, &err);
    if (st != 200 || !json_is_object(manifest)) {
        if (!err.len)
            llmr_strbuf_puts(&err, "the manifest is not a JSON object");
        if (st == 404 && dropped_meanwhile(l, name))
            goto done;
        llmr_log_error(COMPONENT, "model %s: cannot read its manifest: %s", name, llmr_strbuf_cstr(&err));
        set_state(l, name, "failed", llmr_strbuf_cstr(&err));
        goto done;
    }
    llmr_sync_options so;
    llmr_sync_options_default(&so);
    so.data_dir = l->o.data_dir;
    so.router_url = l->o.router_url;
    so.auth_header = l->auth;
    so.origin_allowlist = l->o.origin_allowlist ? l->o.origin_allowlist : "";
    so.prefer_origin = l->o.prefer_origin;
    so.local_dirs = l->o.local_dirs;
    so.progress = on_progress;
    so.user = l;
    llmr_log_info(COMPONENT, "model %s: syncing", name);
    /* Served from an earlier run's copy of another version: not any more. */
    const char *version = json_string_value(json_object_get(manifest, "version"));
    char *local = version ? llmr_sync_local_version(l->o.data_dir, name) : NULL;
    if (version && (!local || strcmp(local, version) != 0) && host_has(l, name))
        take_off_host(l, name);
    free(local);
    llmr_status s = llmr_model_sync(&so, manifest, &skipped, &err);
    bool deleted = false;
    if (sync_cancelled(l, name, &deleted)) { /* the sync thread takes it from here */
        llmr_log_info(COMPONENT, "model %s: sync stopped (%s)", name,
                      deleted ? "the router no longer lists it" : "the router has another version");
        goto done;
    }
    if (s != LLMR_OK && s != LLMR_CANCELLED && dropped_meanwhile(l, name))
        goto done;
    if (s != LLMR_OK) {
        llmr_log_error(COMPONENT, "model %s: sync failed (%s): %s", name, llmr_status_name(s),
                       llmr_strbuf_cstr(&err));
        set_state(l, name, "failed", llmr_strbuf_cstr(&err));
        goto done;
    }
    /* the sync logged each optional file it skipped */
    if (sync_cancelled(l, name, &deleted))
        goto done; /* dropped or changed meanwhile: not served */
    if (!host_has(l, name)) {
        char *models = llmr_path_join(l->o.data_dir, "models");
        char *dir = models ? llmr_path_join(models, name) : NULL;
        const char *format = json_string_value(json_object_get(manifest, "format"));
        llmr_model_spec spec = {name, dir, format, NULL, 0, l->o.engine_options};
        llmr_strbuf_reset(&err);
        s = dir ? llmr_engine_host_add_model(l->host, &spec, &err) : LLMR_OOM_RAM;
        if (s == LLMR_OK)
            llmr_model_dir_special_in_content(name, dir, true); /* logs the opt-out */
        free(dir);
        free(models);
        if (s != LLMR_OK) {
            llmr_log_error(COMPONENT, "model %s: synced but not served: %s", name, llmr_strbuf_cstr(&err));
            set_state(l, name, "failed", llmr_strbuf_cstr(&err));
            goto done;
        }
    }
    llmr_log_info(COMPONENT, "model %s: synced and verified", name);
    {   /* its large files hashed whole in the background (model_hasher.h) */
        char *models = llmr_path_join(l->o.data_dir, "models");
        char *dir = models ? llmr_path_join(models, name) : NULL;
        llmr_model_hasher_add(l->o.hasher, name, dir);
        free(dir);
        free(models);
    }
    set_state(l, name, "ready", NULL);
done:
    json_decref(manifest);
    json_decref(skipped);
    llmr_strbuf_free(&err);
}

static void *sync_main(void *arg)
{
    llmr_router_link *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        char *next = NULL;
        uint64_t now = llmr_now_ms();
        for (size_t i = 0; i < l->n_models && !next; i++) {
            synced *s = &l->models[i];
            if (!strcmp(s->state, "queued") || (!strcmp(s->state, "failed") && now >= s->retry_at_ms)) {
                next = strdup(s->name);
                free(s->state);
                s->state = strdup("syncing");
                free(s->reason);
                s->reason = NULL;
            }
        }
        if (!next) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&l->wake, &l->lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&l->lock);
        sync_one(l, next);
        pthread_mutex_lock(&l->lock);
        /* The router dropped or changed the model while it synced. */
        synced *s = find_synced(l, next);
        bool forget = false;
        if (s && s->deleted) {
            drop_synced(l, (size_t)(s - l->models));
            forget = true;
        } else if (s && s->cancel) {
            s->cancel = false;
            free(s->state);
            s->state = strdup("queued");
            free(s->reason);
            s->reason = NULL;
        }
        if (forget) {
            pthread_mutex_unlock(&l->lock);
            forget_model(l, next);
            pthread_mutex_lock(&l->lock);
        }
        free(next);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* ---- lifetime --------------------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

llmr_status llmr_router_link_start(const llmr_router_link_options *o, llmr_engine_host *host,
                                   llmr_node_http *http, llmr_router_link **out, llmr_strbuf *err)
{
    *out = NULL;
    if (!o->router_url || (strncmp(o->router_url, "http://", 7) && strncmp(o->router_url, "https://", 8))) {
        llmr_strbuf_printf(err, "the router URL \"%s\" must start with http:// or https://",
                           o->router_url ? o->router_url : "");
        return LLMR_INVALID_ARGUMENT;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    llmr_router_link *l = calloc(1, sizeof *l);
    if (!l) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    l->o = *o;
    l->o.router_url = dup_or_null(o->router_url);
    l->o.node_key = NULL;
    l->o.node_url = dup_or_null(o->node_url);
    l->o.node_name = dup_or_null(o->node_name ? o->node_name : "llmr");
    l->o.data_dir = dup_or_null(o->data_dir);
    l->o.origin_allowlist = dup_or_null(o->origin_allowlist);
    l->o.local_dirs = dup_or_null(o->local_dirs);
    l->o.engine_options = dup_or_null(o->engine_options);
    /* a trailing slash would double in the paths */
    char *slash = (char *)l->o.router_url;
    for (size_t n = slash ? strlen(slash) : 0; n > 0 && slash[n - 1] == '/'; n--)
        slash[n - 1] = 0;
    if (o->node_key && *o->node_key) {
        llmr_strbuf a = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&a, "Authorization: Bearer %s", o->node_key);
        l->auth = llmr_strbuf_take(&a);
    }
    l->host = host;
    l->http = http;
    l->interval_ms = o->heartbeat_ms ? o->heartbeat_ms : 5000;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    bool link_started = false;
    if (pthread_create(&l->link_thread, NULL, link_main, l) == 0) {
        link_started = true;
        if (pthread_create(&l->sync_thread, NULL, sync_main, l) == 0) {
            *out = l;
            llmr_log_info(COMPONENT, "linking to router %s (heartbeat every %.1f s)", l->o.router_url,
                          l->interval_ms / 1000.0);
            return LLMR_OK;
        }
    }
    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    if (link_started)
        pthread_join(l->link_thread, NULL);
    llmr_strbuf_puts(err, "cannot start the router link's threads");
    l->sync_thread = 0;
    llmr_router_link_stop(l);
    return LLMR_INTERNAL;
}

void llmr_router_link_stop(llmr_router_link *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    bool running = !l->stopping;
    l->stopping = true;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    if (running) {
        pthread_join(l->link_thread, NULL);
        pthread_join(l->sync_thread, NULL);
    }
    for (size_t i = 0; i < l->n_models; i++)
        free_synced(&l->models[i]);
    free(l->models);
    json_decref(l->proofs);
    free(l->node_id);
    free(l->auth);
    free((char *)l->o.router_url);
    free((char *)l->o.node_url);
    free((char *)l->o.node_name);
    free((char *)l->o.data_dir);
    free((char *)l->o.origin_allowlist);
    free((char *)l->o.local_dirs);
    free((char *)l->o.engine_options);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->wake);
    free(l);
}
