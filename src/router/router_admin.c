/* The router's /v0 API: models (register, list, show, delete, manifest, files; the
 * render is router_render.c's), nodes (register, heartbeat, list, drain, remove), API
 * keys (create with limits, change limits, revoke), the request log and the audit log
 * (the events stream is router_events.c's; the audit rows are written by router.c).  What the lists
 * answer is made by router_nodes_json, router_models_json and router_requests_json,
 * which the dashboard's snapshots share (router_snapshot.c).  See docs/router.md and
 * docs/node-router-protocol.md. */
#include "router/router_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "common/sha256.h"
#include "router/model_source.h"
#include "router/node_address.h"

#define COMPONENT "router"
#define MAX_NAME 128
#define LLMR_NODE_REGISTRATION_MAX (64u << 10) /* bytes of a node's registration */
#define LLMR_NODE_HEARTBEAT_MAX (1u << 20)     /* bytes of a heartbeat */

/* ---- helpers --------------------------------------------------------------------- */

/* The path's segments after "/v0/" into seg (at most max, each under 256 bytes);
 * 0 when there are more or one is empty. */
static size_t split_path(const char *path, char seg[][256], size_t max)
{
    const char *p = path + 4; /* "/v0/" */
    size_t n = 0;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || len >= 256 || n == max)
            return 0;
        memcpy(seg[n], p, len);
        seg[n][len] = 0;
        n++;
        p += len + (slash ? 1 : 0);
        if (slash && !*p)
            return 0; /* a trailing slash */
    }
    return n;
}

static bool is_method(const llmr_http_request *req, const char *m)
{
    return strcmp(req->method, m) == 0;
}

/* A model name: 1 to 128 letters, digits and ._- (a directory on every node), not
 * starting with a dot. */
static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_NAME || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return false;
    return true;
}

