/* Model sources: see model_source.h.
 *
 * This file lists a source and reads single files of it: the Hub's tree API through
 * libcurl (every page, with the token), or a local directory walked recursively.  The
 * checks of a registration and the manifests are in model_source_manifest.c.
 *
 * Requests to the Hub are retried twice on network errors, 429 and 5xx; other
 * answers are final and turned into a sentence that says what to do (401 and 403:
 * set HF_TOKEN; 404: no such repository or revision).  The token goes only to the
 * endpoint's host: libcurl drops it on a redirect to another host (the CDN that
 * serves LFS files), and a paging link to another host is refused. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "router/model_source.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/sha1.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "net/curl_handle.h"
#include "net/http_fetch.h"
#include "storage/hf_cache.h"

#define COMPONENT "source"
#define DEFAULT_ENDPOINT "https://huggingface.co"
#define MAX_FILES 100000u
#define MAX_PAGES 10000u
#define MAX_PAGE_BYTES (64u << 20)
#define HASH_MAX_BYTES (10u << 20)   /* small files fetched to know their sha256 */
#define HASH_MAX_FILES 256u
#define MAX_DEPTH 32
#define REPO_PART_MAX 96
#define REVISION_MAX 255
#define MAX_PATH_BYTES 4096
#define HUB_TRIES 3

#ifndef LLMR_VERSION
#define LLMR_VERSION "0.0.0-dev"
#endif

void llmr_source_options_default(llmr_source_options *o)
{
    memset(o, 0, sizeof *o);
    o->hash_local = true;
    o->timeout_s = 30;
}

/* ---- the listing ------------------------------------------------------------------- */

typedef struct file_list {
    llmr_source_file *files;
    size_t count, cap;
} file_list;

static void free_file(llmr_source_file *f)
{
    free(f->path);
    free(f->sha256);
    free(f->sample_sha256);
    free(f->origin_url);
}

static void file_list_free(file_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free_file(&l->files[i]);
    free(l->files);
    memset(l, 0, sizeof *l);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (out)
        memcpy(out, s, n + 1);
    return out;
}

static char *dup_len(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

/* Adds a file (path copied, sha256 lowercased and copied when not NULL). */
static llmr_status file_list_add(file_list *l, const char *path, uint64_t size, const char *sha256,
                                 llmr_strbuf *err)
{
    if (l->count >= MAX_FILES) {
        llmr_strbuf_printf(err, "more than %u files: too many for one model", MAX_FILES);
        return LLMR_LIMIT_EXCEEDED;
    }
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        llmr_source_file *grown = realloc(l->files, cap * sizeof *grown);
        if (!grown)
            goto oom;
        l->files = grown;
        l->cap = cap;
    }
    llmr_source_file *f = &l->files[l->count];
    memset(f, 0, sizeof *f);
    f->path = dup_str(path);
    f->size = size;
    if (sha256) {
        f->sha256 = dup_str(sha256);
        for (char *c = f->sha256; c && *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
    }
    if (!f->path || (sha256 && !f->sha256)) {
        free_file(f);
        goto oom;
    }
    l->count++;
    return LLMR_OK;
oom:
    llmr_strbuf_puts(err, "out of memory");
    return LLMR_OOM_RAM;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const llmr_source_file *)a)->path, ((const llmr_source_file *)b)->path);
}

/* Sorts by path and drops repeated paths (a page boundary seen twice). */
static void file_list_sort(file_list *l)
{
    if (l->count == 0)
        return;
    qsort(l->files, l->count, sizeof *l->files, by_path);
    size_t k = 1;
    for (size_t i = 1; i < l->count; i++) {
        if (strcmp(l->files[i].path, l->files[k - 1].path) == 0)
            free_file(&l->files[i]);
        else
            l->files[k++] = l->files[i];
    }
    l->count = k;
}

/* True when a path can name a file of a model on every node: relative, '/'-separated
 * components that are not empty, "." or "..", no '\\' or control characters, valid
 * UTF-8 (the same rules as the node's manifest check). */
static bool path_usable(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > MAX_PATH_BYTES || p[0] == '/')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\' || c < 0x20 || c == 0x7f)
            return false;
    }
    if (!llmr_utf8_valid(p, n, NULL))
        return false;
    for (const char *c = p;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0 || len > 255 || (len == 1 && c[0] == '.') ||
            (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!slash)
            return true;
        c = slash + 1;
    }
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

static const char *const metadata_files[] = {
    "config.json",          "tokenizer.json",          "tokenizer_config.json",
    "generation_config.json", "special_tokens_map.json", "chat_template.jinja",
    "chat_template.json",   "model.safetensors.index.json",
};

bool llmr_source_is_model_file(const char *path)
{
    if (strncmp(path, "metal/", 6) == 0)
        return path[6] != '\0' && !strchr(path + 6, '/');
    if (strchr(path, '/'))
        return false;
    for (size_t i = 0; i < sizeof metadata_files / sizeof metadata_files[0]; i++)
        if (strcmp(path, metadata_files[i]) == 0)
            return true;
    return llmr_name_has_suffix(path, ".safetensors") || llmr_name_has_suffix(path, ".gguf");
}

