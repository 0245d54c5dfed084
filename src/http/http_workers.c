/* The HTTP server's handler threads (see http_internal.h): a pool that grows with the
 * handlers running, up to a cap, and shrinks when idle.
 *
 * A job submitted while no thread is idle starts a new one (below the cap; at the cap
 * it waits in the queue for the first thread to finish).  A thread that waited
 * HTTP_WORKER_IDLE_MS for a job exits, so an idle server keeps no handler thread.
 * Threads are detached; http_workers_free waits until every queued job ran and every
 * thread exited. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "http/http_internal.h"

#define HTTP_WORKER_IDLE_MS 5000

typedef struct worker_job {
    http_job_fn fn;
    void *arg;
    struct worker_job *next;
} worker_job;

struct http_workers {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* a job was queued, or the pool stops */
    pthread_cond_t exited;   /* a thread exited */
    worker_job *head, *tail;
    unsigned threads, idle, max_threads;
    bool stopping;
};

static void *worker_main(void *arg)
{
    http_workers *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->head && !w->stopping) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += HTTP_WORKER_IDLE_MS / 1000;
            w->idle++;
            int rc = pthread_cond_timedwait(&w->work, &w->lock, &until);
            w->idle--;
            if (rc == ETIMEDOUT && !w->head)
                goto out;
        }
        worker_job *j = w->head;
        if (!j)
            break; /* stopping, nothing left */
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->lock);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&w->lock);
    }
out:
    w->threads--;
    pthread_cond_broadcast(&w->exited);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

http_workers *http_workers_new(unsigned max_threads)
{
    http_workers *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (llmr_cond_init_monotonic(&w->work) != 0) {
        free(w);
        return NULL;
    }
    pthread_cond_init(&w->exited, NULL);
    pthread_mutex_init(&w->lock, NULL);
    w->max_threads = max_threads ? max_threads : 1;
    return w;
}

bool http_workers_submit(http_workers *w, http_job_fn fn, void *arg)
{
    worker_job *j = malloc(sizeof *j);
    if (!j)
        return false;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->stopping) {
        pthread_mutex_unlock(&w->lock);
        free(j);
        return false;
    }
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    bool ok = true;
    if (w->idle == 0 && w->threads < w->max_threads) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker_main, w) == 0)
            w->threads++;
        else if (w->threads == 0) { /* nobody would run it */
            w->head = w->tail = NULL;
            free(j);
            ok = false;
        }
        else
            llmr_log_warn("http", "could not start a handler thread: the request waits for one");
        pthread_attr_destroy(&attr);
    }
    else
        pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    return ok;
}

unsigned http_workers_threads(http_workers *w)
{
    pthread_mutex_lock(&w->lock);
    unsigned n = w->threads;
    pthread_mutex_unlock(&w->lock);
    return n;
}

void http_workers_drain(http_workers *w)
{
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->work);
    while (w->threads > 0)
        pthread_cond_wait(&w->exited, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

void http_workers_free(http_workers *w)
{
    if (!w)
        return;
    http_workers_drain(w);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->exited);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
