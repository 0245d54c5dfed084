/* Tests of the router's transfer loop (router_upstream.c) against an HTTP server of this
 * process on 127.0.0.1: transfers added one after another reuse the loop's connection;
 * many added at once from several threads all end, each with its own body; a cancel
 * (asked when woken) stops a transfer and closes its connection, which the server sees;
 * a done callback may add the next transfer; freeing the loop cancels what still runs;
 * the loop runs on one thread, however many transfers. */
#include <curl/curl.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/clock.h"
#include "common/strbuf.h"
#include "http/http_server.h"
#include "router/router_upstream.h"

#define WAIT_MS 5000

/* ---- the server: /hello?N answers "hello N"; /slow waits up to WAIT_MS for its
 * client to leave, counting those that did ---------------------------------------- */

static atomic_int slow_left, slow_started;

static void handler(void *user, const llmr_http_request *req, llmr_http_reply *reply)
{
    (void)user;
    if (!strcmp(req->path, "/slow")) {
        atomic_fetch_add(&slow_started, 1);
        uint64_t end = llmr_now_ms() + WAIT_MS;
        while (llmr_now_ms() < end && !llmr_http_request_client_gone(req))
            llmr_sleep_ms(5);
        if (llmr_http_request_client_gone(req))
            atomic_fetch_add(&slow_left, 1);
        llmr_http_reply_text(reply, 200, "text/plain", "late", 4);
        return;
    }
    char text[64];
    int n = snprintf(text, sizeof text, "hello %s", req->query);
    llmr_http_reply_text(reply, 200, "text/plain", text, (size_t)n);
}

static llmr_http_server *srv;
static unsigned port;

static void server_start(void)
{
    llmr_http_server_options o;
    llmr_http_server_options_default(&o);
    o.host = "127.0.0.1";
    o.port = 0;
    o.handler = handler;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK(llmr_http_server_start(&o, &srv, &err) == LLMR_OK);
    llmr_strbuf_free(&err);
    port = srv ? llmr_http_server_port(srv) : 0;
}

/* ---- one transfer ------------------------------------------------------------------ */

typedef struct xfer_test {
    CURL *easy;
    llmr_strbuf body;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    CURLcode result;
    long status, connects;
    atomic_bool cancel;
    unsigned done_thread_same; /* the done callbacks ran on the loop's one thread */
    router_upstream *chain_to; /* done adds the next transfer (next) there */
    struct xfer_test *next;
} xfer_test;

static pthread_t loop_thread;
static atomic_bool loop_thread_known;
static atomic_int other_thread_done;

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    llmr_strbuf_append(user, data, size * n);
    return size * n;
}

static void xfer_init(xfer_test *x, const char *path)
{
    memset(x, 0, sizeof *x);
    llmr_strbuf_init(&x->body);
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->cond, NULL);
    x->easy = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(x->easy, CURLOPT_URL, url);
    curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, &x->body);
}

static void xfer_free(xfer_test *x)
{
    llmr_strbuf_free(&x->body);
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
}

static bool add(router_upstream *u, xfer_test *x);

static void on_done(void *user, CURL *easy, CURLcode result)
{
    xfer_test *x = user;
    pthread_t self = pthread_self();
    if (!atomic_exchange(&loop_thread_known, true))
        loop_thread = self;
    else if (!pthread_equal(loop_thread, self))
        atomic_fetch_add(&other_thread_done, 1);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &x->status);
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &x->connects);
    curl_easy_cleanup(easy);
    if (x->chain_to && x->next)
        add(x->chain_to, x->next);
    pthread_mutex_lock(&x->lock);
    x->result = result;
    x->done = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
}

static bool on_cancel(void *user)
{
    xfer_test *x = user;
    return atomic_load(&x->cancel);
}

static bool add(router_upstream *u, xfer_test *x)
{
    return router_upstream_add(u, x->easy, on_done, on_cancel, x);
}

/* true once x is done, within WAIT_MS. */
static bool wait_done(xfer_test *x)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&x->lock);
    while (!x->done && pthread_cond_timedwait(&x->cond, &x->lock, &until) == 0) {
    }
    bool done = x->done;
    pthread_mutex_unlock(&x->lock);
    return done;
}

/* ---- the tests ----------------------------------------------------------------------- */

TEST(transfers_one_after_another_reuse_the_connection)
{
    router_upstream *u = router_upstream_new();
    CHECK(u != NULL);
    for (int i = 0; u && i < 10; i++) {
        xfer_test x;
        char path[32];
        snprintf(path, sizeof path, "/hello?%d", i);
        xfer_init(&x, path);
        CHECK(add(u, &x));
        CHECK(wait_done(&x));
        CHECK_EQ_INT(x.result, CURLE_OK);
        CHECK_EQ_INT(x.status, 200);
        char want[32];
        snprintf(want, sizeof want, "hello %d", i);
        CHECK_EQ_STR(llmr_strbuf_cstr(&x.body), want);
        CHECK_EQ_INT(x.connects, i == 0 ? 1 : 0); /* the first connects; the others reuse it */
        xfer_free(&x);
    }
    CHECK_EQ_INT(router_upstream_running(u), 0);
    router_upstream_free(u);
}

