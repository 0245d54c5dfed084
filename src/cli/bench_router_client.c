/* The load generator of `llmr bench router`: see bench_router_client.h.
 *
 * Each thread owns some connections and an epoll loop (level-triggered).  A
 * connection goes: waiting (its start in the ramp, or a short pause after a failure)
 * -> connecting -> sending -> head (status line and headers) -> body (chunked or
 * Content-Length; the stream's events are read line by line) -> the next request on
 * the same connection, or a new connection when the server closes it.  A request
 * sent on a reused connection that the server closed before answering (the
 * keep-alive race) is sent again on a new connection and not counted. */
#define _GNU_SOURCE
#include "cli/bench_router_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define READ_BLOCK (64 * 1024)
#define MAX_HEAD (16 * 1024)
#define SCAN_NS 10000000ull        /* ramp starts and hangs are looked at this often */
#define RETRY_PAUSE_NS 10000000ull /* after a failed connection, before the next */

enum { C_WAITING, C_CONNECTING, C_SENDING, C_HEAD, C_BODY, C_IDLE };
enum { K_SIZE, K_DATA, K_DATA_END, K_TRAILER }; /* where a chunked body is */

typedef struct conn {
    int fd;
    uint32_t index, gen;    /* in its worker; gen counts its sockets (stale events) */
    int state;
    bool reused;            /* the connection served a request before this one */
    bool keep_alive;        /* the answer lets the connection be used again */
    size_t sent;
    uint64_t start_at_ns;   /* C_WAITING: when to begin */
    uint64_t last_io_ns;
    struct timespec sent_rt; /* CLOCK_REALTIME just before the request was written */
    char *in;               /* received, not parsed yet */
    size_t in_len, in_cap;
    bool chunked;
    int64_t content_left;   /* Content-Length body: bytes to come; -1: none given */
    size_t chunk_left;
    int chunk_phase;
    bool got_byte, got_body_byte;
    char *sse;              /* body text from the last unfinished line on */
    size_t sse_len, sse_cap;
    bool done_event, error_event;
    uint32_t content_events;
    int64_t usage_tokens;   /* -1: no usage seen */
    char err_body[200];     /* the start of an error answer */
    size_t err_len;
    brc_result r;
} conn;

typedef struct worker {
    brc_load *load;
    pthread_t thread;
    bool started;
    int ep;
    conn **conns;
    size_t n;
    brc_result *res;
    size_t n_res, cap_res;
} worker;

struct brc_load {
    brc_options o;
    char *request;
    size_t request_len;
    struct sockaddr_in addr;
    conn *conns;
    worker *w;
    unsigned n_w;
    atomic_bool stop, abort;
    atomic_uint_fast64_t done, errors, in_flight, tokens;
    atomic_bool user_stamps; /* some first byte had no kernel timestamp */
    pthread_mutex_t lock;
    char first_error[300];
    brc_result *all;
    size_t n_all;
};

const char *brc_outcome_name(brc_outcome o)
{
    static const char *const names[BRC_OUTCOMES] = {"ok",     "error_event", "http_error", "cut",
                                                     "closed", "hung",        "connect",    "bad_http"};
    return (unsigned)o < BRC_OUTCOMES ? names[o] : "?";
}

static void note_error(brc_load *l, const char *fmt, const char *detail, size_t len)
{
    pthread_mutex_lock(&l->lock);
    if (!l->first_error[0]) {
        char d[220];
        size_t n = len < sizeof d - 1 ? len : sizeof d - 1;
        memcpy(d, detail, n);
        d[n] = 0;
        for (size_t i = 0; i < n; i++)
            if (d[i] == '\r' || d[i] == '\n')
                d[i] = ' ';
        snprintf(l->first_error, sizeof l->first_error, fmt, d);
    }
    pthread_mutex_unlock(&l->lock);
}

/* ---- a request's end ------------------------------------------------------------------ */

static bool push_result(worker *w, const brc_result *r)
{
    if (w->n_res == w->cap_res) {
        size_t cap = w->cap_res ? w->cap_res * 2 : 1024;
        brc_result *p = realloc(w->res, cap * sizeof *p);
        if (!p)
            return false;
        w->res = p;
        w->cap_res = cap;
    }
    w->res[w->n_res++] = *r;
    return true;
}

