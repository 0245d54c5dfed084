/* The router's transfer loop (see router_upstream.h).  It owns the libcurl multi handle
 * (and so the cache of connections to the nodes), its thread, the queue of transfers
 * added from other threads, and the list of transfers running.
 *
 * Any thread adds a transfer to the queue under the lock and calls curl_multi_wakeup;
 * the loop's thread alone touches the multi handle: it moves the queue's transfers into
 * it, unpauses those whose resume was asked (router_upstream_resume), runs
 * curl_multi_perform (the handles' own callbacks run there), hands each finished
 * transfer to its done callback (curl_multi_info_read), asks the running ones' cancel
 * every ROUTER_UPSTREAM_CHECK_MS or when woken, and sleeps in curl_multi_poll until a
 * socket is ready, libcurl's next timeout, the next check, or a wakeup.  With nothing
 * running it sleeps until woken: an idle router spends nothing here. */
#include "router/router_upstream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"

#define COMPONENT "router"
#define IDLE_POLL_MS 60000 /* nothing running: a wakeup ends the wait anyway */

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
    xfer *active;           /* the loop's thread only */
};

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

static void *loop_main(void *arg)
{
    router_upstream *u = arg;
    uint64_t next_check = 0;
    for (;;) {
        bool stopping = take_queue(u);
        if (stopping) {
            check_cancels(u, true);
            break;
        }
        int still = 0;
        curl_multi_perform(u->multi, &still);
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
        uint64_t now = llmr_now_ms();
        if (atomic_exchange(&u->check, false) || (u->active && now >= next_check)) {
            check_cancels(u, false);
            next_check = now + ROUTER_UPSTREAM_CHECK_MS;
        }
        int wait_ms = IDLE_POLL_MS;
        if (u->active)
            wait_ms = next_check > now ? (int)(next_check - now) : 0;
        curl_multi_poll(u->multi, NULL, 0, wait_ms, NULL);
    }
    return NULL;
}

router_upstream *router_upstream_new(void)
{
    router_upstream *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->multi = curl_multi_init();
    if (!u->multi) {
        free(u);
        return NULL;
    }
    pthread_mutex_init(&u->lock, NULL);
    if (pthread_create(&u->thread, NULL, loop_main, u) != 0) {
        pthread_mutex_destroy(&u->lock);
        curl_multi_cleanup(u->multi);
        free(u);
        return NULL;
    }
    return u;
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
    curl_multi_wakeup(u->multi);
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
    curl_multi_wakeup(u->multi);
}

void router_upstream_wake(router_upstream *u)
{
    if (!u)
        return;
    atomic_store(&u->check, true);
    curl_multi_wakeup(u->multi);
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
    curl_multi_wakeup(u->multi);
    pthread_join(u->thread, NULL);
    while (u->resumes) {
        resume *next = u->resumes->next;
        free(u->resumes);
        u->resumes = next;
    }
    curl_multi_cleanup(u->multi);
    pthread_mutex_destroy(&u->lock);
    free(u);
}
