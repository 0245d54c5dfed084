/* One streamed completion of `llmr bench serve`: libcurl's easy interface on the calling
 * thread, server-sent events parsed line by line as bytes arrive (bench_serve_stream.h). */
#include "cli/bench_serve_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/clock.h"
#include "common/utf8.h"
#include "net/curl_handle.h"

#define LINE_MAX_BYTES (1u << 20)

typedef struct parse {
    bss_result *r;
    char *line;
    size_t len, cap;
    uint64_t last_ns;
    uint32_t gaps_cap;
    bool done, error_event, overflow;
    char head[2048]; /* the body's first bytes, for the message of an error answer */
    size_t head_len;
} parse;

/* Replaces each ill-formed UTF-8 sequence of s (an error answer's raw bytes, or a message
 * cut mid-character by the buffer) with '?', in place, so that the report's JSON can
 * carry it. */
static void make_utf8(char *s)
{
    size_t n = strlen(s), out = 0;
    for (size_t i = 0; i < n;) {
        size_t len = llmr_utf8_char_len((const unsigned char *)s + i, n - i);
        if (len) {
            memmove(s + out, s + i, len);
            out += len;
            i += len;
        } else {
            s[out++] = '?';
            i += llmr_utf8_invalid_len((const unsigned char *)s + i, n - i);
        }
    }
    s[out] = '\0';
}

static void set_error(bss_result *r, const char *fmt, const char *what)
{
    if (!r->error[0])
        snprintf(r->error, sizeof r->error, fmt, what);
}

static void token_chunk(parse *p, uint64_t now)
{
    bss_result *r = p->r;
    if (!r->first_ns) {
        r->first_ns = now;
    } else {
        if (r->n_gaps == p->gaps_cap) {
            uint32_t n = p->gaps_cap ? p->gaps_cap * 2 : 256;
            uint64_t *g = realloc(r->gaps_ns, n * sizeof *g);
            if (!g)
                return;
            r->gaps_ns = g;
            p->gaps_cap = n;
        }
        r->gaps_ns[r->n_gaps++] = now - p->last_ns;
    }
    p->last_ns = now;
    r->chunks++;
}

/* One complete SSE line. */
static void on_line(parse *p, const char *line, uint64_t now)
{
    if (strncmp(line, "data: ", 6) != 0)
        return;
    const char *data = line + 6;
    if (strcmp(data, "[DONE]") == 0) {
        p->done = true;
        return;
    }
    json_t *chunk = json_loads(data, 0, NULL);
    if (!chunk)
        return;
    json_t *error = json_object_get(chunk, "error");
    if (error) {
        p->error_event = true;
        const char *msg = json_string_value(json_object_get(error, "message"));
        set_error(p->r, "error event: %s", msg ? msg : "(no message)");
    }
    json_t *choices = json_object_get(chunk, "choices");
    json_t *first = json_array_get(choices, 0);
    const char *text = json_string_value(json_object_get(first, "text"));
    if (text && text[0])
        token_chunk(p, now);
    json_t *usage = json_object_get(chunk, "usage");
    if (json_is_object(usage)) {
        p->r->prompt_tokens = (uint32_t)json_integer_value(json_object_get(usage, "prompt_tokens"));
        p->r->completion_tokens =
            (uint32_t)json_integer_value(json_object_get(usage, "completion_tokens"));
    }
    json_decref(chunk);
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
    parse *p = user;
    size_t n = size * nmemb;
    uint64_t now = llmr_now_ns();
    size_t keep = sizeof p->head - 1 - p->head_len;
    keep = n < keep ? n : keep;
    memcpy(p->head + p->head_len, data, keep);
    p->head_len += keep;
    p->head[p->head_len] = '\0';
    for (size_t i = 0; i < n; i++) {
        char c = data[i];
        if (c == '\n') {
            if (p->len && p->line[p->len - 1] == '\r')
                p->len--;
            if (p->line) {
                p->line[p->len] = '\0';
                on_line(p, p->line, now);
            }
            p->len = 0;
            continue;
        }
        if (p->len + 2 > p->cap) {
            if (p->cap >= LINE_MAX_BYTES) {
                p->overflow = true;
                return 0; /* abort: no event is that long */
            }
            size_t cap = p->cap ? p->cap * 2 : 4096;
            char *l = realloc(p->line, cap);
            if (!l)
                return 0;
            p->line = l;
            p->cap = cap;
        }
        p->line[p->len++] = c;
    }
    return n;
}

void bss_run(const char *url, const char *key, const char *body, unsigned timeout_s, bss_result *r)
{
    memset(r, 0, sizeof *r);
    parse p = {.r = r};
    CURL *curl = llmr_curl_new();
    if (!curl) {
        set_error(r, "%s", "curl_easy_init failed");
        return;
    }
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[512];
    if (key && key[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
    r->start_ns = llmr_now_ns();
    CURLcode rc = curl_easy_perform(curl);
    r->end_ns = llmr_now_ns();
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    if (rc != CURLE_OK)
        set_error(r, "%s", p.overflow ? "an event line over 1 MiB" : curl_easy_strerror(rc));
    else if (r->status != 200) {
        json_t *answer = json_loads(p.head, 0, NULL);
        const char *msg = json_string_value(json_object_get(json_object_get(answer, "error"), "message"));
        snprintf(r->error, sizeof r->error, "HTTP %ld: %.120s", r->status, msg ? msg : p.head);
        json_decref(answer);
    }
    else if (!p.done)
        set_error(r, "%s", "the stream ended without [DONE]");
    make_utf8(r->error);
    r->ok = rc == CURLE_OK && r->status == 200 && p.done && !p.error_event;
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    free(p.line);
}

void bss_result_free(bss_result *r)
{
    free(r->gaps_ns);
    r->gaps_ns = NULL;
}