/* What an epoll event carries: the connection and which of its sockets. */
static epoll_data_t ev_data(const conn *c)
{
    epoll_data_t d;
    d.u64 = (uint64_t)c->gen << 32 | c->index;
    return d;
}

static void conn_close(conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->reused = false;
}

static void conn_begin(worker *w, conn *c);

/* Records the request and starts the next one (unless the load stops). */
static void conn_finish(worker *w, conn *c, brc_outcome outcome)
{
    brc_load *l = w->load;
    c->r.outcome = (uint8_t)outcome;
    c->r.end_ns = llmr_now_ns();
    c->r.tokens = c->usage_tokens >= 0 ? (uint32_t)c->usage_tokens : c->content_events;
    push_result(w, &c->r);
    atomic_fetch_sub(&l->in_flight, 1);
    atomic_fetch_add(&l->done, 1);
    atomic_fetch_add(&l->tokens, c->r.tokens);
    if (outcome != BRC_OK)
        atomic_fetch_add(&l->errors, 1);
    if (outcome == BRC_HTTP_ERROR)
        note_error(l, "%s", c->err_body, c->err_len);
    else if (outcome != BRC_OK && outcome != BRC_ERROR_EVENT)
        note_error(l, "%s", brc_outcome_name(outcome), strlen(brc_outcome_name(outcome)));
    bool healthy = outcome == BRC_OK || outcome == BRC_ERROR_EVENT || outcome == BRC_HTTP_ERROR;
    if (!healthy || !c->keep_alive)
        conn_close(c);
    else
        c->reused = true;
    if (atomic_load(&l->stop)) {
        conn_close(c);
        c->state = C_IDLE;
    } else if (!healthy) {
        c->state = C_WAITING; /* a short pause, so a refusing router is not hammered */
        c->start_at_ns = llmr_now_ns() + RETRY_PAUSE_NS;
    } else {
        conn_begin(w, c);
    }
}

/* The answer is complete: what it was. */
static void conn_complete(worker *w, conn *c)
{
    brc_outcome o;
    if (c->r.status != 200)
        o = BRC_HTTP_ERROR;
    else if (c->error_event)
        o = c->done_event ? BRC_ERROR_EVENT : BRC_CUT;
    else
        o = c->done_event ? BRC_OK : BRC_CUT;
    conn_finish(w, c, o);
}

/* ---- the body ---------------------------------------------------------------------------- */

static void sse_line(brc_load *l, conn *c, const char *line, size_t len)
{
    if (len < 5 || memcmp(line, "data:", 5) != 0)
        return;
    const char *p = line + 5;
    size_t n = len - 5;
    if (n && *p == ' ')
        p++, n--;
    if (n == 6 && memcmp(p, "[DONE]", 6) == 0) {
        c->done_event = true;
    } else if (n >= 8 && memcmp(p, "{\"error\"", 8) == 0) {
        c->error_event = true;
        if (!c->err_len) {
            c->err_len = n < sizeof c->err_body ? n : sizeof c->err_body;
            memcpy(c->err_body, p, c->err_len);
            note_error(l, "error event: %s", c->err_body, c->err_len);
        }
    } else {
        c->content_events++;
        static const char key[] = "\"completion_tokens\":";
        const char *u = memmem(p, n, key, sizeof key - 1);
        if (u)
            c->usage_tokens = strtoll(u + sizeof key - 1, NULL, 10);
    }
}

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need)
        cap2 *= 2;
    char *p = realloc(*buf, cap2);
    if (!p)
        return false;
    *buf = p;
    *cap = cap2;
    return true;
}

/* Body bytes: an event stream is read line by line; an error answer keeps its start. */
static void body_bytes(brc_load *l, conn *c, const char *data, size_t n)
{
    if (c->r.status != 200) {
        size_t room = sizeof c->err_body - c->err_len;
        size_t k = n < room ? n : room;
        memcpy(c->err_body + c->err_len, data, k);
        c->err_len += k;
        return;
    }
    if (!grow(&c->sse, &c->sse_cap, c->sse_len + n))
        return;
    memcpy(c->sse + c->sse_len, data, n);
    c->sse_len += n;
    size_t start = 0;
    for (size_t i = 0; i < c->sse_len; i++) {
        if (c->sse[i] != '\n')
            continue;
        size_t end = i > start && c->sse[i - 1] == '\r' ? i - 1 : i;
        sse_line(l, c, c->sse + start, end - start);
        start = i + 1;
    }
    memmove(c->sse, c->sse + start, c->sse_len - start);
    c->sse_len -= start;
}

