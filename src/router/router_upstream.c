/* The router's transfer loop (see router_upstream.h).  It owns the libcurl multi handle
 * (and so the cache of connections to the nodes), its thread, the queue of transfers
 * added from other threads, and the list of transfers running.
 *
 * Any thread adds a transfer to the queue under the lock and writes the loop's eventfd;
 * the loop's thread alone touches the multi handle: it moves the queue's transfers into
 * it, unpauses those whose resume was asked (router_upstream_resume), hands each
 * finished transfer to its done callback (curl_multi_info_read), asks the running ones'
 * cancel every ROUTER_UPSTREAM_CHECK_MS or when woken, and sleeps in epoll_wait until a
 * socket is ready, libcurl's next timeout, the next check, or a wakeup.  libcurl says
 * which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to call it back
 * (CURLMOPT_TIMERFUNCTION), and the loop hands it only the sockets that are ready
 * (curl_multi_socket_action; the handles' own callbacks run there): so a turn costs
 * what the ready transfers need, not a visit to every running one (with
 * curl_multi_perform, 500 streams on a 16-core machine got their first byte 1.6 ms later
 * at p50; BENCHMARKS.md).  With nothing running it sleeps until woken: an idle router spends
 * nothing here. */
#include "router/router_upstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define COMPONENT "router"
#define IDLE_POLL_MS 60000 /* nothing running: a wakeup ends the wait anyway */
#define EVENTS_A_TURN 64

typedef struct xfer {
    CURL *easy;
    router_upstream_done_fn done;
    router_upstream_cancel_fn cancel;
    void *user;
    struct xfer *prev, *next;
} xfer;

typedef struct resume {
    void *user;
    struct resume *next;
} resume;

struct router_upstream {
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t lock;   /* the queue, the resumes, stopping */
    xfer *queue_head, *queue_tail;
    resume *resumes;
    bool stopping;
    atomic_bool check;      /* ask every cancel at the next turn */
    atomic_uint running;    /* transfers in the multi handle or queued */
    int epoll_fd;           /* the sockets libcurl watches, and wake_fd */
    int wake_fd;            /* an eventfd: any thread's wakeup */
    /* the loop's thread only */
    xfer *active;
    bool timer_set;         /* libcurl wants to be called back at timer_at */
    uint64_t timer_at;
};

static void wake(router_upstream *u)
{
    uint64_t one = 1;
    ssize_t n = write(u->wake_fd, &one, sizeof one); /* EAGAIN: a wakeup is pending already */
    (void)n;
}

/* libcurl: watch socket s for what (or no more). */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    router_upstream *u = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(u->epoll_fd, EPOLL_CTL_DEL, s, NULL); /* ENOENT, EBADF: gone already */
        return 0;
    }
    struct epoll_event ev = {0};
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.fd = s;
    if (epoll_ctl(u->epoll_fd, EPOLL_CTL_MOD, s, &ev) != 0 &&
        (errno != ENOENT || epoll_ctl(u->epoll_fd, EPOLL_CTL_ADD, s, &ev) != 0)) {
        llmr_log_warn(COMPONENT, "a node connection cannot be watched: %s", strerror(errno));
        return -1; /* libcurl fails that transfer */
    }
    return 0;
}

/* libcurl: call back in timeout_ms (-1: no more). */
static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    router_upstream *u = userp;
    u->timer_set = timeout_ms >= 0;
    u->timer_at = llmr_now_ms() + (timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    return 0;
}

static void unlink_active(router_upstream *u, xfer *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        u->active = x->next;
    if (x->next)
        x->next->prev = x->prev;
}

/* x is over: out of the multi handle, its done told, freed. */
static void finish(router_upstream *u, xfer *x, CURLcode result, bool in_multi)
{
    if (in_multi) {
        curl_multi_remove_handle(u->multi, x->easy);
        unlink_active(u, x);
    }
    atomic_fetch_sub(&u->running, 1);
    x->done(x->user, x->easy, result);
    free(x);
}

/* The queue's transfers into the multi handle; true when the loop stops. */
static bool take_queue(router_upstream *u)
{
    pthread_mutex_lock(&u->lock);
    xfer *q = u->queue_head;
    u->queue_head = u->queue_tail = NULL;
    resume *rs = u->resumes;
    u->resumes = NULL;
    bool stopping = u->stopping;
    pthread_mutex_unlock(&u->lock);
    while (rs) { /* the running transfer of that user, if any (its write may run now) */
        resume *next = rs->next;
        for (xfer *x = u->active; x; x = x->next)
            if (x->user == rs->user) {
                curl_easy_pause(x->easy, CURLPAUSE_CONT);
                break;
            }
        free(rs);
        rs = next;
    }
    while (q) {
        xfer *x = q;
        q = q->next;
        x->prev = NULL;
        x->next = NULL;
        curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
        CURLMcode mc = curl_multi_add_handle(u->multi, x->easy);
        if (mc != CURLM_OK) {
            llmr_log_warn(COMPONENT, "a transfer to a node cannot start: %s", curl_multi_strerror(mc));
            finish(u, x, CURLE_FAILED_INIT, false);
            continue;
        }
        x->next = u->active;
        if (u->active)
            u->active->prev = x;
        u->active = x;
    }
    return stopping;
}

