/* The CPU path's thread pool: see thread_pool.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "thread_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct gpt_pool {
    unsigned n;               /* workers, the caller being one more */
    pthread_t *threads;
    pthread_mutex_t turn;     /* one parallel_for at a time */
    pthread_mutex_t lock;
    pthread_cond_t start, done;
    unsigned long generation; /* bumped for each job */
    unsigned pending;         /* workers still running the job */
    bool stop;
    /* the job */
    gpt_range_fn fn;
    void *ctx;
    size_t count;
};

static void range_of(size_t n, unsigned parts, unsigned k, size_t *b, size_t *e)
{
    *b = n * k / parts;
    *e = n * (k + 1) / parts;
}

typedef struct worker_arg {
    gpt_pool *p;
    unsigned index;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *w = arg;
    gpt_pool *p = w->p;
    unsigned me = w->index;
    free(w);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->start, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        gpt_range_fn fn = p->fn;
        void *ctx = p->ctx;
        size_t count = p->count;
        pthread_mutex_unlock(&p->lock);
        size_t b, e;
        range_of(count, p->n + 1, me + 1, &b, &e);
        if (b < e)
            fn(ctx, b, e);
        pthread_mutex_lock(&p->lock);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

gpt_pool *gpt_pool_create(unsigned threads)
{
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    gpt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = threads - 1;
    p->threads = calloc(p->n ? p->n : 1, sizeof *p->threads);
    pthread_mutex_init(&p->turn, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    unsigned started = 0;
    for (; p->threads && started < p->n; started++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w)
            break;
        w->p = p;
        w->index = started;
        if (pthread_create(&p->threads[started], NULL, worker, w) != 0) {
            free(w);
            break;
        }
    }
    if (!p->threads || started < p->n) {
        p->n = started;
        gpt_pool_free(p);
        return NULL;
    }
    return p;
}

void gpt_pool_free(gpt_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->turn);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p);
}

unsigned gpt_pool_threads(const gpt_pool *p)
{
    return p->n + 1;
}

void gpt_pool_for(gpt_pool *p, size_t n, gpt_range_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (p->n == 0 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->turn);
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->count = n;
    p->pending = p->n;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    size_t b, e;
    range_of(n, p->n + 1, 0, &b, &e);
    if (b < e)
        fn(ctx, b, e);
    pthread_mutex_lock(&p->lock);
    while (p->pending)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->turn);
}