static json_t *body_json(const llmr_http_request *req, llmr_http_reply *reply)
{
    json_error_t je;
    json_t *j = json_loadb(req->body ? req->body : "", req->body_len, 0, &je);
    if (!json_is_object(j)) {
        router_error(reply, 400, "invalid_request_error", "invalid_json",
                     "The body must be a JSON object%s%s", j ? "" : ": ", j ? "" : je.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ---- models -------------------------------------------------------------------------- */

/* The default name: the last part of the repo or the directory. */
static void default_name(const char *source, char *out, size_t size)
{
    const char *end = source + strlen(source);
    while (end > source && end[-1] == '/')
        end--;
    const char *start = end;
    while (start > source && start[-1] != '/')
        start--;
    const char *at = memchr(start, '@', (size_t)(end - start));
    if (at)
        end = at;
    snprintf(out, size, "%.*s", (int)(end - start), start);
}

void router_model_version(const json_t *manifest, int64_t created, char out[17])
{
    char *text = manifest ? json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char when[32];
    snprintf(when, sizeof when, "\n%lld", (long long)created);
    llmr_sha256 c;
    uint8_t digest[32];
    char hex[65];
    llmr_sha256_init(&c);
    if (text)
        llmr_sha256_update(&c, text, strlen(text));
    llmr_sha256_update(&c, when, strlen(when));
    llmr_sha256_final(&c, digest);
    llmr_sha256_hex(digest, hex);
    memcpy(out, hex, 16);
    out[16] = 0;
    free(text);
}

/* How many unloads of the model were asked (llmr stop) since the router started. */
static json_int_t unload_count(llmr_router *r, const char *name)
{
    pthread_mutex_lock(&r->unloads_lock);
    json_int_t n = json_integer_value(json_object_get(r->unloads, name));
    pthread_mutex_unlock(&r->unloads_lock);
    return n;
}

/* A copy of the model's manifest with its "version" (what GET .../manifest answers). */
static json_t *versioned_manifest(const llmr_store_model *m)
{
    char version[17];
    router_model_version(m->manifest, m->created, version);
    json_t *o = json_deep_copy(m->manifest);
    if (json_is_object(o))
        json_object_set_new(o, "version", json_string(version));
    return o;
}

/* Each node's state for the model: GET /v0/models/{name}'s "nodes". */
static json_t *model_nodes_json(llmr_router *r, const char *name, uint64_t now)
{
    return llmr_node_registry_model_states(r->nodes, name, now);
}

static json_t *model_json(llmr_router *r, const llmr_store_model *m, bool with_manifest)
{
    uint64_t now = router_now_ms();
    json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s?, s:I, s:b, s:o}", "name", m->name, "source_kind",
                          m->source_kind, "source", m->source, "revision", m->revision, "format", m->format,
                          "filename", m->filename, "created", (json_int_t)m->created, "ready",
                          llmr_node_registry_model_ready(r->nodes, m->name, now), "nodes",
                          model_nodes_json(r, m->name, now));
    json_t *files = json_object_get(m->manifest, "files");
    json_object_set_new(o, "files", json_integer((json_int_t)json_array_size(files)));
    char version[17];
    router_model_version(m->manifest, m->created, version);
    json_object_set_new(o, "version", json_string(version));
    json_object_set_new(o, "unloads", json_integer(unload_count(r, m->name)));
    json_t *origin = json_object_get(m->chat_format, "origin");
    json_object_set(o, "chat_template_origin", origin ? origin : json_null());
    if (with_manifest) {
        json_object_set(o, "manifest", m->manifest);
        if (m->chat_format)
            json_object_set(o, "chat_format", m->chat_format);
    }
    return o;
}

/* A registration: 0 and *model (the new model's JSON), or the HTTP status of the
 * refusal with msg and, for the file checks, *files. */
static unsigned do_register(llmr_router *r, const char *repo, const char *path, const char *format,
                            const char *filename, const char *name, const char *tpl, json_t **model,
                            json_t **files, llmr_strbuf *msg)
{
    *model = NULL;
    llmr_source src = {0};
    llmr_store_model m = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char namebuf[MAX_NAME + 1];
    unsigned status = 0;
    if (!!repo == !!path) {
        llmr_strbuf_puts(msg, "Give exactly one of \"repo\" (a Hugging Face repo id or URL) and \"path\" "
                              "(a directory on the router's machine).");
        status = 400;
        goto done;
    }
    if (!format || (strcmp(format, "safetensors") && strcmp(format, "gguf"))) {
        llmr_strbuf_puts(msg, "\"format\" must be \"safetensors\" or \"gguf\".");
        status = 400;
        goto done;
    }
    if (!name) {
        default_name(repo ? repo : path, namebuf, sizeof namebuf);
        name = namebuf;
    }
    if (!valid_name(name)) {
        llmr_strbuf_printf(msg, "The model name \"%.64s\" is not valid: 1 to %d letters, digits, '.', '_' "
                                "or '-', not starting with '.'.",
                           name, MAX_NAME);
        status = 400;
        goto done;
    }
    llmr_store_model existing = {0};
    if (llmr_store_model_get(r->store, name, &existing, &err) == LLMR_OK) {
        llmr_store_model_free(&existing);
        llmr_strbuf_printf(msg, "A model named \"%s\" is registered already; delete it first or choose "
                                "another name.",
                           name);
        status = 409;
        goto done;
    }
    llmr_strbuf_reset(&err);
    llmr_source_options so;
    llmr_source_options_default(&so);
    if (r->o.hf_endpoint)
        so.hf_endpoint = r->o.hf_endpoint;
    if (r->o.hf_token)
        so.hf_token = r->o.hf_token;
    if (llmr_source_resolve(&so, repo ? repo : path, &src, &err) != LLMR_OK) {
        llmr_strbuf_puts(msg, llmr_strbuf_cstr(&err));
        status = 400;
        goto done;
    }
    if (llmr_source_check(&so, &src, format, filename, files, &err) != LLMR_OK) {
        llmr_strbuf_puts(msg, llmr_strbuf_cstr(&err));
        status = 400;
        goto done;
    }
    m.name = (char *)name;
    m.source_kind = src.kind;
    m.source = repo ? src.repo : src.dir;
    m.revision = src.revision;
    m.format = (char *)format;
    m.filename = (char *)filename;
    m.chat_template = (char *)tpl;
    if ((status = router_chat_format_read(&so, &src, format, tpl, &m.chat_format, msg)) != 0)
        goto done;
    m.manifest = llmr_source_manifest(&src, name, format, filename, r->o.artifact_allowlist);
    m.created = (int64_t)time(NULL);
    bool exists = false;
    llmr_strbuf_reset(&err);
    if (!m.manifest) {
        llmr_strbuf_puts(msg, "the manifest could not be made (the log says why)");
        status = 500;
    } else if (llmr_store_model_insert(r->store, &m, &exists, &err) != LLMR_OK) {
        llmr_strbuf_printf(msg, exists ? "A model named \"%s\" is registered already." : "%s",
                           exists ? name : llmr_strbuf_cstr(&err));
        status = exists ? 409 : 500;
    } else {
        llmr_log_info(COMPONENT, "model %s registered (%s %s, %zu files)", name, src.kind,
                      repo ? src.repo : src.dir, json_array_size(json_object_get(m.manifest, "files")));
        *model = model_json(r, &m, true);
    }
done:
    json_decref(m.manifest);
    json_decref(m.chat_format);
    llmr_source_free(&src);
    llmr_strbuf_free(&err);
    return status;
}

static void register_model(llmr_router *r, const llmr_http_request *req, llmr_http_reply *reply)
{
    json_t *b = body_json(req, reply), *files = NULL, *model = NULL;
    if (!b)
        return;
    llmr_strbuf msg = LLMR_STRBUF_INIT;
    unsigned status = do_register(r, json_string_value(json_object_get(b, "repo")),
                                  json_string_value(json_object_get(b, "path")),
                                  json_string_value(json_object_get(b, "format")),
                                  json_string_value(json_object_get(b, "filename")),
                                  json_string_value(json_object_get(b, "name")),
                                  json_string_value(json_object_get(b, "chat_template")), &model, &files, &msg);
    if (!status) {
        llmr_http_reply_note(reply, &(llmr_http_note){.target = json_string_value(json_object_get(model, "name"))});
        llmr_http_reply_json(reply, 201, model);
    } else if (files) {
        llmr_http_reply_json(reply, status,
                             json_pack("{s:{s:s, s:s, s:n, s:s, s:O}}", "error", "message", llmr_strbuf_cstr(&msg),
                                       "type", "invalid_request_error", "param", "code", "invalid_model_files",
                                       "files", files));
    } else {
        const char *code = status == 409 ? "model_exists" : status == 500 ? NULL : "invalid_value";
        router_error(reply, status, status == 500 ? "server_error" : "invalid_request_error", code, "%s",
                     llmr_strbuf_cstr(&msg));
    }
    json_decref(files);
    llmr_strbuf_free(&msg);
    json_decref(b);
}

llmr_status llmr_router_register_local(llmr_router *r, const char *dir, const char *format, const char *name,
                                       llmr_strbuf *err)
{
    json_t *model = NULL, *files = NULL;
    unsigned status = do_register(r, NULL, dir, format, NULL, name, NULL, &model, &files, err);
    json_decref(model);
    json_decref(files);
    return status == 0 ? LLMR_OK : status == 409 ? LLMR_INVALID_ARGUMENT : status == 500 ? LLMR_INTERNAL
                                                                                         : LLMR_INVALID_ARGUMENT;
}

size_t llmr_router_model_count(llmr_router *r)
{
    json_t *all = llmr_store_model_list(r->store);
    size_t n = json_array_size(all);
    json_decref(all);
    return n;
}

llmr_status llmr_router_create_key(llmr_router *r, const char *name, unsigned scopes, char **id, char **secret,
                                   llmr_strbuf *err)
{
    return llmr_store_key_create(r->store, name, scopes, NULL, id, secret, err);
}

void llmr_router_revoke_key(llmr_router *r, const char *id)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_store_key_revoke(r->store, id, &err);
    llmr_strbuf_free(&err);
}

