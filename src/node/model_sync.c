/* Model sync: see model_sync.h.
 *
 * On disk, under DATA_DIR/models:
 *   NAME/PATH                     the verified files
 *   NAME/.llmr-manifest.json      the manifest of the last complete sync: a file whose
 *                                 size matches and whose entry there has the same size
 *                                 and digest is trusted without hashing it again
 *   .partial/NAME/PATH.part       bytes being fetched, resumed by the next try or sync
 * A sync that fetches anything removes the marker first and writes it again at the
 * end, so the marker never describes files that were being replaced. */
#include "node/model_sync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/strmap.h"
#include "common/utf8.h"
#include "net/http_fetch.h"
#include "node/model_in_place.h"
#include "storage/hf_cache.h"

#define COMPONENT "sync"
#define MARKER_NAME LLMR_SYNC_MARKER_NAME
#define PARTIAL_DIR ".partial"
#define MAX_PATH_BYTES 4096
#define MAX_FILES 100000
#define MAX_MARKER_BYTES (64u << 20)
#define LLMR_SOURCE_SAMPLE_FROM (64u << 20) /* larger files get a sampled digest in the marker */

void llmr_sync_options_default(llmr_sync_options *o)
{
    memset(o, 0, sizeof *o);
    o->origin_allowlist = "";
    o->retries = 3;
    o->stall_timeout_s = 30;
}

/* ---- the manifest ------------------------------------------------------------------ */

typedef struct sync_file {
    const char *path;       /* borrowed from the manifest */
    const char *url;
    const char *origin_url; /* NULL when absent */
    uint64_t size;
    bool has_sha;
    char sha[65];           /* lowercase */
    bool has_sample;
    char sample[65];        /* the sampled digest (common/file_sample.h), lowercase */
    const char *source_path; /* local sources: its path in the directory, when not path */
    bool required;
    /* filled by the sync */
    bool in_place;
    uint64_t counted;       /* bytes of this file on disk, counted in bytes_done */
    char *final_path;
    char *part_path;
} sync_file;

static void free_files(sync_file *files, size_t n)
{
    if (!files)
        return;
    for (size_t i = 0; i < n; i++) {
        free(files[i].final_path);
        free(files[i].part_path);
    }
    free(files);
}

/* A string of the manifest without NUL inside. */
static const char *clean_string(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

/* Why a file path may not be used, or NULL when it is fine: it must name a file inside
 * the model directory and nothing else. */
const char *llmr_sync_path_problem(const char *p)
{
    size_t n = strlen(p);
    if (n == 0)
        return "is empty";
    if (n > MAX_PATH_BYTES)
        return "is longer than 4096 bytes";
    if (p[0] == '/')
        return "is absolute (it must be relative to the model directory)";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\')
            return "has a backslash (use '/' between directories)";
        if (c < 0x20 || c == 0x7f)
            return "has a control character";
    }
    if (!llmr_utf8_valid(p, n, NULL))
        return "is not valid UTF-8";
    for (const char *c = p;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0)
            return "has an empty component (\"//\" or a '/' at the end)";
        if (len == 1 && c[0] == '.')
            return "has a \".\" component";
        if (len == 2 && c[0] == '.' && c[1] == '.')
            return "has a \"..\" component, which would leave the model directory";
        if (len > 255)
            return "has a component longer than 255 bytes";
        if (!slash)
            break;
        c = slash + 1;
    }
    if (strcmp(p, MARKER_NAME) == 0)
        return "is the name llmr keeps its record of the sync under";
    return NULL;
}

