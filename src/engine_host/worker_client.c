/* The node's side of an engine worker: see worker_client.h. */
#include "engine_host/worker_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine_host/worker_main.h"

#define WORKER_FD 3 /* where the worker finds its end of the socket */

extern char **environ;

struct llmr_worker {
    int fd;
    pid_t pid;
    void *tag;
    llmr_worker_callbacks cb;
    pthread_t reader;
    pthread_mutex_t lock;      /* everything below */
    pthread_mutex_t write_lock; /* whole frames */
    pthread_mutex_t call_lock;  /* one control call at a time */
    pthread_cond_t changed;
    bool exited;
    int wait_status;
    json_t *reply;             /* the last REPLY, until a caller takes it */
    bool reply_ready;
};

void llmr_worker_describe_exit(int status, llmr_strbuf *out)
{
    if (WIFEXITED(status)) {
        llmr_strbuf_printf(out, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = sig == SIGSEGV   ? "SIGSEGV"
                           : sig == SIGABRT ? "SIGABRT"
                           : sig == SIGKILL ? "SIGKILL"
                           : sig == SIGBUS  ? "SIGBUS"
                           : sig == SIGFPE  ? "SIGFPE"
                           : sig == SIGILL  ? "SIGILL"
                           : sig == SIGTERM ? "SIGTERM"
                                            : "signal";
        llmr_strbuf_printf(out, "was killed by signal %d (%s)", sig, name);
    } else {
        llmr_strbuf_printf(out, "ended (wait status %d)", status);
    }
}

static void deliver_reply(llmr_worker *w, const llmr_wire_frame *f)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *reply = llmr_wire_json(f, &err);
    if (!reply)
        llmr_log_error("engine", "worker %d sent a reply that is not JSON: %s", (int)w->pid,
                       llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    pthread_mutex_lock(&w->lock);
    json_decref(w->reply);
    w->reply = reply;
    w->reply_ready = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

static void *read_frames(void *arg)
{
    llmr_worker *w = arg;
    llmr_wire_reader reader;
    llmr_wire_reader_init(&reader, w->fd);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    for (;;) {
        llmr_wire_frame f;
        llmr_strbuf_reset(&err);
        if (llmr_wire_read(&reader, &f, &err) != LLMR_OK) {
            if (strcmp(llmr_strbuf_cstr(&err), "closed") != 0)
                llmr_log_warn("engine", "worker %d: %s; stopping it", (int)w->pid,
                              llmr_strbuf_cstr(&err));
            break;
        }
        if (f.type == LLMR_WIRE_EVENT) {
            llmr_wire_event ev;
            if (llmr_wire_event_decode(f.payload, f.len, &ev, &err) != LLMR_OK) {
                llmr_log_error("engine", "worker %d: %s; stopping it", (int)w->pid,
                               llmr_strbuf_cstr(&err));
                break;
            }
            if (w->cb.on_event)
                w->cb.on_event(w->cb.ctx, w, f.request_id, &ev);
        } else if (f.type == LLMR_WIRE_PONG) {
            llmr_wire_pong pong;
            if (llmr_wire_pong_decode(f.payload, f.len, &pong, &err) == LLMR_OK && w->cb.on_pong)
                w->cb.on_pong(w->cb.ctx, w, &pong);
        } else if (f.type == LLMR_WIRE_REPLY) {
            deliver_reply(w, &f);
        } else {
            llmr_log_warn("engine", "worker %d sent an unknown frame type %u", (int)w->pid, f.type);
        }
    }
    /* A worker that broke the protocol is stopped; one that closed is ending. */
    if (strcmp(llmr_strbuf_cstr(&err), "closed") != 0)
        kill(w->pid, SIGKILL);
    llmr_wire_reader_free(&reader);
    llmr_strbuf_free(&err);
    int status = 0;
    while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&w->lock);
    w->exited = true;
    w->wait_status = status;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    if (w->cb.on_exit)
        w->cb.on_exit(w->cb.ctx, w, status);
    return NULL;
}

llmr_status llmr_worker_start(const char *exe, const char *model_name,
                              const llmr_worker_callbacks *callbacks, void *tag,
                              llmr_worker **out, llmr_strbuf *err)
{
    *out = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        llmr_strbuf_printf(err, "cannot create the worker's socket: %s", strerror(errno));
        return LLMR_INTERNAL;
    }
    if (sv[1] == WORKER_FD) { /* dup2 onto itself would keep close-on-exec */
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, WORKER_FD + 1);
        close(sv[1]);
        sv[1] = moved;
    }
    llmr_worker *w = calloc(1, sizeof *w);
    if (!w || sv[1] < 0) {
        free(w);
        close(sv[0]);
        if (sv[1] >= 0)
            close(sv[1]);
        llmr_strbuf_puts(err, "out of memory or descriptors starting a worker");
        return LLMR_OOM_RAM;
    }
    w->fd = sv[0];
    w->tag = tag;
    w->cb = *callbacks;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->write_lock, NULL);
    pthread_mutex_init(&w->call_lock, NULL);
    llmr_cond_init_monotonic(&w->changed);

    char fd_arg[16];
    snprintf(fd_arg, sizeof fd_arg, "%d", WORKER_FD);
    char *argv[] = {(char *)exe, (char *)LLMR_WORKER_COMMAND, (char *)"--fd", fd_arg,
                    (char *)"--name", (char *)model_name, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], WORKER_FD);
    /* The worker starts with no signal blocked and default handlers, whatever the
     * node's threads have (the node blocks SIGHUP/SIGTERM to wait for them). */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(&w->pid, exe, &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        llmr_strbuf_printf(err, "cannot start the engine worker %s: %s", exe, strerror(rc));
        close(w->fd);
        free(w);
        return LLMR_INTERNAL;
    }
    if (pthread_create(&w->reader, NULL, read_frames, w) != 0) {
        kill(w->pid, SIGKILL);
        waitpid(w->pid, NULL, 0);
        close(w->fd);
        free(w);
        llmr_strbuf_puts(err, "cannot start the worker's reader thread");
        return LLMR_INTERNAL;
    }
    *out = w;
    return LLMR_OK;
}