json_t *llmr_router_list_keys(llmr_router *r)
{
    return llmr_store_key_list(r->store);
}

json_t *router_models_json(llmr_router *r, bool with_nodes)
{
    json_t *all = llmr_store_model_list(r->store), *out = json_array(), *m;
    size_t i;
    uint64_t now = router_now_ms();
    json_array_foreach(all, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        json_t *o = json_pack("{s:O, s:O, s:O, s:O, s:b, s:O}", "name", json_object_get(m, "name"), "format",
                              json_object_get(m, "format"), "source", json_object_get(m, "source"),
                              "source_kind", json_object_get(m, "source_kind"), "ready",
                              name && llmr_node_registry_model_ready(r->nodes, name, now), "chat_template_origin",
                              json_object_get(m, "chat_template_origin"));
        char version[17];
        router_model_version(json_object_get(m, "manifest"),
                             (int64_t)json_integer_value(json_object_get(m, "created")), version);
        if (o) {
            json_object_set_new(o, "version", json_string(version));
            json_object_set_new(o, "unloads", json_integer(name ? unload_count(r, name) : 0));
        }
        if (o && with_nodes)
            json_object_set_new(o, "nodes", name ? model_nodes_json(r, name, now) : json_array());
        json_array_append_new(out, o);
    }
    json_decref(all);
    return out;
}

static void list_models(llmr_router *r, llmr_http_reply *reply)
{
    llmr_http_reply_json(reply, 200, json_pack("{s:o}", "models", router_models_json(r, false)));
}

/* Files of up to this many bytes are hashed again before each serving (the configs,
 * tokenizers and templates a node reads first); larger ones (weights) are checked by
 * size, and the node checks every byte against the manifest's SHA-256. */
#define SERVE_REHASH_MAX (64u << 20)

/* Whether the open file fd is still the manifest entry's: its size, for a small file its
 * SHA-256, for a large local one its sampled digest. */
static bool still_as_registered(int fd, const struct stat *st, const json_t *entry)
{
    json_int_t size = json_integer_value(json_object_get(entry, "size"));
    if (!json_is_integer(json_object_get(entry, "size")) || (uint64_t)st->st_size != (uint64_t)size)
        return false;
    const char *sample = json_string_value(json_object_get(entry, "sample_sha256"));
    char sample_hex[65];
    if (sample && (llmr_file_sample_sha256_fd(fd, (uint64_t)st->st_size, sample_hex) != 0 ||
                   strcmp(sample_hex, sample) != 0))
        return false;
    const char *want = json_string_value(json_object_get(entry, "sha256"));
    if (!want || (uint64_t)st->st_size > SERVE_REHASH_MAX)
        return true;
    llmr_sha256 h;
    llmr_sha256_init(&h);
    unsigned char buf[65536];
    uint64_t at = 0;
    while (at < (uint64_t)st->st_size) {
        ssize_t n = pread(fd, buf, sizeof buf, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        llmr_sha256_update(&h, buf, (size_t)n);
        at += (uint64_t)n;
    }
    uint8_t digest[32];
    char hex[65];
    llmr_sha256_final(&h, digest);
    llmr_sha256_hex(digest, hex);
    return strcmp(hex, want) == 0;
}

/* Serves one file of a model's manifest (Range: bytes=N- and N-M). */
static void serve_file(const llmr_store_model *m, const char *path, const llmr_http_request *req,
                       llmr_http_reply *reply)
{
    const json_t *entry = NULL, *f;
    size_t i;
    json_array_foreach(json_object_get(m->manifest, "files"), i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        if (p && strcmp(p, path) == 0)
            entry = f;
    }
    /* Only the manifest's own paths are served: nothing else is reachable by construction. */
    if (!entry) {
        router_error(reply, 404, "not_found_error", "file_not_found", "Model %s has no file \"%.200s\".",
                     m->name, path);
        return;
    }
    if (strcmp(m->source_kind, "local") != 0) { /* the Hub: the node follows to the origin */
        const char *origin = json_string_value(json_object_get(entry, "origin_url"));
        if (!origin) {
            router_error(reply, 404, "not_found_error", "file_not_found", "No origin for %s.", path);
            return;
        }
        llmr_http_reply_header(reply, "Location", origin);
        llmr_http_reply_text(reply, 302, "text/plain", "", 0);
        return;
    }
    char *full = llmr_path_join(m->source, path);
    /* the manifest holds only paths the registration vetted (links included: a Hugging
     * Face cache snapshot is links into its blobs) */
    int fd = full ? open(full, O_RDONLY | O_CLOEXEC) : -1;
    free(full);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        router_error(reply, 404, "not_found_error", "file_not_found",
                     "%s of model %s is not readable on the router any more: %s", path, m->name,
                     strerror(errno ? errno : ENOENT));
        return;
    }
    /* Still what the manifest says: a file (or a link put there) changed since the
     * registration is not served, whatever it now holds. */
    if (!still_as_registered(fd, &st, entry)) {
        close(fd);
        llmr_log_warn(COMPONENT, "%s of model %s changed on disk since its registration: not served", path,
                      m->name);
        router_error(reply, 409, "invalid_request_error", "file_changed",
                     "%s of model %s changed on disk since its registration; register the model again.",
                     path, m->name);
        return;
    }
    uint64_t size = (uint64_t)st.st_size, from = 0, to = size ? size - 1 : 0;
    unsigned status = 200;
    const char *range = llmr_http_request_header(req, "Range");
    if (range) {
        unsigned long long a = 0, b = 0;
        int n = sscanf(range, "bytes=%llu-%llu", &a, &b);
        if (n < 1 || a >= size || (n == 2 && b < a)) {
            char cr[64];
            snprintf(cr, sizeof cr, "bytes */%" PRIu64, size);
            llmr_http_reply_header(reply, "Content-Range", cr);
            close(fd);
            router_error(reply, 416, "invalid_request_error", "range_not_satisfiable",
                         "The range \"%.64s\" is outside the file's %" PRIu64 " bytes.", range, size);
            return;
        }
        from = a;
        if (n == 2 && b < size)
            to = b;
        status = 206;
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, size);
        llmr_http_reply_header(reply, "Content-Range", cr);
    }
    llmr_http_reply_header(reply, "Accept-Ranges", "bytes");
    if (!llmr_http_reply_file(reply, status, "application/octet-stream", fd, from, size ? to - from + 1 : 0))
        close(fd);
}