const llmr_source_file *llmr_source_find(const llmr_source *s, const char *path)
{
    if (!s || !path)
        return NULL;
    /* Sorted by path (resolve sorts): a binary search. */
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->files[mid].path, path);
        if (c == 0)
            return &s->files[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void llmr_source_free(llmr_source *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->count; i++)
        free_file(&s->files[i]);
    free(s->files);
    free(s->kind);
    free(s->repo);
    free(s->revision);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

/* ---- names: repository ids, revisions, URLs ---------------------------------------- */

static bool repo_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

static bool alnum(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* "org/name": [A-Za-z0-9][A-Za-z0-9._-]* "/" [A-Za-z0-9._-]+, at most 96 bytes each,
 * no "..", neither part ".". */
static bool repo_id_valid(const char *id, size_t n)
{
    const char *slash = memchr(id, '/', n);
    if (!slash)
        return false;
    size_t a = (size_t)(slash - id), b = n - a - 1;
    if (a == 0 || b == 0 || a > REPO_PART_MAX || b > REPO_PART_MAX || !alnum(id[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (i == a)
            continue;
        if (!repo_char(id[i]))
            return false;
        if (i + 1 < n && id[i] == '.' && id[i + 1] == '.')
            return false;
    }
    return !(b == 1 && slash[1] == '.');
}

static bool revision_char(char c)
{
    return alnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == '/';
}

/* A branch, tag or commit: [A-Za-z0-9._+/-], no "..", no empty or "." component (git
 * refuses the same in its ref names). */
static bool revision_valid(const char *rev)
{
    size_t n = strlen(rev);
    if (n == 0 || n > REVISION_MAX || strstr(rev, ".."))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!revision_char(rev[i]))
            return false;
    for (const char *c = rev;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!slash)
            return true;
        c = slash + 1;
    }
}

/* Appends text percent-encoded: every byte but A-Za-z0-9 "-._~" (and '/' with
 * keep_slash). */
static void url_encode(llmr_strbuf *sb, const char *text, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (alnum((char)*c) || *c == '-' || *c == '.' || *c == '_' || *c == '~' ||
            (keep_slash && *c == '/')) {
            llmr_strbuf_putc(sb, (char)*c);
        } else {
            llmr_strbuf_putc(sb, '%');
            llmr_strbuf_putc(sb, hex[*c >> 4]);
            llmr_strbuf_putc(sb, hex[*c & 15]);
        }
    }
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* n bytes of text percent-decoded, malloc'd; NULL for a bad escape, a NUL, or no
 * memory. */
static char *url_decode(const char *text, size_t n)
{
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '%') {
            int hi = i + 2 < n + 1 ? hex_value(text[i + 1]) : -1;
            int lo = hi >= 0 && i + 2 < n ? hex_value(text[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[k++] = text[i];
        }
    }
    out[k] = '\0';
    return out;
}

static void put_quoted(llmr_strbuf *sb, const char *text)
{
    llmr_strbuf_putc(sb, '"');
    llmr_strbuf_put_display(sb, text, strlen(text));
    llmr_strbuf_putc(sb, '"');
}

/* ---- the Hub: endpoint, token, one GET --------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct hub {
    char *endpoint;   /* no '/' at the end */
    char host[256];   /* the endpoint's host, lowercased */
    char *auth;       /* "Authorization: Bearer TOKEN", or NULL */
    unsigned timeout_s;
} hub;

static void hub_close(hub *h)
{
    free(h->endpoint);
    free(h->auth);
    memset(h, 0, sizeof *h);
}

static llmr_status hub_open(const llmr_source_options *o, hub *h, llmr_strbuf *err)
{
    memset(h, 0, sizeof *h);
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_result != CURLE_OK) {
        llmr_strbuf_puts(err, "libcurl failed to initialise");
        return LLMR_IO;
    }
    const char *endpoint = o && o->hf_endpoint ? o->hf_endpoint : getenv("HF_ENDPOINT");
    if (!endpoint || !endpoint[0])
        endpoint = DEFAULT_ENDPOINT;
    size_t n = strlen(endpoint);
    while (n > 0 && endpoint[n - 1] == '/')
        n--;
    h->endpoint = dup_len(endpoint, n);
    if (!h->endpoint) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    bool bad = strchr(h->endpoint, '?') || strchr(h->endpoint, '#');
    for (const char *c = h->endpoint; *c && !bad; c++)
        bad = (unsigned char)*c <= 0x20 || *c == 0x7f;
    if (bad || !llmr_url_http_host(h->endpoint, h->host, sizeof h->host)) {
        llmr_strbuf_puts(err, "the Hub endpoint ");
        put_quoted(err, endpoint);
        llmr_strbuf_puts(err, " is not an http:// or https:// URL: fix HF_ENDPOINT (or leave it "
                              "unset for https://huggingface.co)");
        hub_close(h);
        return LLMR_INVALID_ARGUMENT;
    }
    h->timeout_s = o && o->timeout_s ? o->timeout_s : 30;
    const char *token = o && o->hf_token ? o->hf_token : getenv("HF_TOKEN");
    if (token && token[0]) {
        for (const char *c = token; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                llmr_strbuf_puts(err, "HF_TOKEN has a control character (a line break?): set it "
                                      "to the token alone");
                hub_close(h);
                return LLMR_INVALID_ARGUMENT;
            }
        }
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&sb, "Authorization: Bearer %s", token);
        h->auth = llmr_strbuf_take(&sb);
        if (!h->auth) {
            llmr_strbuf_puts(err, "out of memory");
            hub_close(h);
            return LLMR_OOM_RAM;
        }
    }
    return LLMR_OK;
}

typedef struct answer {
    long code;
    llmr_strbuf body;
    size_t max_body;
    bool too_big;
    llmr_strbuf next;  /* the Link header's rel="next" URL, "" when none */
} answer;

static void answer_free(answer *a)
{
    llmr_strbuf_free(&a->body);
    llmr_strbuf_free(&a->next);
}

static size_t on_answer_body(char *data, size_t size, size_t n, void *user)
{
    answer *a = user;
    size_t len = size * n;
    if (len > a->max_body - a->body.len) {
        a->too_big = true;
        return 0;
    }
    return llmr_strbuf_append(&a->body, data, len) ? len : 0;
}

/* Link: <URL>; rel="next", <URL>; rel="last" */
static void parse_link(answer *a, const char *v, size_t n)
{
    const char *end = v + n;
    while (v < end) {
        const char *lt = memchr(v, '<', (size_t)(end - v));
        if (!lt)
            return;
        const char *gt = memchr(lt, '>', (size_t)(end - lt));
        if (!gt)
            return;
        const char *params = gt + 1;
        const char *stop = memchr(params, '<', (size_t)(end - params));
        if (!stop)
            stop = end;
        for (const char *p = params; p + 3 <= stop; p++) {
            if (strncasecmp(p, "rel", 3) != 0)
                continue;
            const char *q = p + 3;
            while (q < stop && (*q == ' ' || *q == '\t'))
                q++;
            if (q >= stop || *q != '=')
                continue;
            q++;
            while (q < stop && (*q == ' ' || *q == '\t' || *q == '"'))
                q++;
            if (stop - q >= 4 && strncasecmp(q, "next", 4) == 0 &&
                (stop - q == 4 || q[4] == '"' || q[4] == ' ' || q[4] == ';' || q[4] == ',' ||
                 q[4] == '\r' || q[4] == '\n')) {
                llmr_strbuf_reset(&a->next);
                llmr_strbuf_append(&a->next, lt + 1, (size_t)(gt - lt - 1));
                return;
            }
        }
        v = stop;
    }
}