/* Parses what the buffer holds of a chunked body; true when the body is complete.
 * *bad when it is not chunked encoding. */
static bool parse_chunked(brc_load *l, conn *c, size_t *used, bool *bad)
{
    size_t pos = 0;
    for (;;) {
        char *avail = c->in + pos;
        size_t left = c->in_len - pos;
        if (c->chunk_phase == K_DATA) {
            size_t k = left < c->chunk_left ? left : c->chunk_left;
            if (!k)
                break;
            body_bytes(l, c, avail, k);
            pos += k;
            c->chunk_left -= k;
            if (!c->chunk_left)
                c->chunk_phase = K_DATA_END;
            continue;
        }
        char *eol = memmem(avail, left, "\r\n", 2);
        if (!eol)
            break;
        size_t line = (size_t)(eol - avail);
        pos += line + 2;
        if (c->chunk_phase == K_DATA_END) {
            if (line) {
                *bad = true;
                break;
            }
            c->chunk_phase = K_SIZE;
        } else if (c->chunk_phase == K_SIZE) {
            char *end = NULL;
            unsigned long size = strtoul(avail, &end, 16);
            if (end == avail) {
                *bad = true;
                break;
            }
            c->chunk_left = size;
            c->chunk_phase = size ? K_DATA : K_TRAILER;
        } else if (line == 0) { /* the empty line after the last chunk (and trailers) */
            *used = pos;
            return true;
        }
    }
    *used = pos;
    return false;
}

/* Parses the body bytes in the buffer; true when the answer is complete. */
static bool parse_body(brc_load *l, conn *c, bool *bad)
{
    size_t used = 0;
    bool complete;
    if (c->chunked) {
        complete = parse_chunked(l, c, &used, bad);
    } else {
        size_t k = c->content_left >= 0 && (uint64_t)c->content_left < c->in_len ? (size_t)c->content_left
                                                                                 : c->in_len;
        body_bytes(l, c, c->in, k);
        used = k;
        if (c->content_left >= 0)
            c->content_left -= (int64_t)k;
        complete = c->content_left == 0;
    }
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    return complete;
}

/* ---- the head -------------------------------------------------------------------------- */

static bool header_is(const char *line, size_t len, const char *name, const char **value)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    *value = line + n + 1;
    while (**value == ' ')
        (*value)++;
    return true;
}

/* Parses the status line and headers once they are all in; 1: done, 0: more to come,
 * -1: not HTTP as expected. */
static int parse_head(conn *c)
{
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return c->in_len > MAX_HEAD ? -1 : 0;
    *end = 0;
    unsigned major = 0, minor = 0, status = 0;
    if (sscanf(c->in, "HTTP/%u.%u %u", &major, &minor, &status) != 3 || status < 100 || status > 999)
        return -1;
    c->r.status = (uint16_t)status;
    c->keep_alive = major == 1 && minor >= 1;
    c->chunked = false;
    c->content_left = -1;
    for (char *line = strstr(c->in, "\r\n"); line;) {
        line += 2;
        char *next = strstr(line, "\r\n");
        size_t len = next ? (size_t)(next - line) : strlen(line);
        const char *v;
        if (header_is(line, len, "Transfer-Encoding", &v))
            c->chunked = strncasecmp(v, "chunked", 7) == 0;
        else if (header_is(line, len, "Content-Length", &v))
            c->content_left = strtoll(v, NULL, 10);
        else if (header_is(line, len, "Connection", &v) && strncasecmp(v, "close", 5) == 0)
            c->keep_alive = false;
        else if (header_is(line, len, "X-Llmr-Upstream-Ttfb-Us", &v))
            c->r.upstream_us = strtoll(v, NULL, 10);
        line = next;
    }
    if (!c->chunked && c->content_left < 0)
        c->keep_alive = false; /* the body runs to the close */
    size_t head = (size_t)(end - c->in) + 4;
    memmove(c->in, c->in + head, c->in_len - head);
    c->in_len -= head;
    c->state = C_BODY;
    return 1;
}