/* Every running transfer whose cancel says so (all when the loop stops) ends now. */
static void check_cancels(router_upstream *u, bool all)
{
    for (xfer *x = u->active, *next; x; x = next) {
        next = x->next;
        if (all || (x->cancel && x->cancel(x->user)))
            finish(u, x, CURLE_ABORTED_BY_CALLBACK, true);
    }
}

/* Each finished transfer to its done. */
static void read_finished(router_upstream *u)
{
    CURLMsg *m;
    int left = 0;
    while ((m = curl_multi_info_read(u->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode result = m->data.result;
        xfer *x = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
        if (x)
            finish(u, x, result, true); /* m is not used after: removing frees it */
    }
}

static void *loop_main(void *arg)
{
    router_upstream *u = arg;
    uint64_t next_check = 0;
    struct epoll_event ev[EVENTS_A_TURN];
    int still = 0;
    for (;;) {
        bool stopping = take_queue(u);
        if (stopping) {
            check_cancels(u, true);
            break;
        }
        uint64_t now = llmr_now_ms();
        if (u->timer_set && now >= u->timer_at) {
            u->timer_set = false;
            curl_multi_socket_action(u->multi, CURL_SOCKET_TIMEOUT, 0, &still);
            read_finished(u);
        }
        if (atomic_exchange(&u->check, false) || (u->active && now >= next_check)) {
            check_cancels(u, false);
            next_check = now + ROUTER_UPSTREAM_CHECK_MS;
        }
        uint64_t wait = IDLE_POLL_MS;
        if (u->active)
            wait = next_check > now ? next_check - now : 0;
        if (u->timer_set && (u->timer_at > now ? u->timer_at - now : 0) < wait)
            wait = u->timer_at > now ? u->timer_at - now : 0;
        int n = epoll_wait(u->epoll_fd, ev, EVENTS_A_TURN, (int)wait);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == u->wake_fd) {
                uint64_t count;
                ssize_t r = read(u->wake_fd, &count, sizeof count);
                (void)r;
                continue;
            }
            int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(u->multi, ev[i].data.fd, flags, &still);
        }
        read_finished(u);
    }
    return NULL;
}

router_upstream *router_upstream_new(void)
{
    router_upstream *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->multi = curl_multi_init();
    u->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    u->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = u->wake_fd};
    if (!u->multi || u->epoll_fd < 0 || u->wake_fd < 0 ||
        epoll_ctl(u->epoll_fd, EPOLL_CTL_ADD, u->wake_fd, &ev) != 0)
        goto fail;
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETDATA, u);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERDATA, u);
    pthread_mutex_init(&u->lock, NULL);
    if (pthread_create(&u->thread, NULL, loop_main, u) != 0) {
        pthread_mutex_destroy(&u->lock);
        goto fail;
    }
    return u;
fail:
    if (u->multi)
        curl_multi_cleanup(u->multi);
    if (u->epoll_fd >= 0)
        close(u->epoll_fd);
    if (u->wake_fd >= 0)
        close(u->wake_fd);
    free(u);
    return NULL;
}

bool router_upstream_add(router_upstream *u, CURL *easy, router_upstream_done_fn done,
                         router_upstream_cancel_fn cancel, void *user)
{
    xfer *x = calloc(1, sizeof *x);
    if (!x)
        return false;
    *x = (xfer){easy, done, cancel, user, NULL, NULL};
    pthread_mutex_lock(&u->lock);
    if (u->stopping) {
        pthread_mutex_unlock(&u->lock);
        free(x);
        return false;
    }
    if (u->queue_tail)
        u->queue_tail->next = x;
    else
        u->queue_head = x;
    u->queue_tail = x;
    atomic_fetch_add(&u->running, 1);
    pthread_mutex_unlock(&u->lock);
    wake(u);
    return true;
}

void router_upstream_resume(router_upstream *u, void *user)
{
    resume *rs = malloc(sizeof *rs);
    if (!rs)
        return;
    pthread_mutex_lock(&u->lock);
    rs->user = user;
    rs->next = u->resumes;
    u->resumes = rs;
    pthread_mutex_unlock(&u->lock);
    wake(u);
}

void router_upstream_wake(router_upstream *u)
{
    if (!u)
        return;
    atomic_store(&u->check, true);
    wake(u);
}

unsigned router_upstream_running(router_upstream *u)
{
    return u ? atomic_load(&u->running) : 0;
}

void router_upstream_free(router_upstream *u)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    u->stopping = true;
    pthread_mutex_unlock(&u->lock);
    wake(u);
    pthread_join(u->thread, NULL);
    while (u->resumes) {
        resume *next = u->resumes->next;
        free(u->resumes);
        u->resumes = next;
    }
    curl_multi_cleanup(u->multi); /* its last socket callbacks still find the epoll set */
    close(u->epoll_fd);
    close(u->wake_fd);
    pthread_mutex_destroy(&u->lock);
    free(u);
}