static bool is_hex64(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

static void lower_hex(const char *in, char out[65])
{
    for (size_t i = 0; i < 64; i++) {
        char c = in[i];
        out[i] = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
    }
    out[64] = '\0';
}

static void put_field(llmr_strbuf *err, size_t i, const char *field)
{
    llmr_strbuf_printf(err, "manifest: files[%zu].%s", i, field);
}

/* One entry of "files" into f; INVALID_ARGUMENT with err naming the entry. */
static llmr_status parse_file(const json_t *e, size_t i, sync_file *f, llmr_strbuf *err)
{
    if (!json_is_object(e)) {
        llmr_strbuf_printf(err, "manifest: files[%zu] is not an object", i);
        return LLMR_INVALID_ARGUMENT;
    }
    const json_t *v = json_object_get(e, "path");
    f->path = clean_string(v);
    if (!f->path) {
        put_field(err, i, "path");
        llmr_strbuf_puts(err, " is missing or not a string without NUL");
        return LLMR_INVALID_ARGUMENT;
    }
    const char *why = llmr_sync_path_problem(f->path);
    if (why) {
        put_field(err, i, "path");
        llmr_strbuf_puts(err, " \"");
        llmr_strbuf_put_display(err, f->path, strlen(f->path));
        llmr_strbuf_printf(err, "\" %s", why);
        return LLMR_INVALID_ARGUMENT;
    }

    v = json_object_get(e, "size");
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        put_field(err, i, "size");
        llmr_strbuf_puts(err, " (of \"");
        llmr_strbuf_put_display(err, f->path, strlen(f->path));
        llmr_strbuf_puts(err, "\") must be a whole number >= 0, not ");
        if (v)
            llmr_json_describe(err, v);
        else
            llmr_strbuf_puts(err, "missing");
        return LLMR_INVALID_ARGUMENT;
    }
    f->size = (uint64_t)json_integer_value(v);

    v = json_object_get(e, "sha256");
    if (v && !json_is_null(v)) {
        const char *s = clean_string(v);
        if (!s || !is_hex64(s)) {
            put_field(err, i, "sha256");
            llmr_strbuf_puts(err, " (of \"");
            llmr_strbuf_put_display(err, f->path, strlen(f->path));
            llmr_strbuf_puts(err, "\") must be 64 hex digits, not ");
            llmr_json_describe(err, v);
            return LLMR_INVALID_ARGUMENT;
        }
        f->has_sha = true;
        lower_hex(s, f->sha);
    }

    v = json_object_get(e, "sample_sha256");
    if (v && !json_is_null(v)) {
        const char *s = clean_string(v);
        if (!s || !is_hex64(s)) {
            put_field(err, i, "sample_sha256");
            llmr_strbuf_puts(err, " (of \"");
            llmr_strbuf_put_display(err, f->path, strlen(f->path));
            llmr_strbuf_puts(err, "\") must be 64 hex digits, not ");
            llmr_json_describe(err, v);
            return LLMR_INVALID_ARGUMENT;
        }
        f->has_sample = true;
        lower_hex(s, f->sample);
    }

    v = json_object_get(e, "source_path");
    f->source_path = NULL;
    if (v && !json_is_null(v)) {
        f->source_path = clean_string(v);
        const char *bad = f->source_path ? llmr_sync_path_problem(f->source_path) : "is not a string";
        if (bad) {
            put_field(err, i, "source_path");
            llmr_strbuf_printf(err, " %s", bad);
            return LLMR_INVALID_ARGUMENT;
        }
    }

    v = json_object_get(e, "required");
    f->required = true;
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            put_field(err, i, "required");
            llmr_strbuf_puts(err, " must be true or false, not ");
            llmr_json_describe(err, v);
            return LLMR_INVALID_ARGUMENT;
        }
        f->required = json_is_true(v);
    }

    /* The url goes to the router with its key: it must stay on the router. */
    v = json_object_get(e, "url");
    f->url = clean_string(v);
    bool url_ok = f->url && f->url[0] == '/' && f->url[1] != '/';
    for (const char *c = f->url; url_ok && *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            url_ok = false;
    if (!url_ok) {
        put_field(err, i, "url");
        llmr_strbuf_puts(err, " (of \"");
        llmr_strbuf_put_display(err, f->path, strlen(f->path));
        llmr_strbuf_puts(err, "\") must be a path on the router starting with '/', not ");
        if (v)
            llmr_json_describe(err, v);
        else
            llmr_strbuf_puts(err, "missing");
        return LLMR_INVALID_ARGUMENT;
    }

    v = json_object_get(e, "origin_url");
    f->origin_url = NULL;
    if (v && !json_is_null(v)) {
        f->origin_url = clean_string(v);
        if (!f->origin_url) {
            put_field(err, i, "origin_url");
            llmr_strbuf_puts(err, " must be a string, not ");
            llmr_json_describe(err, v);
            return LLMR_INVALID_ARGUMENT;
        }
    }
    return LLMR_OK;
}

/* Paths listed twice, and a path used both as a file and as a directory. */
static llmr_status check_path_set(const sync_file *files, size_t n, llmr_strbuf *err)
{
    llmr_strmap *map = llmr_strmap_create(n);
    char *prefix = malloc(MAX_PATH_BYTES + 1);
    llmr_status status = LLMR_OK;
    if (!map || !prefix) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        llmr_strmap_put_result r = llmr_strmap_put(map, files[i].path, i);
        if (r == LLMR_STRMAP_NOMEM) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto done;
        }
        if (r == LLMR_STRMAP_EXISTS) {
            llmr_strmap_get(map, files[i].path, &j);
            llmr_strbuf_printf(err, "manifest: files[%zu].path \"", i);
            llmr_strbuf_put_display(err, files[i].path, strlen(files[i].path));
            llmr_strbuf_printf(err, "\" is a duplicate: files[%zu] has the same path", j);
            status = LLMR_INVALID_ARGUMENT;
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = files[i].path;
        for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
            size_t len = (size_t)(s - p), j = 0;
            memcpy(prefix, p, len);
            prefix[len] = '\0';
            if (llmr_strmap_get(map, prefix, &j)) {
                llmr_strbuf_printf(err, "manifest: files[%zu].path \"", i);
                llmr_strbuf_put_display(err, p, strlen(p));
                llmr_strbuf_puts(err, "\" needs \"");
                llmr_strbuf_put_display(err, prefix, len);
                llmr_strbuf_printf(err, "\" to be a directory, but files[%zu] is a file of that "
                                        "name", j);
                status = LLMR_INVALID_ARGUMENT;
                goto done;
            }
        }
    }
done:
    free(prefix);
    llmr_strmap_free(map);
    return status;
}