/* ---- the socket ------------------------------------------------------------------------ */

static int64_t us_between(const struct timespec *a, const struct timespec *b)
{
    return ((int64_t)b->tv_sec - (int64_t)a->tv_sec) * 1000000 + ((int64_t)b->tv_nsec - (int64_t)a->tv_nsec) / 1000;
}

/* The connection failed or the server closed it: what that means for the request. */
static void conn_lost(worker *w, conn *c)
{
    if (!c->got_byte && c->reused) { /* the keep-alive race: once more, on a new connection */
        conn_close(c);
        atomic_fetch_sub(&w->load->in_flight, 1);
        conn_begin(w, c);
        return;
    }
    if (c->state == C_BODY && !c->chunked && c->content_left < 0) {
        conn_close(c);
        conn_complete(w, c); /* a body that ran to the close */
        return;
    }
    conn_finish(w, c, !c->got_byte ? (c->state == C_CONNECTING ? BRC_CONNECT : BRC_CLOSED) : BRC_CUT);
}

static void conn_send(worker *w, conn *c)
{
    brc_load *l = w->load;
    if (c->sent == 0)
        clock_gettime(CLOCK_REALTIME, &c->sent_rt);
    ssize_t n = send(c->fd, l->request + c->sent, l->request_len - c->sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0) {
        conn_lost(w, c);
        return;
    }
    c->sent += (size_t)n;
    c->last_io_ns = llmr_now_ns();
    if (c->sent < l->request_len)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data = ev_data(c)};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->state = C_HEAD;
}

static bool conn_open(worker *w, conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    c->gen++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data = ev_data(c)};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        return false;
    int rc = connect(c->fd, (const struct sockaddr *)&w->load->addr, sizeof w->load->addr);
    if (rc != 0 && errno != EINPROGRESS)
        return false;
    c->state = rc == 0 ? C_SENDING : C_CONNECTING;
    return true;
}

static void conn_begin(worker *w, conn *c)
{
    brc_load *l = w->load;
    memset(&c->r, 0, sizeof c->r);
    c->r.ttfb_us = -1;
    c->r.upstream_us = -1;
    c->r.start_ns = llmr_now_ns();
    c->last_io_ns = c->r.start_ns;
    c->sent = 0;
    c->in_len = c->sse_len = c->err_len = 0;
    c->chunk_left = 0;
    c->chunk_phase = K_SIZE;
    c->got_byte = c->got_body_byte = c->done_event = c->error_event = false;
    c->content_events = 0;
    c->usage_tokens = -1;
    atomic_fetch_add(&l->in_flight, 1);
    if (c->fd >= 0) { /* keep-alive: the next request on the same connection */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data = ev_data(c)};
        epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->state = C_SENDING;
    } else if (!conn_open(w, c)) {
        c->state = C_CONNECTING;
        conn_finish(w, c, BRC_CONNECT);
        return;
    }
    if (c->state == C_SENDING)
        conn_send(w, c);
}

/* One recvmsg: the bytes, and the kernel's receive time of the data read. */
static ssize_t read_stamped(conn *c, struct timespec *stamp, bool *kernel)
{
    if (!grow(&c->in, &c->in_cap, c->in_len + READ_BLOCK))
        return -1;
    struct iovec iov = {c->in + c->in_len, c->in_cap - c->in_len};
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec)) * 2];
        struct cmsghdr align;
    } control;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT);
    *kernel = false;
    for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h))
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
            memcpy(stamp, CMSG_DATA(h), sizeof *stamp);
            *kernel = true;
        }
    if (n > 0 && !*kernel)
        clock_gettime(CLOCK_REALTIME, stamp);
    return n;
}

