/* GET /v0/events (admin scope): the dashboard's live view, a stream of Server-Sent
 * Events, each `event: snapshot` with one line of JSON (router_snapshot.c): one at
 * once, then one every interval_ms (?interval_ms=N: default 1000, kept within
 * 200..10000).  Nothing else is sent.
 *
 * Each stream runs as a job (router_jobs.c), so its thread may write the stream after
 * the server's handler returned.  Between two snapshots the thread waits on the
 * router's events_wake, which is broadcast when a stream's client leaves (on_close)
 * and when llmr_router_stop begins (router_events_stop): the thread then ends its
 * stream and returns at once, and llmr_router_stop, which waits for the jobs, never
 * waits out an interval. */
#include "router/router_internal.h"

#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INTERVAL_DEFAULT_MS 1000
#define INTERVAL_MIN_MS 200
#define INTERVAL_MAX_MS 10000

/* One open stream: what its on_close and its thread share (under r->events_lock). */
typedef struct events_stream {
    llmr_router *r;
    bool gone; /* the client left */
} events_stream;

void router_events_init(llmr_router *r)
{
    pthread_mutex_init(&r->events_lock, NULL);
    llmr_cond_init_monotonic(&r->events_wake); /* deadlines on the monotonic clock */
}

void router_events_stop(llmr_router *r)
{
    pthread_mutex_lock(&r->events_lock);
    pthread_cond_broadcast(&r->events_wake);
    pthread_mutex_unlock(&r->events_lock);
}

void router_events_free(llmr_router *r)
{
    pthread_mutex_destroy(&r->events_lock);
    pthread_cond_destroy(&r->events_wake);
}

/* on_close: runs on a server thread, never after the stream's thread ended it. */
static void client_gone(void *user)
{
    events_stream *e = user;
    pthread_mutex_lock(&e->r->events_lock);
    e->gone = true;
    pthread_cond_broadcast(&e->r->events_wake);
    pthread_mutex_unlock(&e->r->events_lock);
}

/* Waits until the deadline (CLOCK_MONOTONIC); false when the client left or the router
 * stops first. */
static bool wait_until(events_stream *e, const struct timespec *deadline)
{
    llmr_router *r = e->r;
    pthread_mutex_lock(&r->events_lock);
    while (!e->gone && !atomic_load(&r->draining) &&
           pthread_cond_timedwait(&r->events_wake, &r->events_lock, deadline) != ETIMEDOUT)
        ;
    bool go_on = !e->gone && !atomic_load(&r->draining);
    pthread_mutex_unlock(&r->events_lock);
    return go_on;
}

/* Writes one snapshot event; false when the client has gone. */
static bool send_snapshot(llmr_router *r, llmr_http_stream *out)
{
    json_t *snap = router_snapshot_json(r);
    char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL; /* one line: newlines are escaped */
    json_decref(snap);
    if (!text)
        return true; /* out of memory: skip this one */
    llmr_strbuf ev = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&ev, "event: snapshot\ndata: %s\n\n", text);
    free(text);
    bool ok = llmr_strbuf_failed(&ev) || llmr_http_stream_write(out, ev.data, ev.len);
    llmr_strbuf_free(&ev);
    return ok;
}

static void add_ms(struct timespec *t, long ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The job: the stream, from its first snapshot to its end. */
static void events_job(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                       llmr_http_reply *reply, router_job *job, int interval_ms)
{
    (void)c;
    (void)req;
    events_stream e = {r, false};
    llmr_http_stream *out = llmr_http_reply_stream(reply, 200, "text/event-stream", client_gone, &e);
    router_job_replied(job); /* the server sends the stream from now on */
    if (!out)
        return; /* out of memory: the server answers 500 */
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (send_snapshot(r, out)) {
        add_ms(&next, interval_ms);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (before(&next, &now)) { /* the snapshot took longer than the interval: no burst */
            next = now;
            add_ms(&next, interval_ms);
        }
        if (!wait_until(&e, &next))
            break;
    }
    /* not under events_lock: ending waits for an on_close running elsewhere, which takes it */
    llmr_http_stream_end(out);
}

/* ?interval_ms=N into *ms (kept within bounds); false when N is not a whole number. */
static bool parse_interval(const char *query, int *ms)
{
    *ms = INTERVAL_DEFAULT_MS;
    const char *q = query ? strstr(query, "interval_ms=") : NULL;
    while (q && q != query && q[-1] != '&')
        q = strstr(q + 1, "interval_ms=");
    if (!q)
        return true;
    const char *v = q + 12;
    char *end = NULL;
    long n = strtol(v, &end, 10); /* out of range: LONG_MIN or LONG_MAX, kept within bounds below */
    if (end == v || (*end && *end != '&'))
        return false;
    *ms = n < INTERVAL_MIN_MS ? INTERVAL_MIN_MS : n > INTERVAL_MAX_MS ? INTERVAL_MAX_MS : (int)n;
    return true;
}

bool router_events_route(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                         llmr_http_reply *reply)
{
    int interval_ms;
    if (strcmp(req->method, "GET") != 0) {
        llmr_http_reply_header(reply, "Allow", "GET");
        router_error(reply, 405, "invalid_request_error", "method_not_allowed", "/v0/events takes GET.");
    } else if (!router_need(c, LLMR_SCOPE_ADMIN, reply)) {
        /* answered 403 */
    } else if (!parse_interval(req->query, &interval_ms)) {
        router_error(reply, 400, "invalid_request_error", "invalid_value",
                     "interval_ms must be a whole number of milliseconds (%d to %d).", INTERVAL_MIN_MS,
                     INTERVAL_MAX_MS);
    } else {
        router_job_run(r, c, req, reply, events_job, interval_ms);
    }
    return true;
}
