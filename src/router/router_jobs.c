/* The router's running work, and requests that run on a thread of their own.
 *
 * The HTTP server sends an answer when its handler returns, and a stream's bytes only
 * after that; the dashboard's event stream (router_events.c) writes its stream from a
 * loop of its own.  So its handler hands the request (copied) to a job thread and waits
 * only until the job has replied: a whole answer given, or a stream opened
 * (router_job_replied).  The job goes on writing the stream after the handler has
 * returned; it never touches the reply again.  (Proxied requests need no thread of
 * their own: their streams run on the transfer loop, router_proxy.c.)
 *
 * The router counts its jobs (those threads, and each proxied request from its
 * handler's start to its end: router_jobs_begin, router_jobs_end), so that
 * llmr_router_drain can wait for running work and llmr_router_stop for the last job
 * before it frees what they use (router_jobs_wait). */
#include "router/router_internal.h"

#include <time.h>

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct router_job {
    llmr_router *r;
    router_caller caller;     /* key_id owned */
    llmr_http_request req;    /* its strings are the copies below */
    char *method, *path, *query, *body, *remote, *request_id;
    llmr_http_reply *reply;   /* the handler's, until replied */
    router_job_fn fn;
    int arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool replied;
    int refs;                 /* the handler's and the thread's */
};

void router_jobs_init(llmr_router *r)
{
    pthread_mutex_init(&r->jobs_lock, NULL);
    pthread_cond_init(&r->jobs_done, NULL);
    r->jobs = 0;
}

bool router_jobs_idle(llmr_router *r, uint64_t deadline_ms)
{
    pthread_mutex_lock(&r->jobs_lock);
    while (r->jobs > 0 && router_now_ms() < deadline_ms) {
        pthread_mutex_unlock(&r->jobs_lock);
        struct timespec nap = {0, 20 * 1000000L};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&r->jobs_lock);
    }
    bool idle = r->jobs == 0;
    pthread_mutex_unlock(&r->jobs_lock);
    return idle;
}

void router_jobs_wait(llmr_router *r)
{
    pthread_mutex_lock(&r->jobs_lock);
    while (r->jobs > 0)
        pthread_cond_wait(&r->jobs_done, &r->jobs_lock);
    pthread_mutex_unlock(&r->jobs_lock);
    pthread_mutex_destroy(&r->jobs_lock);
    pthread_cond_destroy(&r->jobs_done);
}

void router_jobs_begin(llmr_router *r)
{
    pthread_mutex_lock(&r->jobs_lock);
    r->jobs++;
    pthread_mutex_unlock(&r->jobs_lock);
}

void router_jobs_end(llmr_router *r)
{
    pthread_mutex_lock(&r->jobs_lock);
    if (--r->jobs == 0)
        pthread_cond_broadcast(&r->jobs_done);
    pthread_mutex_unlock(&r->jobs_lock);
}

void router_job_replied(router_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->lock);
    j->replied = true;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

static void job_unref(router_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    free(j->method);
    free(j->path);
    free(j->query);
    free(j->body);
    free(j->remote);
    free(j->request_id);
    free(j->caller.key_id);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j);
}

static void *job_main(void *arg)
{
    router_job *j = arg;
    llmr_router *r = j->r;
    llmr_log_set_request_id(j->request_id);
    j->fn(r, &j->caller, &j->req, j->reply, j, j->arg);
    llmr_log_set_request_id(NULL);
    router_job_replied(j); /* a job that never replied leaves the handler its reply */
    job_unref(j);
    pthread_mutex_lock(&r->jobs_lock);
    if (--r->jobs == 0)
        pthread_cond_broadcast(&r->jobs_done);
    pthread_mutex_unlock(&r->jobs_lock);
    return NULL;
}

static char *copy(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        if (n)
            memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A copy of what the job reads of the request (its headers are not kept; its
 * connection, for llmr_http_request_client_gone, only until the job replied). */
static router_job *job_new(llmr_router *r, const router_caller *c, const llmr_http_request *req,
                           llmr_http_reply *reply, router_job_fn fn, int arg)
{
    router_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->r = r;
    j->reply = reply;
    j->fn = fn;
    j->arg = arg;
    j->caller.scopes = c->scopes;
    j->caller.limits = c->limits;
    j->caller.key_id = c->key_id ? strdup(c->key_id) : NULL;
    j->method = copy(req->method, strlen(req->method));
    j->path = copy(req->path, strlen(req->path));
    j->query = copy(req->query ? req->query : "", req->query ? strlen(req->query) : 0);
    j->body = copy(req->body ? req->body : "", req->body ? req->body_len : 0);
    j->remote = copy(req->remote ? req->remote : "", req->remote ? strlen(req->remote) : 0);
    j->request_id = copy(req->request_id ? req->request_id : "", req->request_id ? strlen(req->request_id) : 0);
    if (!j->method || !j->path || !j->query || !j->body || !j->remote || !j->request_id ||
        (c->key_id && !j->caller.key_id)) {
        j->refs = 1;
        pthread_mutex_init(&j->lock, NULL);
        pthread_cond_init(&j->cond, NULL);
        job_unref(j);
        return NULL;
    }
    j->req = (llmr_http_request){j->method, j->path, j->query, j->body, req->body ? req->body_len : 0, j->remote,
                                 req->conn, j->request_id};
    j->refs = 2;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    return j;
}

void router_job_run(llmr_router *r, const router_caller *c, const llmr_http_request *req, llmr_http_reply *reply,
                    router_job_fn fn, int arg)
{
    router_job *j = job_new(r, c, req, reply, fn, arg);
    if (!j) {
        router_error(reply, 503, "server_error", "out_of_memory", "The router is out of memory; try again.");
        return;
    }
    pthread_mutex_lock(&r->jobs_lock);
    r->jobs++;
    pthread_mutex_unlock(&r->jobs_lock);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, job_main, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        llmr_log_warn("router", "cannot start a thread for a request (error %d): answering 503", rc);
        pthread_mutex_lock(&r->jobs_lock);
        if (--r->jobs == 0)
            pthread_cond_broadcast(&r->jobs_done);
        pthread_mutex_unlock(&r->jobs_lock);
        j->refs = 1;
        job_unref(j);
        llmr_http_reply_header(reply, "Retry-After", "1");
        router_error(reply, 503, "server_error", "overloaded", "The router cannot take more requests now; try again.");
        return;
    }
    pthread_mutex_lock(&j->lock);
    while (!j->replied)
        pthread_cond_wait(&j->cond, &j->lock);
    pthread_mutex_unlock(&j->lock);
    job_unref(j);
}
