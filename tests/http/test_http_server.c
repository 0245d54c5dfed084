/* Tests of the HTTP server, with libcurl as the client against a server on
 * 127.0.0.1 and a port it picks: whole requests and replies, a path encoding a NUL
 * (400), the body limit (413, declared and streamed), a handler that does not reply, streamed responses written
 * from another thread, clients that leave mid-stream, stopping with a stream open,
 * and an address in use. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "check.h"
#include "common/strbuf.h"
#include "http/http_server.h"

#define WAIT_MS 5000 /* how long a test waits for something that should happen */

/* ---- the server's side: one handler, state shared with the tests ------------------ */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int handled;               /* handler calls */
    llmr_http_stream *stream;  /* the last stream /stream started */
    int closes;                /* on_close calls */
    bool end_in_close;         /* on_close ends the stream itself */
    size_t received;           /* stream bytes the client got */
    int pieces;                /* client write callbacks with stream bytes */
    bool abort_after_first;    /* the client hangs up after its first bytes */
    int done;                  /* on_done calls (a server with the record) */
    llmr_http_done last;       /* the last record: strings copied below */
    char rid[80], path[64], model[32];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void reset_state(void)
{
    pthread_mutex_lock(&g.lock);
    g.handled = 0;
    g.stream = NULL;
    g.closes = 0;
    g.end_in_close = false;
    g.received = 0;
    g.pieces = 0;
    g.abort_after_first = false;
    g.done = 0;
    pthread_mutex_unlock(&g.lock);
}

static void on_done(void *user, const llmr_http_done *d)
{
    (void)user;
    pthread_mutex_lock(&g.lock);
    g.done++;
    g.last = *d;
    snprintf(g.rid, sizeof g.rid, "%s", d->request_id ? d->request_id : "");
    snprintf(g.path, sizeof g.path, "%s", d->path ? d->path : "");
    snprintf(g.model, sizeof g.model, "%s", d->model ? d->model : "");
    g.last.request_id = g.rid;
    g.last.path = g.path;
    g.last.model = g.model;
    g.last.node = g.last.key_id = g.last.response_id = g.last.error = g.last.method = NULL;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
}

static void on_stream_close(void *user)
{
    (void)user;
    pthread_mutex_lock(&g.lock);
    g.closes++;
    llmr_http_stream *s = g.end_in_close ? g.stream : NULL;
    if (s)
        g.stream = NULL;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    if (s)
        llmr_http_stream_end(s);
}

static void handler(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    (void)user;
    pthread_mutex_lock(&g.lock);
    g.handled++;
    pthread_mutex_unlock(&g.lock);
    if (strcmp(req->path, "/noreply") == 0)
        return;
    if (strcmp(req->path, "/noted") == 0) {
        llmr_http_reply_note(reply, &(llmr_http_note){.model = "m1", .usage = true, .prompt_tokens = 3,
                                                      .completion_tokens = 4, .ttft_ms = 1.5});
        llmr_http_reply_text(reply, 200, "text/plain", req->request_id, strlen(req->request_id));
        return;
    }
    if (strcmp(req->path, "/text") == 0) {
        llmr_http_reply_text(reply, 201, "text/plain", "made", 4);
        return;
    }
    if (strcmp(req->path, "/stream") == 0) {
        llmr_http_reply_header(reply, "X-Stream", "1");
        llmr_http_stream *s = llmr_http_reply_stream(reply, 200, "text/event-stream",
                                                     on_stream_close, NULL);
        pthread_mutex_lock(&g.lock);
        g.stream = s;
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        return;
    }
    /* Anything else: the request echoed back as JSON. */
    const char *h = llmr_http_request_header(req, "x-test");
    json_t *echo = json_pack("{s:s, s:s, s:s, s:s%, s:I, s:s?, s:s}", "method", req->method,
                             "path", req->path, "query", req->query, "body", req->body,
                             req->body_len, "body_len", (json_int_t)req->body_len, "x_test", h,
                             "remote", req->remote);
    llmr_http_reply_header(reply, "X-Reply", "yes");
    llmr_http_reply_json(reply, 200, echo);
}

static size_t next_queue_max; /* the next server's stream_queue_max (0: the default) */