static size_t on_answer_header(char *data, size_t size, size_t n, void *user)
{
    answer *a = user;
    size_t len = size * n;
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        llmr_strbuf_reset(&a->next); /* a new answer: a redirect's, or the final one */
        return len;
    }
    if (len > 5 && strncasecmp(data, "link:", 5) == 0)
        parse_link(a, data + 5, len - 5);
    return len;
}

/* One GET.  LLMR_OK once an answer came whose status is final (the caller reads
 * a->code); IO when the network failed or the Hub kept answering 429/5xx;
 * LIMIT_EXCEEDED for a body over max_body. */
static llmr_status hub_get(const hub *h, const char *url, size_t max_body, answer *a,
                           llmr_strbuf *err)
{
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status status = LLMR_IO;
    for (unsigned attempt = 1;; attempt++) {
        llmr_strbuf_reset(&a->body);
        llmr_strbuf_reset(&a->next);
        llmr_strbuf_reset(&why);
        a->code = 0;
        a->too_big = false;
        a->max_body = max_body;
        char errbuf[CURL_ERROR_SIZE];
        errbuf[0] = '\0';
        struct curl_slist *headers = NULL;
        if (h->auth) {
            headers = curl_slist_append(NULL, h->auth);
            if (!headers) {
                llmr_strbuf_puts(err, "out of memory");
                status = LLMR_OOM_RAM;
                goto done;
            }
        }
        CURL *c = llmr_curl_new();
        if (!c) {
            curl_slist_free_all(headers);
            llmr_strbuf_printf(err, "GET %s: cannot start a transfer (libcurl: out of memory?)",
                               url);
            goto done;
        }
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
        curl_easy_setopt(c, CURLOPT_USERAGENT, "llmr/" LLMR_VERSION);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)(h->timeout_s < 10 ? h->timeout_s : 10));
        curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)h->timeout_s);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_answer_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_answer_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
        if (headers)
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        CURLcode res = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->code);
        curl_easy_cleanup(c);
        curl_slist_free_all(headers);

        if (a->too_big) {
            llmr_strbuf_printf(err, "GET %s: the answer is larger than %zu bytes", url, max_body);
            status = LLMR_LIMIT_EXCEEDED;
            goto done;
        }
        if (llmr_strbuf_failed(&a->body) || llmr_strbuf_failed(&a->next)) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto done;
        }
        bool retry;
        if (res == CURLE_OK) {
            if (a->code != 429 && a->code < 500) {
                status = LLMR_OK;
                goto done;
            }
            llmr_strbuf_printf(&why, "HTTP %ld", a->code);
            retry = true;
        } else {
            llmr_strbuf_puts(&why, errbuf[0] ? errbuf : curl_easy_strerror(res));
            retry = res != CURLE_UNSUPPORTED_PROTOCOL && res != CURLE_URL_MALFORMAT &&
                    res != CURLE_TOO_MANY_REDIRECTS;
        }
        if (!retry || attempt >= HUB_TRIES) {
            llmr_strbuf_printf(err, "GET %s: %s", url, llmr_strbuf_cstr(&why));
            if (retry)
                llmr_strbuf_printf(err, " (after %u tries)", attempt);
            llmr_strbuf_puts(err, res == CURLE_OK
                                      ? ": the Hub is failing; try again later"
                                      : ": the Hub cannot be reached; check the network (and "
                                        "HF_ENDPOINT)");
            status = LLMR_IO;
            goto done;
        }
        uint64_t wait_ms = attempt == 1 ? 500 : 1500;
        llmr_log_warn(COMPONENT, "GET %s: %s: trying again in %llu ms", url,
                      llmr_strbuf_cstr(&why), (unsigned long long)wait_ms);
        llmr_sleep_ms(wait_ms);
    }
done:
    llmr_strbuf_free(&why);
    return status;
}

/* The Hub's own words from an error body ({"error": "..."}), appended as
 * " (\"words\")". */
static void put_hub_words(llmr_strbuf *err, const answer *a)
{
    llmr_strbuf ignored = LLMR_STRBUF_INIT;
    json_t *root = a->body.len ? llmr_json_parse(a->body.data, a->body.len, &ignored) : NULL;
    llmr_strbuf_free(&ignored);
    const json_t *v = json_object_get(root, "error");
    if (json_is_string(v) && json_string_length(v) > 0) {
        size_t n = json_string_length(v);
        llmr_strbuf_puts(err, " (\"");
        llmr_strbuf_put_display(err, json_string_value(v), n < 200 ? n : 200);
        llmr_strbuf_puts(err, "\")");
    }
    json_decref(root);
}

/* Turns an answer that is not 200 into a status and a sentence. */
static llmr_status hub_refusal(const hub *h, const char *repo, const char *revision,
                               const char *what, const char *url, const answer *a,
                               llmr_strbuf *err)
{
    switch (a->code) {
    case 401:
        llmr_strbuf_printf(err, "%s: the Hub answered 401", repo);
        put_hub_words(err, a);
        if (h->auth)
            llmr_strbuf_puts(err, ": the token was refused: HF_TOKEN is wrong or expired (or the "
                                  "repository does not exist)");
        else
            llmr_strbuf_puts(err, ": the repository is private or gated (or does not exist): "
                                  "set HF_TOKEN to a token that may read it");
        return LLMR_NOT_FOUND;
    case 403:
        llmr_strbuf_printf(err, "%s: the Hub answered 403", repo);
        put_hub_words(err, a);
        llmr_strbuf_puts(err, h->auth ? ": the token may not read this private or gated "
                                        "repository: accept its terms on its page, or set "
                                        "HF_TOKEN to a token with access"
                                      : ": the repository is private or gated: set HF_TOKEN to "
                                        "a token that may read it");
        return LLMR_IO;
    case 404:
        if (what) {
            llmr_strbuf_printf(err, "%s@%s: the Hub lists %s but does not serve it (HTTP 404 for "
                                    "%s)", repo, revision, what, url);
        } else {
            llmr_strbuf_printf(err, "%s@%s: no such repository (or revision) at %s: the Hub "
                                    "answered 404", repo, revision, h->endpoint);
            put_hub_words(err, a);
        }
        return LLMR_NOT_FOUND;
    default:
        llmr_strbuf_printf(err, "GET %s: the Hub answered HTTP %ld", url, a->code);
        put_hub_words(err, a);
        return LLMR_IO;
    }
}

