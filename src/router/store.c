/* The router's store: opening, the schema and its migrations, and models (see store.h
 * and store_internal.h; nodes are in store_nodes.c, keys in store_keys.c, the request
 * log in store_log.c).
 *
 * Durability: WAL with synchronous=FULL, so a transaction that committed survives a
 * crash or a power cut and one that did not is never seen.  Every change here is one
 * statement, which SQLite runs as its own transaction.
 *
 * Schema versions live in PRAGMA user_version.  MIGRATIONS[i] takes a database from
 * version i to i + 1; each runs in one transaction with the version bump, so an
 * interrupted migration leaves the old version whole.  Add steps at the end, never
 * change one that has shipped. */
#include "router/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "router/store_internal.h"

#define BUSY_TIMEOUT_MS 5000

static const char *const MIGRATIONS[] = {
    /* 1: the first schema */
    "CREATE TABLE models ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  source_kind TEXT NOT NULL,"
    "  source TEXT NOT NULL,"
    "  revision TEXT,"
    "  format TEXT NOT NULL,"
    "  filename TEXT,"
    "  chat_template TEXT,"
    "  manifest TEXT,"
    "  created INTEGER NOT NULL);"
    "CREATE TABLE nodes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT,"
    "  url TEXT,"
    "  info TEXT,"
    "  last_seen INTEGER NOT NULL DEFAULT 0,"
    "  drained INTEGER NOT NULL DEFAULT 0 CHECK (drained IN (0, 1)));"
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL,"
    "  scopes INTEGER NOT NULL,"
    "  lookup TEXT NOT NULL,"
    "  salt TEXT NOT NULL,"
    "  hash TEXT NOT NULL,"
    "  created INTEGER NOT NULL,"
    "  revoked INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1)),"
    "  last_used INTEGER);"
    "CREATE INDEX api_keys_lookup ON api_keys (lookup);"
    "CREATE TABLE requests ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  model TEXT,"
    "  node TEXT,"
    "  key_id TEXT,"
    "  endpoint TEXT,"
    "  status INTEGER NOT NULL,"
    "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
    "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
    "  ttft_ms REAL,"
    "  duration_ms REAL,"
    "  error TEXT);"
    "CREATE INDEX requests_time ON requests (time_ms);",
    /* 2: the chat format the router renders with (template/chat_format.h), as JSON */
    "ALTER TABLE models ADD COLUMN chat_format TEXT;",
    /* 3: the Responses API's stored responses (store_responses.c) */
    "CREATE TABLE responses ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  key_id TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  input TEXT NOT NULL,"
    "  response TEXT NOT NULL);"
    "CREATE INDEX responses_created ON responses (created_ms);",
    /* 4: the request id of each request log entry (the x-request-id of its answer) */
    "ALTER TABLE requests ADD COLUMN request_id TEXT;"
    "CREATE INDEX requests_request_id ON requests (request_id);",
    /* 5: per-key limits (store_keys.c); NULL: the router's default */
    "ALTER TABLE api_keys ADD COLUMN requests_per_minute INTEGER;"
    "ALTER TABLE api_keys ADD COLUMN concurrent_requests INTEGER;"
    "ALTER TABLE api_keys ADD COLUMN tokens_per_minute INTEGER;",
    /* 6: the audit log of admin actions (store_audit.c) */
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  key_id TEXT,"
    "  method TEXT NOT NULL,"
    "  path TEXT NOT NULL,"
    "  target TEXT,"
    "  status INTEGER NOT NULL,"
    "  request_id TEXT);"
    "CREATE INDEX audit_time ON audit (time_ms);",
    /* 7: each stored response's size, and its key's responses by age (the bounds of
     * store_responses.c) */
    "ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
    "UPDATE responses SET bytes = length(CAST(input AS BLOB)) + length(CAST(response AS BLOB));"
    "DROP INDEX responses_created;"
    "CREATE INDEX responses_created ON responses (created_ms, bytes);"
    "CREATE INDEX responses_key ON responses (key_id, created_ms, bytes);",
};
#define SCHEMA_LATEST ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

/* ---- helpers shared with store_keys.c and store_log.c ------------------------------ */