/* The manifest's files, checked; *name is borrowed from the manifest. */
static llmr_status parse_manifest(const json_t *m, const char **name, sync_file **out,
                                  size_t *count, llmr_strbuf *err)
{
    *out = NULL;
    *count = 0;
    if (!json_is_object(m)) {
        llmr_strbuf_puts(err, "manifest: not a JSON object");
        return LLMR_INVALID_ARGUMENT;
    }
    const json_t *v = json_object_get(m, "name");
    *name = clean_string(v);
    if (!*name || !llmr_file_name_is_safe(*name) || (*name)[0] == '.') {
        llmr_strbuf_puts(err, "manifest: \"name\" must be one plain directory name (no '/', "
                              "'\\', control characters, not starting with '.'), not ");
        if (v)
            llmr_json_describe(err, v);
        else
            llmr_strbuf_puts(err, "missing");
        return LLMR_INVALID_ARGUMENT;
    }
    v = json_object_get(m, "format");
    if (v && !json_is_string(v)) {
        llmr_strbuf_puts(err, "manifest: \"format\" must be a string, not ");
        llmr_json_describe(err, v);
        return LLMR_INVALID_ARGUMENT;
    }
    const json_t *arr = json_object_get(m, "files");
    if (!json_is_array(arr)) {
        llmr_strbuf_puts(err, "manifest: \"files\" must be an array of {path, size, url, ...}");
        return LLMR_INVALID_ARGUMENT;
    }
    size_t n = json_array_size(arr);
    if (n == 0) {
        llmr_strbuf_puts(err, "manifest: \"files\" is empty: a model needs at least one file");
        return LLMR_INVALID_ARGUMENT;
    }
    if (n > MAX_FILES) {
        llmr_strbuf_printf(err, "manifest: %zu files, more than the limit of %u", n, MAX_FILES);
        return LLMR_INVALID_ARGUMENT;
    }
    sync_file *files = calloc(n, sizeof *files);
    if (!files) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status status = LLMR_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        status = parse_file(json_array_get(arr, i), i, &files[i], err);
        if (status != LLMR_OK)
            goto fail;
        if (files[i].size > UINT64_MAX - total) {
            llmr_strbuf_puts(err, "manifest: the file sizes add up to more than 2^64 bytes");
            status = LLMR_INVALID_ARGUMENT;
            goto fail;
        }
        total += files[i].size;
    }
    status = check_path_set(files, n, err);
    if (status != LLMR_OK)
        goto fail;
    *out = files;
    *count = n;
    return LLMR_OK;
fail:
    free(files);
    return status;
}

llmr_status llmr_manifest_check(const json_t *manifest, llmr_strbuf *err)
{
    const char *name;
    sync_file *files;
    size_t n;
    llmr_status status = parse_manifest(manifest, &name, &files, &n, err);
    free_files(files, n);
    return status;
}

/* ---- origins ----------------------------------------------------------------------- */

bool llmr_sync_origin_allowed(const char *url, const char *allowlist)
{
    char host[256];
    if (!url || !allowlist || !llmr_url_http_host(url, host, sizeof host))
        return false;
    size_t hn = strlen(host);
    while (hn > 0 && host[hn - 1] == '.')
        host[--hn] = '\0'; /* "hf.co." is "hf.co" */
    if (hn == 0)
        return false;
    for (const char *p = allowlist; *p;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        p = *end ? end + 1 : end;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '.'))
            b--;
        if (b - a >= 2 && a[0] == '*' && a[1] == '.')
            a += 2; /* "*.hf.co" reads as "hf.co" */
        while (a < b && *a == '.')
            a++;
        size_t en = (size_t)(b - a);
        if (en == 0 || en > hn)
            continue;
        if (strncasecmp(host + hn - en, a, en) != 0)
            continue;
        if (en == hn || host[hn - en - 1] == '.')
            return true;
    }
    return false;
}

/* ---- the sync ---------------------------------------------------------------------- */

typedef struct sync_ctx {
    const llmr_sync_options *o;
    const char *name;
    const char *local_dir;   /* a local source's directory (the manifest's source.dir) */
    const char *hf_repo, *hf_revision; /* a Hub source's (source.repo and .revision) */
    sync_file *files;
    size_t n;
    llmr_sync_progress p;
    sync_file *current;      /* the file being fetched */
    uint64_t others_done;    /* bytes_done of every file but current */
} sync_ctx;

static bool emit(sync_ctx *x, const char *state, const char *file)
{
    if (!x->o->progress)
        return true;
    x->p.state = state;
    x->p.file = file;
    return x->o->progress(x->o->user, &x->p);
}

static bool on_fetch_progress(void *user, uint64_t have, uint64_t total)
{
    (void)total;
    sync_ctx *x = user;
    x->current->counted = have;
    x->p.bytes_done = x->others_done + have;
    return emit(x, "fetching", x->current->path);
}

static void format_bytes(uint64_t n, char out[32])
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(out, 32, "%llu bytes", (unsigned long long)n);
        return;
    }
    double v = (double)n;
    int u = -1;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(out, 32, "%.1f %s", v, units[u]);
}

/* A copy of path up to its last '/' ("" when none). */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, path, n);
        out[n] = '\0';
    }
    return out;
}

