/* The HTTP server's watch thread (see http_internal.h): it closes connections that
 * pass their deadline, and looks after streams whose connection is suspended.
 *
 * Every connection is registered here from its accept to its close, with the
 * CLOCK_MONOTONIC deadline of what it is sending now: its headers (header_timeout
 * from the accept, or, on a kept-alive connection, from the end of its last request
 * plus the idle timeout), then its body (body_timeout from the headers), then none
 * while its handler runs and its answer goes out.  A connection past its deadline is
 * shut down (both ways): libmicrohttpd reads the end of file and closes it.  The
 * registry's lock is held while shutting one down, and a connection leaves the
 * registry before libmicrohttpd closes its socket, so a descriptor reused by a newer
 * connection is never shut down by mistake.
 *
 * A stream whose connection is suspended (it waits for bytes) is not polled by
 * libmicrohttpd: every HTTP_WATCH_TICK_MS the thread asks each stream to look
 * whether its client hung up or the server stops (http_stream_check). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/http_internal.h"

struct http_conn {
    int fd;
    _Atomic uint64_t deadline_ns; /* 0: none */
    struct http_conn *prev, *next;
};

typedef struct watched_stream {
    llmr_http_stream *s;
    struct watched_stream *prev, *next;
} watched_stream;

struct http_watch {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool stopping;
    uint64_t header_ns, body_ns, idle_ns;
    http_conn *conns;
    watched_stream *streams;
    uint64_t closed;      /* connections shut down for a deadline */
};

static void watch_tick(http_watch *w)
{
    uint64_t now = llmr_now_ns();
    for (http_conn *c = w->conns; c; c = c->next) {
        uint64_t d = atomic_load(&c->deadline_ns);
        if (d && now > d) {
            atomic_store(&c->deadline_ns, 0);
            shutdown(c->fd, SHUT_RDWR);
            w->closed++;
            llmr_log_debug("http", "a connection sent its request too slowly: closed");
        }
    }
    for (watched_stream *ws = w->streams; ws; ws = ws->next)
        http_stream_check(ws->s);
}

static void *watch_main(void *arg)
{
    http_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += HTTP_WATCH_TICK_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&w->wake, &w->lock, &until);
        if (!w->stopping)
            watch_tick(w);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

http_watch *http_watch_new(unsigned header_timeout_s, unsigned body_timeout_s,
                           unsigned idle_timeout_s)
{
    http_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (llmr_cond_init_monotonic(&w->wake) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->header_ns = (uint64_t)header_timeout_s * 1000000000ull;
    w->body_ns = (uint64_t)body_timeout_s * 1000000000ull;
    w->idle_ns = (uint64_t)idle_timeout_s * 1000000000ull;
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

void http_watch_free(http_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    while (w->conns) {
        http_conn *c = w->conns;
        w->conns = c->next;
        free(c);
    }
    while (w->streams) {
        watched_stream *ws = w->streams;
        w->streams = ws->next;
        free(ws);
    }
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

http_conn *http_watch_conn_open(http_watch *w, int fd)
{
    http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    atomic_init(&c->deadline_ns, w->header_ns ? llmr_now_ns() + w->header_ns : 0);
    pthread_mutex_lock(&w->lock);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    pthread_mutex_unlock(&w->lock);
    return c;
}

void http_watch_conn_close(http_watch *w, http_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&w->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&w->lock);
    free(c);
}

void http_watch_conn_phase(http_watch *w, http_conn *c, http_phase phase)
{
    if (!c)
        return;
    uint64_t now = llmr_now_ns(), d = 0;
    if (phase == HTTP_PHASE_BODY && w->body_ns)
        d = now + w->body_ns;
    else if (phase == HTTP_PHASE_NEXT && w->header_ns)
        d = now + w->idle_ns + w->header_ns;
    atomic_store(&c->deadline_ns, d);
}

uint64_t http_watch_closed(http_watch *w)
{
    pthread_mutex_lock(&w->lock);
    uint64_t n = w->closed;
    pthread_mutex_unlock(&w->lock);
    return n;
}

bool http_watch_stream_add(http_watch *w, llmr_http_stream *s)
{
    watched_stream *ws = calloc(1, sizeof *ws);
    if (!ws)
        return false;
    ws->s = s;
    pthread_mutex_lock(&w->lock);
    ws->next = w->streams;
    if (w->streams)
        w->streams->prev = ws;
    w->streams = ws;
    pthread_mutex_unlock(&w->lock);
    return true;
}

void http_watch_stream_remove(http_watch *w, llmr_http_stream *s)
{
    pthread_mutex_lock(&w->lock);
    for (watched_stream *ws = w->streams; ws; ws = ws->next) {
        if (ws->s != s)
            continue;
        if (ws->prev)
            ws->prev->next = ws->next;
        else
            w->streams = ws->next;
        if (ws->next)
            ws->next->prev = ws->prev;
        free(ws);
        break;
    }
    pthread_mutex_unlock(&w->lock);
}

void http_watch_check_streams(http_watch *w)
{
    pthread_mutex_lock(&w->lock);
    for (watched_stream *ws = w->streams; ws; ws = ws->next)
        http_stream_check(ws->s);
    pthread_mutex_unlock(&w->lock);
}