/* The resolve URL of a file: ENDPOINT/REPO/resolve/REVISION/PATH. */
static char *resolve_url(const char *endpoint, const char *repo, const char *revision,
                         const char *path)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb, "%s/%s/resolve/", endpoint, repo);
    url_encode(&sb, revision, false);
    llmr_strbuf_putc(&sb, '/');
    url_encode(&sb, path, true);
    return llmr_strbuf_take(&sb);
}

/* A paging link, made absolute against the page's URL; NULL (with err) when it leaves
 * the endpoint's scheme, host or port. */
static char *next_page_url(const hub *h, const char *page, const char *link, llmr_strbuf *err)
{
    char *out = NULL, *scheme = NULL, *host = NULL, *port = NULL;
    char *scheme0 = NULL, *host0 = NULL, *port0 = NULL;
    CURLU *u = curl_url(), *base = curl_url();
    if (!u || !base)
        goto bad;
    if (curl_url_set(base, CURLUPART_URL, h->endpoint, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, page, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, link, 0) != CURLUE_OK)
        goto bad;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(base, CURLUPART_SCHEME, &scheme0, 0) != CURLUE_OK ||
        curl_url_get(base, CURLUPART_HOST, &host0, 0) != CURLUE_OK ||
        curl_url_get(base, CURLUPART_PORT, &port0, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto bad;
    if (strcasecmp(scheme, scheme0) != 0 || strcasecmp(host, host0) != 0 ||
        strcmp(port, port0) != 0) {
        llmr_strbuf_puts(err, "the Hub's next page ");
        put_quoted(err, link);
        llmr_strbuf_printf(err, " is on another host than %s: refused, the token would go "
                                "there", h->endpoint);
        goto done;
    }
    char *full = NULL;
    if (curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK)
        goto bad;
    out = dup_str(full);
    curl_free(full);
    if (!out)
        llmr_strbuf_puts(err, "out of memory");
    goto done;
bad:
    llmr_strbuf_puts(err, "the Hub's next page ");
    put_quoted(err, link);
    llmr_strbuf_puts(err, " is not a URL");
done:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(scheme0);
    curl_free(host0);
    curl_free(port0);
    curl_url_cleanup(u);
    curl_url_cleanup(base);
    return out;
}

/* ---- the Hub: listing ---------------------------------------------------------------- */

/* The entries of one page of the tree API into l. */
static llmr_status add_tree_page(const answer *a, const char *url, file_list *l, size_t *skipped,
                                 llmr_strbuf *err)
{
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status status = LLMR_IO;
    json_t *root = llmr_json_parse(a->body.data ? a->body.data : "", a->body.len, &why);
    if (!root)
        goto bad;
    if (!json_is_array(root)) {
        llmr_strbuf_puts(&why, "not a JSON array");
        goto bad;
    }
    size_t i;
    json_t *e;
    json_array_foreach(root, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!type) {
            llmr_strbuf_printf(&why, "entry %zu has no \"type\"", i);
            goto bad;
        }
        if (strcmp(type, "file") != 0)
            continue; /* directories: their files are listed too */
        const json_t *pv = json_object_get(e, "path");
        const char *path = json_string_value(pv);
        uint64_t size = 0;
        if (!path || !llmr_json_as_u64(json_object_get(e, "size"), &size)) {
            llmr_strbuf_printf(&why, "file entry %zu lacks a \"path\" or a \"size\"", i);
            goto bad;
        }
        if (strlen(path) != json_string_length(pv) || !path_usable(path)) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            llmr_strbuf_put_display(&sb, path, json_string_length(pv));
            llmr_log_warn(COMPONENT, "%s: left out \"%s\": no node could store a file of that "
                                     "name", url, llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
            (*skipped)++;
            continue;
        }
        const char *sha = NULL;
        const json_t *lfs = json_object_get(e, "lfs");
        if (json_is_object(lfs)) {
            const char *oid = json_string_value(json_object_get(lfs, "oid"));
            uint64_t lfs_size;
            if (oid && strncmp(oid, "sha256:", 7) == 0)
                oid += 7;
            if (oid && is_hex64(oid))
                sha = oid;
            if (llmr_json_as_u64(json_object_get(lfs, "size"), &lfs_size))
                size = lfs_size;
        }
        if (size > INT64_MAX) {
            llmr_strbuf_printf(&why, "file entry %zu has a size past 2^63", i);
            goto bad;
        }
        status = file_list_add(l, path, size, sha, err);
        if (status != LLMR_OK)
            goto done;
        const char *git = json_string_value(json_object_get(e, "oid"));
        if (git && strlen(git) == 40 && strspn(git, "0123456789abcdef") == 40)
            memcpy(l->files[l->count - 1].git_oid, git, 41);
    }
    status = LLMR_OK;
    goto done;
bad:
    llmr_strbuf_printf(err, "GET %s: the Hub's file list is not what was expected: %s", url,
                       llmr_strbuf_cstr(&why));
    status = LLMR_IO;
done:
    json_decref(root);
    llmr_strbuf_free(&why);
    return status;
}

/* A file of a Hub repository read from this machine's Hugging Face cache
 * (storage/hf_cache.h) when it is there whole: its size the listed one, its SHA-256 (an
 * LFS file) or else its git blob id the listed one.  NULL when not (*len 0). */