llmr_status llmr_store_sql_fail(llmr_store *s, llmr_strbuf *err, const char *what)
{
    int code = sqlite3_errcode(s->db);
    llmr_strbuf_printf(err, "%s: %s (database %s)", what, sqlite3_errmsg(s->db), s->path);
    switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        llmr_strbuf_puts(err, "; another process holds it: is a second router running on "
                              "the same data directory?");
        return LLMR_IO;
    case SQLITE_FULL:
        llmr_strbuf_puts(err, "; free some disk space");
        return LLMR_IO;
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
        llmr_strbuf_puts(err, "; check the disk and that llmr may write the file");
        return LLMR_IO;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        llmr_strbuf_puts(err, "; the file is damaged: restore it from a backup or move it "
                              "aside to start empty");
        return LLMR_IO;
    case SQLITE_NOMEM:
        return LLMR_OOM_RAM;
    default:
        return LLMR_INTERNAL;
    }
}

json_t *llmr_store_list_end(llmr_store *s, sqlite3_stmt *st, int rc, json_t *list, llmr_strbuf *err,
                            const char *what)
{
    if (rc != SQLITE_DONE && !err->len) {
        if (rc == SQLITE_NOMEM)
            llmr_strbuf_printf(err, "%s: out of memory", what);
        else
            llmr_store_sql_fail(s, err, what); /* before the finalize: its message */
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    if (!err->len) {
        llmr_strbuf_free(err);
        return list;
    }
    llmr_log_error(STORE_COMPONENT, "%s", llmr_strbuf_cstr(err));
    llmr_strbuf_free(err);
    json_decref(list);
    return NULL;
}

char *llmr_store_column_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? strdup((const char *)t) : NULL;
}

json_t *llmr_store_column_json(sqlite3_stmt *st, int col)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    if (!t)
        return json_null();
    json_t *v = json_loadb(t, (size_t)sqlite3_column_bytes(st, col), JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

int llmr_store_bind_text(sqlite3_stmt *st, int idx, const char *text)
{
    return text ? sqlite3_bind_text(st, idx, text, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, idx);
}

int64_t llmr_store_unix_now(void)
{
    return (int64_t)time(NULL);
}

json_t *llmr_store_column_string(sqlite3_stmt *st, int col)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    if (!t)
        return json_null();
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    if (llmr_utf8_valid(t, n, NULL) && !memchr(t, '\0', n))
        return json_stringn(t, n);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_append_lossy(&sb, t, strlen(t));
    json_t *v = llmr_strbuf_failed(&sb) ? NULL : json_string(llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
    return v;
}

bool llmr_store_json_text(const json_t *v, char **text)
{
    *text = NULL;
    if (!v)
        return true;
    *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    return *text != NULL;
}

/* ---- opening ------------------------------------------------------------------------ */

/* One integer from a PRAGMA. */
static bool pragma_int(llmr_store *s, const char *sql, int *out)
{
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW;
    if (ok)
        *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return ok;
}

/* Why the first read failed, in words for whoever started the router. */
static llmr_status first_read_failed(llmr_store *s, llmr_strbuf *err)
{
    int code = sqlite3_errcode(s->db) & 0xff;
    if (code == SQLITE_NOTADB) {
        llmr_strbuf_printf(err, "%s is not an SQLite database (%s): the router keeps its "
                                "state there; move that file aside or use another data "
                                "directory", s->path, sqlite3_errmsg(s->db));
        return LLMR_INVALID_ARGUMENT;
    }
    return llmr_store_sql_fail(s, err, "reading the schema version");
}

static llmr_status exec(llmr_store *s, const char *sql, const char *what, llmr_strbuf *err)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return LLMR_OK;
    return llmr_store_sql_fail(s, err, what);
}

/* Applies the migrations from the current version on, each in its own transaction.
 * The version is read again inside each one, in case another process migrated. */