static llmr_http_server *start_server_with(size_t max_body, llmr_http_done_fn done)
{
    llmr_http_server_options o;
    llmr_http_server_options_default(&o);
    o.stream_queue_max = next_queue_max;
    o.on_done = done;
    o.service = done ? "test" : NULL;
    o.host = "127.0.0.1";
    o.port = 0;
    if (max_body)
        o.max_body = max_body;
    o.handler = handler;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_http_server *s = NULL;
    llmr_status st = llmr_http_server_start(&o, &s, &err);
    if (st != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "server start: %s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return s;
}

static llmr_http_server *start_server(size_t max_body)
{
    return start_server_with(max_body, NULL);
}


/* Waits (up to WAIT_MS) until *flag reaches at least want; g.lock is held. */
static bool wait_count_locked(const int *flag, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    while (*flag < want) {
        if (pthread_cond_timedwait(&g.cond, &g.lock, &until) != 0)
            return *flag >= want;
    }
    return true;
}

static bool wait_done(int want)
{
    return wait_count_locked(&g.done, want);
}

static bool wait_received(size_t want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&g.lock);
    while (g.received < want && pthread_cond_timedwait(&g.cond, &g.lock, &until) == 0) {
    }
    bool ok = g.received >= want;
    pthread_mutex_unlock(&g.lock);
    return ok;
}

static llmr_http_stream *wait_stream(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&g.lock);
    while (!g.stream && pthread_cond_timedwait(&g.cond, &g.lock, &until) == 0) {
    }
    llmr_http_stream *s = g.stream;
    pthread_mutex_unlock(&g.lock);
    return s;
}

static int closes_now(void)
{
    pthread_mutex_lock(&g.lock);
    int n = g.closes;
    pthread_mutex_unlock(&g.lock);
    return n;
}

static bool wait_closes(int want)
{
    pthread_mutex_lock(&g.lock);
    bool ok = wait_count_locked(&g.closes, want);
    pthread_mutex_unlock(&g.lock);
    return ok;
}

static int handled_now(void)
{
    pthread_mutex_lock(&g.lock);
    int n = g.handled;
    pthread_mutex_unlock(&g.lock);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* ---- the client: libcurl -------------------------------------------------------- */

enum { CHUNKED = 1, NO_EXPECT = 2, EXPECT = 4, STREAMING = 8 };

typedef struct fetch_result {
    CURLcode rc;
    long status;
    llmr_strbuf body;
    llmr_strbuf headers;
} fetch_result;

typedef struct upload {
    const char *data;
    size_t len, off;
} upload;

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    llmr_strbuf_append(ctx, p, size * n);
    return size * n;
}

/* A streaming client's body callback: counts what arrived, for the producer. */
static size_t on_stream_body(char *p, size_t size, size_t n, void *ctx)
{
    llmr_strbuf_append(ctx, p, size * n);
    pthread_mutex_lock(&g.lock);
    g.received += size * n;
    g.pieces++;
    bool hang_up = g.abort_after_first;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    return hang_up ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    llmr_strbuf_append(ctx, p, size * n);
    return size * n;
}

/* In pieces of at most 1000 bytes, so a chunked upload has several chunks. */
static size_t on_upload(char *p, size_t size, size_t n, void *ctx)
{
    upload *u = ctx;
    size_t room = size * n, left = u->len - u->off;
    size_t k = left < room ? left : room;
    if (k > 1000)
        k = 1000;
    memcpy(p, u->data + u->off, k);
    u->off += k;
    return k;
}

static void fetch(CURL *reuse, unsigned port, const char *method, const char *path,
                  const char *body, size_t len, unsigned flags, const char *header,
                  fetch_result *out)
{
    memset(out, 0, sizeof *out);
    CURL *c = reuse ? reuse : curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, (flags & STREAMING) ? on_stream_body : on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &out->headers);
    struct curl_slist *hs = NULL;
    if (header)
        hs = curl_slist_append(hs, header);
    if (flags & NO_EXPECT)
        hs = curl_slist_append(hs, "Expect:");
    if (flags & EXPECT)
        hs = curl_slist_append(hs, "Expect: 100-continue");
    upload up = {body, len, 0};
    if (body && (flags & CHUNKED)) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
        hs = curl_slist_append(hs, "Transfer-Encoding: chunked");
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    out->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hs);
    if (!reuse)
        curl_easy_cleanup(c);
}