static bool models_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                         llmr_http_reply *reply)
{
    /* /v0/models[/NAME[/manifest | /render | /unload | /files/PATH]]: PATH is the rest, slashes and all */
    char seg[3][256];
    const char *rest = NULL;
    const char *files = strstr(req->path, "/files/");
    size_t n;
    if (files && files > req->path + 10) {
        char head[512];
        snprintf(head, sizeof head, "%.*s", (int)(files - req->path), req->path);
        n = strlen(head) < sizeof head - 1 ? split_path(head, seg, 2) : 0;
        if (n == 2) {
            snprintf(seg[2], sizeof seg[2], "files");
            rest = files + 7;
            n = *rest ? 3 : 0;
        }
    } else {
        n = split_path(req->path, seg, 3);
    }
    if (n == 1 && is_method(req, "POST")) {
        if (router_need(c, LLMR_SCOPE_ADMIN, reply))
            register_model(r, req, reply);
        return true;
    }
    if (n == 1 && is_method(req, "GET")) {
        if (router_need(c, LLMR_SCOPE_NODE, reply))
            list_models(r, reply);
        return true;
    }
    if (n < 2)
        return false;
    if (!valid_name(seg[1])) {
        router_error(reply, 400, "invalid_request_error", "invalid_name", "\"%.64s\" is not a model name.",
                     seg[1]);
        return true;
    }
    llmr_store_model m = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    bool found = llmr_store_model_get(r->store, seg[1], &m, &err) == LLMR_OK;
    if (n == 2 && is_method(req, "DELETE")) {
        if (router_need(c, LLMR_SCOPE_ADMIN, reply)) {
            if (llmr_store_model_delete(r->store, seg[1], &err) == LLMR_OK) {
                /* a model registered again under the name is proven again */
                llmr_node_registry_forget_model(r->nodes, seg[1]);
                pthread_mutex_lock(&r->unloads_lock);
                json_object_del(r->unloads, seg[1]);
                pthread_mutex_unlock(&r->unloads_lock);
                llmr_log_info(COMPONENT, "model %s deleted: nodes unload it and delete their copy", seg[1]);
                llmr_http_reply_json(reply, 200, json_pack("{s:s, s:b}", "name", seg[1], "deleted", 1));
            } else
                router_error(reply, 404, "not_found_error", "model_not_found", "No model named \"%s\".",
                             seg[1]);
        }
    } else if (!found && n >= 2) {
        router_error(reply, 404, "not_found_error", "model_not_found", "No model named \"%s\".", seg[1]);
    } else if (n == 2 && is_method(req, "GET")) {
        if (router_need(c, LLMR_SCOPE_NODE, reply))
            llmr_http_reply_json(reply, 200, model_json(r, &m, true));
    } else if (n == 3 && !rest && !strcmp(seg[2], "manifest") && is_method(req, "GET")) {
        if (router_need(c, LLMR_SCOPE_NODE, reply))
            llmr_http_reply_json(reply, 200, versioned_manifest(&m));
    } else if (n == 3 && !rest && !strcmp(seg[2], "unload") && is_method(req, "POST")) {
        if (router_need(c, LLMR_SCOPE_ADMIN, reply)) {
            pthread_mutex_lock(&r->unloads_lock);
            json_int_t count = json_integer_value(json_object_get(r->unloads, seg[1])) + 1;
            json_object_set_new(r->unloads, seg[1], json_integer(count));
            pthread_mutex_unlock(&r->unloads_lock);
            llmr_log_info(COMPONENT, "model %s: unload asked: nodes unload it and keep its files", seg[1]);
            llmr_http_reply_json(reply, 200, json_pack("{s:s, s:b, s:I}", "name", seg[1], "unloading", 1,
                                                       "unloads", count));
        }
    } else if (n == 3 && !rest && !strcmp(seg[2], "render") && is_method(req, "POST")) {
        if (router_need(c, LLMR_SCOPE_INFERENCE, reply))
            router_render_endpoint(r, &m, req, reply);
    } else if (rest && !strcmp(seg[2], "files") && is_method(req, "GET")) {
        if (router_need(c, LLMR_SCOPE_NODE, reply))
            serve_file(&m, rest, req, reply);
    } else {
        llmr_store_model_free(&m);
        llmr_strbuf_free(&err);
        return false;
    }
    llmr_store_model_free(&m);
    llmr_strbuf_free(&err);
    return true;
}