static llmr_status migrate(llmr_store *s, llmr_strbuf *err)
{
    llmr_status st = LLMR_OK;
    while (s->schema_version < SCHEMA_LATEST) {
        char what[96];
        snprintf(what, sizeof what, "migrating to schema version %d", s->schema_version + 1);
        st = exec(s, "BEGIN IMMEDIATE", what, err);
        if (st != LLMR_OK)
            return st;
        int v = 0;
        if (!pragma_int(s, "PRAGMA user_version", &v)) {
            st = llmr_store_sql_fail(s, err, what);
            goto rollback;
        }
        if (v > s->schema_version) { /* someone else did it meanwhile */
            s->schema_version = v;
            st = exec(s, "COMMIT", what, err);
            if (st != LLMR_OK)
                goto rollback;
            continue;
        }
        st = exec(s, MIGRATIONS[v], what, err);
        if (st != LLMR_OK)
            goto rollback;
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        st = exec(s, bump, what, err);
        if (st != LLMR_OK)
            goto rollback;
        st = exec(s, "COMMIT", what, err);
        if (st != LLMR_OK)
            goto rollback;
        s->schema_version = v + 1;
        if (v == 0)
            llmr_log_info(STORE_COMPONENT, "%s: a new database (schema version %d)", s->path, v + 1);
        else
            llmr_log_info(STORE_COMPONENT, "%s: migrated to schema version %d", s->path, v + 1);
    }
    return LLMR_OK;

rollback:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static llmr_status open_db(llmr_store *s, llmr_strbuf *err)
{
    int rc = sqlite3_open_v2(s->path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        llmr_strbuf_printf(err, "cannot open the router database %s: %s; check that its "
                                "directory exists and that llmr may write there",
                           s->path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return rc == SQLITE_NOMEM ? LLMR_OOM_RAM : LLMR_IO;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);

    /* The version first: a newer database is left exactly as it is. */
    if (!pragma_int(s, "PRAGMA user_version", &s->schema_version))
        return first_read_failed(s, err);
    if (s->schema_version > SCHEMA_LATEST) {
        llmr_strbuf_printf(err, "%s has schema version %d, but this llmr knows versions up to "
                                "%d: it was written by a newer llmr; upgrade llmr to use it",
                           s->path, s->schema_version, SCHEMA_LATEST);
        return LLMR_UNSUPPORTED;
    }
    if (s->schema_version < 0) {
        llmr_strbuf_printf(err, "%s has schema version %d, which no llmr writes: it is not "
                                "the router's database; move it aside",
                           s->path, s->schema_version);
        return LLMR_INVALID_ARGUMENT;
    }

    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return llmr_store_sql_fail(s, err, "switching to write-ahead logging");
    }
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    if (!mode || strcmp(mode, "wal") != 0)
        llmr_log_warn(STORE_COMPONENT, "%s: the file system does not allow write-ahead "
                                       "logging (journal mode \"%s\"); going on without it",
                      s->path, mode ? mode : "?");
    sqlite3_finalize(st);

    llmr_status status = exec(s, "PRAGMA synchronous = FULL", "setting synchronous writes", err);
    if (status == LLMR_OK)
        status = exec(s, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
    if (status == LLMR_OK)
        status = migrate(s, err);
    return status;
}

llmr_status llmr_store_open(const char *path, llmr_store **out, llmr_strbuf *err)
{
    *out = NULL;
    llmr_store *s = calloc(1, sizeof *s);
    if (!s) {
        llmr_strbuf_puts(err, "out of memory opening the router database");
        return LLMR_OOM_RAM;
    }
    pthread_mutex_init(&s->db_lock, NULL);
    s->response_bounds = llmr_store_response_default_bounds();
    pthread_mutex_init(&s->log_lock, NULL);
    pthread_mutex_init(&s->flush_lock, NULL);
    llmr_cond_init_monotonic(&s->log_wake); /* the log thread's waits */
    llmr_status st = LLMR_OOM_RAM;
    s->path = strdup(path);
    s->queue = calloc(STORE_LOG_QUEUE_MAX, sizeof *s->queue);
    if (!s->path || !s->queue) {
        llmr_strbuf_puts(err, "out of memory opening the router database");
        goto fail;
    }
    st = open_db(s, err);
    if (st != LLMR_OK)
        goto fail;
    st = llmr_store_log_start(s, err);
    if (st != LLMR_OK)
        goto fail;
    *out = s;
    return LLMR_OK;

fail:
    llmr_store_close(s);
    return st;
}

void llmr_store_close(llmr_store *s)
{
    if (!s)
        return;
    llmr_store_log_stop(s);
    if (s->db && sqlite3_close(s->db) != SQLITE_OK) {
        llmr_log_error(STORE_COMPONENT, "%s: closing: %s", s->path, sqlite3_errmsg(s->db));
        sqlite3_close_v2(s->db);
    }
    pthread_cond_destroy(&s->log_wake);
    pthread_mutex_destroy(&s->flush_lock);
    pthread_mutex_destroy(&s->log_lock);
    pthread_mutex_destroy(&s->db_lock);
    free(s->queue);
    free(s->path);
    free(s);
}

int llmr_store_schema_version(llmr_store *s)
{
    return s->schema_version;
}

/* ---- models --------------------------------------------------------------------------- */

#define MODEL_COLUMNS \
    "name, source_kind, source, revision, format, filename, chat_template, manifest, created, chat_format"

static bool present(const char *text)
{
    return text && text[0];
}

llmr_status llmr_store_model_insert(llmr_store *s, const llmr_store_model *m, bool *exists,
                                    llmr_strbuf *err)
{
    if (exists)
        *exists = false;
    if (!present(m->name) || !present(m->source_kind) || !present(m->source) ||
        !present(m->format)) {
        llmr_strbuf_puts(err, "a model needs a name, a source kind, a source and a format");
        return LLMR_INVALID_ARGUMENT;
    }
    char *manifest = NULL, *chat_format = NULL;
    if (!llmr_store_json_text(m->manifest, &manifest) || !llmr_store_json_text(m->chat_format, &chat_format)) {
        free(manifest);
        llmr_strbuf_puts(err, "out of memory writing the model's manifest");
        return LLMR_OOM_RAM;
    }

    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "INSERT INTO models (" MODEL_COLUMNS ") "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "registering a model");
        goto done;
    }
    llmr_store_bind_text(st, 1, m->name);
    llmr_store_bind_text(st, 2, m->source_kind);
    llmr_store_bind_text(st, 3, m->source);
    llmr_store_bind_text(st, 4, m->revision);
    llmr_store_bind_text(st, 5, m->format);
    llmr_store_bind_text(st, 6, m->filename);
    llmr_store_bind_text(st, 7, m->chat_template);
    llmr_store_bind_text(st, 8, manifest);
    sqlite3_bind_int64(st, 9, m->created > 0 ? m->created : llmr_store_unix_now());
    llmr_store_bind_text(st, 10, chat_format);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        if (exists)
            *exists = true;
        llmr_strbuf_puts(err, "a model named \"");
        llmr_strbuf_put_display(err, m->name, strlen(m->name));
        llmr_strbuf_puts(err, "\" is registered already; delete it first to register it again");
        status = LLMR_INVALID_ARGUMENT;
    } else if (rc != SQLITE_DONE) {
        status = llmr_store_sql_fail(s, err, "registering a model");
    }

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    free(manifest);
    free(chat_format);
    return status;
}