static void fetch_free(fetch_result *r)
{
    llmr_strbuf_free(&r->body);
    llmr_strbuf_free(&r->headers);
}

/* A response header's value (the last one of that name), copied into buf. */
static const char *header_of(const fetch_result *r, const char *name, char *buf, size_t cap)
{
    const char *p = llmr_strbuf_cstr(&r->headers);
    const char *found = NULL;
    size_t n = strlen(name);
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t line = eol ? (size_t)(eol - p) : strlen(p);
        if (line > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(p + line - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            found = buf;
        }
        p += line + (eol ? 1 : 0);
    }
    return found;
}

static json_t *body_json(const fetch_result *r)
{
    return json_loadb(r->body.data ? r->body.data : "", r->body.len, JSON_ALLOW_NUL, NULL);
}

static const char *jstr(json_t *obj, const char *path1, const char *path2)
{
    json_t *v = json_object_get(obj, path1);
    if (path2)
        v = json_object_get(v, path2);
    return json_string_value(v);
}

/* Checks an OpenAI-style error body with this status, type and code. */
static void check_error(const fetch_result *r, long status, const char *type, const char *code)
{
    CHECK_EQ_INT(r->rc, CURLE_OK);
    CHECK_EQ_INT(r->status, status);
    char ct[128];
    CHECK_EQ_STR(header_of(r, "Content-Type", ct, sizeof ct), "application/json");
    json_t *j = body_json(r);
    CHECK(j != NULL);
    CHECK_EQ_STR(jstr(j, "error", "type"), type);
    CHECK_EQ_STR(jstr(j, "error", "code"), code);
    CHECK(json_is_string(json_object_get(json_object_get(j, "error"), "message")));
    CHECK(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
    json_decref(j);
}

/* The server answers a plain request (after something that may have hurt it). */
static void check_still_serving(unsigned port)
{
    fetch_result r;
    fetch(NULL, port, "GET", "/alive", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.rc, CURLE_OK);
    CHECK_EQ_INT(r.status, 200);
    json_t *j = body_json(&r);
    CHECK_EQ_STR(jstr(j, "path", NULL), "/alive");
    json_decref(j);
    fetch_free(&r);
}

/* ---- whole requests --------------------------------------------------------------- */

TEST(post_json_round_trip_with_body_query_and_headers)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    unsigned port = llmr_http_server_port(srv);
    CHECK(port > 0);
    CURL *c = curl_easy_init();
    const char *body = "{\"model\":\"m\",\"x\":[1,2,3]}";
    fetch_result r;
    fetch(c, port, "POST", "/v1/chat/completions?stream=true&a=b%20c", body, strlen(body), 0,
          "X-Test: hello there", &r);
    CHECK_EQ_INT(r.rc, CURLE_OK);
    CHECK_EQ_INT(r.status, 200);
    char buf[128];
    CHECK_EQ_STR(header_of(&r, "content-type", buf, sizeof buf), "application/json");
    CHECK_EQ_STR(header_of(&r, "X-Reply", buf, sizeof buf), "yes");
    json_t *j = body_json(&r);
    CHECK(j != NULL);
    CHECK_EQ_STR(jstr(j, "method", NULL), "POST");
    CHECK_EQ_STR(jstr(j, "path", NULL), "/v1/chat/completions");
    CHECK_EQ_STR(jstr(j, "query", NULL), "stream=true&a=b%20c");
    CHECK_EQ_STR(jstr(j, "body", NULL), body);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "body_len")), strlen(body));
    CHECK_EQ_STR(jstr(j, "x_test", NULL), "hello there");
    CHECK_EQ_STR(jstr(j, "remote", NULL), "127.0.0.1");
    json_decref(j);
    fetch_free(&r);

    /* The same connection again: a GET with no body, no query, no such header. */
    fetch(c, port, "GET", "/v1/models", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    j = body_json(&r);
    CHECK_EQ_STR(jstr(j, "method", NULL), "GET");
    CHECK_EQ_STR(jstr(j, "path", NULL), "/v1/models");
    CHECK_EQ_STR(jstr(j, "query", NULL), "");
    CHECK_EQ_STR(jstr(j, "body", NULL), "");
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "body_len")), 0);
    CHECK(json_is_null(json_object_get(j, "x_test")));
    json_decref(j);
    fetch_free(&r);
    curl_easy_cleanup(c);

    /* A text reply keeps its status and type. */
    fetch(NULL, port, "GET", "/text", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    CHECK_EQ_STR(header_of(&r, "Content-Type", buf, sizeof buf), "text/plain");
    CHECK_EQ_STR(llmr_strbuf_cstr(&r.body), "made");
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 3);
    llmr_http_server_stop(srv);
}