static char *cache_read(const char *repo, const char *revision, const llmr_source_file *f,
                        size_t max_bytes, size_t *len)
{
    *len = 0;
    if (f->size > max_bytes || (!f->sha256 && !f->git_oid[0]))
        return NULL;
    char *cache_dir = llmr_hf_cache_dir();
    char *path = cache_dir ? llmr_hf_cache_find(cache_dir, repo, revision, f->path, f->sha256) : NULL;
    char *data = NULL;
    size_t n = 0;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    if (path && llmr_read_file(path, max_bytes, &data, &n, &why) == LLMR_OK && n == f->size) {
        char hex[65];
        if (f->sha256) {
            llmr_sha256 c;
            uint8_t d[32];
            llmr_sha256_init(&c);
            llmr_sha256_update(&c, data, n);
            llmr_sha256_final(&c, d);
            llmr_sha256_hex(d, hex);
        } else {
            llmr_git_blob_id(data, n, hex);
        }
        if (strcmp(hex, f->sha256 ? f->sha256 : f->git_oid) == 0) {
            *len = n;
            llmr_log_debug(COMPONENT, "%s@%s: %s read from the Hugging Face cache (%s)", repo,
                           revision, f->path, path);
        } else {
            llmr_log_warn(COMPONENT, "%s@%s: %s in the Hugging Face cache (%s) is not the listed "
                                     "file: reading it from the Hub", repo, revision, f->path, path);
            free(data);
            data = NULL;
        }
    } else if (data) {
        free(data);
        data = NULL;
    }
    llmr_strbuf_free(&why);
    free(path);
    free(cache_dir);
    return data;
}

/* Fetches a small file (or reads it from the Hugging Face cache) and sets its sha256;
 * the size must be the listed one. */
static llmr_status hash_remote(const hub *h, const char *repo, const char *revision,
                               llmr_source_file *f, llmr_strbuf *err)
{
    answer a = {0};
    size_t cached_len = 0;
    char *cached = cache_read(repo, revision, f, HASH_MAX_BYTES, &cached_len);
    if (cached) {
        char hex[65];
        llmr_sha256 c;
        uint8_t d[32];
        llmr_sha256_init(&c);
        llmr_sha256_update(&c, cached, cached_len);
        llmr_sha256_final(&c, d);
        llmr_sha256_hex(d, hex);
        free(cached);
        f->sha256 = dup_str(hex);
        if (!f->sha256) {
            llmr_strbuf_puts(err, "out of memory");
            return LLMR_OOM_RAM;
        }
        return LLMR_OK;
    }
    llmr_status status = hub_get(h, f->origin_url, HASH_MAX_BYTES, &a, err);
    if (status != LLMR_OK)
        goto done;
    if (a.code != 200) {
        status = hub_refusal(h, repo, revision, f->path, f->origin_url, &a, err);
        goto done;
    }
    if (a.body.len != f->size) {
        llmr_strbuf_printf(err, "%s@%s: %s is listed with %llu bytes but %zu came: the revision "
                                "changed while it was read; try again", repo, revision, f->path,
                           (unsigned long long)f->size, a.body.len);
        status = LLMR_IO;
        goto done;
    }
    llmr_sha256 sha;
    uint8_t digest[32];
    char hex[65];
    llmr_sha256_init(&sha);
    llmr_sha256_update(&sha, a.body.data ? a.body.data : "", a.body.len);
    llmr_sha256_final(&sha, digest);
    llmr_sha256_hex(digest, hex);
    f->sha256 = dup_str(hex);
    if (!f->sha256) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
    }
done:
    answer_free(&a);
    return status;
}

static llmr_status resolve_hub(const llmr_source_options *o, const char *repo, const char *revision,
                               llmr_source *out, llmr_strbuf *err)
{
    hub h;
    file_list l = {0};
    answer a = {0};
    char *url = NULL, *first = NULL;
    llmr_status status = hub_open(o, &h, err);
    if (status != LLMR_OK)
        return status;

    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb, "%s/api/models/%s/tree/", h.endpoint, repo);
    url_encode(&sb, revision, false);
    llmr_strbuf_puts(&sb, "?recursive=true");
    url = llmr_strbuf_take(&sb);
    first = url ? dup_str(url) : NULL;
    if (!url || !first) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    size_t skipped = 0;
    for (unsigned page = 1;; page++) {
        status = hub_get(&h, url, MAX_PAGE_BYTES, &a, err);
        if (status != LLMR_OK)
            goto done;
        if (a.code != 200) {
            status = hub_refusal(&h, repo, revision, NULL, url, &a, err);
            goto done;
        }
        status = add_tree_page(&a, url, &l, &skipped, err);
        if (status != LLMR_OK)
            goto done;
        if (a.next.len == 0)
            break;
        if (page >= MAX_PAGES) {
            llmr_strbuf_printf(err, "%s@%s: the Hub's file list runs past %u pages", repo,
                               revision, MAX_PAGES);
            status = LLMR_LIMIT_EXCEEDED;
            goto done;
        }
        char *next = next_page_url(&h, url, llmr_strbuf_cstr(&a.next), err);
        if (!next) {
            status = LLMR_IO;
            goto done;
        }
        if (strcmp(next, url) == 0 || strcmp(next, first) == 0) {
            llmr_strbuf_printf(err, "%s@%s: the Hub's next page is a page already read (%s)",
                               repo, revision, next);
            free(next);
            status = LLMR_IO;
            goto done;
        }
        free(url);
        url = next;
    }
    file_list_sort(&l);

    unsigned hashed = 0;
    for (size_t i = 0; i < l.count; i++) {
        llmr_source_file *f = &l.files[i];
        f->origin_url = resolve_url(h.endpoint, repo, revision, f->path);
        if (!f->origin_url) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto done;
        }
        if (f->sha256 || f->size > HASH_MAX_BYTES || !llmr_source_is_model_file(f->path))
            continue;
        if (hashed >= HASH_MAX_FILES) {
            llmr_log_warn(COMPONENT, "%s@%s: %s left without a sha256: more than %u small files "
                                     "to hash", repo, revision, f->path, HASH_MAX_FILES);
            continue;
        }
        hashed++;
        status = hash_remote(&h, repo, revision, f, err);
        if (status != LLMR_OK)
            goto done;
    }

    out->kind = dup_str("hf");
    out->repo = dup_str(repo);
    out->revision = dup_str(revision);
    if (!out->kind || !out->repo || !out->revision) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    out->files = l.files;
    out->count = l.count;
    memset(&l, 0, sizeof l);
    llmr_log_info(COMPONENT, "%s@%s: %zu files listed (%u hashed), %zu left out", repo, revision,
                  out->count, hashed, skipped);
    status = LLMR_OK;