void llmr_store_not_found(llmr_strbuf *err, const char *what, const char *name)
{
    llmr_strbuf_printf(err, "no %s \"", what);
    llmr_strbuf_put_display(err, name, strlen(name));
    llmr_strbuf_puts(err, "\"");
}

llmr_status llmr_store_model_get(llmr_store *s, const char *name, llmr_store_model *out,
                                 llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    if (!name) {
        llmr_strbuf_puts(err, "reading a model: no name given");
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "SELECT " MODEL_COLUMNS " FROM models WHERE name = ?", -1,
                           &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "reading a model");
        goto done;
    }
    llmr_store_bind_text(st, 1, name);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        llmr_store_not_found(err, "model", name);
        status = LLMR_NOT_FOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        status = llmr_store_sql_fail(s, err, "reading a model");
        goto done;
    }
    out->name = llmr_store_column_dup(st, 0);
    out->source_kind = llmr_store_column_dup(st, 1);
    out->source = llmr_store_column_dup(st, 2);
    out->revision = llmr_store_column_dup(st, 3);
    out->format = llmr_store_column_dup(st, 4);
    out->filename = llmr_store_column_dup(st, 5);
    out->chat_template = llmr_store_column_dup(st, 6);
    if (sqlite3_column_type(st, 7) != SQLITE_NULL)
        out->manifest = llmr_store_column_json(st, 7);
    out->created = sqlite3_column_int64(st, 8);
    if (sqlite3_column_type(st, 9) != SQLITE_NULL)
        out->chat_format = llmr_store_column_json(st, 9);
    if (!out->name || !out->source_kind || !out->source || !out->format ||
        (sqlite3_column_type(st, 3) != SQLITE_NULL && !out->revision) ||
        (sqlite3_column_type(st, 5) != SQLITE_NULL && !out->filename) ||
        (sqlite3_column_type(st, 6) != SQLITE_NULL && !out->chat_template)) {
        llmr_strbuf_puts(err, "out of memory reading a model");
        status = LLMR_OOM_RAM;
    }

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    if (status != LLMR_OK)
        llmr_store_model_free(out);
    return status;
}

