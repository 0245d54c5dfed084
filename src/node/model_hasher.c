/* The full hash of synced models' large files, in the background: see model_hasher.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "node/model_hasher.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/sha256.h"
#include "node/model_sync.h"

#define COMPONENT "hasher"
#define LARGE_FROM (64u << 20) /* smaller files are hashed whole before each load */
#define CHUNK (1u << 20)
#define MAX_MARKER_BYTES (64u << 20)

typedef struct job {
    struct job *next;
    char *name, *dir;
} job;

struct llmr_model_hasher {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job *head, *tail;
    atomic_bool stop;
    llmr_hasher_fail_fn on_fail;
    void *user;
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The SHA-256 of path, or -1 (errno; ECANCELED when stop was set or the record went). */
static int hash_file(const char *path, const char *marker, atomic_bool *stop, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    unsigned char *buf = malloc(CHUNK);
    llmr_sha256 c;
    llmr_sha256_init(&c);
    int rc = buf ? 0 : -1;
    for (unsigned n = 0; rc == 0; n++) {
        struct stat st;
        if ((stop && atomic_load(stop)) || (n % 64 == 63 && lstat(marker, &st) != 0)) {
            errno = ECANCELED;
            rc = -1;
            break;
        }
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -1;
        else if (r == 0)
            break;
        else
            llmr_sha256_update(&c, buf, (size_t)r);
    }
    int saved = errno;
    free(buf);
    close(fd);
    errno = saved;
    if (rc == 0) {
        uint8_t d[32];
        llmr_sha256_final(&c, d);
        llmr_sha256_hex(d, hex);
    }
    return rc;
}

llmr_status llmr_model_hash_check(const char *model_dir, atomic_bool *stop, llmr_strbuf *why)
{
    char *marker = llmr_path_join(model_dir, LLMR_SYNC_MARKER_NAME);
    struct stat before, after;
    if (!marker || lstat(marker, &before) != 0) {
        free(marker);
        return LLMR_OK; /* not synced from a router, or removed */
    }
    llmr_status st;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *doc = llmr_json_load_file(marker, MAX_MARKER_BYTES, &st, &err);
    llmr_strbuf_free(&err);
    json_t *files = json_object_get(doc, "files");
    llmr_status status = LLMR_OK;
    bool recorded = false, cancelled = false;
    size_t i;
    json_t *e;
    if (json_string_value(json_object_get(doc, "corrupt")))
        goto done; /* failed already */
    json_array_foreach(files, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        json_int_t size = json_integer_value(json_object_get(e, "size"));
        if (!path || size <= (json_int_t)LARGE_FROM || llmr_sync_path_problem(path))
            continue;
        const char *sha = json_string_value(json_object_get(e, "sha256"));
        const char *mine = json_string_value(json_object_get(e, "node_sha256"));
        char *full = llmr_path_join(model_dir, path), hex[65];
        int rc = full ? hash_file(full, marker, stop, hex) : -1;
        int saved = errno;
        if (rc != 0) {
            free(full);
            cancelled = saved == ECANCELED;
            if (!cancelled)
                llmr_log_warn(COMPONENT, "%s: cannot hash %s: %s", model_dir, path, strerror(saved));
            break;
        }
        const char *want = sha ? sha : mine;
        if (want && strcasecmp(hex, want) != 0) {
            llmr_strbuf_printf(why, "%s changed on disk since it was %s: its sha256 is %s, not %s", full,
                               sha ? "synced" : "first hashed", hex, want);
            status = LLMR_MODEL_CORRUPT;
            free(full);
            break;
        }
        if (!want) {
            json_object_set_new(e, "node_sha256", json_string(hex));
            recorded = true;
        }
        free(full);
    }
    if (status == LLMR_MODEL_CORRUPT)
        json_object_set_new(doc, "corrupt", json_string(llmr_strbuf_cstr(why)));
    /* rewrite the record only if no sync replaced it meanwhile */
    if (!cancelled && (recorded || status == LLMR_MODEL_CORRUPT) && lstat(marker, &after) == 0 &&
        same_file(&before, &after)) {
        char *text = llmr_json_pretty(doc);
        llmr_strbuf werr = LLMR_STRBUF_INIT;
        if (!text || llmr_write_file_atomic(marker, text, strlen(text), &werr) != LLMR_OK)
            llmr_log_warn(COMPONENT, "%s: cannot write the hashes: %s", marker,
                          text ? llmr_strbuf_cstr(&werr) : "out of memory");
        llmr_strbuf_free(&werr);
        free(text);
    }
done:
    json_decref(doc);
    free(marker);
    return status;
}

static void *hasher_main(void *arg)
{
    llmr_model_hasher *hz = arg;
    pthread_mutex_lock(&hz->lock);
    while (!atomic_load(&hz->stop)) {
        job *j = hz->head;
        if (!j) {
            pthread_cond_wait(&hz->wake, &hz->lock);
            continue;
        }
        hz->head = j->next;
        if (!hz->head)
            hz->tail = NULL;
        pthread_mutex_unlock(&hz->lock);
        llmr_strbuf why = LLMR_STRBUF_INIT;
        if (llmr_model_hash_check(j->dir, &hz->stop, &why) == LLMR_MODEL_CORRUPT) {
            llmr_log_error(COMPONENT, "model %s: %s: it is taken out of service; delete it and pull "
                                      "it again (llmr rm, llmr pull)",
                           j->name, llmr_strbuf_cstr(&why));
            if (hz->on_fail)
                hz->on_fail(hz->user, j->name, llmr_strbuf_cstr(&why));
        }
        llmr_strbuf_free(&why);
        free(j->name);
        free(j->dir);
        free(j);
        pthread_mutex_lock(&hz->lock);
    }
    pthread_mutex_unlock(&hz->lock);
    return NULL;
}

llmr_model_hasher *llmr_model_hasher_start(llmr_hasher_fail_fn on_fail, void *user)
{
    llmr_model_hasher *hz = calloc(1, sizeof *hz);
    if (!hz)
        return NULL;
    pthread_mutex_init(&hz->lock, NULL);
    pthread_cond_init(&hz->wake, NULL);
    atomic_init(&hz->stop, false);
    hz->on_fail = on_fail;
    hz->user = user;
    if (pthread_create(&hz->thread, NULL, hasher_main, hz) != 0) {
        pthread_mutex_destroy(&hz->lock);
        pthread_cond_destroy(&hz->wake);
        free(hz);
        return NULL;
    }
    return hz;
}

void llmr_model_hasher_add(llmr_model_hasher *hz, const char *name, const char *model_dir)
{
    if (!hz || !name || !model_dir)
        return;
    pthread_mutex_lock(&hz->lock);
    for (job *j = hz->head; j; j = j->next)
        if (strcmp(j->dir, model_dir) == 0) { /* waiting already */
            pthread_mutex_unlock(&hz->lock);
            return;
        }
    job *j = calloc(1, sizeof *j);
    if (j && (j->name = strdup(name)) && (j->dir = strdup(model_dir))) {
        if (hz->tail)
            hz->tail->next = j;
        else
            hz->head = j;
        hz->tail = j;
        pthread_cond_signal(&hz->wake);
    } else if (j) {
        free(j->name);
        free(j);
    }
    pthread_mutex_unlock(&hz->lock);
}

void llmr_model_hasher_stop(llmr_model_hasher *hz)
{
    if (!hz)
        return;
    pthread_mutex_lock(&hz->lock);
    atomic_store(&hz->stop, true);
    pthread_cond_signal(&hz->wake);
    pthread_mutex_unlock(&hz->lock);
    pthread_join(hz->thread, NULL);
    while (hz->head) {
        job *j = hz->head;
        hz->head = j->next;
        free(j->name);
        free(j->dir);
        free(j);
    }
    pthread_mutex_destroy(&hz->lock);
    pthread_cond_destroy(&hz->wake);
    free(hz);
}
