/* The router's request log (store.h): llmr_store_log_request copies the entry into an
 * in-memory ring and returns; a thread writes what has gathered every 200 ms, in one
 * transaction, and trims the table to its newest STORE_LOG_KEEP_ROWS rows.  When the
 * disk cannot keep up and the ring is full, the oldest entry waiting is dropped and
 * counted (llmr_store_log_dropped), so a slow disk never slows a request down. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "router/store_internal.h"

static void entry_free(store_log_entry *e)
{
    free(e->model);
    free(e->node);
    free(e->key_id);
    free(e->endpoint);
    free(e->error);
    free(e->request_id);
}

/* A copy of text, at most STORE_LOG_TEXT_MAX bytes of it; *ok turns false when out
 * of memory. */
static char *dup_or_null(const char *text, bool *ok)
{
    if (!text)
        return NULL;
    char *d = strndup(text, STORE_LOG_TEXT_MAX);
    if (!d)
        *ok = false;
    return d;
}

void llmr_store_log_request(llmr_store *s, const llmr_store_request *r)
{
    bool ok = true;
    store_log_entry e = {
        .time_ms = r->time_ms,
        .model = dup_or_null(r->model, &ok),
        .node = dup_or_null(r->node, &ok),
        .key_id = dup_or_null(r->key_id, &ok),
        .endpoint = dup_or_null(r->endpoint, &ok),
        .error = dup_or_null(r->error, &ok),
        .request_id = dup_or_null(r->request_id, &ok),
        .status = r->status,
        .prompt_tokens = r->prompt_tokens,
        .completion_tokens = r->completion_tokens,
        .ttft_ms = r->ttft_ms,
        .duration_ms = r->duration_ms,
    };
    store_log_entry old = {0};
    bool drop_old = false;
    pthread_mutex_lock(&s->log_lock);
    if (!ok) {
        s->dropped++;
    } else {
        if (s->queue_len == STORE_LOG_QUEUE_MAX) {
            old = s->queue[s->queue_head];
            drop_old = true;
            s->queue_head = (s->queue_head + 1) % STORE_LOG_QUEUE_MAX;
            s->queue_len--;
            s->dropped++;
        }
        s->queue[(s->queue_head + s->queue_len) % STORE_LOG_QUEUE_MAX] = e;
        s->queue_len++;
    }
    pthread_mutex_unlock(&s->log_lock);
    if (!ok)
        entry_free(&e);
    if (drop_old)
        entry_free(&old);
}

uint64_t llmr_store_log_dropped(llmr_store *s)
{
    pthread_mutex_lock(&s->log_lock);
    uint64_t n = s->dropped;
    pthread_mutex_unlock(&s->log_lock);
    return n;
}

static void bind_real(sqlite3_stmt *st, int idx, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(st, idx, v);
    else
        sqlite3_bind_null(st, idx);
}

/* Writes a batch and, when it is time (or `trim`), trims the table: one transaction.
 * With flush_lock held. */
static void write_batch(llmr_store *s, const store_log_entry *batch, size_t n, bool trim)
{
    bool trim_now = s->written_since_trim + n >= STORE_LOG_TRIM_EVERY ||
                    (trim && s->written_since_trim + n > 0);
    if (n == 0 && !trim_now)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "writing the request log");
        goto done;
    }
    if (n > 0 && sqlite3_prepare_v2(s->db, "INSERT INTO requests (time_ms, model, node, key_id, "
                                           "endpoint, status, prompt_tokens, completion_tokens, "
                                           "ttft_ms, duration_ms, error, request_id) "
                                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                    -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "writing the request log");
        goto rollback;
    }
    for (size_t i = 0; i < n; i++) {
        const store_log_entry *e = &batch[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, e->time_ms);
        llmr_store_bind_text(st, 2, e->model);
        llmr_store_bind_text(st, 3, e->node);
        llmr_store_bind_text(st, 4, e->key_id);
        llmr_store_bind_text(st, 5, e->endpoint);
        sqlite3_bind_int64(st, 6, e->status);
        sqlite3_bind_int64(st, 7, e->prompt_tokens);
        sqlite3_bind_int64(st, 8, e->completion_tokens);
        bind_real(st, 9, e->ttft_ms);
        bind_real(st, 10, e->duration_ms);
        llmr_store_bind_text(st, 11, e->error);
        llmr_store_bind_text(st, 12, e->request_id);
        if (sqlite3_step(st) != SQLITE_DONE) {
            llmr_store_sql_fail(s, &err, "writing the request log");
            goto rollback;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (trim_now) {
        char sql[128];
        snprintf(sql, sizeof sql, "DELETE FROM requests WHERE id <= "
                                  "(SELECT max(id) FROM requests) - %d", STORE_LOG_KEEP_ROWS);
        if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            llmr_store_sql_fail(s, &err, "trimming the request log");
            goto rollback;
        }
    }
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "writing the request log");
        goto rollback;
    }
    s->written_since_trim = trim_now ? 0 : s->written_since_trim + n;
    goto done;

rollback:
    sqlite3_finalize(st);
    st = NULL;
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
done:
    pthread_mutex_unlock(&s->db_lock);
    if (err.len)
        llmr_log_error(STORE_COMPONENT, "%s; %zu request log entries lost", llmr_strbuf_cstr(&err), n);
    llmr_strbuf_free(&err);
}