/* Makes the parent directory of path; with fsync_it, flushes the directory entry. */
static llmr_status make_parent(const char *path, bool fsync_it, llmr_strbuf *err)
{
    char *dir = parent_of(path);
    if (!dir) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status status = dir[0] ? llmr_mkdir_p(dir, err) : LLMR_OK;
    if (status == LLMR_OK && fsync_it && dir[0]) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            fsync(fd); /* best effort: some file systems refuse it on directories */
            close(fd);
        }
    }
    free(dir);
    return status;
}

/* Removes a directory tree without following links; failures are logged. */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        if (errno != ENOENT)
            llmr_log_warn(COMPONENT, "cannot open %s to remove it: %s", path, strerror(errno));
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *child = llmr_path_join(path, e->d_name);
        if (!child)
            break;
        struct stat st;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(child);
        else if (unlink(child) != 0)
            llmr_log_warn(COMPONENT, "cannot remove %s: %s", child, strerror(errno));
        free(child);
    }
    closedir(d);
    if (rmdir(path) != 0)
        llmr_log_warn(COMPONENT, "cannot remove %s: %s", path, strerror(errno));
}

/* The files of the previous complete sync's manifest: path -> index in its array. */
typedef struct marker {
    json_t *doc;
    const json_t *files;
    llmr_strmap *map;
} marker;

static void marker_load(marker *mk, const char *path)
{
    memset(mk, 0, sizeof *mk);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st;
    mk->doc = llmr_json_load_file(path, MAX_MARKER_BYTES, &st, &err);
    if (!mk->doc) {
        if (st != LLMR_NOT_FOUND)
            llmr_log_warn(COMPONENT, "%s: %s: ignoring it (every file will be hashed)", path,
                          llmr_strbuf_cstr(&err));
        goto done;
    }
    mk->files = json_object_get(mk->doc, "files");
    if (!json_is_array(mk->files))
        goto done;
    mk->map = llmr_strmap_create(json_array_size(mk->files));
    for (size_t i = 0; mk->map && i < json_array_size(mk->files); i++) {
        const char *p = clean_string(json_object_get(json_array_get(mk->files, i), "path"));
        if (p)
            llmr_strmap_put(mk->map, p, i);
    }
done:
    llmr_strbuf_free(&err);
}

static void marker_free(marker *mk)
{
    llmr_strmap_free(mk->map);
    json_decref(mk->doc);
}

/* True when the last complete sync verified this path with the same size and digest. */
static bool marker_vouches(const marker *mk, const sync_file *f)
{
    size_t i;
    if (!mk->map || !f->has_sha || !llmr_strmap_get(mk->map, f->path, &i))
        return false;
    const json_t *e = json_array_get(mk->files, i);
    const json_t *size = json_object_get(e, "size");
    const char *sha = clean_string(json_object_get(e, "sha256"));
    if (!json_is_integer(size) || (uint64_t)json_integer_value(size) != f->size || !sha ||
        !is_hex64(sha))
        return false;
    char low[65];
    lower_hex(sha, low);
    return strcmp(low, f->sha) == 0;
}