/* ---- nodes ------------------------------------------------------------------------- */

/* Removes the nodes silent past the expiry (llmr_node_registry_expire), from the
 * store too. */
static void expire_nodes(llmr_router *r)
{
    char ids[64][32];
    size_t n;
    do {
        n = llmr_node_registry_expire(r->nodes, router_now_ms(), ids, 64);
        for (size_t i = 0; i < n && i < 64; i++) {
            llmr_strbuf err = LLMR_STRBUF_INIT;
            llmr_store_node_delete(r->store, ids[i], &err);
            llmr_strbuf_free(&err);
            llmr_log_info(COMPONENT, "node %s removed: no heartbeat for %.0f s", ids[i], r->o.node_expire_ms / 1e3);
        }
    } while (n > 64);
}

json_t *router_nodes_json(llmr_router *r)
{
    expire_nodes(r);
    return llmr_node_registry_list(r->nodes, router_now_ms());
}

static void register_node(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                          llmr_http_reply *reply)
{
    if (req->body_len > LLMR_NODE_REGISTRATION_MAX) {
        router_error(reply, 413, "invalid_request_error", "body_too_large",
                     "A node's registration is at most %u bytes; this one is %zu.", LLMR_NODE_REGISTRATION_MAX,
                     req->body_len);
        return;
    }
    json_t *b = body_json(req, reply);
    if (!b)
        return;
    expire_nodes(r);
    const char *url = json_string_value(json_object_get(b, "url"));
    const json_t *name = json_object_get(b, "name");
    char pin[320] = "";
    llmr_strbuf why = LLMR_STRBUF_INIT;
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strlen(url) >= 400) {
        router_error(reply, 400, "invalid_request_error", "invalid_value",
                     "A node registers with its \"url\" (http:// or https://, under 400 bytes).");
    } else if (name && (!json_is_string(name) || json_string_length(name) > 128)) {
        router_error(reply, 400, "invalid_request_error", "invalid_value",
                     "A node's \"name\" is a string of at most 128 bytes.");
    } else if (!json_is_true(json_object_get(b, "has_gpu")) && !json_is_true(json_object_get(b, "allow_cpu"))) {
        router_error(reply, 403, "permission_error", "no_gpu",
                     "This node has no GPU, so the router refuses it; start the node with "
                     "--allow-cpu for tests and tiny models.");
    } else if (!llmr_node_url_check(url, req->remote, r->o.node_url_allow, pin, sizeof pin, &why)) {
        router_error(reply, 403, "permission_error", "node_url_refused", "%s", llmr_strbuf_cstr(&why));
    } else {
        llmr_node_added added;
        /* without keys (--no-auth) there is no owner: every registration is its own */
        const char *owner = r->o.no_auth ? NULL : c->key_id ? c->key_id : "";
        llmr_node_add_result res = llmr_node_registry_add(r->nodes, b, owner, pin, router_now_ms(), &added);
        if (res == LLMR_NODE_KEY_IN_USE) {
            router_error(reply, 409, "invalid_request_error", "node_key_in_use",
                         "This key's node is online at another URL; a key registers one node (make a key "
                         "for each node: POST /v0/keys).");
        } else if (res == LLMR_NODE_URL_IN_USE) {
            router_error(reply, 409, "invalid_request_error", "node_url_in_use",
                         "Another key's node is online at this URL.");
        } else if (res == LLMR_NODE_TOO_FAST) {
            llmr_http_reply_header(reply, "Retry-After", "60");
            router_error(reply, 429, "rate_limit_error", "too_many_registrations",
                         "This key registered a node %u times in the last minute; try again later.",
                         LLMR_NODE_REGISTRATIONS_PER_MIN);
        } else if (res != LLMR_NODE_ADDED) {
            router_error(reply, 503, "server_error", "too_many_nodes", "The router holds as many nodes as it can.");
        } else {
            llmr_strbuf err = LLMR_STRBUF_INIT;
            if (added.replaced[0])
                llmr_store_node_delete(r->store, added.replaced, &err);
            llmr_strbuf_reset(&err);
            llmr_store_node_upsert(r->store, added.id, json_string_value(name), url, b, (int64_t)time(NULL), &err);
            llmr_strbuf_free(&err);
            if (added.replaced[0])
                llmr_log_info(COMPONENT, "node %s registered (%s), replacing %s", added.id, url, added.replaced);
            else
                llmr_log_info(COMPONENT, "node %s registered (%s)", added.id, url);
            /* a beat at least three times within the offline timeout */
            double iv = r->o.heartbeat_s;
            if (iv * 3000.0 > r->o.node_offline_ms)
                iv = r->o.node_offline_ms / 3000.0;
            llmr_http_reply_json(reply, 200, json_pack("{s:s, s:s, s:o}", "node_id", added.id, "node_secret",
                                                       added.secret, "heartbeat_interval_s",
                                                       iv == (int)iv ? json_integer((int)iv) : json_real(iv)));
        }
        memset(added.secret, 0, sizeof added.secret);
    }
    llmr_strbuf_free(&why);
    json_decref(b);
}

