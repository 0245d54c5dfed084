/* The router's store: the Responses API's stored responses (see store.h), so that
 * GET /v1/responses/{id}, DELETE and previous_response_id find them.  Each belongs to
 * the API key that created it: another key is told there is none.  The table is
 * bounded: a response over LLMR_STORE_RESPONSE_MAX is refused, and after each new one
 * the oldest go that are past the age bound, beyond their key's count or bytes, then
 * beyond the table's (llmr_store_response_bounds). */
#include <stdlib.h>
#include <string.h>

#include "router/store_internal.h"

llmr_store_response_bounds llmr_store_response_default_bounds(void)
{
    return (llmr_store_response_bounds){.keep = 10000,
                                        .keep_per_key = 1000,
                                        .bytes = 2ull << 30,
                                        .bytes_per_key = 256ull << 20,
                                        .max_age_ms = 30ll * 24 * 3600 * 1000};
}

void llmr_store_set_response_bounds(llmr_store *s, const llmr_store_response_bounds *b)
{
    pthread_mutex_lock(&s->db_lock);
    s->response_bounds = *b;
    pthread_mutex_unlock(&s->db_lock);
}

/* Prepares sql and binds key (when not NULL) to its first ?.  NULL on failure. */
static sqlite3_stmt *prepare_for(llmr_store *s, const char *sql, const char *key)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return NULL;
    if (key)
        llmr_store_bind_text(st, 1, key);
    return st;
}

/* The oldest responses (of key, or of all when NULL) beyond keep or bytes, deleted: the
 * count and size first (covering indexes: cheap), then, only when over, the oldest rows
 * walked until what is left fits.  Under db_lock. */
static bool trim_oldest(llmr_store *s, const char *key, uint32_t keep, uint64_t bytes)
{
    sqlite3_stmt *st = prepare_for(s, key ? "SELECT count(*), coalesce(sum(bytes), 0) FROM responses "
                                            "WHERE key_id = ?"
                                          : "SELECT count(*), coalesce(sum(bytes), 0) FROM responses",
                                   key);
    if (!st || sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return false;
    }
    int64_t over_n = sqlite3_column_int64(st, 0) - (int64_t)keep;
    int64_t over_bytes = sqlite3_column_int64(st, 1) - (int64_t)bytes;
    sqlite3_finalize(st);
    if (over_n <= 0 && over_bytes <= 0)
        return true;
    st = prepare_for(s, key ? "SELECT rowid, bytes FROM responses WHERE key_id = ? ORDER BY created_ms, rowid"
                            : "SELECT rowid, bytes FROM responses ORDER BY created_ms, rowid",
                     key);
    int64_t *gone = NULL;
    size_t n_gone = 0, cap = 0;
    int rc = st ? SQLITE_ROW : SQLITE_ERROR;
    while ((over_n > 0 || over_bytes > 0) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n_gone == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *grown = realloc(gone, cap * sizeof *gone);
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            gone = grown;
        }
        gone[n_gone++] = sqlite3_column_int64(st, 0);
        over_n--;
        over_bytes -= sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    bool ok = rc == SQLITE_ROW || rc == SQLITE_DONE;
    st = ok && n_gone ? prepare_for(s, "DELETE FROM responses WHERE rowid = ?", NULL) : NULL;
    ok = ok && (!n_gone || st);
    for (size_t i = 0; ok && i < n_gone; i++) {
        sqlite3_bind_int64(st, 1, gone[i]);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    free(gone);
    return ok;
}

/* The stored responses within their bounds: past the age, then the key's own, then the
 * table's.  Under db_lock. */
static bool trim(llmr_store *s, const char *key, int64_t now_ms)
{
    const llmr_store_response_bounds *b = &s->response_bounds;
    sqlite3_stmt *st = prepare_for(s, "DELETE FROM responses WHERE created_ms < ?", NULL);
    bool ok = st != NULL;
    if (ok) {
        sqlite3_bind_int64(st, 1, now_ms - b->max_age_ms);
        ok = sqlite3_step(st) == SQLITE_DONE;
    }
    sqlite3_finalize(st);
    return ok && trim_oldest(s, key, b->keep_per_key, b->bytes_per_key) &&
           trim_oldest(s, NULL, b->keep, b->bytes);
}

llmr_status llmr_store_response_put(llmr_store *s, const char *id, const char *key_id, int64_t created_ms,
                                    const json_t *input, const json_t *response, llmr_strbuf *err)
{
    char *input_text = NULL, *response_text = NULL;
    if (!llmr_store_json_text(input, &input_text) || !llmr_store_json_text(response, &response_text) ||
        !input_text || !response_text) {
        free(input_text);
        free(response_text);
        llmr_strbuf_puts(err, "out of memory writing a response");
        return LLMR_OOM_RAM;
    }
    if (strlen(input_text) > LLMR_STORE_RESPONSE_MAX || strlen(response_text) > LLMR_STORE_RESPONSE_MAX) {
        free(input_text);
        free(response_text);
        llmr_strbuf_printf(err, "the response is larger than %u MiB", LLMR_STORE_RESPONSE_MAX >> 20);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    /* the response and the trim it makes: one transaction (all or nothing, one commit) */
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "storing a response");
        goto unlock;
    }
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO responses (id, key_id, created_ms, input, response, bytes) "
                           "VALUES (?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "storing a response");
        goto done;
    }
    llmr_store_bind_text(st, 1, id);
    llmr_store_bind_text(st, 2, key_id ? key_id : "");
    sqlite3_bind_int64(st, 3, created_ms);
    llmr_store_bind_text(st, 4, input_text);
    llmr_store_bind_text(st, 5, response_text);
    sqlite3_bind_int64(st, 6, (int64_t)(strlen(input_text) + strlen(response_text)));
    int rc = sqlite3_step(st);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) { /* never replaced: it may be another key's */
        llmr_strbuf_printf(err, "a response with id '%.64s' is stored already", id);
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    if (rc != SQLITE_DONE) {
        status = llmr_store_sql_fail(s, err, "storing a response");
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!trim(s, key_id ? key_id : "", created_ms))
        status = llmr_store_sql_fail(s, err, "trimming the stored responses");
    else if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        status = llmr_store_sql_fail(s, err, "storing a response");
done:
    sqlite3_finalize(st);
    if (status != LLMR_OK)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
unlock:
    pthread_mutex_unlock(&s->db_lock);
    free(input_text);
    free(response_text);
    return status;
}