#define MANY 60
#define ADDERS 4
static xfer_test many[MANY];
static router_upstream *many_u;

static void *adder(void *arg)
{
    intptr_t k = (intptr_t)arg;
    for (int i = (int)k; i < MANY; i += ADDERS)
        CHECK(add(many_u, &many[i]));
    return NULL;
}

TEST(many_transfers_from_several_threads_all_end_on_one_thread)
{
    many_u = router_upstream_new();
    CHECK(many_u != NULL);
    if (!many_u)
        return;
    atomic_store(&loop_thread_known, false);
    atomic_store(&other_thread_done, 0);
    for (int i = 0; i < MANY; i++) {
        char path[32];
        snprintf(path, sizeof path, "/hello?%d", i);
        xfer_init(&many[i], path);
    }
    pthread_t t[ADDERS];
    for (intptr_t k = 0; k < ADDERS; k++)
        pthread_create(&t[k], NULL, adder, (void *)k);
    for (int k = 0; k < ADDERS; k++)
        pthread_join(t[k], NULL);
    long connects = 0;
    for (int i = 0; i < MANY; i++) {
        CHECK(wait_done(&many[i]));
        CHECK_EQ_INT(many[i].result, CURLE_OK);
        char want[32];
        snprintf(want, sizeof want, "hello %d", i);
        CHECK_EQ_STR(llmr_strbuf_cstr(&many[i].body), want);
        connects += many[i].connects;
    }
    CHECK_EQ_INT(atomic_load(&other_thread_done), 0);
    CHECK(connects <= MANY);
    CHECK_EQ_INT(router_upstream_running(many_u), 0);
    for (int i = 0; i < MANY; i++)
        xfer_free(&many[i]);
    router_upstream_free(many_u);
}

TEST(a_cancel_stops_the_transfer_and_the_server_sees_its_client_leave)
{
    router_upstream *u = router_upstream_new();
    CHECK(u != NULL);
    if (!u)
        return;
    int left0 = atomic_load(&slow_left), started0 = atomic_load(&slow_started);
    xfer_test x;
    xfer_init(&x, "/slow");
    CHECK(add(u, &x));
    for (uint64_t end = llmr_now_ms() + WAIT_MS; llmr_now_ms() < end && atomic_load(&slow_started) == started0;)
        llmr_sleep_ms(5);
    CHECK_EQ_INT(router_upstream_running(u), 1);
    uint64_t t0 = llmr_now_ms();
    atomic_store(&x.cancel, true);
    router_upstream_wake(u);
    CHECK(wait_done(&x));
    CHECK(llmr_now_ms() - t0 < 1000);
    CHECK_EQ_INT(x.result, CURLE_ABORTED_BY_CALLBACK);
    for (uint64_t end = llmr_now_ms() + WAIT_MS; llmr_now_ms() < end && atomic_load(&slow_left) == left0;)
        llmr_sleep_ms(5);
    CHECK_EQ_INT(atomic_load(&slow_left), left0 + 1); /* the connection closed: the request is cancelled */
    xfer_free(&x);
    router_upstream_free(u);
}

TEST(a_done_callback_may_add_the_next_transfer)
{
    router_upstream *u = router_upstream_new();
    CHECK(u != NULL);
    if (!u)
        return;
    xfer_test a, b;
    xfer_init(&a, "/hello?a");
    xfer_init(&b, "/hello?b");
    a.chain_to = u;
    a.next = &b;
    CHECK(add(u, &a));
    CHECK(wait_done(&a));
    CHECK(wait_done(&b));
    CHECK_EQ_STR(llmr_strbuf_cstr(&b.body), "hello b");
    xfer_free(&a);
    xfer_free(&b);
    router_upstream_free(u);
}

TEST(freeing_the_loop_cancels_what_still_runs)
{
    router_upstream *u = router_upstream_new();
    CHECK(u != NULL);
    if (!u)
        return;
    int started0 = atomic_load(&slow_started);
    xfer_test x;
    xfer_init(&x, "/slow");
    CHECK(add(u, &x));
    for (uint64_t end = llmr_now_ms() + WAIT_MS; llmr_now_ms() < end && atomic_load(&slow_started) == started0;)
        llmr_sleep_ms(5);
    uint64_t t0 = llmr_now_ms();
    router_upstream_free(u);
    CHECK(x.done);
    CHECK_EQ_INT(x.result, CURLE_ABORTED_BY_CALLBACK);
    CHECK(llmr_now_ms() - t0 < 1000);
    xfer_free(&x);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    server_start();
    if (srv) {
        RUN(transfers_one_after_another_reuse_the_connection);
        RUN(many_transfers_from_several_threads_all_end_on_one_thread);
        RUN(a_cancel_stops_the_transfer_and_the_server_sees_its_client_leave);
        RUN(a_done_callback_may_add_the_next_transfer);
        RUN(freeing_the_loop_cancels_what_still_runs);
    }
    llmr_http_server_stop(srv);
    curl_global_cleanup();
    return llmr_test_finish();
}