static bool nodes_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply)
{
    char seg[3][256];
    size_t n = split_path(req->path, seg, 3);
    if (n == 1 && is_method(req, "POST")) {
        if (router_need(c, LLMR_SCOPE_NODE, reply))
            register_node(r, c, req, reply);
        return true;
    }
    if (n == 1 && is_method(req, "GET")) {
        if (router_need(c, LLMR_SCOPE_ADMIN, reply))
            llmr_http_reply_json(reply, 200, json_pack("{s:o}", "nodes", router_nodes_json(r)));
        return true;
    }
    if (n == 3 && !strcmp(seg[2], "heartbeat") && is_method(req, "POST")) {
        if (!router_need(c, LLMR_SCOPE_NODE, reply))
            return true;
        if (req->body_len > LLMR_NODE_HEARTBEAT_MAX) {
            router_error(reply, 413, "invalid_request_error", "body_too_large",
                         "A heartbeat is at most %u bytes; this one is %zu.", LLMR_NODE_HEARTBEAT_MAX, req->body_len);
            return true;
        }
        json_t *b = body_json(req, reply);
        if (!b)
            return true;
        llmr_http_reply_note(reply, &(llmr_http_note){.quiet = true}); /* one a node a second */
        const char *owner = r->o.no_auth ? NULL : c->key_id ? c->key_id : "";
        /* another key's node is answered as an unknown one: it changes nothing */
        if (llmr_node_registry_heartbeat(r->nodes, seg[1], owner, b, router_now_ms()))
            llmr_http_reply_json(reply, 200,
                                 json_pack("{s:b, s:o}", "ok", 1, "challenges", router_node_proofs(r, seg[1], b)));
        else
            router_error(reply, 404, "not_found_error", "unknown_node",
                         "The router does not know node %.64s (it may have restarted): register again.",
                         seg[1]);
        json_decref(b);
        return true;
    }
    if ((n == 3 && (!strcmp(seg[2], "drain") || !strcmp(seg[2], "undrain")) && is_method(req, "POST")) ||
        (n == 2 && is_method(req, "DELETE"))) {
        if (!router_need(c, LLMR_SCOPE_ADMIN, reply))
            return true;
        bool ok = n == 2 ? llmr_node_registry_remove(r->nodes, seg[1])
                         : llmr_node_registry_drain(r->nodes, seg[1], !strcmp(seg[2], "drain"));
        if (ok && n == 2) { /* the store forgets it too */
            llmr_strbuf err = LLMR_STRBUF_INIT;
            llmr_store_node_delete(r->store, seg[1], &err);
            llmr_strbuf_free(&err);
        }
        if (ok)
            llmr_http_reply_json(reply, 200, json_pack("{s:s, s:s}", "node", seg[1], "result",
                                                       n == 2 ? "removed" : seg[2]));
        else
            router_error(reply, 404, "not_found_error", "unknown_node", "No node %.64s.", seg[1]);
        return true;
    }
    return false;
}

/* ---- keys ------------------------------------------------------------------------------ */

/* POST /v0/keys' "scopes": an array of names (["inference", "node"]) or a comma-separated
 * string ("inference,node").  0 and *scopes, or false after a 400 naming what is wrong. */
static bool body_scopes(const json_t *v, unsigned *scopes, llmr_http_reply *reply)
{
    static const char KNOWN[] = "the scopes are inference, node and admin";
    llmr_strbuf bad = LLMR_STRBUF_INIT;
    unsigned bits = 0, one = 0;
    bool ok = false;
    size_t i;
    const json_t *e;
    if (json_is_string(v)) {
        ok = llmr_scopes_parse_report(json_string_value(v), &bits, &bad);
    } else if (json_is_array(v)) {
        ok = json_array_size(v) > 0;
        json_array_foreach(v, i, e)
        {
            const char *name = json_string_value(e);
            if (!ok)
                break;
            if (!name) {
                router_error(reply, 400, "invalid_request_error", "invalid_value",
                             "\"scopes\"[%zu] is not a string; %s.", i, KNOWN);
                return false;
            }
            if (strchr(name, ',') || !llmr_scopes_parse_report(name, &one, &bad)) {
                if (!bad.len)
                    llmr_strbuf_puts(&bad, name);
                ok = false;
            }
            bits |= one;
        }
    }
    if (!ok && (bad.len || (json_is_string(v) && *json_string_value(v)))) {
        router_error(reply, 400, "invalid_request_error", "invalid_scope", "Unknown scope \"%.64s\": %s.",
                     llmr_strbuf_cstr(&bad), KNOWN);
    } else if (!ok) {
        router_error(reply, 400, "invalid_request_error", "invalid_value",
                     "\"scopes\" must list one or more of inference, node and admin: an array "
                     "([\"inference\"]) or a comma-separated string (\"inference,node\").");
    }
    llmr_strbuf_free(&bad);
    *scopes = bits;
    return ok;
}

