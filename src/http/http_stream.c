/* Streamed responses of the HTTP server (see http_server.h): a byte queue that any
 * thread fills with llmr_http_stream_write, drained by the content reader that
 * libmicrohttpd calls on one of its event-loop threads.
 *
 * The reader never blocks: with bytes queued it hands them over; with none (and the
 * stream not ended) it suspends the connection, under the stream's lock, and notes
 * that it did; a write, the end, or a cut takes the same lock and resumes the
 * connection when it was suspended, so a write between "queue empty" and
 * "suspended" cannot be missed.  A suspended connection is not polled by
 * libmicrohttpd: the server's watch thread calls http_stream_check every
 * HTTP_WATCH_TICK_MS, which resumes the connection (to end it with an error) when
 * the client hung up or the server stops, so a client that leaves while the producer
 * is silent (a long prompt being read) is noticed at once, not at the next write.
 *
 * Lifetime: the stream has two owners, the producer and libmicrohttpd's response.
 * Whichever lets go last frees it.  When the response is released before the
 * producer ended the stream, the client did not get the whole stream: on_close runs
 * then, once, and never after llmr_http_stream_end was called; llmr_http_stream_end
 * waits for an on_close that is running on another thread, so the producer's user
 * data stays valid while on_close uses it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "http/http_internal.h"

/* Reader block size: what libmicrohttpd asks for at most per call. */
#define STREAM_BLOCK (16 * 1024)
/* Bytes already sent are dropped from the queue's front once there are this many. */
#define STREAM_COMPACT (64 * 1024)
/* A client that lets more than this wait unread is cut (llmr_http_server_options). */
#define STREAM_QUEUE_MAX_DEFAULT ((size_t)16 << 20)

struct llmr_http_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* bytes queued, ended, gone, or on_close returned */
    llmr_strbuf queue;          /* bytes not yet handed to the reader start at head */
    size_t head;
    int owners;                 /* producer + response */
    bool ended;                 /* the producer called llmr_http_stream_end */
    bool gone;                  /* the client left, the server stops, or the
                                   response was released: writes fail */
    bool close_called;          /* on_close was started (it runs at most once) */
    bool closing;               /* on_close is running now, on thread closer */
    pthread_t closer;
    llmr_http_close_fn on_close;
    void *user;
    struct MHD_Connection *conn; /* NULL once the response was released */
    bool suspended;             /* the reader suspended conn: the next write resumes it */
    http_watch *watch;          /* checks the client while suspended (NULL: none) */
    const atomic_bool *stopping;
    http_access *access;        /* the request's record, finished at the end */
    unsigned status;            /* the status the stream was sent with */
    atomic_uint *open_streams;  /* the server's count of streams its connections still
                                   send (NULL: none, or released already) */
    size_t queue_max;           /* bytes unread at most */
    bool too_slow;              /* cut for that: said once in the log */
};

static void stream_free(llmr_http_stream *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    llmr_strbuf_free(&s->queue);
    free(s);
}

/* Drops one owner's hold; the last one frees. */
static void stream_release(llmr_http_stream *s)
{
    pthread_mutex_lock(&s->lock);
    bool last = --s->owners == 0;
    pthread_mutex_unlock(&s->lock);
    if (last)
        stream_free(s);
}

/* True while the client's socket is open for reading: a peer that closed its side
 * reads as end of file, a reset as an error.  Bytes it already sent (a pipelined
 * request) count as alive. */
bool http_client_connected(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info)
        return true;
    struct pollfd p = {.fd = info->connect_fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    if (n <= 0)
        return true;
    if (p.revents & (POLLERR | POLLNVAL))
        return false;
    char c;
    ssize_t r = recv(info->connect_fd, &c, 1, MSG_PEEK);
    if (r > 0)
        return true;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return true;
    return false;
}

/* Resumes the connection the reader suspended (the lock is held). */
static void wake_reader(llmr_http_stream *s)
{
    if (s->suspended && s->conn) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
    }
}

void http_stream_check(llmr_http_stream *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->suspended && s->conn &&
        (atomic_load(s->stopping) || !http_client_connected(s->conn))) {
        s->gone = true;
        wake_reader(s);
    }
    pthread_mutex_unlock(&s->lock);
}

/* libmicrohttpd's content reader: up to max queued bytes; none yet: the connection
 * is suspended until there are. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    llmr_http_stream *s = cls;
    (void)pos;
    pthread_mutex_lock(&s->lock);
    if (!s->gone && atomic_load(s->stopping))
        s->gone = true;
    ssize_t ret;
    size_t avail = s->queue.len - s->head;
    if (avail > 0 && !s->gone) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, s->queue.data + s->head, n);
        s->head += n;
        if (s->head == s->queue.len) {
            llmr_strbuf_reset(&s->queue);
            s->head = 0;
        } else if (s->head >= STREAM_COMPACT) {
            memmove(s->queue.data, s->queue.data + s->head, s->queue.len - s->head);
            s->queue.len -= s->head;
            s->queue.data[s->queue.len] = '\0';
            s->head = 0;
        }
        ret = (ssize_t)n;
    } else if (s->gone) {
        /* Closes the connection; the response is released after. */
        ret = MHD_CONTENT_READER_END_WITH_ERROR;
    } else if (s->ended) {
        ret = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        s->suspended = true;
        MHD_suspend_connection(s->conn);
        ret = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return ret;
}

