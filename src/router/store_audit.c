/* The router's store: the audit log of admin actions (see store.h).  One row per action,
 * written when its answer is made (a few a minute at most: an admin's own calls), and
 * the table keeps the newest LLMR_STORE_AUDIT_KEEP_ROWS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/store_internal.h"

#define AUDIT_TEXT_MAX 1024 /* bytes kept of a path or a target */

llmr_status llmr_store_audit_add(llmr_store *s, const llmr_store_audit *a, llmr_strbuf *err)
{
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO audit (time_ms, key_id, method, path, target, status, request_id) "
                           "VALUES (?, ?, ?, substr(?, 1, ?), substr(?, 1, ?), ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "writing the audit log");
        goto done;
    }
    sqlite3_bind_int64(st, 1, a->time_ms);
    llmr_store_bind_text(st, 2, a->key_id);
    llmr_store_bind_text(st, 3, a->method ? a->method : "");
    llmr_store_bind_text(st, 4, a->path ? a->path : "");
    sqlite3_bind_int(st, 5, AUDIT_TEXT_MAX);
    llmr_store_bind_text(st, 6, a->target);
    sqlite3_bind_int(st, 7, AUDIT_TEXT_MAX);
    sqlite3_bind_int(st, 8, (int)a->status);
    llmr_store_bind_text(st, 9, a->request_id);
    if (sqlite3_step(st) != SQLITE_DONE) {
        status = llmr_store_sql_fail(s, err, "writing the audit log");
        goto done;
    }
    char trim[200];
    snprintf(trim, sizeof trim,
             "DELETE FROM audit WHERE id <= (SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET %d)",
             LLMR_STORE_AUDIT_KEEP_ROWS);
    if (sqlite3_exec(s->db, trim, NULL, NULL, NULL) != SQLITE_OK)
        status = llmr_store_sql_fail(s, err, "trimming the audit log");

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    return status;
}

json_t *llmr_store_audit_list(llmr_store *s, size_t limit)
{
    json_t *list = json_array();
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&s->db_lock);
    if (!list)
        goto fail;
    if (sqlite3_prepare_v2(s->db, "SELECT time_ms, key_id, method, path, target, status, request_id "
                                  "FROM audit ORDER BY id DESC LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "reading the audit log");
        goto fail;
    }
    sqlite3_bind_int64(st, 1, (int64_t)limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        static const char *const TEXT[] = {NULL, "key_id", "method", "path", "target"};
        json_t *o = json_object();
        bool ok = o && json_array_append_new(list, o) == 0 &&
                  json_object_set_new(o, "time_ms", json_integer(sqlite3_column_int64(st, 0))) == 0;
        for (int c = 1; ok && c <= 4; c++)
            ok = json_object_set_new(o, TEXT[c], llmr_store_column_string(st, c)) == 0;
        ok = ok && json_object_set_new(o, "status", json_integer(sqlite3_column_int64(st, 5))) == 0 &&
             json_object_set_new(o, "request_id", llmr_store_column_string(st, 6)) == 0;
        if (!ok) {
            llmr_strbuf_puts(&err, "reading the audit log: out of memory");
            goto fail;
        }
    }
    return llmr_store_list_end(s, st, rc, list, &err, "reading the audit log");

fail: /* err says why, or is empty: out of memory */
    return llmr_store_list_end(s, st, SQLITE_NOMEM, list, &err, "reading the audit log");
}