TEST(path_is_decoded_and_query_split_off_raw)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    unsigned port = llmr_http_server_port(srv);
    fetch_result r;
    fetch(NULL, port, "GET", "/a%20b/c%2Bd+e?x=%2F&y=1+2&z", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    json_t *j = body_json(&r);
    CHECK_EQ_STR(jstr(j, "path", NULL), "/a b/c+d+e");
    CHECK_EQ_STR(jstr(j, "query", NULL), "x=%2F&y=1+2&z");
    json_decref(j);
    fetch_free(&r);
    /* An empty query after '?' is "" too. */
    fetch(NULL, port, "DELETE", "/x?", NULL, 0, 0, NULL, &r);
    j = body_json(&r);
    CHECK_EQ_STR(jstr(j, "method", NULL), "DELETE");
    CHECK_EQ_STR(jstr(j, "path", NULL), "/x");
    CHECK_EQ_STR(jstr(j, "query", NULL), "");
    json_decref(j);
    fetch_free(&r);
    llmr_http_server_stop(srv);
}

TEST(body_with_nul_bytes_arrives_whole)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    char body[300];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)('a' + i % 26);
    body[10] = '\0';
    fetch_result r;
    fetch(NULL, llmr_http_server_port(srv), "POST", "/bin", body, sizeof body, 0, NULL, &r);
    json_t *j = body_json(&r);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "body_len")), sizeof body);
    CHECK_EQ_INT(json_string_length(json_object_get(j, "body")), sizeof body);
    const char *got = json_string_value(json_object_get(j, "body"));
    CHECK(got && memcmp(got, body, sizeof body) == 0);
    json_decref(j);
    fetch_free(&r);
    llmr_http_server_stop(srv);
}

TEST(path_with_an_encoded_nul_is_400_without_the_handler)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    unsigned port = llmr_http_server_port(srv);
    fetch_result r;
    fetch(NULL, port, "GET", "/files/secret%00.txt", NULL, 0, 0, NULL, &r);
    check_error(&r, 400, "invalid_request_error", "invalid_path");
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 0);
    /* in the query it is the handler's to judge */
    fetch(NULL, port, "GET", "/x?a=%00", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 1);
    llmr_http_server_stop(srv);
}

/* ---- the body limit ------------------------------------------------------------ */

TEST(body_over_the_limit_by_content_length_is_413)
{
    reset_state();
    llmr_http_server *srv = start_server(1024);
    unsigned port = llmr_http_server_port(srv);
    size_t big = 3u << 20;
    char *body = malloc(big);
    memset(body, 'x', big);
    /* Small and large, with and without Expect: 100-continue. */
    size_t sizes[] = {1025, 5000, big};
    unsigned modes[] = {NO_EXPECT, EXPECT};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        for (size_t m = 0; m < 2; m++) {
            fetch_result r;
            fetch(NULL, port, "POST", "/v1/completions", body, sizes[i], modes[m], NULL, &r);
            check_error(&r, 413, "invalid_request_error", "request_too_large");
            CHECK_CONTAINS(llmr_strbuf_cstr(&r.body), "1024 bytes");
            fetch_free(&r);
        }
    }
    CHECK_EQ_INT(handled_now(), 0);
    /* Exactly the limit is fine. */
    fetch_result r;
    fetch(NULL, port, "POST", "/exact", body, 1024, 0, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    json_t *j = body_json(&r);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "body_len")), 1024);
    json_decref(j);
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 1);
    check_still_serving(port);
    free(body);
    llmr_http_server_stop(srv);
}