done:
    file_list_free(&l);
    answer_free(&a);
    free(url);
    free(first);
    hub_close(&h);
    return status;
}

/* ---- local directories --------------------------------------------------------------- */

typedef struct walker {
    const char *root;    /* realpath of the directory */
    char *blobs;         /* a Hugging Face cache's blob store ("<cache>/blobs/"), or NULL */
    file_list list;
    size_t skipped;
} walker;

/* True when real (a realpath) lies inside the root, or in the cache's blob store. */
static bool inside(const walker *w, const char *real)
{
    size_t n = strlen(w->root);
    if (strncmp(real, w->root, n) == 0 && real[n] == '/')
        return true;
    return w->blobs && strncmp(real, w->blobs, strlen(w->blobs)) == 0;
}

/* root = ".../snapshots/REV": the blob store is ".../blobs/". */
static char *cache_blobs(const char *root)
{
    const char *last = strrchr(root, '/');
    if (!last || last == root)
        return NULL;
    const char *prev = last;
    while (prev > root && prev[-1] != '/')
        prev--;
    if ((size_t)(last - prev) != strlen("snapshots") || strncmp(prev, "snapshots", 9) != 0)
        return NULL;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_append(&sb, root, (size_t)(prev - root));
    llmr_strbuf_puts(&sb, "blobs/");
    return llmr_strbuf_take(&sb);
}

/* A file of the directory, named for the client: by its path in the directory only.
 * (The directory's real path, and where a link leads, go to the log: the client may
 * be anyone with an admin key, and the names of the router machine's other files are
 * none of its business.) */
static void put_local(llmr_strbuf *err, const char *rel)
{
    llmr_strbuf_put_display(err, rel, strlen(rel));
}

/* "the model directory" or "its subdirectory REL". */
static void put_local_dir(llmr_strbuf *err, const char *rel)
{
    if (!rel[0]) {
        llmr_strbuf_puts(err, "the model directory");
        return;
    }
    llmr_strbuf_puts(err, "the model directory's subdirectory ");
    put_local(err, rel);
}

/* Lists root/rel (rel "" for the root itself) into w->list. */
static llmr_status walk(walker *w, const char *rel, int depth, llmr_strbuf *err)
{
    llmr_status status = LLMR_OK;
    char *dir_path = rel[0] ? llmr_path_join(w->root, rel) : dup_str(w->root);
    char *child_rel = NULL, *child = NULL, *real = NULL;
    DIR *d = NULL;
    if (!dir_path) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    d = opendir(dir_path);
    if (!d) {
        int e = errno;
        llmr_log_warn(COMPONENT, "cannot read the directory %s: %s", dir_path, strerror(e));
        llmr_strbuf_puts(err, "cannot read ");
        put_local_dir(err, rel);
        llmr_strbuf_printf(err, ": %s", strerror(e));
        status = LLMR_IO;
        goto done;
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                int e = errno;
                llmr_log_warn(COMPONENT, "cannot read the directory %s: %s", dir_path, strerror(e));
                llmr_strbuf_puts(err, "cannot read ");
                put_local_dir(err, rel);
                llmr_strbuf_printf(err, ": %s", strerror(e));
                status = LLMR_IO;
            }
            break;
        }
        const char *name = de->d_name;
        if (name[0] == '.')
            continue; /* ".", "..", and hidden files: .git, .cache, ... */
        free(child_rel);
        free(child);
        free(real);
        real = NULL;
        child_rel = rel[0] ? llmr_path_join(rel, name) : dup_str(name);
        child = child_rel ? llmr_path_join(w->root, child_rel) : NULL;
        if (!child) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            break;
        }
        if (!path_usable(child_rel)) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            llmr_strbuf_put_display(&sb, child_rel, strlen(child_rel));
            llmr_log_warn(COMPONENT, "%s: left out \"%s\": no node could store a file of that "
                                     "name", w->root, llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
            w->skipped++;
            continue;
        }
        struct stat st;
        if (lstat(child, &st) != 0) {
            if (errno == ENOENT)
                continue; /* removed while listed */
            llmr_strbuf_puts(err, "cannot stat ");
            put_local(err, child_rel);
            llmr_strbuf_printf(err, ": %s", strerror(errno));
            status = LLMR_IO;
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            real = realpath(child, NULL);
            if (!real) {
                put_local(err, child_rel);
                llmr_strbuf_printf(err, " is a symbolic link to nothing (%s): remove it, or "
                                        "finish the download it belongs to", strerror(errno));
                status = LLMR_INVALID_ARGUMENT;
                break;
            }
            if (!inside(w, real)) {
                llmr_strbuf sb = LLMR_STRBUF_INIT;
                llmr_strbuf_put_display(&sb, real, strlen(real));
                llmr_log_warn(COMPONENT, "%s: refused: a symbolic link out of the directory, to %s",
                              child, llmr_strbuf_cstr(&sb));
                llmr_strbuf_free(&sb);
                put_local(err, child_rel);
                llmr_strbuf_puts(err, " is a symbolic link that leaves the directory: "
                                      "refused; copy the file into the directory instead");
                status = LLMR_INVALID_ARGUMENT;
                break;
            }
            if (stat(child, &st) != 0) {
                put_local(err, child_rel);
                llmr_strbuf_printf(err, ": cannot stat the link's target: %s", strerror(errno));
                status = LLMR_IO;
                break;
            }
            if (!S_ISREG(st.st_mode)) {
                llmr_log_warn(COMPONENT, "%s/%s: left out: a link to something other than a "
                                         "file", w->root, child_rel);
                w->skipped++;
                continue;
            }
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth >= MAX_DEPTH) {
                put_local(err, child_rel);
                llmr_strbuf_printf(err, ": directories nest deeper than %d levels", MAX_DEPTH);
                status = LLMR_LIMIT_EXCEEDED;
                break;
            }
            status = walk(w, child_rel, depth + 1, err);
            if (status != LLMR_OK)
                break;
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            w->skipped++; /* sockets, pipes, devices */
            continue;
        }
        status = file_list_add(&w->list, child_rel, (uint64_t)st.st_size, NULL, err);
        if (status != LLMR_OK) {
            if (status == LLMR_LIMIT_EXCEEDED)
                llmr_strbuf_puts(err, " (in the model directory)");
            break;
        }
    }