llmr_status llmr_worker_send(llmr_worker *w, llmr_wire_type type, uint64_t request_id,
                             const void *payload, size_t len)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&w->write_lock);
    llmr_status st = llmr_wire_write(w->fd, (uint16_t)type, request_id, payload, len, &err);
    pthread_mutex_unlock(&w->write_lock);
    llmr_strbuf_free(&err);
    return st;
}

static struct timespec deadline_in(unsigned ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000u;
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

llmr_status llmr_worker_call(llmr_worker *w, llmr_wire_type type, const json_t *msg,
                             unsigned timeout_ms, json_t **reply, llmr_strbuf *err)
{
    if (reply)
        *reply = NULL;
    pthread_mutex_lock(&w->call_lock);
    pthread_mutex_lock(&w->lock);
    json_decref(w->reply);
    w->reply = NULL;
    w->reply_ready = false;
    pthread_mutex_unlock(&w->lock);
    llmr_status st;
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text) {
        pthread_mutex_unlock(&w->call_lock);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    st = llmr_worker_send(w, type, 0, text, strlen(text));
    free(text);
    struct timespec deadline = deadline_in(timeout_ms);
    pthread_mutex_lock(&w->lock);
    while (st == LLMR_OK && !w->reply_ready && !w->exited)
        if (pthread_cond_timedwait(&w->changed, &w->lock, &deadline) == ETIMEDOUT)
            break;
    json_t *r = NULL;
    if (w->reply_ready) {
        r = w->reply;
        w->reply = NULL;
        w->reply_ready = false;
        st = LLMR_OK;
    } else if (w->exited || st != LLMR_OK) {
        llmr_strbuf_puts(err, "the engine worker ");
        if (w->exited)
            llmr_worker_describe_exit(w->wait_status, err);
        else
            llmr_strbuf_puts(err, "closed its connection");
        st = LLMR_INTERNAL;
    } else {
        llmr_strbuf_printf(err, "the engine worker did not answer within %u ms", timeout_ms);
        st = LLMR_TIMEOUT;
    }
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_unlock(&w->call_lock);
    if (st != LLMR_OK)
        return st;
    if (!r) {
        llmr_strbuf_puts(err, "the engine worker sent a reply that is not JSON");
        return LLMR_INTERNAL;
    }
    const char *name = json_string_value(json_object_get(r, "status"));
    const char *message = json_string_value(json_object_get(r, "message"));
    st = LLMR_INTERNAL;
    for (int i = 0; i < LLMR_STATUS_COUNT; i++)
        if (name && strcmp(name, llmr_status_name((llmr_status)i)) == 0)
            st = (llmr_status)i;
    if (st != LLMR_OK)
        llmr_strbuf_puts(err, message && *message ? message : llmr_status_message(st));
    if (reply)
        *reply = r;
    else
        json_decref(r);
    return st;
}

void llmr_worker_kill(llmr_worker *w)
{
    pthread_mutex_lock(&w->lock);
    if (!w->exited)
        kill(w->pid, SIGKILL);
    pthread_mutex_unlock(&w->lock);
}

bool llmr_worker_exited(const llmr_worker *w)
{
    llmr_worker *m = (llmr_worker *)w;
    pthread_mutex_lock(&m->lock);
    bool exited = m->exited;
    pthread_mutex_unlock(&m->lock);
    return exited;
}

int llmr_worker_pid(const llmr_worker *w)
{
    return (int)w->pid;
}

void *llmr_worker_tag(const llmr_worker *w)
{
    return w->tag;
}

void llmr_worker_free(llmr_worker *w, unsigned timeout_ms)
{
    if (!w)
        return;
    struct timespec deadline = deadline_in(timeout_ms);
    pthread_mutex_lock(&w->lock);
    while (!w->exited)
        if (pthread_cond_timedwait(&w->changed, &w->lock, &deadline) == ETIMEDOUT)
            break;
    if (!w->exited)
        kill(w->pid, SIGKILL);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->reader, NULL);
    close(w->fd);
    json_decref(w->reply);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->write_lock);
    pthread_mutex_destroy(&w->call_lock);
    pthread_cond_destroy(&w->changed);
    free(w);
}