/* libmicrohttpd let go of the response: the request finished, failed, or the client
 * left.  If the producer has not ended the stream, the client missed its end. */
static void stream_response_released(void *cls)
{
    llmr_http_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    http_watch *watch = s->watch;
    s->watch = NULL;
    pthread_mutex_unlock(&s->lock);
    if (watch) /* its lock comes before the stream's */
        http_watch_stream_remove(watch, s);
    pthread_mutex_lock(&s->lock);
    s->gone = true;
    s->suspended = false;
    s->conn = NULL;
    if (s->open_streams) /* sent, or its client left: the server no longer waits for it
                            (and may be freed before the producer ends the stream) */
        atomic_fetch_sub(s->open_streams, 1);
    s->open_streams = NULL;
    bool call = !s->ended && !s->close_called && s->on_close;
    if (call) {
        s->close_called = true;
        s->closing = true;
        s->closer = pthread_self();
    }
    pthread_mutex_unlock(&s->lock);
    if (call) {
        /* Outside the lock: on_close may write to or end the stream. */
        s->on_close(s->user);
        pthread_mutex_lock(&s->lock);
        s->closing = false;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    }
    stream_release(s);
}

struct MHD_Response *llmr_http_stream_open(struct MHD_Connection *conn,
                                           const atomic_bool *stopping,
                                           llmr_http_close_fn on_close, void *user,
                                           llmr_http_stream **out)
{
    *out = NULL;
    llmr_http_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (llmr_cond_init_monotonic(&s->cond) != 0) {
        free(s);
        return NULL;
    }
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        pthread_cond_destroy(&s->cond);
        free(s);
        return NULL;
    }
    llmr_strbuf_init(&s->queue);
    s->owners = 2;
    s->queue_max = STREAM_QUEUE_MAX_DEFAULT;
    s->on_close = on_close;
    s->user = user;
    s->conn = conn;
    s->stopping = stopping;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s, stream_response_released);
    if (!resp) {
        stream_free(s);
        return NULL;
    }
    *out = s;
    return resp;
}

bool llmr_http_stream_write(llmr_http_stream *s, const char *data, size_t len)
{
    if (!s)
        return false;
    pthread_mutex_lock(&s->lock);
    if (!s->gone && !s->ended && s->queue.len - s->head + len > s->queue_max) {
        s->gone = true; /* the client reads too slowly: its stream is cut */
        s->too_slow = true;
        wake_reader(s);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        llmr_log_warn("http", "a client reads a stream too slowly: %zu bytes wait unread (at most %zu): its "
                              "connection is closed",
                      s->queue.len - s->head, s->queue_max);
        return false;
    }
    bool ok = !s->gone && !s->ended && llmr_strbuf_append(&s->queue, data, len);
    if (!ok && llmr_strbuf_failed(&s->queue))
        s->gone = true; /* out of memory: the client cannot get a whole stream */
    if (ok && len)
        wake_reader(s);
    else if (s->gone)
        wake_reader(s);
    pthread_mutex_unlock(&s->lock);
    return ok;
}

void http_stream_set_server(llmr_http_stream *s, atomic_uint *open_streams, size_t queue_max,
                            http_watch *watch)
{
    if (watch && !http_watch_stream_add(watch, s))
        watch = NULL; /* out of memory: a hang-up is noticed at the next write */
    pthread_mutex_lock(&s->lock);
    s->watch = watch;
    s->open_streams = open_streams;
    if (open_streams)
        atomic_fetch_add(open_streams, 1);
    if (queue_max)
        s->queue_max = queue_max;
    pthread_mutex_unlock(&s->lock);
}

void http_stream_take_access(llmr_http_stream *s, http_access *a, unsigned status)
{
    pthread_mutex_lock(&s->lock);
    s->access = a;
    s->status = status;
    pthread_mutex_unlock(&s->lock);
}

void llmr_http_stream_note(llmr_http_stream *s, const llmr_http_note *n)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    http_access_note(s->access, n);
    pthread_mutex_unlock(&s->lock);
}

void llmr_http_stream_end(llmr_http_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    /* the client left (or the server stopped) before the producer ended: 499 */
    bool cut = s->gone && !s->ended;
    http_access *a = s->access;
    s->access = NULL;
    s->ended = true;
    wake_reader(s);
    pthread_cond_broadcast(&s->cond);
    /* An on_close running on another thread still uses the producer's user data. */
    while (s->closing && !pthread_equal(s->closer, pthread_self()))
        pthread_cond_wait(&s->cond, &s->lock);
    unsigned status = s->status;
    pthread_mutex_unlock(&s->lock);
    http_access_finish(a, status, cut);
    stream_release(s);
}