done:
    if (d)
        closedir(d);
    free(dir_path);
    free(child_rel);
    free(child);
    free(real);
    return status;
}

static llmr_status resolve_local(const llmr_source_options *o, const char *source,
                                 llmr_source *out, llmr_strbuf *err)
{
    walker w = {0};
    char *root = realpath(source, NULL);
    llmr_status status = LLMR_OK;
    if (!root) {
        int e = errno;
        llmr_strbuf_puts(err, "the directory ");
        put_quoted(err, source);
        if (e == ENOENT || e == ENOTDIR) {
            llmr_strbuf_puts(err, " does not exist");
            return LLMR_NOT_FOUND;
        }
        llmr_strbuf_printf(err, " cannot be read: %s", strerror(e));
        return LLMR_IO;
    }
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        put_quoted(err, source);
        llmr_strbuf_puts(err, " is not a directory: give the directory that holds the model's "
                              "files");
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    if (strcmp(root, "/") == 0) {
        llmr_strbuf_puts(err, "\"/\" is not a model directory: give the directory that holds "
                              "the model's files");
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    w.root = root;
    w.blobs = cache_blobs(root);
    status = walk(&w, "", 0, err);
    if (status != LLMR_OK)
        goto done;
    file_list_sort(&w.list);
    bool hash = !o || o->hash_local;
    for (size_t i = 0; hash && i < w.list.count; i++) {
        llmr_source_file *f = &w.list.files[i];
        char hex[65];
        if (!llmr_source_is_model_file(f->path))
            continue; /* no manifest takes it: not read at all (a directory like /etc costs a walk) */
        char *full = llmr_path_join(root, f->path);
        bool sample = f->size > LLMR_SOURCE_HASH_MAX;
        uint64_t size = f->size;
        /* (the walk admitted links into a Hugging Face cache's blobs: follow them) */
        int fd = full ? open(full, O_RDONLY | O_CLOEXEC) : -1;
        int rc = fd < 0 ? -1
                 : sample ? llmr_file_sample_sha256_fd(fd, size, hex)
                          : llmr_sha256_fd(fd, hex);
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(full);
        if (rc != 0) {
            put_local(err, f->path);
            llmr_strbuf_printf(err, ": cannot read it to hash it: %s",
                               full ? strerror(e) : "out of memory");
            status = LLMR_IO;
            goto done;
        }
        char **slot = sample ? &f->sample_sha256 : &f->sha256;
        *slot = dup_str(hex);
        if (!*slot) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto done;
        }
    }
    out->kind = dup_str("local");
    if (!out->kind) {
        llmr_strbuf_puts(err, "out of memory");
        status = LLMR_OOM_RAM;
        goto done;
    }
    out->dir = root;
    root = NULL;
    out->files = w.list.files;
    out->count = w.list.count;
    memset(&w.list, 0, sizeof w.list);
    if (w.skipped)
        llmr_log_info(COMPONENT, "%s: %zu files listed, %zu left out", out->dir, out->count,
                      w.skipped);
done:
    file_list_free(&w.list);
    free(w.blobs);
    free(root);
    return status;
}

/* ---- resolve ------------------------------------------------------------------------- */

/* "org/name" or "org/name@rev" (n bytes of text) into *repo and *revision. */
static llmr_status parse_repo_id(const char *text, size_t n, char **repo, char **revision,
                                 const char *source, llmr_strbuf *err)
{
    const char *at = memchr(text, '@', n);
    size_t id_len = at ? (size_t)(at - text) : n;
    if (!repo_id_valid(text, id_len)) {
        put_quoted(err, source);
        llmr_strbuf_printf(err, " is not a Hugging Face repository id: it must be \"org/name\" "
                                "(letters, digits, '.', '_', '-'; at most %d each, no \"..\"), "
                                "or an absolute directory", REPO_PART_MAX);
        return LLMR_INVALID_ARGUMENT;
    }
    *repo = dup_len(text, id_len);
    *revision = at ? dup_len(at + 1, n - id_len - 1) : dup_str("main");
    if (!*repo || !*revision) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    return LLMR_OK;
}

/* https://huggingface.co/org/name[/tree/REV][/] (or the endpoint's host). */
static llmr_status parse_hub_url(const char *source, const char *endpoint_host, char **repo,
                                 char **revision, llmr_strbuf *err)
{
    char host[256];
    if (!llmr_url_http_host(source, host, sizeof host) ||
        !(strcmp(host, "huggingface.co") == 0 || strcmp(host, "www.huggingface.co") == 0 ||
          strcmp(host, "hf.co") == 0 || (endpoint_host && strcmp(host, endpoint_host) == 0))) {
        put_quoted(err, source);
        llmr_strbuf_puts(err, " is not a Hugging Face URL (https://huggingface.co/org/name): "
                              "give a repository id, a Hub URL or an absolute directory");
        return LLMR_INVALID_ARGUMENT;
    }
    const char *p = strstr(source, "://") + 3;
    p += strcspn(p, "/?#");
    size_t n = strcspn(p, "?#");
    while (n > 0 && p[n - 1] == '/')
        n--;
    /* p[0, n): "/org/name", "/org/name/tree/REV" */
    const char *parts[5];
    size_t lens[5], count = 0;
    for (size_t i = 0; i < n && count < 5;) {
        if (p[i] == '/') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && p[j] != '/')
            j++;
        parts[count] = p + i;
        lens[count] = j - i;
        count++;
        i = j;
    }
    if (count >= 1 && ((lens[0] == 8 && strncmp(parts[0], "datasets", 8) == 0) ||
                       (lens[0] == 6 && strncmp(parts[0], "spaces", 6) == 0))) {
        put_quoted(err, source);
        llmr_strbuf_puts(err, " is a dataset or a Space, not a model repository");
        return LLMR_INVALID_ARGUMENT;
    }
    bool tree = count == 4 && lens[2] == 4 && strncmp(parts[2], "tree", 4) == 0;
    if (!(count == 2 || tree)) {
        put_quoted(err, source);
        llmr_strbuf_puts(err, " is not the URL of a model repository: it should be "
                              "https://huggingface.co/org/name or .../org/name/tree/REVISION");
        return LLMR_INVALID_ARGUMENT;
    }
    size_t id_len = (size_t)(parts[1] + lens[1] - parts[0]);
    if (!repo_id_valid(parts[0], id_len)) {
        put_quoted(err, source);
        llmr_strbuf_puts(err, " does not name a valid repository id (\"org/name\")");
        return LLMR_INVALID_ARGUMENT;
    }
    *repo = dup_len(parts[0], id_len);
    *revision = tree ? url_decode(parts[3], lens[3]) : dup_str("main");
    if (!*repo || !*revision) {
        if (*repo && tree) {
            put_quoted(err, source);
            llmr_strbuf_puts(err, ": the revision has a bad %-escape");
            return LLMR_INVALID_ARGUMENT;
        }
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    return LLMR_OK;
}