json_t *llmr_store_model_list(llmr_store *s)
{
    json_t *list = json_array();
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&s->db_lock);
    if (!list)
        goto fail;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT " MODEL_COLUMNS ", CASE WHEN json_valid(chat_format) "
                           "THEN json_extract(chat_format, '$.origin') END FROM models "
                           "ORDER BY created, rowid",
                           -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "listing models");
        goto fail;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_object();
        if (!o || json_array_append_new(list, o) != 0 ||
            json_object_set_new(o, "name", llmr_store_column_string(st, 0)) != 0 ||
            json_object_set_new(o, "source_kind", llmr_store_column_string(st, 1)) != 0 ||
            json_object_set_new(o, "source", llmr_store_column_string(st, 2)) != 0 ||
            json_object_set_new(o, "revision", llmr_store_column_string(st, 3)) != 0 ||
            json_object_set_new(o, "format", llmr_store_column_string(st, 4)) != 0 ||
            json_object_set_new(o, "filename", llmr_store_column_string(st, 5)) != 0 ||
            json_object_set_new(o, "chat_template", llmr_store_column_string(st, 6)) != 0 ||
            json_object_set_new(o, "manifest", llmr_store_column_json(st, 7)) != 0 ||
            json_object_set_new(o, "created", json_integer(sqlite3_column_int64(st, 8))) != 0 ||
            json_object_set_new(o, "chat_template_origin", llmr_store_column_string(st, 10)) != 0) {
            llmr_strbuf_puts(&err, "listing models: out of memory");
            goto fail;
        }
    }
    return llmr_store_list_end(s, st, rc, list, &err, "listing models");

fail: /* err says why, or is empty: out of memory */
    return llmr_store_list_end(s, st, SQLITE_NOMEM, list, &err, "listing models");
}

llmr_status llmr_store_change_one(llmr_store *s, const char *sql, const char *key,
                                  const int64_t *ints, int n_ints, const char *what,
                                  const char *kind, llmr_strbuf *err)
{
    if (!key) {
        llmr_strbuf_printf(err, "%s: no %s given", what, kind);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, what);
        goto done;
    }
    for (int i = 0; i < n_ints; i++)
        sqlite3_bind_int64(st, i + 1, ints[i]);
    llmr_store_bind_text(st, n_ints + 1, key);
    if (sqlite3_step(st) != SQLITE_DONE) {
        status = llmr_store_sql_fail(s, err, what);
        goto done;
    }
    if (sqlite3_changes(s->db) == 0) {
        llmr_store_not_found(err, kind, key);
        status = LLMR_NOT_FOUND;
    }

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    return status;
}

llmr_status llmr_store_model_delete(llmr_store *s, const char *name, llmr_strbuf *err)
{
    return llmr_store_change_one(s, "DELETE FROM models WHERE name = ?", name, NULL, 0,
                      "deleting a model", "model", err);
}

void llmr_store_model_free(llmr_store_model *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->source_kind);
    free(m->source);
    free(m->revision);
    free(m->format);
    free(m->filename);
    free(m->chat_template);
    json_decref(m->manifest);
    json_decref(m->chat_format);
    memset(m, 0, sizeof *m);
}
