/* A streamed chat completion for `llmr run MODEL`: see chat_stream.h. */
#include "cli/chat_stream.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "net/curl_handle.h"

typedef struct stream_state {
    CURL *h;
    llmr_strbuf pending; /* bytes of a line not yet complete; the whole body when not 200 */
    long status;
    llmr_chat_piece_fn piece;
    void *user;
    volatile sig_atomic_t *stop;
    llmr_chat_outcome *out;
} stream_state;

static void set_error(llmr_chat_outcome *out, const json_t *err, const char *fallback)
{
    const char *m = json_string_value(json_object_get(err, "message"));
    snprintf(out->error, sizeof out->error, "%s", m && *m ? m : fallback);
}

/* One "data: ..." event: a chunk, an error, or the end. */
static void on_event(stream_state *s, const char *data, size_t n)
{
    if (n == 6 && !memcmp(data, "[DONE]", 6))
        return;
    json_t *chunk = json_loadb(data, n, 0, NULL);
    const json_t *err = json_object_get(chunk, "error");
    if (err) {
        set_error(s->out, err, "the stream ended with an error");
    } else {
        const json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
        const json_t *delta = json_object_get(choice, "delta");
        const char *reasoning = json_string_value(json_object_get(delta, "reasoning_content"));
        if (!reasoning)
            reasoning = json_string_value(json_object_get(delta, "reasoning"));
        const char *content = json_string_value(json_object_get(delta, "content"));
        const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
        if (reasoning && *reasoning)
            s->piece(s->user, true, reasoning, strlen(reasoning));
        if (content && *content)
            s->piece(s->user, false, content, strlen(content));
        if (finish)
            snprintf(s->out->finish, sizeof s->out->finish, "%s", finish);
    }
    json_decref(chunk);
}

static size_t on_body(char *data, size_t size, size_t count, void *user)
{
    stream_state *s = user;
    size_t n = size * count;
    if (!s->status)
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
    if (!llmr_strbuf_append(&s->pending, data, n))
        return 0;
    if (s->status != 200)
        return n; /* an error body, read whole */
    size_t start = 0;
    for (size_t i = 0; i < s->pending.len; i++) {
        if (s->pending.data[i] != '\n')
            continue;
        const char *line = s->pending.data + start;
        size_t len = i - start;
        if (len && line[len - 1] == '\r')
            len--;
        if (len >= 5 && !memcmp(line, "data:", 5)) {
            size_t skip = len > 5 && line[5] == ' ' ? 6 : 5;
            on_event(s, line + skip, len - skip);
        }
        start = i + 1;
    }
    memmove(s->pending.data, s->pending.data + start, s->pending.len - start);
    s->pending.len -= start;
    s->pending.data[s->pending.len] = 0;
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    stream_state *s = user;
    return s->stop && *s->stop ? 1 : 0;
}

bool llmr_chat_stream(const llmr_router_client *c, json_t *body, volatile sig_atomic_t *stop, llmr_chat_piece_fn piece,
                      void *user, llmr_chat_outcome *out)
{
    memset(out, 0, sizeof *out);
    static bool curl_ready;
    if (!curl_ready && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "llmr %s: libcurl could not start\n", c->cmd);
        return false;
    }
    curl_ready = true;
    json_object_set_new(body, "stream", json_true());
    char *json = json_dumps(body, JSON_COMPACT);
    llmr_strbuf url = LLMR_STRBUF_INIT, auth = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&url, "%s/v1/chat/completions", c->url);
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: text/event-stream");
    headers = curl_slist_append(headers, "Content-Type: application/json");
    if (c->key) {
        llmr_strbuf_printf(&auth, "Authorization: Bearer %s", c->key);
        headers = curl_slist_append(headers, llmr_strbuf_cstr(&auth));
    }
    stream_state s = {.pending = LLMR_STRBUF_INIT, .piece = piece, .user = user, .stop = stop, .out = out};
    s.h = llmr_curl_new();
    char detail[CURL_ERROR_SIZE] = "";
    bool answered = false;
    if (!s.h || !json || !headers || llmr_strbuf_failed(&url) || llmr_strbuf_failed(&auth)) {
        fprintf(stderr, "llmr %s: out of memory\n", c->cmd);
        goto done;
    }
    curl_easy_setopt(s.h, CURLOPT_URL, llmr_strbuf_cstr(&url));
    curl_easy_setopt(s.h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(s.h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(s.h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
    curl_easy_setopt(s.h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(s.h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(s.h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(s.h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(s.h, CURLOPT_XFERINFODATA, &s);
    curl_easy_setopt(s.h, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(s.h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s.h, CURLOPT_CONNECTTIMEOUT, 10L);
    CURLcode rc = curl_easy_perform(s.h);
    if (!s.status)
        curl_easy_getinfo(s.h, CURLINFO_RESPONSE_CODE, &s.status);
    out->status = s.status;
    if (rc == CURLE_ABORTED_BY_CALLBACK && stop && *stop) {
        out->stopped = true;
        answered = true;
    } else if (rc != CURLE_OK && !s.status) {
        llmr_router_print_unreachable(c, (int)rc, detail[0] ? detail : curl_easy_strerror(rc), 0);
    } else {
        answered = true;
        if (rc != CURLE_OK && !out->error[0])
            snprintf(out->error, sizeof out->error, "the answer was cut off: %s",
                     detail[0] ? detail : curl_easy_strerror(rc));
        if (s.status != 200) {
            json_t *j = json_loadb(s.pending.len ? s.pending.data : "", s.pending.len, 0, NULL);
            char fallback[320];
            snprintf(fallback, sizeof fallback, "%.*s", (int)(s.pending.len < 300 ? s.pending.len : 300),
                     s.pending.len ? s.pending.data : "");
            set_error(out, json_object_get(j, "error"), fallback[0] ? fallback : "(no message)");
            json_decref(j);
        }
    }
done:
    if (s.h)
        curl_easy_cleanup(s.h);
    curl_slist_free_all(headers);
    llmr_strbuf_free(&url);
    llmr_strbuf_free(&auth);
    llmr_strbuf_free(&s.pending);
    free(json);
    return answered;
}