llmr_status llmr_source_resolve(const llmr_source_options *o, const char *source, llmr_source *out,
                                llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    char *repo = NULL, *revision = NULL;
    llmr_status status;
    if (!source || !source[0]) {
        llmr_strbuf_puts(err, "no source given: name a Hugging Face repository (\"org/name\") "
                              "or an absolute directory");
        return LLMR_INVALID_ARGUMENT;
    }
    if (strlen(source) > MAX_PATH_BYTES) {
        llmr_strbuf_printf(err, "the source is longer than %d bytes", MAX_PATH_BYTES);
        return LLMR_INVALID_ARGUMENT;
    }
    if (source[0] == '/') {
        status = resolve_local(o, source, out, err);
        goto done;
    }
    if (strncmp(source, "hf://", 5) == 0) {
        status = parse_repo_id(source + 5, strlen(source + 5), &repo, &revision, source, err);
    } else if (strncasecmp(source, "https://", 8) == 0 || strncasecmp(source, "http://", 7) == 0) {
        /* The endpoint's host is a Hub too (a mirror, or a test's). */
        char endpoint_host[256];
        const char *endpoint = o && o->hf_endpoint ? o->hf_endpoint : getenv("HF_ENDPOINT");
        bool has_host = endpoint && endpoint[0] &&
                        llmr_url_http_host(endpoint, endpoint_host, sizeof endpoint_host);
        status = parse_hub_url(source, has_host ? endpoint_host : NULL, &repo, &revision, err);
    } else {
        size_t n = strlen(source);
        const char *slash = strchr(source, '/');
        bool one_slash = slash && !strchr(slash + 1, '/');
        if (!one_slash || source[0] == '.' || source[0] == '~') {
            put_quoted(err, source);
            llmr_strbuf_puts(err, " is neither a Hugging Face repository id (\"org/name\") nor an "
                                  "absolute directory: a local directory must be given as an "
                                  "absolute path");
            status = LLMR_INVALID_ARGUMENT;
            goto done;
        }
        status = parse_repo_id(source, n, &repo, &revision, source, err);
    }
    if (status != LLMR_OK)
        goto done;
    if (!revision_valid(revision)) {
        llmr_strbuf_puts(err, "the revision ");
        put_quoted(err, revision);
        llmr_strbuf_printf(err, " is not a branch, tag or commit name llmr accepts: letters, "
                                "digits, '.', '_', '-', '+', and '/' between parts; no \"..\"; at "
                                "most %d bytes", REVISION_MAX);
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    status = resolve_hub(o, repo, revision, out, err);
done:
    if (status != LLMR_OK)
        llmr_source_free(out);
    free(repo);
    free(revision);
    return status;
}

/* ---- one file ------------------------------------------------------------------------ */

llmr_status llmr_source_read(const llmr_source_options *o, const llmr_source *s, const char *path,
                             size_t max_bytes, char **data, size_t *len, llmr_strbuf *err)
{
    *data = NULL;
    *len = 0;
    const llmr_source_file *f = llmr_source_find(s, path);
    if (!f) {
        put_quoted(err, path);
        llmr_strbuf_puts(err, " is not a file of this source");
        return LLMR_NOT_FOUND;
    }
    if (f->size > max_bytes) {
        llmr_strbuf_printf(err, "%s is %llu bytes, more than the limit of %zu", f->path,
                           (unsigned long long)f->size, max_bytes);
        return LLMR_LIMIT_EXCEEDED;
    }
    if (s->dir) {
        char *full = llmr_path_join(s->dir, f->path);
        if (!full) {
            llmr_strbuf_puts(err, "out of memory");
            return LLMR_OOM_RAM;
        }
        llmr_strbuf why = LLMR_STRBUF_INIT;
        llmr_status status = llmr_read_file(full, max_bytes, data, len, &why);
        if (status != LLMR_OK) { /* the callers name the file; its real path is for the log */
            llmr_log_warn(COMPONENT, "%s: %s", full, llmr_strbuf_cstr(&why));
            llmr_strbuf_puts(err, llmr_strbuf_cstr(&why));
        }
        llmr_strbuf_free(&why);
        free(full);
        return status;
    }
    if (!f->origin_url || !s->repo || !s->revision) {
        llmr_strbuf_printf(err, "%s has no URL to read it from", f->path);
        return LLMR_INVALID_ARGUMENT;
    }
    if ((*data = cache_read(s->repo, s->revision, f, max_bytes, len)) != NULL)
        return LLMR_OK;
    hub h;
    llmr_status status = hub_open(o, &h, err);
    if (status != LLMR_OK)
        return status;
    answer a = {0};
    status = hub_get(&h, f->origin_url, max_bytes, &a, err);
    if (status == LLMR_OK && a.code != 200)
        status = hub_refusal(&h, s->repo, s->revision, f->path, f->origin_url, &a, err);
    if (status == LLMR_OK) {
        *len = a.body.len;
        *data = llmr_strbuf_take(&a.body);
        if (!*data) {
            *len = 0;
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
        }
    }
    answer_free(&a);
    hub_close(&h);
    return status;
}