TEST(chunked_body_over_the_limit_is_413)
{
    reset_state();
    llmr_http_server *srv = start_server(1024);
    unsigned port = llmr_http_server_port(srv);
    char body[8192];
    memset(body, 'y', sizeof body);
    fetch_result r;
    fetch(NULL, port, "POST", "/v1/completions", body, sizeof body, CHUNKED, NULL, &r);
    check_error(&r, 413, "invalid_request_error", "request_too_large");
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 0);
    /* A chunked body within the limit gets through whole. */
    fetch(NULL, port, "POST", "/chunked", body, 1024, CHUNKED, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    json_t *j = body_json(&r);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "body_len")), 1024);
    json_decref(j);
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 1);
    check_still_serving(port);
    llmr_http_server_stop(srv);
}

TEST(handler_that_does_not_reply_gets_500_json)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    fetch_result r;
    fetch(NULL, llmr_http_server_port(srv), "POST", "/noreply", "{}", 2, 0, NULL, &r);
    check_error(&r, 500, "server_error", "internal_error");
    fetch_free(&r);
    CHECK_EQ_INT(handled_now(), 1);
    check_still_serving(llmr_http_server_port(srv));
    llmr_http_server_stop(srv);
}

/* ---- streams ----------------------------------------------------------------------- */

typedef struct client_job {
    unsigned port;
    fetch_result r;
    pthread_t thread;
} client_job;

static void *client_main(void *arg)
{
    client_job *job = arg;
    fetch(NULL, job->port, "POST", "/stream", "{}", 2, STREAMING, NULL, &job->r);
    return NULL;
}

static void client_start(client_job *job, unsigned port)
{
    memset(job, 0, sizeof *job);
    job->port = port;
    pthread_create(&job->thread, NULL, client_main, job);
}

TEST(stream_written_from_another_thread_arrives_in_order)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    client_job job;
    client_start(&job, llmr_http_server_port(srv));
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    const char *pieces[] = {"data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: {\"n\":3}\n\n",
                            "data: [DONE]\n\n"};
    llmr_strbuf want = LLMR_STRBUF_INIT;
    for (size_t i = 0; s && i < 4; i++) {
        CHECK(llmr_http_stream_write(s, pieces[i], strlen(pieces[i])));
        llmr_strbuf_puts(&want, pieces[i]);
        /* Each piece reaches the client before the next is written: nothing waits
         * in a buffer for more. */
        CHECK(wait_received(want.len));
    }
    llmr_http_stream_end(s);
    pthread_join(job.thread, NULL);
    CHECK_EQ_INT(job.r.rc, CURLE_OK);
    CHECK_EQ_INT(job.r.status, 200);
    CHECK_EQ_STR(llmr_strbuf_cstr(&job.r.body), llmr_strbuf_cstr(&want));
    CHECK(g.pieces >= 4);
    char buf[128];
    CHECK_EQ_STR(header_of(&job.r, "Content-Type", buf, sizeof buf), "text/event-stream");
    CHECK_EQ_STR(header_of(&job.r, "Cache-Control", buf, sizeof buf), "no-cache");
    CHECK_EQ_STR(header_of(&job.r, "X-Accel-Buffering", buf, sizeof buf), "no");
    CHECK_EQ_STR(header_of(&job.r, "X-Stream", buf, sizeof buf), "1");
    fetch_free(&job.r);
    llmr_strbuf_free(&want);
    /* Ended normally: on_close never ran. */
    sleep_ms(200);
    CHECK_EQ_INT(closes_now(), 0);
    llmr_http_server_stop(srv);
    CHECK_EQ_INT(closes_now(), 0);
}

TEST(stream_written_at_once_then_ended_arrives_whole)
{
    /* A large stream written and ended at once: the queue is drained after end. */
    reset_state();
    llmr_http_server *srv = start_server(0);
    client_job job;
    client_start(&job, llmr_http_server_port(srv));
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    size_t n = 1u << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('0' + i % 10);
    for (size_t off = 0; s && off < n; off += 1000)
        CHECK(llmr_http_stream_write(s, big + off, off + 1000 <= n ? 1000 : n - off));
    llmr_http_stream_end(s);
    pthread_join(job.thread, NULL);
    CHECK_EQ_INT(job.r.rc, CURLE_OK);
    CHECK_EQ_INT(job.r.body.len, n);
    CHECK(job.r.body.len == n && memcmp(job.r.body.data, big, n) == 0);
    fetch_free(&job.r);
    free(big);
    CHECK_EQ_INT(closes_now(), 0);
    llmr_http_server_stop(srv);
}