static void conn_readable(worker *w, conn *c)
{
    brc_load *l = w->load;
    struct timespec stamp;
    bool kernel;
    ssize_t n = read_stamped(c, &stamp, &kernel);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_lost(w, c);
        return;
    }
    c->in_len += (size_t)n;
    c->got_byte = true;
    c->last_io_ns = llmr_now_ns();
    if (c->state == C_HEAD) {
        int h = parse_head(c);
        if (h < 0) {
            conn_finish(w, c, BRC_BAD);
            return;
        }
        if (h == 0)
            return;
    }
    if (c->state != C_BODY)
        return;
    if (!c->got_body_byte && c->in_len) {
        c->got_body_byte = true;
        c->r.ttfb_us = us_between(&c->sent_rt, &stamp);
        if (!kernel)
            atomic_store(&l->user_stamps, true);
    }
    bool bad = false;
    bool complete = parse_body(l, c, &bad);
    if (bad)
        conn_finish(w, c, BRC_BAD);
    else if (complete)
        conn_complete(w, c);
}

static void conn_event(worker *w, conn *c, uint32_t events)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            conn_finish(w, c, BRC_CONNECT);
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        c->state = C_SENDING;
    }
    if (c->state == C_SENDING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            conn_send(w, c);
        return;
    }
    if (c->state == C_HEAD || c->state == C_BODY)
        conn_readable(w, c);
}

/* ---- the threads ----------------------------------------------------------------------- */

static bool in_request(const conn *c)
{
    return c->state != C_WAITING && c->state != C_IDLE;
}

/* Starts those whose time came, ends hung ones; false when nothing is left to do. */
static bool scan(worker *w, uint64_t now)
{
    brc_load *l = w->load;
    bool stop = atomic_load(&l->stop), busy = false;
    uint64_t hang_ns = (uint64_t)l->o.hang_ms * 1000000u;
    for (size_t i = 0; i < w->n; i++) {
        conn *c = w->conns[i];
        if (c->state == C_WAITING) {
            if (stop) {
                conn_close(c);
                c->state = C_IDLE;
            } else if (now >= c->start_at_ns) {
                conn_begin(w, c);
            }
        } else if (in_request(c) && now - c->last_io_ns > hang_ns) {
            conn_finish(w, c, BRC_HUNG);
        }
        busy = busy || c->state != C_IDLE;
    }
    return busy;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    brc_load *l = w->load;
    struct epoll_event evs[128];
    uint64_t next_scan = 0;
    while (!atomic_load(&l->abort)) {
        uint64_t now = llmr_now_ns();
        if (now >= next_scan) {
            if (!scan(w, now))
                break;
            next_scan = now + SCAN_NS;
        }
        int timeout = (int)((next_scan - now) / 1000000u) + 1;
        int n = epoll_wait(w->ep, evs, 128, timeout);
        for (int i = 0; i < n && !atomic_load(&l->abort); i++) {
            uint32_t index = (uint32_t)evs[i].data.u64, gen = (uint32_t)(evs[i].data.u64 >> 32);
            conn *c = index < w->n ? w->conns[index] : NULL;
            if (c && c->gen == gen && c->fd >= 0 && in_request(c))
                conn_event(w, c, evs[i].events);
        }
    }
    for (size_t i = 0; i < w->n; i++) {
        if (in_request(w->conns[i]))
            atomic_fetch_sub(&l->in_flight, 1); /* aborted: not recorded */
        conn_close(w->conns[i]);
        w->conns[i]->state = C_IDLE;
    }
    return NULL;
}

static bool build_request(brc_load *l, llmr_strbuf *err)
{
    size_t body = strlen(l->o.body);
    llmr_strbuf r = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&r,
                       "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nContent-Type: application/json\r\n"
                       "Accept: text/event-stream\r\nContent-Length: %zu\r\n\r\n%s",
                       l->o.path, l->o.port, body, l->o.body);
    if (llmr_strbuf_failed(&r)) {
        llmr_strbuf_free(&r);
        llmr_strbuf_puts(err, "out of memory");
        return false;
    }
    l->request_len = r.len;
    l->request = llmr_strbuf_take(&r);
    return true;
}