/* A body's "limits" object ({"requests_per_minute", "concurrent_requests",
 * "tokens_per_minute"}: each a count, 0 for no limit, or null for the router's
 * default) into *l; one not given is LLMR_LIMIT_KEEP.  false after a 400. */
static bool body_limits(const json_t *v, llmr_store_key_limits *l, llmr_http_reply *reply)
{
    static const char *const names[] = {"requests_per_minute", "concurrent_requests", "tokens_per_minute"};
    int64_t *out[] = {&l->requests_per_minute, &l->concurrent_requests, &l->tokens_per_minute};
    for (int i = 0; i < 3; i++)
        *out[i] = LLMR_LIMIT_KEEP;
    if (!v)
        return true;
    const char *k;
    json_t *e;
    if (!json_is_object(v))
        goto bad;
    json_object_foreach((json_t *)v, k, e)
    {
        int i = 0;
        while (i < 3 && strcmp(k, names[i]) != 0)
            i++;
        if (i == 3) {
            router_error(reply, 400, "invalid_request_error", "invalid_value",
                         "Unknown limit \"%.64s\": the limits are requests_per_minute, concurrent_requests and "
                         "tokens_per_minute.",
                         k);
            return false;
        }
        if (json_is_null(e))
            *out[i] = LLMR_LIMIT_DEFAULT;
        else if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) <= LLMR_LIMIT_MAX)
            *out[i] = json_integer_value(e);
        else
            goto bad;
    }
    return true;
bad:
    router_error(reply, 400, "invalid_request_error", "invalid_value",
                 "\"limits\" must be an object of requests_per_minute, concurrent_requests and "
                 "tokens_per_minute, each a whole number from 0 (no limit) to %d, or null (the router's "
                 "default).",
                 LLMR_LIMIT_MAX);
    return false;
}

/* PATCH /v0/keys/{id}: {"limits": {...}} changes the limits given, the others stay. */
static void update_key(llmr_router *r, const char *id, const llmr_http_request *req, llmr_http_reply *reply)
{
    json_t *b = body_json(req, reply);
    if (!b)
        return;
    llmr_store_key_limits l;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const char *k;
    json_t *e;
    bool ok = true;
    json_object_foreach(b, k, e) if (strcmp(k, "limits") != 0) ok = false;
    if (!ok) {
        router_error(reply, 400, "invalid_request_error", "invalid_value",
                     "A key's update takes \"limits\" only (its name and scopes stay: make a new key).");
    } else if (!body_limits(json_object_get(b, "limits"), &l, reply)) {
        /* answered */
    } else {
        llmr_status st = llmr_store_key_set_limits(r->store, id, &l, &err);
        if (st == LLMR_NOT_FOUND) {
            router_error(reply, 404, "not_found_error", "key_not_found", "No live key %.64s.", id);
        } else if (st != LLMR_OK) {
            router_error(reply, 500, "server_error", NULL, "%s", llmr_strbuf_cstr(&err));
        } else {
            json_t *all = llmr_store_key_list(r->store), *one = NULL, *x;
            size_t i;
            json_array_foreach(all, i, x) if (!strcmp(json_string_value(json_object_get(x, "id")), id)) one = x;
            llmr_log_info(COMPONENT, "key %s: limits changed", id);
            llmr_http_reply_json(reply, 200, one ? json_incref(one) : json_pack("{s:s}", "id", id));
            json_decref(all);
        }
    }
    llmr_strbuf_free(&err);
    json_decref(b);
}

static void create_key(llmr_router *r, const llmr_http_request *req, llmr_http_reply *reply)
{
    json_t *b = body_json(req, reply);
    if (!b)
        return;
    unsigned scopes = 0;
    llmr_store_key_limits limits;
    const json_t *jname = json_object_get(b, "name");
    const char *name = json_string_value(jname);
    char *id = NULL, *secret = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT, names = LLMR_STRBUF_INIT;
    if (jname && !json_is_null(jname) && !name) {
        router_error(reply, 400, "invalid_request_error", "invalid_value", "\"name\" must be a string.");
    } else if (!body_scopes(json_object_get(b, "scopes"), &scopes, reply)) {
        /* answered */
    } else if (!body_limits(json_object_get(b, "limits"), &limits, reply)) {
        /* answered */
    } else if (llmr_store_key_create(r->store, name ? name : "", scopes, NULL, &id, &secret, &err) != LLMR_OK) {
        router_error(reply, 400, "invalid_request_error", "invalid_value", "%s", llmr_strbuf_cstr(&err));
    } else if (llmr_store_key_set_limits(r->store, id, &limits, &err) != LLMR_OK) {
        llmr_strbuf ignored = LLMR_STRBUF_INIT;
        llmr_store_key_revoke(r->store, id, &ignored);
        llmr_strbuf_free(&ignored);
        router_error(reply, 500, "server_error", NULL, "%s", llmr_strbuf_cstr(&err));
    } else {
        llmr_scopes_format(scopes, &names);
        llmr_log_info(COMPONENT, "key %s created (%s)", id, llmr_strbuf_cstr(&names));
        llmr_http_reply_note(reply, &(llmr_http_note){.target = id});
        llmr_http_reply_json(reply, 201, json_pack("{s:s, s:s, s:s, s:s}", "id", id, "secret", secret, "name",
                                                   name ? name : "", "scopes", llmr_strbuf_cstr(&names)));
    }
    free(id);
    if (secret) {
        memset(secret, 0, strlen(secret));
        free(secret);
    }
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&names);
    json_decref(b);
}