/* Is f already in place, whole and right?  Hashes it unless the marker vouches. */
static llmr_status check_in_place(sync_ctx *x, const marker *mk, sync_file *f, llmr_strbuf *err)
{
    struct stat st;
    f->in_place = false;
    if (lstat(f->final_path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size)
        return LLMR_OK;
    if (!f->has_sha && f->has_sample) { /* a large local file: its sampled digest, always */
        char sample[65];
        uint64_t size = 0;
        f->in_place = llmr_file_sample_sha256(f->final_path, &size, sample) == 0 &&
                      size == f->size && strcmp(sample, f->sample) == 0;
        if (!f->in_place)
            llmr_log_warn(COMPONENT, "model %s: %s is there but is not the registered file (its "
                                     "sampled digest differs): fetching it again", x->name, f->path);
        return LLMR_OK;
    }
    if (!f->has_sha || marker_vouches(mk, f)) {
        f->in_place = true;
        return LLMR_OK;
    }
    if (!emit(x, "checking", f->path)) {
        llmr_strbuf_printf(err, "model %s: cancelled", x->name);
        return LLMR_CANCELLED;
    }
    char hex[65];
    if (llmr_sha256_file(f->final_path, hex) != 0) {
        llmr_log_warn(COMPONENT, "model %s: cannot read %s (%s): fetching it again", x->name,
                      f->final_path, strerror(errno));
        return LLMR_OK;
    }
    f->in_place = strcmp(hex, f->sha) == 0;
    if (!f->in_place)
        llmr_log_warn(COMPONENT, "model %s: %s is there but its sha256 is %s, not %s: fetching "
                                 "it again", x->name, f->path, hex, f->sha);
    return LLMR_OK;
}

/* Checks what a fetch brought against the manifest. */
static bool fetched_matches(const sync_file *f, const char *hex, uint64_t size, llmr_strbuf *why)
{
    if (size != f->size) {
        llmr_strbuf_printf(why, "size mismatch: expected %llu bytes, got %llu",
                           (unsigned long long)f->size, (unsigned long long)size);
        return false;
    }
    if (f->has_sha && strcmp(hex, f->sha) != 0) {
        llmr_strbuf_printf(why, "sha256 mismatch: expected %s, got %s", f->sha, hex);
        return false;
    }
    char sample[65];
    uint64_t sample_size = 0;
    if (!f->has_sha && f->has_sample &&
        (llmr_file_sample_sha256(f->part_path, &sample_size, sample) != 0 ||
         strcmp(sample, f->sample) != 0)) {
        llmr_strbuf_printf(why, "sampled digest mismatch: expected %s, got %s", f->sample,
                           sample_size ? sample : "none (unreadable)");
        return false;
    }
    return true;
}

/* Fetches, verifies and places one file; err gets "PATH: what went wrong". */
static llmr_status sync_one(sync_ctx *x, sync_file *f, llmr_strbuf *err)
{
    const llmr_sync_options *o = x->o;
    llmr_strbuf why = LLMR_STRBUF_INIT, router_url = LLMR_STRBUF_INIT;
    llmr_status status = LLMR_OK;

    x->current = f;
    x->others_done = x->p.bytes_done - f->counted;
    if (!emit(x, "fetching", f->path)) {
        llmr_strbuf_puts(&why, "cancelled");
        status = LLMR_CANCELLED;
        goto done;
    }
    status = make_parent(f->part_path, false, &why);
    if (status != LLMR_OK)
        goto done;

    /* Where from: the origin first when allowed and preferred, the router always. */
    const char *urls[2], *auths[2];
    size_t nurls = 0;
    if (o->prefer_origin && f->origin_url &&
        llmr_sync_origin_allowed(f->origin_url, o->origin_allowlist)) {
        urls[nurls] = f->origin_url;
        auths[nurls++] = NULL; /* the router's key is for the router only */
    }
    const char *base = o->router_url ? o->router_url : "";
    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/')
        blen--;
    llmr_strbuf_append(&router_url, base, blen);
    llmr_strbuf_puts(&router_url, f->url);
    if (llmr_strbuf_failed(&router_url)) {
        llmr_strbuf_puts(&why, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    urls[nurls] = router_url.data;
    auths[nurls++] = o->auth_header;

    for (size_t u = 0; u < nurls; u++) {
        llmr_strbuf_reset(&why);
        llmr_fetch_options fo;
        llmr_fetch_options_default(&fo);
        fo.url = urls[u];
        fo.part_path = f->part_path;
        fo.expected_size = f->size;
        fo.auth_header = auths[u];
        fo.retries = o->retries;
        if (o->stall_timeout_s)
            fo.stall_timeout_s = o->stall_timeout_s;
        fo.progress = on_fetch_progress;
        fo.user = x;
        char hex[65];
        uint64_t got = 0;
        status = llmr_fetch(&fo, hex, &got, &why);
        if (status == LLMR_OK) {
            if (!emit(x, "verifying", f->path)) {
                llmr_strbuf_puts(&why, "cancelled");
                status = LLMR_CANCELLED;
                goto done;
            }
            if (!fetched_matches(f, hex, got, &why)) {
                llmr_strbuf_printf(&why, " (from %s)", urls[u]);
                unlink(f->part_path); /* wrong bytes: never resume from them */
                f->counted = 0;
                x->p.bytes_done = x->others_done;
                status = LLMR_MODEL_CORRUPT;
            }
        }
        if (status == LLMR_OK || status == LLMR_CANCELLED || u + 1 == nurls)
            break;
        llmr_log_warn(COMPONENT, "model %s: %s from the origin failed (%s): fetching it from the "
                                 "router", x->name, f->path, llmr_strbuf_cstr(&why));
    }
    if (status != LLMR_OK)
        goto done;

    status = make_parent(f->final_path, false, &why);
    if (status != LLMR_OK)
        goto done;
    if (rename(f->part_path, f->final_path) != 0) {
        llmr_strbuf_printf(&why, "cannot move %s to %s: %s", f->part_path, f->final_path,
                           strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    make_parent(f->final_path, true, &why); /* flush the new directory entry */
    llmr_strbuf_reset(&why);
    f->in_place = true;
    f->counted = f->size;
    x->p.bytes_done = x->others_done + f->size;
    x->p.files_done++;
    if (!emit(x, "verifying", f->path)) {
        llmr_strbuf_puts(&why, "cancelled");
        status = LLMR_CANCELLED;
    }

done:
    if (status != LLMR_OK) {
        llmr_strbuf_put_display(err, f->path, strlen(f->path));
        llmr_strbuf_printf(err, ": %s", llmr_strbuf_cstr(&why));
    }
    x->current = NULL;
    llmr_strbuf_free(&why);
    llmr_strbuf_free(&router_url);
    return status;
}

static char *join3(const char *a, const char *b, const char *c)
{
    char *ab = llmr_path_join(a, b);
    char *abc = ab ? llmr_path_join(ab, c) : NULL;
    free(ab);
    return abc;
}

/* What the marker records of a complete sync: the manifest, with the sampled digest of
 * each large file it gave none (taken now, after the file's full check), for the quick
 * check before each load (model_check.h).  NULL when out of memory. */
static json_t *marker_record(const sync_ctx *x, const json_t *manifest)
{
    json_t *copy = json_deep_copy(manifest);
    json_t *files = json_object_get(copy, "files");
    for (size_t i = 0; copy && i < x->n && i < json_array_size(files); i++) {
        const sync_file *f = &x->files[i];
        char hex[65];
        uint64_t size = 0;
        if (f->has_sample || f->size <= LLMR_SOURCE_SAMPLE_FROM || !f->in_place)
            continue;
        if (llmr_file_sample_sha256(f->final_path, &size, hex) == 0 && size == f->size)
            json_object_set_new(json_array_get(files, i), "sample_sha256", json_string(hex));
    }
    return copy;
}

/* The repo and revision of a manifest's Hub source, or NULLs. */
static void hub_source(const json_t *manifest, const char **repo, const char **revision)
{
    const json_t *src = json_object_get(manifest, "source");
    const char *kind = clean_string(json_object_get(src, "kind"));
    *repo = *revision = NULL;
    if (!kind || strcmp(kind, "hf") != 0)
        return;
    *repo = clean_string(json_object_get(src, "repo"));
    *revision = clean_string(json_object_get(src, "revision"));
    if (!*repo || !*revision)
        *repo = *revision = NULL;
}

/* The directory of a manifest's local source (absolute), or NULL. */
static const char *local_source_dir(const json_t *manifest)
{
    const json_t *src = json_object_get(manifest, "source");
    const char *kind = clean_string(json_object_get(src, "kind"));
    const char *dir = clean_string(json_object_get(src, "dir"));
    return kind && strcmp(kind, "local") == 0 && dir && dir[0] == '/' ? dir : NULL;
}

/* Where a missing file may be on this machine: in the local source's directory, or in
 * the Hub cache hub (only a file with a sha256 to check the copy by); NULL: nowhere. */
static char *candidate(const sync_ctx *x, const sync_file *f, const char *hub)
{
    const char *rel = f->source_path ? f->source_path : f->path;
    if (x->local_dir)
        return llmr_path_join(x->local_dir, rel);
    return f->has_sha ? llmr_hf_cache_find(hub, x->hf_repo, x->hf_revision, rel, f->sha) : NULL;
}

/* Links each missing file found on this machine (model_in_place.h): from the local
 * source's directory (allowed by local_dirs), or from the Hub cache hub (hub not NULL).
 * What cannot be used so stays to be fetched, with the reason logged. */
static llmr_status link_local_files(sync_ctx *x, const char *marker_path, const char *hub,
                                    uint64_t *missing, size_t *to_fetch, llmr_strbuf *err)
{
    size_t linked = 0;
    bool marker_gone = false;
    uint64_t linked_bytes = 0;
    for (size_t i = 0; i < x->n; i++) {
        sync_file *f = &x->files[i];
        if (f->in_place)
            continue;
        if (!emit(x, "checking", f->path)) {
            llmr_strbuf_printf(err, "model %s: cancelled", x->name);
            return LLMR_CANCELLED;
        }
        char *source = candidate(x, f, hub);
        if (!source && hub)
            continue; /* not in the cache */
        /* The marker describes verified files only: not while some are replaced. */
        if (!marker_gone && unlink(marker_path) != 0 && errno != ENOENT) {
            llmr_strbuf_printf(err, "model %s: cannot remove %s: %s", x->name, marker_path,
                               strerror(errno));
            free(source);
            return LLMR_IO;
        }
        marker_gone = true;
        llmr_strbuf why = LLMR_STRBUF_INIT, tmp = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&tmp, "%s.link", f->part_path); /* beside the fetches: the same disk */
        llmr_status st = source && !llmr_strbuf_failed(&tmp) ? make_parent(f->final_path, false, &why)
                                                             : LLMR_OOM_RAM;
        if (st == LLMR_OK)
            st = make_parent(f->part_path, false, &why);
        if (st == LLMR_OK) {
            llmr_in_place_file in = {source, f->size, f->has_sha ? f->sha : NULL,
                                     f->has_sample ? f->sample : NULL};
            st = llmr_in_place_link(&in, hub ? hub : x->o->local_dirs, tmp.data, f->final_path, &why);
        }
        free(source);
        llmr_strbuf_free(&tmp);
        if (st == LLMR_OOM_RAM) {
            llmr_strbuf_free(&why);
            llmr_strbuf_puts(err, "out of memory");
            return st;
        }
        if (st != LLMR_OK) {
            llmr_log_info(COMPONENT, "model %s: %s not used %s (%s): fetching it", x->name, f->path,
                          hub ? "from the Hugging Face cache" : "in place", llmr_strbuf_cstr(&why));
            llmr_strbuf_free(&why);
            continue;
        }
        llmr_strbuf_free(&why);
        unlink(f->part_path); /* a fetch begun earlier is not needed */
        *missing -= f->size - f->counted;
        x->p.bytes_done += f->size - f->counted;
        f->counted = f->size;
        f->in_place = true;
        x->p.files_done++;
        (*to_fetch)--;
        linked++;
        linked_bytes += f->size;
    }
    if (linked) {
        char bytes_s[32];
        format_bytes(linked_bytes, bytes_s);
        llmr_log_info(COMPONENT, "model %s: %zu files (%s) %s %s", x->name, linked, bytes_s,
                      hub ? "taken from the Hugging Face cache at" : "used in place from",
                      hub ? hub : x->local_dir);
    }
    return LLMR_OK;
}

llmr_status llmr_model_sync(const llmr_sync_options *o, const json_t *manifest, json_t **skipped,
                            llmr_strbuf *err)
{
    if (skipped)
        *skipped = NULL;
    sync_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    marker mk;
    memset(&mk, 0, sizeof mk);
    char *models_dir = NULL, *model_dir = NULL, *partial_dir = NULL, *marker_path = NULL;
    char *text = NULL;
    json_t *skip = NULL, *record = NULL;
    llmr_status status = parse_manifest(manifest, &x.name, &x.files, &x.n, err);
    if (status != LLMR_OK)
        goto done;
    x.local_dir = local_source_dir(manifest);
    hub_source(manifest, &x.hf_repo, &x.hf_revision);
    if (!o->data_dir || !o->data_dir[0]) {
        llmr_strbuf_puts(err, "model sync: no data directory given");
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    models_dir = llmr_path_join(o->data_dir, "models");
    model_dir = models_dir ? llmr_path_join(models_dir, x.name) : NULL;
    partial_dir = models_dir ? join3(models_dir, PARTIAL_DIR, x.name) : NULL;
    marker_path = model_dir ? llmr_path_join(model_dir, MARKER_NAME) : NULL;
    skip = json_array();
    if (!marker_path || !partial_dir || !skip)
        goto oom;
    for (size_t i = 0; i < x.n; i++) {
        sync_file *f = &x.files[i];
        f->final_path = llmr_path_join(model_dir, f->path);
        llmr_strbuf part = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&part, "%s/%s.part", partial_dir, f->path);
        f->part_path = llmr_strbuf_take(&part);
        if (!f->final_path || !f->part_path)
            goto oom;
    }

    /* What is already here. */
    x.p.model = x.name;
    x.p.files_total = (uint32_t)x.n;
    for (size_t i = 0; i < x.n; i++)
        x.p.bytes_total += x.files[i].size;
    if (!emit(&x, "checking", NULL)) {
        llmr_strbuf_printf(err, "model %s: cancelled", x.name);
        status = LLMR_CANCELLED;
        goto done;
    }
    marker_load(&mk, marker_path);
    uint64_t missing = 0;
    size_t to_fetch = 0;
    for (size_t i = 0; i < x.n; i++) {
        sync_file *f = &x.files[i];
        status = check_in_place(&x, &mk, f, err);
        if (status != LLMR_OK)
            goto done;
        struct stat st;
        if (f->in_place) {
            f->counted = f->size;
            x.p.files_done++;
        } else {
            to_fetch++;
            f->counted = 0;
            if (stat(f->part_path, &st) == 0 && S_ISREG(st.st_mode) &&
                (uint64_t)st.st_size <= f->size)
                f->counted = (uint64_t)st.st_size;
            missing += f->size - f->counted;
        }
        x.p.bytes_done += f->counted;
    }

    /* A local source on this machine: its files linked where the node may use them. */
    if (to_fetch > 0 && x.local_dir && llmr_in_place_allowed(x.local_dir, o->local_dirs)) {
        status = link_local_files(&x, marker_path, NULL, &missing, &to_fetch, err);
        if (status != LLMR_OK)
            goto done;
    }
    /* A Hub model whose files this machine's Hugging Face cache holds: linked from there. */
    if (to_fetch > 0 && x.hf_repo) {
        char *hub = llmr_hf_cache_dir();
        struct stat hst;
        if (hub && stat(hub, &hst) == 0 && S_ISDIR(hst.st_mode))
            status = link_local_files(&x, marker_path, hub, &missing, &to_fetch, err);
        free(hub);
        if (status != LLMR_OK)
            goto done;
    }

    /* Room for what is missing, before any byte. */
    status = llmr_mkdir_p(models_dir, err);
    if (status != LLMR_OK)
        goto done;
    struct statvfs vfs;
    if (statvfs(models_dir, &vfs) != 0) {
        llmr_strbuf_printf(err, "model %s: cannot tell the free space of %s: %s", x.name,
                           models_dir, strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (missing > avail) {
        char need_s[32], avail_s[32];
        format_bytes(missing, need_s);
        format_bytes(avail, avail_s);
        llmr_strbuf_printf(err, "model %s: not enough disk space: %s more are needed, %s has %s "
                                "free: free some space or use a data directory on a larger disk",
                           x.name, need_s, models_dir, avail_s);
        status = LLMR_LIMIT_EXCEEDED;
        goto done;
    }

    if (to_fetch > 0) {
        char need_s[32];
        format_bytes(missing, need_s);
        llmr_log_info(COMPONENT, "model %s: fetching %zu of %zu files (%s)", x.name, to_fetch, x.n,
                      need_s);
        /* The marker describes verified files only: not while some are replaced. */
        if (unlink(marker_path) != 0 && errno != ENOENT) {
            llmr_strbuf_printf(err, "model %s: cannot remove %s: %s", x.name, marker_path,
                               strerror(errno));
            status = LLMR_IO;
            goto done;
        }
    }
    for (size_t i = 0; i < x.n; i++) {
        sync_file *f = &x.files[i];
        if (f->in_place)
            continue;
        llmr_strbuf why = LLMR_STRBUF_INIT;
        status = sync_one(&x, f, &why);
        if (status == LLMR_OK) {
            llmr_strbuf_free(&why);
            continue;
        }
        if (f->required || status == LLMR_CANCELLED || status == LLMR_OOM_RAM) {
            llmr_strbuf_printf(err, "model %s: %s", x.name, llmr_strbuf_cstr(&why));
            if (status != LLMR_CANCELLED)
                llmr_strbuf_puts(err, status == LLMR_MODEL_CORRUPT
                                          ? " (the bad copy was deleted; check the source)"
                                          : " (what was fetched is kept: a later sync resumes)");
            llmr_strbuf_free(&why);
            goto done;
        }
        llmr_log_warn(COMPONENT, "model %s: skipping the optional file %s", x.name,
                      llmr_strbuf_cstr(&why));
        json_array_append_new(skip, json_pack("{s:s, s:s, s:s}", "path", f->path, "error",
                                              llmr_strbuf_cstr(&why), "status",
                                              llmr_status_name(status)));
        llmr_strbuf_free(&why);
        status = LLMR_OK;
    }

    /* Every required file is in place: record it. */
    remove_tree(partial_dir);
    char *partial_root = llmr_path_join(models_dir, PARTIAL_DIR);
    if (partial_root)
        rmdir(partial_root); /* fails while other models are syncing: fine */
    free(partial_root);
    record = marker_record(&x, manifest);
    text = record ? llmr_json_pretty(record) : NULL;
    if (!text)
        goto oom;
    status = llmr_mkdir_p(model_dir, err);
    if (status == LLMR_OK)
        status = llmr_write_file_atomic(marker_path, text, strlen(text), err);
    if (status != LLMR_OK)
        goto done;
    if (to_fetch > 0)
        llmr_log_info(COMPONENT, "model %s: %zu files in place and verified (%zu skipped)", x.name,
                      x.n - json_array_size(skip), json_array_size(skip));
    emit(&x, "ready", NULL);
    if (skipped) {
        *skipped = skip;
        skip = NULL;
    }
    goto done;

oom:
    llmr_strbuf_puts(err, "model sync: out of memory");
    status = LLMR_OOM_RAM;
done:
    if (status != LLMR_OK && x.name && x.files)
        emit(&x, "failed", NULL);
    json_decref(skip);
    json_decref(record);
    free(text);
    marker_free(&mk);
    free_files(x.files, x.n);
    free(models_dir);
    free(model_dir);
    free(partial_dir);
    free(marker_path);
    return status;
}

bool llmr_sync_remove_model(const char *data_dir, const char *name)
{
    if (!data_dir || !name || !llmr_file_name_is_safe(name))
        return false;
    char *models_dir = llmr_path_join(data_dir, "models");
    char *model_dir = models_dir ? llmr_path_join(models_dir, name) : NULL;
    char *partial_dir = models_dir ? join3(models_dir, PARTIAL_DIR, name) : NULL;
    char *partial_root = models_dir ? llmr_path_join(models_dir, PARTIAL_DIR) : NULL;
    bool ok = model_dir && partial_dir && partial_root;
    if (ok) {
        remove_tree(model_dir);
        remove_tree(partial_dir);
        rmdir(partial_root); /* fails while other models are syncing: fine */
        struct stat st;
        ok = lstat(model_dir, &st) != 0 && lstat(partial_dir, &st) != 0;
    }
    free(models_dir);
    free(model_dir);
    free(partial_dir);
    free(partial_root);
    return ok;
}

bool llmr_sync_has_marker(const char *data_dir, const char *name)
{
    if (!data_dir || !name || !llmr_file_name_is_safe(name))
        return false;
    char *models_dir = llmr_path_join(data_dir, "models");
    char *path = models_dir ? join3(models_dir, name, MARKER_NAME) : NULL;
    struct stat st;
    bool yes = path && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
    free(path);
    free(models_dir);
    return yes;
}

char *llmr_sync_local_version(const char *data_dir, const char *name)
{
    if (!data_dir || !name || !llmr_file_name_is_safe(name))
        return NULL;
    char *models_dir = llmr_path_join(data_dir, "models");
    char *path = models_dir ? join3(models_dir, name, MARKER_NAME) : NULL;
    char *version = NULL;
    if (path) {
        llmr_strbuf err = LLMR_STRBUF_INIT;
        llmr_status st;
        json_t *doc = llmr_json_load_file(path, MAX_MARKER_BYTES, &st, &err);
        const char *v = clean_string(json_object_get(doc, "version"));
        version = v ? strdup(v) : NULL;
        json_decref(doc);
        llmr_strbuf_free(&err);
    }
    free(path);
    free(models_dir);
    return version;
}