llmr_status brc_start(const brc_options *o, brc_load **out, llmr_strbuf *err)
{
    *out = NULL;
    brc_load *l = calloc(1, sizeof *l);
    if (!l) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    l->o = *o;
    if (l->o.threads < 1)
        l->o.threads = 1;
    if (l->o.threads > l->o.connections)
        l->o.threads = l->o.connections;
    pthread_mutex_init(&l->lock, NULL);
    l->addr.sin_family = AF_INET;
    l->addr.sin_port = htons((uint16_t)o->port);
    l->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    l->conns = calloc(o->connections, sizeof *l->conns);
    l->w = calloc(l->o.threads, sizeof *l->w);
    for (unsigned k = 0; l->conns && k < o->connections; k++)
        l->conns[k].fd = -1;
    for (unsigned t = 0; l->w && t < l->o.threads; t++)
        l->w[t].ep = -1;
    if (!l->conns || !l->w || !build_request(l, err)) {
        if (!err->len)
            llmr_strbuf_puts(err, "out of memory");
        brc_free(l);
        return LLMR_OOM_RAM;
    }
    l->n_w = l->o.threads;
    uint64_t t0 = llmr_now_ns();
    for (unsigned t = 0; t < l->n_w; t++) {
        worker *w = &l->w[t];
        w->load = l;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->conns = calloc(o->connections / l->n_w + 1, sizeof *w->conns);
        if (w->ep < 0 || !w->conns) {
            llmr_strbuf_printf(err, "cannot set up the client's event loops: %s", strerror(errno));
            brc_abort(l);
            brc_join(l);
            brc_free(l);
            return LLMR_INTERNAL;
        }
    }
    for (unsigned k = 0; k < o->connections; k++) {
        conn *c = &l->conns[k];
        c->state = C_WAITING;
        c->start_at_ns = t0 + (uint64_t)o->ramp_ms * 1000000u * k / o->connections;
        worker *w = &l->w[k % l->n_w];
        c->index = (uint32_t)w->n;
        w->conns[w->n++] = c;
    }
    for (unsigned t = 0; t < l->n_w; t++) {
        if (pthread_create(&l->w[t].thread, NULL, worker_main, &l->w[t]) != 0) {
            llmr_strbuf_puts(err, "cannot start the client's threads");
            brc_abort(l);
            brc_join(l);
            brc_free(l);
            return LLMR_INTERNAL;
        }
        l->w[t].started = true;
    }
    *out = l;
    return LLMR_OK;
}

void brc_live_counts(brc_load *l, brc_live *out)
{
    out->done = atomic_load(&l->done);
    out->errors = atomic_load(&l->errors);
    out->in_flight = atomic_load(&l->in_flight);
    out->tokens = atomic_load(&l->tokens);
}

void brc_stop_issuing(brc_load *l)
{
    atomic_store(&l->stop, true);
}

void brc_abort(brc_load *l)
{
    atomic_store(&l->stop, true);
    atomic_store(&l->abort, true);
}

void brc_join(brc_load *l)
{
    size_t total = 0;
    for (unsigned t = 0; t < l->n_w; t++) {
        if (l->w[t].started)
            pthread_join(l->w[t].thread, NULL);
        l->w[t].started = false;
        total += l->w[t].n_res;
    }
    free(l->all);
    l->all = malloc((total ? total : 1) * sizeof *l->all);
    l->n_all = 0;
    for (unsigned t = 0; l->all && t < l->n_w; t++) {
        memcpy(l->all + l->n_all, l->w[t].res, l->w[t].n_res * sizeof *l->all);
        l->n_all += l->w[t].n_res;
    }
}

const brc_result *brc_results(brc_load *l, size_t *n)
{
    *n = l->n_all;
    return l->all;
}

bool brc_kernel_timestamps(const brc_load *l)
{
    return !atomic_load(&l->user_stamps);
}

const char *brc_first_error(const brc_load *l)
{
    return l->first_error;
}

void brc_free(brc_load *l)
{
    if (!l)
        return;
    for (unsigned t = 0; l->w && t < l->o.threads; t++) {
        if (l->w[t].ep >= 0)
            close(l->w[t].ep);
        free(l->w[t].conns);
        free(l->w[t].res);
    }
    for (unsigned k = 0; l->conns && k < l->o.connections; k++) {
        conn_close(&l->conns[k]);
        free(l->conns[k].in);
        free(l->conns[k].sse);
    }
    free(l->conns);
    free(l->w);
    free(l->all);
    free(l->request);
    pthread_mutex_destroy(&l->lock);
    free(l);
}