static bool keys_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                       llmr_http_reply *reply)
{
    char seg[2][256];
    size_t n = split_path(req->path, seg, 2);
    if (n == 0 || !router_need(c, LLMR_SCOPE_ADMIN, reply))
        return n != 0;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (n == 1 && is_method(req, "GET")) {
        llmr_http_reply_json(reply, 200, json_pack("{s:o}", "keys", llmr_store_key_list(r->store)));
    } else if (n == 1 && is_method(req, "POST")) {
        create_key(r, req, reply);
    } else if (n == 2 && is_method(req, "PATCH")) {
        update_key(r, seg[1], req, reply);
    } else if (n == 2 && is_method(req, "DELETE")) {
        if (llmr_store_key_revoke(r->store, seg[1], &err) == LLMR_OK) {
            llmr_log_info(COMPONENT, "key %s revoked", seg[1]);
            llmr_http_reply_json(reply, 200, json_pack("{s:s, s:b}", "id", seg[1], "revoked", 1));
        } else {
            router_error(reply, 404, "not_found_error", "key_not_found", "No key %.64s.", seg[1]);
        }
    } else {
        llmr_strbuf_free(&err);
        return false;
    }
    llmr_strbuf_free(&err);
    return true;
}

/* ---- the request log ---------------------------------------------------------------- */

json_t *router_requests_json(llmr_router *r, size_t limit)
{
    return llmr_store_recent_requests(r->store, limit);
}

/* A list's ?limit=N: 100 when absent, 1 to 1000; false (a 400 replied) otherwise. */
static bool query_limit(const llmr_http_request *req, llmr_http_reply *reply, unsigned long *limit)
{
    *limit = 100;
    const char *q = req->query ? strstr(req->query, "limit=") : NULL;
    if (q && (q == req->query || q[-1] == '&')) {
        char *end = NULL;
        *limit = strtoul(q + 6, &end, 10);
        if (end == q + 6 || (*end && *end != '&') || *limit < 1 || *limit > 1000) {
            router_error(reply, 400, "invalid_request_error", "invalid_value",
                         "limit must be a whole number from 1 to 1000.");
            return false;
        }
    }
    return true;
}

/* GET /v0/requests[?limit=N]: the newest entries first (default 100, at most 1000). */
static void recent_requests(llmr_router *r, const llmr_http_request *req, llmr_http_reply *reply)
{
    unsigned long limit;
    if (!query_limit(req, reply, &limit))
        return;
    json_t *rows = router_requests_json(r, limit);
    if (!rows) {
        router_error(reply, 500, "server_error", NULL, "The request log cannot be read now (the log says why).");
        return;
    }
    llmr_http_reply_json(reply, 200,
                         json_pack("{s:o, s:I}", "requests", rows, "dropped",
                                   (json_int_t)llmr_store_log_dropped(r->store)));
}

/* GET /v0/audit[?limit=N]: the audit log, the newest first (default 100, at most 1000). */
static void audit_log(llmr_router *r, const llmr_http_request *req, llmr_http_reply *reply)
{
    unsigned long limit;
    if (!query_limit(req, reply, &limit))
        return;
    json_t *rows = llmr_store_audit_list(r->store, limit);
    if (!rows) {
        router_error(reply, 500, "server_error", NULL, "The audit log cannot be read now (the log says why).");
        return;
    }
    llmr_http_reply_json(reply, 200, json_pack("{s:o}", "audit", rows));
}

bool router_admin_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                        llmr_http_reply *reply)
{
    if (!strcmp(req->path, "/v0/audit")) {
        if (!is_method(req, "GET")) {
            llmr_http_reply_header(reply, "Allow", "GET");
            router_error(reply, 405, "invalid_request_error", "method_not_allowed", "/v0/audit takes GET.");
        } else if (router_need(c, LLMR_SCOPE_ADMIN, reply)) {
            audit_log(r, req, reply);
        }
        return true;
    }
    if (!strcmp(req->path, "/v0/events"))
        return router_events_route(r, c, req, reply);
    if (!strcmp(req->path, "/v0/requests")) {
        if (!is_method(req, "GET")) {
            llmr_http_reply_header(reply, "Allow", "GET");
            router_error(reply, 405, "invalid_request_error", "method_not_allowed", "/v0/requests takes GET.");
        } else if (router_need(c, LLMR_SCOPE_ADMIN, reply)) {
            recent_requests(r, req, reply);
        }
        return true;
    }
    if (!strncmp(req->path, "/v0/models", 10) && (req->path[10] == 0 || req->path[10] == '/'))
        return models_route(r, c, req, reply);
    if (!strncmp(req->path, "/v0/nodes", 9) && (req->path[9] == 0 || req->path[9] == '/'))
        return nodes_route(r, c, req, reply);
    if (!strncmp(req->path, "/v0/keys", 8) && (req->path[8] == 0 || req->path[8] == '/'))
        return keys_route(r, c, req, reply);
    return false;
}