/* The client hangs up after the first piece; end_in_close: on_close ends it. */
static void client_leaves_mid_stream(bool end_in_close)
{
    reset_state();
    pthread_mutex_lock(&g.lock);
    g.abort_after_first = true;
    g.end_in_close = end_in_close;
    pthread_mutex_unlock(&g.lock);
    llmr_http_server *srv = start_server(0);
    client_job job;
    client_start(&job, llmr_http_server_port(srv));
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    if (!s) {
        pthread_join(job.thread, NULL);
        llmr_http_server_stop(srv);
        return;
    }
    CHECK(llmr_http_stream_write(s, "data: 1\n\n", 9));
    pthread_join(job.thread, NULL);
    CHECK_EQ_INT(job.r.rc, CURLE_WRITE_ERROR);
    fetch_free(&job.r);
    /* Noticed while the producer is silent. */
    CHECK(wait_closes(1));
    if (!end_in_close) {
        CHECK(!llmr_http_stream_write(s, "data: 2\n\n", 9));
        CHECK(!llmr_http_stream_write(s, "data: 3\n\n", 9));
        llmr_http_stream_end(s);
    }
    sleep_ms(300);
    CHECK_EQ_INT(closes_now(), 1);
    check_still_serving(llmr_http_server_port(srv));
    llmr_http_server_stop(srv);
    CHECK_EQ_INT(closes_now(), 1);
}

TEST(client_leaving_mid_stream_runs_on_close_once)
{
    client_leaves_mid_stream(false);
}

TEST(on_close_may_end_the_stream_itself)
{
    client_leaves_mid_stream(true);
}

TEST(stop_with_a_stream_open_closes_it)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    client_job job;
    client_start(&job, llmr_http_server_port(srv));
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    if (!s) {
        pthread_join(job.thread, NULL);
        llmr_http_server_stop(srv);
        return;
    }
    CHECK(llmr_http_stream_write(s, "data: 1\n\n", 9));
    CHECK(wait_received(9));
    CHECK_EQ_INT(closes_now(), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    llmr_http_server_stop(srv);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(took < 2.0);
    /* on_close ran before stop returned; the producer's writes now fail. */
    CHECK_EQ_INT(closes_now(), 1);
    CHECK(!llmr_http_stream_write(s, "data: 2\n\n", 9));
    llmr_http_stream_end(s);
    pthread_join(job.thread, NULL);
    CHECK(job.r.rc != CURLE_OK); /* the chunked body never ended */
    CHECK_EQ_STR(llmr_strbuf_cstr(&job.r.body), "data: 1\n\n");
    fetch_free(&job.r);
    CHECK_EQ_INT(closes_now(), 1);
}

/* A client that asks for the stream and never reads: a connected socket, or -1. */
static int silent_client(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int small = 4096; /* little room in the kernel for what it does not read */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    static const char req[] = "POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}";
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, req, sizeof req - 1) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

TEST(a_client_too_slow_for_its_stream_is_cut)
{
    reset_state();
    next_queue_max = 64 << 10;
    llmr_http_server *srv = start_server(0);
    next_queue_max = 0;
    int fd = silent_client(llmr_http_server_port(srv));
    CHECK(fd >= 0);
    llmr_http_stream *s = fd >= 0 ? wait_stream() : NULL;
    CHECK(s != NULL);
    char piece[1000];
    memset(piece, 'x', sizeof piece);
    size_t written = 0;
    /* the kernel's buffers take some; past them and 64 KiB queued, a write fails */
    while (s && written < ((size_t)64 << 20) && llmr_http_stream_write(s, piece, sizeof piece))
        written += sizeof piece;
    CHECK(written < ((size_t)64 << 20));
    CHECK(s == NULL || !llmr_http_stream_write(s, piece, sizeof piece)); /* and stays cut */
    CHECK(wait_closes(1));
    if (s)
        llmr_http_stream_end(s);
    if (fd >= 0)
        close(fd);
    check_still_serving(llmr_http_server_port(srv));
    llmr_http_server_stop(srv);
}