llmr_status llmr_store_response_get(llmr_store *s, const char *id, const char *key_id, json_t **input,
                                    json_t **response, llmr_strbuf *err)
{
    *input = *response = NULL;
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "SELECT input, response FROM responses WHERE id = ? AND key_id = ?", -1, &st,
                           NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "reading a response");
        goto done;
    }
    llmr_store_bind_text(st, 1, id);
    llmr_store_bind_text(st, 2, key_id ? key_id : "");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        llmr_strbuf_printf(err, "No response with id '%.64s' found.", id);
        status = LLMR_NOT_FOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        status = llmr_store_sql_fail(s, err, "reading a response");
        goto done;
    }
    *input = json_loads((const char *)sqlite3_column_text(st, 0), JSON_ALLOW_NUL, NULL);
    *response = json_loads((const char *)sqlite3_column_text(st, 1), JSON_ALLOW_NUL, NULL);
    if (!json_is_array(*input) || !json_is_object(*response)) {
        json_decref(*input);
        json_decref(*response);
        *input = *response = NULL;
        llmr_strbuf_printf(err, "the stored response '%.64s' is damaged", id);
        status = LLMR_INTERNAL;
    }
done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    return status;
}

llmr_status llmr_store_response_delete(llmr_store *s, const char *id, const char *key_id, llmr_strbuf *err)
{
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "DELETE FROM responses WHERE id = ? AND key_id = ?", -1, &st, NULL) !=
        SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "deleting a response");
        goto done;
    }
    llmr_store_bind_text(st, 1, id);
    llmr_store_bind_text(st, 2, key_id ? key_id : "");
    if (sqlite3_step(st) != SQLITE_DONE)
        status = llmr_store_sql_fail(s, err, "deleting a response");
    else if (sqlite3_changes(s->db) == 0) {
        llmr_strbuf_printf(err, "No response with id '%.64s' found.", id);
        status = LLMR_NOT_FOUND;
    }
done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    return status;
}