/* Takes what is queued and writes it. */
static void flush(llmr_store *s, bool trim)
{
    if (!s->db || !s->queue)
        return;
    pthread_mutex_lock(&s->flush_lock);
    pthread_mutex_lock(&s->log_lock);
    size_t n = s->queue_len;
    store_log_entry *batch = n ? malloc(n * sizeof *batch) : NULL;
    if (batch) {
        for (size_t i = 0; i < n; i++)
            batch[i] = s->queue[(s->queue_head + i) % STORE_LOG_QUEUE_MAX];
        s->queue_head = 0;
        s->queue_len = 0;
    } else {
        n = 0; /* out of memory: the entries wait for the next flush */
    }
    uint64_t newly_dropped = s->dropped - s->dropped_reported;
    s->dropped_reported = s->dropped;
    pthread_mutex_unlock(&s->log_lock);

    if (newly_dropped)
        llmr_log_warn(STORE_COMPONENT, "%llu request log entries dropped: more than %d were "
                                       "waiting for the disk",
                      (unsigned long long)newly_dropped, STORE_LOG_QUEUE_MAX);
    write_batch(s, batch, n, trim);
    for (size_t i = 0; i < n; i++)
        entry_free(&batch[i]);
    free(batch);
    pthread_mutex_unlock(&s->flush_lock);
}

void llmr_store_log_flush(llmr_store *s)
{
    flush(s, true);
}

void llmr_store_log_write_queued(llmr_store *s)
{
    flush(s, false);
}

static void *log_main(void *arg)
{
    llmr_store *s = arg;
    pthread_mutex_lock(&s->log_lock);
    while (!s->log_stop) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += STORE_LOG_FLUSH_MS * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->log_wake, &s->log_lock, &t);
        if (s->log_stop)
            break;
        bool work = s->queue_len > 0;
        pthread_mutex_unlock(&s->log_lock);
        if (work)
            flush(s, false);
        pthread_mutex_lock(&s->log_lock);
    }
    pthread_mutex_unlock(&s->log_lock);
    flush(s, true);
    return NULL;
}

llmr_status llmr_store_log_start(llmr_store *s, llmr_strbuf *err)
{
    /* Trim once at start: a router that logged little since may have left more. */
    pthread_mutex_lock(&s->flush_lock);
    s->written_since_trim = STORE_LOG_TRIM_EVERY;
    write_batch(s, NULL, 0, true);
    pthread_mutex_unlock(&s->flush_lock);

    int rc = pthread_create(&s->log_thread, NULL, log_main, s);
    if (rc != 0) {
        llmr_strbuf_printf(err, "cannot start the request log's thread: %s", strerror(rc));
        return LLMR_INTERNAL;
    }
    s->log_thread_running = true;
    return LLMR_OK;
}

void llmr_store_log_stop(llmr_store *s)
{
    if (s->log_thread_running) {
        pthread_mutex_lock(&s->log_lock);
        s->log_stop = true;
        pthread_cond_signal(&s->log_wake);
        pthread_mutex_unlock(&s->log_lock);
        pthread_join(s->log_thread, NULL);
        s->log_thread_running = false;
    }
    flush(s, true); /* anything logged while the thread stopped */
    if (s->queue) {
        for (size_t i = 0; i < s->queue_len; i++)
            entry_free(&s->queue[(s->queue_head + i) % STORE_LOG_QUEUE_MAX]);
        s->queue_len = 0;
    }
}

json_t *llmr_store_recent_requests(llmr_store *s, size_t limit)
{
    flush(s, false); /* what was logged before this call is in the answer */
    json_t *list = json_array();
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (limit > STORE_LOG_KEEP_ROWS)
        limit = STORE_LOG_KEEP_ROWS;
    pthread_mutex_lock(&s->db_lock);
    if (!list)
        goto fail;
    if (sqlite3_prepare_v2(s->db, "SELECT id, time_ms, model, node, key_id, endpoint, status, "
                                  "prompt_tokens, completion_tokens, ttft_ms, duration_ms, error, "
                                  "request_id FROM requests ORDER BY time_ms DESC, id DESC LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "reading the request log");
        goto fail;
    }
    sqlite3_bind_int64(st, 1, (int64_t)limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_object();
        static const char *const TEXT[] = {NULL, NULL, "model", "node", "key_id", "endpoint"};
        bool ok = o && json_array_append_new(list, o) == 0 &&
                  json_object_set_new(o, "id", json_integer(sqlite3_column_int64(st, 0))) == 0 &&
                  json_object_set_new(o, "time_ms", json_integer(sqlite3_column_int64(st, 1))) == 0;
        for (int c = 2; ok && c <= 5; c++)
            ok = json_object_set_new(o, TEXT[c], llmr_store_column_string(st, c)) == 0;
        static const char *const NUM[] = {"status", "prompt_tokens", "completion_tokens"};
        for (int c = 6; ok && c <= 8; c++)
            ok = json_object_set_new(o, NUM[c - 6], json_integer(sqlite3_column_int64(st, c))) == 0;
        static const char *const REAL[] = {"ttft_ms", "duration_ms"};
        for (int c = 9; ok && c <= 10; c++)
            ok = json_object_set_new(o, REAL[c - 9], sqlite3_column_type(st, c) == SQLITE_NULL
                                                         ? json_null()
                                                         : json_real(sqlite3_column_double(st, c))) == 0;
        if (ok)
            ok = json_object_set_new(o, "error", llmr_store_column_string(st, 11)) == 0 &&
                 json_object_set_new(o, "request_id", llmr_store_column_string(st, 12)) == 0;
        if (!ok) {
            llmr_strbuf_puts(&err, "reading the request log: out of memory");
            goto fail;
        }
    }
    return llmr_store_list_end(s, st, rc, list, &err, "reading the request log");

fail: /* err says why, or is empty: out of memory */
    return llmr_store_list_end(s, st, SQLITE_NOMEM, list, &err, "reading the request log");
}