TEST(quiesce_refuses_new_connections_and_drain_waits_for_streams)
{
    reset_state();
    llmr_http_server *srv = start_server(0);
    unsigned port = llmr_http_server_port(srv);
    client_job job;
    client_start(&job, port);
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    llmr_http_server_quiesce(srv);
    fetch_result r;
    fetch(NULL, port, "GET", "/x", NULL, 0, 0, NULL, &r);
    CHECK_EQ_INT(r.rc, CURLE_COULDNT_CONNECT);
    fetch_free(&r);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    CHECK(!llmr_http_server_drain(srv, now_ms + 200)); /* the stream is open */
    if (s) {
        CHECK(llmr_http_stream_write(s, "data: [DONE]\n\n", 14));
        llmr_http_stream_end(s);
    }
    CHECK(llmr_http_server_drain(srv, now_ms + 5000));
    pthread_join(job.thread, NULL);
    CHECK_EQ_STR(llmr_strbuf_cstr(&job.r.body), "data: [DONE]\n\n"); /* the open stream went on */
    fetch_free(&job.r);
    llmr_http_server_stop(srv);
}

/* ---- the listening socket -------------------------------------------------------- */

TEST(address_in_use_names_host_and_port)
{
    reset_state();
    llmr_http_server *a = start_server(0);
    unsigned port = llmr_http_server_port(a);
    llmr_http_server_options o;
    llmr_http_server_options_default(&o);
    o.host = "127.0.0.1";
    o.port = port;
    o.handler = handler;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_http_server *b = NULL;
    llmr_status st = llmr_http_server_start(&o, &b, &err);
    CHECK(st != LLMR_OK);
    CHECK(b == NULL);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%u", port);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), where);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "in use");
    llmr_strbuf_free(&err);
    /* A host that is no address at all. */
    o.host = "not a host name";
    o.port = 0;
    st = llmr_http_server_start(&o, &b, &err);
    CHECK(st != LLMR_OK);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "not a host name");
    llmr_strbuf_free(&err);
    check_still_serving(port);
    llmr_http_server_stop(a);
}

TEST(defaults)
{
    llmr_http_server_options o;
    llmr_http_server_options_default(&o);
    CHECK_EQ_STR(o.host, "127.0.0.1");
    CHECK_EQ_INT(o.max_body, 8u << 20);
    CHECK_EQ_INT(o.max_connections, 256);
    CHECK_EQ_INT(o.timeout_s, 120);
    CHECK(o.handler == NULL);
    llmr_http_server_stop(NULL);
    CHECK_EQ_INT(llmr_http_server_port(NULL), 0);
}

/* ---- request ids and the record of each request ------------------------------------ */

TEST(request_id_is_the_clients_or_a_new_one_and_each_answer_is_recorded)
{
    reset_state();
    llmr_http_server *srv = start_server_with(0, on_done);
    unsigned port = llmr_http_server_port(srv);
    fetch_result r;
    char buf[128];
    fetch(NULL, port, "GET", "/noted", NULL, 0, 0, "x-request-id: client-7", &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(header_of(&r, "x-request-id", buf, sizeof buf), "client-7");
    CHECK_EQ_STR(llmr_strbuf_cstr(&r.body), "client-7"); /* the handler sees it */
    fetch_free(&r);
    CHECK(wait_done(1));
    pthread_mutex_lock(&g.lock);
    CHECK_EQ_STR(g.last.request_id, "client-7");
    CHECK_EQ_STR(g.last.path, "/noted");
    CHECK_EQ_STR(g.last.model, "m1");
    CHECK_EQ_INT(g.last.status, 200);
    CHECK_EQ_INT(g.last.prompt_tokens, 3);
    CHECK_EQ_INT(g.last.completion_tokens, 4);
    CHECK(g.last.ttft_ms == 1.5);
    CHECK(g.last.duration_ms >= 0);
    pthread_mutex_unlock(&g.lock);

    /* none, or an invalid one: a new id, the same in the header, the body and the record */
    const char *headers[] = {NULL, "x-request-id: two words", "x-request-id: \"q\""};
    for (int i = 0; i < 3; i++) {
        fetch(NULL, port, "GET", "/noted", NULL, 0, 0, headers[i], &r);
        const char *id = header_of(&r, "x-request-id", buf, sizeof buf);
        CHECK(id && strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32);
        CHECK_EQ_STR(llmr_strbuf_cstr(&r.body), id ? id : "");
        CHECK(wait_done(2 + i));
        pthread_mutex_lock(&g.lock);
        CHECK_EQ_STR(g.last.request_id, id ? id : "");
        pthread_mutex_unlock(&g.lock);
        fetch_free(&r);
    }
    /* an answer the server makes itself (413) carries one too, and is recorded */
    llmr_http_server_stop(srv);
    reset_state();
    srv = start_server_with(16, on_done);
    port = llmr_http_server_port(srv);
    fetch(NULL, port, "POST", "/x", "0123456789abcdefghij", 20, 0, "x-request-id: big-1", &r);
    CHECK_EQ_INT(r.status, 413);
    CHECK_EQ_STR(header_of(&r, "x-request-id", buf, sizeof buf), "big-1");
    fetch_free(&r);
    CHECK(wait_done(1));
    pthread_mutex_lock(&g.lock);
    CHECK_EQ_INT(g.last.status, 413);
    CHECK_EQ_STR(g.last.request_id, "big-1");
    pthread_mutex_unlock(&g.lock);
    llmr_http_server_stop(srv);
}

TEST(a_stream_is_recorded_at_its_end_and_one_its_client_left_as_499)
{
    reset_state();
    llmr_http_server *srv = start_server_with(0, on_done);
    client_job job;
    client_start(&job, llmr_http_server_port(srv));
    llmr_http_stream *s = wait_stream();
    CHECK(s != NULL);
    if (s) {
        CHECK(llmr_http_stream_write(s, "data: 1\n\n", 9));
        llmr_http_stream_note(s, &(llmr_http_note){.usage = true, .completion_tokens = 9, .ttft_ms = 2});
        llmr_http_stream_end(s);
    }
    pthread_join(job.thread, NULL);
    fetch_free(&job.r);
    CHECK(wait_done(1));
    pthread_mutex_lock(&g.lock);
    CHECK_EQ_INT(g.last.status, 200);
    CHECK_EQ_INT(g.last.completion_tokens, 9);
    CHECK_EQ_STR(g.last.path, "/stream");
    pthread_mutex_unlock(&g.lock);

    /* the client hangs up after the first bytes: the record says 499 at the end */
    reset_state();
    pthread_mutex_lock(&g.lock);
    g.abort_after_first = true;
    pthread_mutex_unlock(&g.lock);
    client_start(&job, llmr_http_server_port(srv));
    s = wait_stream();
    CHECK(s != NULL);
    if (s) {
        CHECK(llmr_http_stream_write(s, "data: 1\n\n", 9));
        pthread_join(job.thread, NULL);
        CHECK(wait_closes(1));
        CHECK_EQ_INT(g.done, 0); /* not before the producer ends it */
        llmr_http_stream_end(s);
    } else {
        pthread_join(job.thread, NULL);
    }
    fetch_free(&job.r);
    CHECK(wait_done(1));
    pthread_mutex_lock(&g.lock);
    CHECK_EQ_INT(g.last.status, 499);
    pthread_mutex_unlock(&g.lock);
    llmr_http_server_stop(srv);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(defaults);
    RUN(post_json_round_trip_with_body_query_and_headers);
    RUN(path_is_decoded_and_query_split_off_raw);
    RUN(body_with_nul_bytes_arrives_whole);
    RUN(path_with_an_encoded_nul_is_400_without_the_handler);
    RUN(body_over_the_limit_by_content_length_is_413);
    RUN(chunked_body_over_the_limit_is_413);
    RUN(handler_that_does_not_reply_gets_500_json);
    RUN(stream_written_from_another_thread_arrives_in_order);
    RUN(stream_written_at_once_then_ended_arrives_whole);
    RUN(client_leaving_mid_stream_runs_on_close_once);
    RUN(on_close_may_end_the_stream_itself);
    RUN(stop_with_a_stream_open_closes_it);
    RUN(a_client_too_slow_for_its_stream_is_cut);
    RUN(quiesce_refuses_new_connections_and_drain_waits_for_streams);
    RUN(address_in_use_names_host_and_port);
    curl_global_cleanup();
    RUN(request_id_is_the_clients_or_a_new_one_and_each_answer_is_recorded);
    RUN(a_stream_is_recorded_at_its_end_and_one_its_client_left_as_499);
    return llmr_test_finish();
}
