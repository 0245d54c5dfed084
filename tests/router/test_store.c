/* Tests of the router's store (src/router/store.h) on real SQLite files in a temporary
 * directory: opening, reopening and the files it refuses; models, nodes and API keys
 * (no secret on disk, the checks of good, wrong, revoked and malformed secrets);
 * the request log (never waiting for the disk, flushed on close, trimmed, newest
 * first); what survives a process killed with SIGKILL and what does not; and use
 * from several threads at once. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "common/strbuf.h"
#include "fixture.h"
#include "llmr/status.h"
#include "router/store.h"

/* A fresh store in a new directory; its path in *path (static rotating buffer). */
static llmr_store *open_new(const char **path)
{
    const char *p = fx_path(fx_tmpdir(), "router.db");
    if (path)
        *path = p;
    llmr_store *s = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_open(p, &s, &err);
    if (st != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "open %s: %s", p, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return s;
}

static llmr_store *reopen(const char *path)
{
    llmr_store *s = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_store_open(path, &s, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "reopen %s: %s", path, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return s;
}

/* One text value of a query on a separate connection, malloc'd ("" for none). */
static char *raw_text(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0))
        out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out ? out : strdup("");
}

static long long raw_int(const char *path, const char *sql)
{
    char *t = raw_text(path, sql);
    long long v = atoll(t);
    free(t);
    return v;
}

static llmr_store_model sample_model(const char *name, const char *source, int64_t created)
{
    llmr_store_model m = {
        .name = (char *)name,
        .source_kind = "hf",
        .source = (char *)source,
        .revision = "main",
        .format = "safetensors",
        .filename = NULL,
        .chat_template = NULL,
        .manifest = json_pack("{s:s, s:[{s:s, s:i, s:s}], s:f}", "model", name, "files", "path",
                              "config.json", "size", 123, "sha256",
                              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                              "ratio", 1.5),
        .created = created,
    };
    return m;
}

static bool insert(llmr_store *s, const char *name, const char *source, int64_t created)
{
    llmr_store_model m = sample_model(name, source, created);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    bool exists = true;
    llmr_status st = llmr_store_model_insert(s, &m, &exists, &err);
    if (st != LLMR_OK)
        fprintf(stderr, "insert %s: %s\n", name, llmr_strbuf_cstr(&err));
    json_decref(m.manifest);
    llmr_strbuf_free(&err);
    return st == LLMR_OK && !exists;
}

/* ---- opening -------------------------------------------------------------------------- */

TEST(open_creates_a_database_that_survives_reopening)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    CHECK(llmr_store_schema_version(s) >= 1);
    CHECK(insert(s, "m1", "org/m1", 0));
    llmr_store_close(s);

    s = reopen(path);
    if (!s)
        return;
    llmr_store_model m;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_model_get(s, "m1", &m, &err), LLMR_OK);
    CHECK_EQ_STR(m.source, "org/m1");
    CHECK(m.created > 1600000000); /* 0 given: now */
    llmr_store_model_free(&m);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

TEST(the_database_is_in_wal_mode_with_its_schema_version)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    char *mode = raw_text(path, "PRAGMA journal_mode");
    CHECK_EQ_STR(mode, "wal");
    free(mode);
    CHECK_EQ_INT(raw_int(path, "PRAGMA user_version"), llmr_store_schema_version(s));
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'api_keys'"), 1);
    llmr_store_close(s);
}

TEST(a_database_from_a_newer_llmr_is_refused_untouched)
{
    const char *path = fx_path(fx_tmpdir(), "router.db");
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "CREATE TABLE future (x); PRAGMA user_version = 999", NULL, NULL,
                              NULL), SQLITE_OK);
    sqlite3_close(db);

    llmr_store *s = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_open(path, &s, &err);
    CHECK(st != LLMR_OK);
    CHECK(s == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "newer llmr");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "upgrade llmr");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "999");
    llmr_strbuf_free(&err);
    char *mode = raw_text(path, "PRAGMA journal_mode");
    CHECK_EQ_STR(mode, "delete"); /* not switched to WAL */
    free(mode);
    CHECK_EQ_INT(raw_int(path, "PRAGMA user_version"), 999);
}

TEST(a_file_that_is_not_a_database_is_refused)
{
    const char *dir = fx_tmpdir();
    char text[4096];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "this is not a database\n"[i % 23];
    fx_write(dir, "router.db", text, sizeof text);

    llmr_store *s = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_open(fx_path(dir, "router.db"), &s, &err), LLMR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "is not an SQLite database");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "move that file aside");
    llmr_strbuf_free(&err);

    /* A directory that does not exist: the caller makes it, the store says so. */
    llmr_strbuf_init(&err);
    CHECK_EQ_INT(llmr_store_open(fx_path(dir, "missing/router.db"), &s, &err), LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "directory exists");
    llmr_strbuf_free(&err);
}

/* ---- models --------------------------------------------------------------------------- */

TEST(models_insert_get_list_delete)
{
    llmr_store *s = open_new(NULL);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK(insert(s, "beta", "org/beta", 200));
    CHECK(insert(s, "alpha", "org/alpha", 100));

    llmr_store_model want = sample_model("alpha", "org/alpha", 100);
    llmr_store_model m;
    CHECK_EQ_INT(llmr_store_model_get(s, "alpha", &m, &err), LLMR_OK);
    CHECK_EQ_STR(m.name, "alpha");
    CHECK_EQ_STR(m.source_kind, "hf");
    CHECK_EQ_STR(m.revision, "main");
    CHECK_EQ_STR(m.format, "safetensors");
    CHECK(m.filename == NULL);
    CHECK(m.chat_template == NULL);
    CHECK_EQ_INT(m.created, 100);
    CHECK(json_equal(m.manifest, want.manifest));
    llmr_store_model_free(&m);
    json_decref(want.manifest);

    /* A local gguf model with a template and no manifest. */
    llmr_store_model local = {.name = "local", .source_kind = "local", .source = "/models/x",
                              .format = "gguf", .filename = "x-Q4.gguf",
                              .chat_template = "{{ messages }}", .created = 300};
    bool exists = true;
    CHECK_EQ_INT(llmr_store_model_insert(s, &local, &exists, &err), LLMR_OK);
    CHECK(!exists);
    CHECK_EQ_INT(llmr_store_model_get(s, "local", &m, &err), LLMR_OK);
    CHECK(m.revision == NULL);
    CHECK_EQ_STR(m.filename, "x-Q4.gguf");
    CHECK_EQ_STR(m.chat_template, "{{ messages }}");
    CHECK(m.manifest == NULL);
    llmr_store_model_free(&m);

    json_t *list = llmr_store_model_list(s);
    CHECK(json_is_array(list));
    CHECK_EQ_INT(json_array_size(list), 3);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, 0), "name")), "alpha");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, 1), "name")), "beta");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, 2), "name")), "local");
    json_t *first = json_array_get(list, 0);
    CHECK(json_is_object(json_object_get(first, "manifest")));
    CHECK_EQ_INT(json_integer_value(json_object_get(
                     json_array_get(json_object_get(json_object_get(first, "manifest"), "files"), 0),
                     "size")), 123);
    CHECK(json_is_null(json_object_get(first, "filename")));
    CHECK_EQ_INT(json_integer_value(json_object_get(first, "created")), 100);
    CHECK(json_is_null(json_object_get(json_array_get(list, 2), "revision")));
    json_decref(list);

    CHECK_EQ_INT(llmr_store_model_delete(s, "beta", &err), LLMR_OK);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_model_get(s, "beta", &m, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no model \"beta\"");
    CHECK(m.name == NULL);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_model_delete(s, "beta", &err), LLMR_NOT_FOUND);
    list = llmr_store_model_list(s);
    CHECK_EQ_INT(json_array_size(list), 2);
    json_decref(list);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

TEST(a_model_keeps_its_chat_format)
{
    llmr_store *s = open_new(NULL);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *format = json_pack("{s:s, s:s, s:{s:s}}", "template", "{{ messages[0].content }}", "origin",
                               "chat_template.jinja", "special", "bos_token", "<s>");
    llmr_store_model m = {.name = "chat", .source_kind = "local", .source = "/models/chat",
                          .format = "safetensors", .chat_format = format, .created = 10};
    CHECK_EQ_INT(llmr_store_model_insert(s, &m, NULL, &err), LLMR_OK);
    llmr_store_model got;
    CHECK_EQ_INT(llmr_store_model_get(s, "chat", &got, &err), LLMR_OK);
    CHECK(json_equal(got.chat_format, format));
    llmr_store_model_free(&got);
    json_t *list = llmr_store_model_list(s);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, 0), "chat_template_origin")),
                 "chat_template.jinja");
    CHECK(json_object_get(json_array_get(list, 0), "chat_format") == NULL); /* the list stays small */
    json_decref(list);
    json_decref(format);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

TEST(a_version_1_database_migrates_with_its_models)
{
    /* the first schema's models table, as version 1 wrote it */
    const char *path = fx_path(fx_tmpdir(), "router.db");
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "CREATE TABLE models (name TEXT PRIMARY KEY NOT NULL, source_kind TEXT NOT NULL,"
                              " source TEXT NOT NULL, revision TEXT, format TEXT NOT NULL, filename TEXT,"
                              " chat_template TEXT, manifest TEXT, created INTEGER NOT NULL);"
                              "CREATE TABLE nodes (id TEXT PRIMARY KEY NOT NULL, name TEXT, url TEXT, info TEXT,"
                              " last_seen INTEGER NOT NULL DEFAULT 0, drained INTEGER NOT NULL DEFAULT 0);"
                              "CREATE TABLE api_keys (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL,"
                              " scopes INTEGER NOT NULL, lookup TEXT NOT NULL, salt TEXT NOT NULL,"
                              " hash TEXT NOT NULL, created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,"
                              " last_used INTEGER);"
                              "CREATE TABLE requests (id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, model TEXT,"
                              " node TEXT, key_id TEXT, endpoint TEXT, status INTEGER NOT NULL,"
                              " prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL"
                              " DEFAULT 0, ttft_ms REAL, duration_ms REAL, error TEXT);"
                              "INSERT INTO models VALUES ('old', 'hf', 'org/old', 'main', 'safetensors', NULL,"
                              " NULL, '{\"files\": []}', 5);"
                              "PRAGMA user_version = 1",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    llmr_store *s = reopen(path);
    if (!s)
        return;
    CHECK(llmr_store_schema_version(s) >= 2);
    llmr_store_model m;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_model_get(s, "old", &m, &err), LLMR_OK);
    CHECK_EQ_STR(m.source, "org/old");
    CHECK(m.chat_format == NULL); /* its node renders */
    llmr_store_model_free(&m);
    json_t *list = llmr_store_model_list(s);
    CHECK(json_is_null(json_object_get(json_array_get(list, 0), "chat_template_origin")));
    json_decref(list);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

TEST(a_second_registration_of_a_name_changes_nothing)
{
    llmr_store *s = open_new(NULL);
    if (!s)
        return;
    CHECK(insert(s, "dup", "org/first", 10));
    llmr_store_model again = sample_model("dup", "org/second", 20);
    bool exists = false;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_model_insert(s, &again, &exists, &err), LLMR_INVALID_ARGUMENT);
    CHECK(exists);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "\"dup\" is registered already");
    json_decref(again.manifest);
    llmr_store_model m;
    CHECK_EQ_INT(llmr_store_model_get(s, "dup", &m, &err), LLMR_OK);
    CHECK_EQ_STR(m.source, "org/first");
    CHECK_EQ_INT(m.created, 10);
    llmr_store_model_free(&m);

    /* Missing fields: refused, and not as a duplicate. */
    llmr_store_model bad = {.name = "nosource", .source_kind = "hf", .format = "gguf"};
    exists = true;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_model_insert(s, &bad, &exists, &err), LLMR_INVALID_ARGUMENT);
    CHECK(!exists);
    CHECK_EQ_INT(llmr_store_model_insert(s, &bad, NULL, &err), LLMR_INVALID_ARGUMENT);
    json_t *list = llmr_store_model_list(s);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

/* ---- nodes ---------------------------------------------------------------------------- */

static json_t *node_in(json_t *list, const char *id)
{
    size_t i;
    json_t *n;
    json_array_foreach(list, i, n)
        if (strcmp(json_string_value(json_object_get(n, "id")), id) == 0)
            return n;
    return NULL;
}

TEST(nodes_upsert_list_drain_delete)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *info = json_pack("{s:i, s:[s]}", "gpus", 2, "engines", "gpt_oss");
    CHECK_EQ_INT(llmr_store_node_upsert(s, "n1", "gpu-a", "http://a:8001", info, 1000, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_node_upsert(s, "n2", "gpu-b", "http://b:8001", NULL, 1001, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_node_set_drained(s, "n1", true, &err), LLMR_OK);
    /* A heartbeat later: new address and time, still drained. */
    CHECK_EQ_INT(llmr_store_node_upsert(s, "n1", "gpu-a", "http://a2:8001", info, 2000, &err), LLMR_OK);

    json_t *list = llmr_store_node_list(s);
    CHECK_EQ_INT(json_array_size(list), 2);
    json_t *n1 = node_in(list, "n1"), *n2 = node_in(list, "n2");
    CHECK(n1 && n2);
    if (n1 && n2) {
        CHECK_EQ_STR(json_string_value(json_object_get(n1, "url")), "http://a2:8001");
        CHECK_EQ_STR(json_string_value(json_object_get(n1, "name")), "gpu-a");
        CHECK_EQ_INT(json_integer_value(json_object_get(n1, "last_seen")), 2000);
        CHECK(json_is_true(json_object_get(n1, "drained")));
        CHECK(json_equal(json_object_get(n1, "info"), info));
        CHECK(json_is_false(json_object_get(n2, "drained")));
        CHECK(json_is_null(json_object_get(n2, "info")));
    }
    json_decref(list);
    json_decref(info);

    CHECK_EQ_INT(llmr_store_node_set_drained(s, "n1", false, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_node_set_drained(s, "nope", true, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no node \"nope\"");
    CHECK_EQ_INT(llmr_store_node_delete(s, "n2", &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_node_delete(s, "n2", &err), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_store_node_upsert(s, NULL, "x", "y", NULL, 0, &err), LLMR_INVALID_ARGUMENT);
    llmr_store_close(s);

    s = reopen(path);
    if (!s)
        return;
    list = llmr_store_node_list(s);
    CHECK_EQ_INT(json_array_size(list), 1);
    CHECK(json_is_false(json_object_get(json_array_get(list, 0), "drained")));
    json_decref(list);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

/* ---- keys ----------------------------------------------------------------------------- */

TEST(scopes_parse_and_format)
{
    unsigned b = 99;
    CHECK(llmr_scopes_parse("inference", &b));
    CHECK_EQ_INT(b, LLMR_SCOPE_INFERENCE);
    CHECK(llmr_scopes_parse("inference,node", &b));
    CHECK_EQ_INT(b, LLMR_SCOPE_INFERENCE | LLMR_SCOPE_NODE);
    CHECK(llmr_scopes_parse(" admin , node ", &b));
    CHECK_EQ_INT(b, LLMR_SCOPE_ADMIN | LLMR_SCOPE_NODE);
    CHECK(llmr_scopes_parse("Admin,admin", &b));
    CHECK_EQ_INT(b, LLMR_SCOPE_ADMIN);
    b = 99;
    CHECK(!llmr_scopes_parse("bogus", &b));
    CHECK(!llmr_scopes_parse("inference,bogus", &b));
    CHECK(!llmr_scopes_parse("", &b));
    CHECK(!llmr_scopes_parse("inference,", &b));
    CHECK(!llmr_scopes_parse("inference,,node", &b));
    CHECK(!llmr_scopes_parse("inferencex", &b));
    CHECK(!llmr_scopes_parse(NULL, &b));
    CHECK_EQ_INT(b, 99); /* untouched on failure */

    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_scopes_format(LLMR_SCOPE_INFERENCE | LLMR_SCOPE_NODE | LLMR_SCOPE_ADMIN, &sb);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "inference,node,admin");
    llmr_strbuf_reset(&sb);
    llmr_scopes_format(LLMR_SCOPE_INFERENCE | LLMR_SCOPE_ADMIN, &sb);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "inference,admin");
    llmr_strbuf_reset(&sb);
    llmr_scopes_format(0, &sb);
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "");
    llmr_strbuf_reset(&sb);
    llmr_scopes_format(LLMR_SCOPE_NODE, &sb);
    CHECK(llmr_scopes_parse(llmr_strbuf_cstr(&sb), &b));
    CHECK_EQ_INT(b, LLMR_SCOPE_NODE);

    /* the name that is not a scope is reported, and only on failure */
    llmr_strbuf_reset(&sb);
    CHECK(!llmr_scopes_parse_report("inference, root ,node", &b, &sb));
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "root");
    llmr_strbuf_reset(&sb);
    CHECK(!llmr_scopes_parse_report("inference,", &b, &sb));
    CHECK_EQ_STR(llmr_strbuf_cstr(&sb), "");
    CHECK(llmr_scopes_parse_report("node,admin", &b, &sb));
    CHECK_EQ_INT(b, LLMR_SCOPE_NODE | LLMR_SCOPE_ADMIN);
    CHECK_EQ_INT(sb.len, 0);
    llmr_strbuf_free(&sb);
}

/* Whether the bytes of path (and of its -wal file) contain needle. */
static bool file_has(const char *path, const char *needle)
{
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    const char *paths[] = {path, wal};
    for (int i = 0; i < 2; i++) {
        char *data = NULL;
        size_t len = 0;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_read_file(paths[i], 1u << 26, &data, &len, &err) == LLMR_OK) {
            bool found = memmem(data, len, needle, strlen(needle)) != NULL;
            free(data);
            llmr_strbuf_free(&err);
            if (found)
                return true;
        }
        llmr_strbuf_free(&err);
    }
    return false;
}

TEST(keys_are_made_checked_and_revoked)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *id = NULL, *secret = NULL;
    CHECK_EQ_INT(llmr_store_key_create(s, "ci", LLMR_SCOPE_INFERENCE, NULL, &id, &secret, &err),
                 LLMR_OK);
    if (!id || !secret) {
        llmr_store_close(s);
        return;
    }
    CHECK_EQ_INT(strlen(secret), 45);
    CHECK(strncmp(secret, "llmr-", 5) == 0);
    for (size_t i = 5; i < strlen(secret); i++)
        CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", secret[i]));
    CHECK_EQ_INT(strlen(id), 16);
    CHECK(strncmp(id, "key_", 4) == 0);

    unsigned scopes = 0;
    char *got_id = NULL;
    CHECK_EQ_INT(llmr_store_key_check(s, secret, &scopes, &got_id), LLMR_OK);
    CHECK_EQ_INT(scopes, LLMR_SCOPE_INFERENCE);
    CHECK_EQ_STR(got_id, id);
    free(got_id);
    CHECK_EQ_INT(llmr_store_key_check(s, secret, NULL, NULL), LLMR_OK);

    /* Wrong and malformed secrets: the same answer, nothing filled in. */
    char wrong[64];
    snprintf(wrong, sizeof wrong, "%s", secret);
    wrong[44] = wrong[44] == 'a' ? 'b' : 'a';
    char longer[64];
    snprintf(longer, sizeof longer, "%sx", secret);
    char huge[400];
    memset(huge, 'a', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    const char *bad[] = {wrong, longer, secret + 1, "", "short", "llmr-", huge,
                         "llmr-with space inside of it", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        scopes = 77;
        got_id = (char *)"untouched";
        CHECK_EQ_INT(llmr_store_key_check(s, bad[i], &scopes, &got_id), LLMR_NOT_FOUND);
        CHECK_EQ_INT(scopes, 77);
        CHECK(got_id == NULL);
    }

    /* The list: no secret, the scopes by name, last_used set by the check. */
    json_t *list = llmr_store_key_list(s);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_t *k = json_array_get(list, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(k, "id")), id);
    CHECK_EQ_STR(json_string_value(json_object_get(k, "name")), "ci");
    CHECK_EQ_STR(json_string_value(json_object_get(k, "scopes")), "inference");
    CHECK(json_is_false(json_object_get(k, "revoked")));
    CHECK(json_is_integer(json_object_get(k, "last_used")));
    CHECK(json_integer_value(json_object_get(k, "created")) > 1600000000);
    char *text = json_dumps(list, 0);
    CHECK(text && !strstr(text, secret) && !strstr(text, secret + 5));
    free(text);
    json_decref(list);

    CHECK_EQ_INT(llmr_store_key_revoke(s, id, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_check(s, secret, &scopes, NULL), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_store_key_revoke(s, id, &err), LLMR_OK); /* again: still revoked */
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_key_revoke(s, "key_nosuchkey000", &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no key");
    list = llmr_store_key_list(s);
    CHECK(json_is_true(json_object_get(json_array_get(list, 0), "revoked")));
    json_decref(list);

    /* Bad requests. */
    char *id2 = NULL, *secret2 = NULL;
    CHECK_EQ_INT(llmr_store_key_create(s, "none", 0, NULL, &id2, &secret2, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmr_store_key_create(s, "odd", 8, NULL, &id2, &secret2, &err), LLMR_INVALID_ARGUMENT);
    CHECK(id2 == NULL && secret2 == NULL);

    /* Two keys: each its own. */
    CHECK_EQ_INT(llmr_store_key_create(s, NULL, LLMR_SCOPE_NODE, NULL, &id2, &secret2, &err), LLMR_OK);
    CHECK(secret2 && strcmp(secret2, secret) != 0);
    CHECK(id2 && strcmp(id2, id) != 0);
    CHECK_EQ_INT(llmr_store_key_check(s, secret2, &scopes, NULL), LLMR_OK);
    CHECK_EQ_INT(scopes, LLMR_SCOPE_NODE);
    llmr_store_close(s);

    /* No secret on disk, only its hash. */
    CHECK(!file_has(path, secret));
    CHECK(!file_has(path, secret + 5));
    CHECK(secret2 && !file_has(path, secret2));
    CHECK(file_has(path, id)); /* the search itself works */
    free(id);
    free(secret);
    free(id2);
    free(secret2);
    llmr_strbuf_free(&err);
}

TEST(admin_keys_and_given_secrets)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK(!llmr_store_has_admin_key(s));
    char *id = NULL, *secret = NULL;
    CHECK_EQ_INT(llmr_store_key_create(s, "inference only", LLMR_SCOPE_INFERENCE, NULL, &id, &secret,
                                       &err), LLMR_OK);
    CHECK(!llmr_store_has_admin_key(s));
    free(id);
    free(secret);

    const char *given = "Bootstrap-Admin_Key.2026!";
    CHECK_EQ_INT(llmr_store_key_create(s, "bootstrap", LLMR_SCOPE_ADMIN, given, &id, &secret, &err),
                 LLMR_OK);
    CHECK_EQ_STR(secret, given);
    CHECK(llmr_store_has_admin_key(s));
    unsigned scopes = 0;
    char *got = NULL;
    CHECK_EQ_INT(llmr_store_key_check(s, given, &scopes, &got), LLMR_OK);
    CHECK_EQ_INT(scopes, LLMR_SCOPE_ADMIN);
    CHECK_EQ_STR(got, id);
    free(got);
    CHECK_EQ_INT(llmr_store_key_check(s, "Bootstrap-Admin_Key.2027!", &scopes, NULL), LLMR_NOT_FOUND);

    /* The same secret again is refused while the first is live. */
    char *id2 = NULL, *secret2 = NULL;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_key_create(s, "again", LLMR_SCOPE_ADMIN, given, &id2, &secret2, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "exists already");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), id);

    /* Given secrets must be 8 to 256 visible characters. */
    const char *bad[] = {"1234567", "has a space", "tab\there!", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        llmr_strbuf_reset(&err);
        CHECK_EQ_INT(llmr_store_key_create(s, "bad", LLMR_SCOPE_ADMIN, bad[i], &id2, &secret2, &err),
                     LLMR_INVALID_ARGUMENT);
        CHECK_CONTAINS(llmr_strbuf_cstr(&err), "8 to 256 visible ASCII characters");
    }
    char too_long[258];
    memset(too_long, 'k', 257);
    too_long[257] = '\0';
    CHECK_EQ_INT(llmr_store_key_create(s, "long", LLMR_SCOPE_ADMIN, too_long, &id2, &secret2, &err),
                 LLMR_INVALID_ARGUMENT);
    too_long[256] = '\0';
    CHECK_EQ_INT(llmr_store_key_create(s, "long", LLMR_SCOPE_ADMIN, too_long, &id2, &secret2, &err),
                 LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_check(s, too_long, &scopes, NULL), LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_revoke(s, id2, &err), LLMR_OK);
    free(id2);
    free(secret2);
    /* The shortest allowed, stored as a hash only. */
    CHECK_EQ_INT(llmr_store_key_create(s, "short", LLMR_SCOPE_NODE, "Zq8#kP2!", &id2, &secret2, &err),
                 LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_check(s, "Zq8#kP2!", &scopes, NULL), LLMR_OK);
    free(id2);
    free(secret2);

    CHECK_EQ_INT(llmr_store_key_revoke(s, id, &err), LLMR_OK);
    CHECK(!llmr_store_has_admin_key(s));
    CHECK_EQ_INT(llmr_store_key_check(s, given, &scopes, NULL), LLMR_NOT_FOUND);
    /* Revoked, the secret may be given again. */
    CHECK_EQ_INT(llmr_store_key_create(s, "again", LLMR_SCOPE_ADMIN, given, &id2, &secret2, &err),
                 LLMR_OK);
    CHECK(llmr_store_has_admin_key(s));
    CHECK_EQ_INT(llmr_store_key_check(s, given, &scopes, &got), LLMR_OK);
    CHECK_EQ_STR(got, id2);
    free(got);
    free(id2);
    free(secret2);
    llmr_store_close(s);
    CHECK(!file_has(path, given));
    CHECK(!file_has(path, "Zq8#kP2!"));
    free(id);
    free(secret);
    llmr_strbuf_free(&err);
}

/* ---- the request log ------------------------------------------------------------------ */

static void log_one(llmr_store *s, int64_t time_ms, const char *model, unsigned status)
{
    llmr_store_request r = {.time_ms = time_ms, .model = model, .node = "n1", .key_id = "key_x",
                            .endpoint = "/v1/chat/completions", .status = status,
                            .prompt_tokens = 12, .completion_tokens = 34, .ttft_ms = 5.5,
                            .duration_ms = 120.25, .error = status >= 400 ? "upstream failed" : NULL};
    llmr_store_log_request(s, &r);
}

TEST(the_request_log_never_waits_for_the_disk)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    /* Another connection holds the write lock: the log's writes must wait, callers not. */
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    uint64_t t0 = llmr_now_ms();
    for (int i = 0; i < 1000; i++)
        log_one(s, 1000 + i, "m", 200);
    uint64_t took = llmr_now_ms() - t0;
    CHECK(took < 200);
    llmr_sleep_ms(400); /* the thread has tried to write and waits */
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM requests"), 0);
    CHECK_EQ_INT(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    llmr_store_log_flush(s);
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM requests"), 1000);
    CHECK_EQ_INT(llmr_store_log_dropped(s), 0);
    llmr_store_close(s);
}

TEST(the_request_log_reads_newest_first_and_survives_close)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    log_one(s, 3000, "c", 200);
    log_one(s, 1000, "a", 200);
    log_one(s, 2000, "b", 502);
    log_one(s, 2000, "b2", 200); /* same time: the later entry first */
    json_t *list = llmr_store_recent_requests(s, 3);
    CHECK_EQ_INT(json_array_size(list), 3);
    const char *want[] = {"c", "b2", "b"};
    for (size_t i = 0; i < 3 && i < json_array_size(list); i++)
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, i), "model")), want[i]);
    json_t *b = json_array_get(list, 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "time_ms")), 2000);
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "status")), 502);
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "prompt_tokens")), 12);
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "completion_tokens")), 34);
    CHECK(json_real_value(json_object_get(b, "ttft_ms")) == 5.5);
    CHECK(json_real_value(json_object_get(b, "duration_ms")) == 120.25);
    CHECK_EQ_STR(json_string_value(json_object_get(b, "error")), "upstream failed");
    CHECK_EQ_STR(json_string_value(json_object_get(b, "node")), "n1");
    CHECK_EQ_STR(json_string_value(json_object_get(b, "key_id")), "key_x");
    CHECK_EQ_STR(json_string_value(json_object_get(b, "endpoint")), "/v1/chat/completions");
    CHECK(json_is_null(json_object_get(json_array_get(list, 0), "error")));
    json_decref(list);
    list = llmr_store_recent_requests(s, 0);
    CHECK_EQ_INT(json_array_size(list), 0);
    json_decref(list);

    /* Logged right before close: written by close. */
    llmr_store_request odd = {.time_ms = 9000, .model = "bad\xff utf-8", .status = 200,
                              .ttft_ms = NAN};
    llmr_store_log_request(s, &odd);
    log_one(s, 8000, "last", 200);
    llmr_store_close(s);
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM requests"), 6);

    s = reopen(path);
    if (!s)
        return;
    list = llmr_store_recent_requests(s, 100);
    CHECK_EQ_INT(json_array_size(list), 6);
    json_t *first = json_array_get(list, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(first, "model")), "bad\xef\xbf\xbd utf-8");
    CHECK(json_is_null(json_object_get(first, "ttft_ms")));
    CHECK(json_is_null(json_object_get(first, "node")));
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(list, 1), "model")), "last");
    json_decref(list);
    llmr_store_close(s);
}

TEST(the_request_log_keeps_the_newest_rows)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    const int total = 101500;
    for (int i = 0; i < total; i++) {
        log_one(s, i, "m", 200);
        if (i % 5000 == 4999)
            llmr_store_log_flush(s);
    }
    llmr_store_log_flush(s);
    CHECK_EQ_INT(llmr_store_log_dropped(s), 0);
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM requests"), 100000);
    CHECK_EQ_INT(raw_int(path, "SELECT min(time_ms) FROM requests"), total - 100000);
    json_t *list = llmr_store_recent_requests(s, 2);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 0), "time_ms")), total - 1);
    json_decref(list);
    llmr_store_close(s);
}

TEST(a_full_queue_drops_the_oldest_and_counts_them)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    const int n = 25000;
    for (int i = 0; i < n; i++)
        log_one(s, i, "m", 200);
    CHECK_EQ_INT(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    llmr_store_log_flush(s);
    long long rows = raw_int(path, "SELECT count(*) FROM requests");
    uint64_t dropped = llmr_store_log_dropped(s);
    CHECK(dropped > 0);
    CHECK(rows <= 2 * 10000); /* the queue, and at most one batch taken before */
    CHECK_EQ_INT(rows + (long long)dropped, n);
    CHECK_EQ_INT(raw_int(path, "SELECT max(time_ms) FROM requests"), n - 1); /* the newest kept */
    llmr_store_close(s);
}

/* ---- crashes -------------------------------------------------------------------------- */

TEST(a_committed_model_survives_sigkill_and_a_half_transaction_does_not)
{
    const char *dir = fx_tmpdir();
    const char *path = fx_path(dir, "router.db");
    char saved[4200];
    snprintf(saved, sizeof saved, "%s", path);

    pid_t pid = fork();
    if (pid == 0) {
        llmr_store *s = NULL;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_store_open(saved, &s, &err) != LLMR_OK)
            _exit(3);
        llmr_store_model m = {.name = "kept", .source_kind = "hf", .source = "org/kept",
                              .format = "gguf", .filename = "k.gguf", .manifest = json_pack("{s:i}", "v", 7)};
        bool exists;
        if (llmr_store_model_insert(s, &m, &exists, &err) != LLMR_OK)
            _exit(4);
        raise(SIGKILL); /* no close, no flush, no exit handlers */
        _exit(5);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

    char wal[4300];
    snprintf(wal, sizeof wal, "%s-wal", saved);
    struct stat before, after;
    CHECK_EQ_INT(stat(wal, &before), 0); /* the committed insert, not yet checkpointed */

    /* A transaction big enough to spill into the WAL file, killed before COMMIT. */
    pid = fork();
    if (pid == 0) {
        sqlite3 *db = NULL;
        if (sqlite3_open(saved, &db) != SQLITE_OK ||
            sqlite3_exec(db, "PRAGMA cache_size = 8; BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            _exit(3);
        for (int i = 0; i < 2000; i++) {
            char sql[512];
            snprintf(sql, sizeof sql, "INSERT INTO models (name, source_kind, source, format, "
                                      "manifest, created) VALUES ('half-%d', 'hf', 'org/half', "
                                      "'gguf', hex(randomblob(300)), 1)", i);
            if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
                _exit(4);
        }
        raise(SIGKILL);
        _exit(5);
    }
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    CHECK_EQ_INT(stat(wal, &after), 0);
    CHECK(after.st_size > before.st_size + 100000); /* its pages did reach the disk */

    llmr_store *s = reopen(saved);
    if (!s)
        return;
    llmr_store_model m;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_model_get(s, "kept", &m, &err), LLMR_OK);
    CHECK_EQ_STR(m.filename, "k.gguf");
    CHECK_EQ_INT(json_integer_value(json_object_get(m.manifest, "v")), 7);
    llmr_store_model_free(&m);
    CHECK_EQ_INT(llmr_store_model_get(s, "half-0", &m, &err), LLMR_NOT_FOUND);
    json_t *list = llmr_store_model_list(s);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

/* ---- threads -------------------------------------------------------------------------- */

typedef struct worker_arg {
    llmr_store *s;
    int index;
    const char *secret;
    int errors;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    char model[32], node[32];
    snprintf(model, sizeof model, "model-%d", a->index);
    snprintf(node, sizeof node, "node-%d", a->index);
    for (int i = 0; i < 200; i++) {
        log_one(a->s, a->index * 1000 + i, model, 200);
        unsigned scopes = 0;
        char *id = NULL;
        if (llmr_store_key_check(a->s, a->secret, &scopes, &id) != LLMR_OK ||
            scopes != LLMR_SCOPE_INFERENCE)
            a->errors++;
        free(id);
        if (llmr_store_key_check(a->s, "llmr-notakeynotakeynotakeynotakeynotakey000", &scopes, NULL) !=
            LLMR_NOT_FOUND)
            a->errors++;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        llmr_store_model m;
        if (llmr_store_model_get(a->s, "shared", &m, &err) != LLMR_OK)
            a->errors++;
        llmr_store_model_free(&m);
        if (i % 20 == 0) {
            if (llmr_store_node_upsert(a->s, node, node, "http://x", NULL, i, &err) != LLMR_OK)
                a->errors++;
            json_t *l = llmr_store_recent_requests(a->s, 10);
            if (!l)
                a->errors++;
            json_decref(l);
        }
        llmr_strbuf_free(&err);
    }
    return NULL;
}

TEST(threads_share_one_store)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    CHECK(insert(s, "shared", "org/shared", 0));
    char *id = NULL, *secret = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_store_key_create(s, "t", LLMR_SCOPE_INFERENCE, NULL, &id, &secret, &err), LLMR_OK);
    enum { N = 4 };
    pthread_t t[N];
    worker_arg args[N];
    for (int i = 0; i < N; i++) {
        args[i] = (worker_arg){.s = s, .index = i, .secret = secret};
        CHECK_EQ_INT(pthread_create(&t[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(args[i].errors, 0);
    }
    json_t *list = llmr_store_recent_requests(s, 10000);
    CHECK_EQ_INT(json_array_size(list), N * 200);
    json_decref(list);
    list = llmr_store_node_list(s);
    CHECK_EQ_INT(json_array_size(list), N);
    json_decref(list);
    CHECK_EQ_INT(llmr_store_log_dropped(s), 0);
    llmr_store_close(s);
    CHECK_EQ_INT(raw_int(path, "SELECT count(*) FROM requests"), N * 200);
    free(id);
    free(secret);
    llmr_strbuf_free(&err);
}

/* A stored response is never replaced: an id that comes again (a node may answer with
 * any id) is refused, and the first key's response stays its own. */
TEST(a_stored_response_is_never_replaced_by_another_key)
{
    llmr_store *s = open_new(NULL);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    static const char with_nul[] = "a's input with \0 inside";
    json_t *in_a = json_pack("[{s:o}]", "text", json_stringn(with_nul, sizeof with_nul - 1));
    json_t *resp_a = json_pack("{s:s, s:s}", "id", "resp_1", "owner", "a");
    json_t *in_b = json_pack("[]"), *resp_b = json_pack("{s:s, s:s}", "id", "resp_1", "owner", "b");
    CHECK_EQ_INT(llmr_store_response_put(s, "resp_1", "key-a", 1, in_a, resp_a, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_response_put(s, "resp_1", "key-b", 2, in_b, resp_b, &err), LLMR_INVALID_ARGUMENT);
    json_t *in = NULL, *resp = NULL;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_store_response_get(s, "resp_1", "key-a", &in, &resp, &err), LLMR_OK);
    CHECK_EQ_STR(json_string_value(json_object_get(resp, "owner")), "a");
    CHECK(json_equal(in, in_a)); /* a NUL in the text survives */
    json_decref(in);
    json_decref(resp);
    CHECK_EQ_INT(llmr_store_response_get(s, "resp_1", "key-b", &in, &resp, &err), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_store_response_delete(s, "resp_1", "key-b", &err), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_store_response_get(s, "resp_1", "key-a", &in, &resp, &err), LLMR_OK);
    json_decref(in);
    json_decref(resp);
    json_decref(in_a);
    json_decref(resp_a);
    json_decref(in_b);
    json_decref(resp_b);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

/* put_response: response id for key at created_ms, its input padding bytes long. */
static llmr_status put_response(llmr_store *s, const char *id, const char *key, int64_t created_ms,
                                size_t padding)
{
    char *pad = malloc(padding + 1);
    memset(pad, 'x', padding);
    pad[padding] = '\0';
    json_t *in = json_pack("[{s:s}]", "text", pad), *resp = json_pack("{s:s}", "id", id);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_response_put(s, id, key, created_ms, in, resp, &err);
    llmr_strbuf_free(&err);
    json_decref(in);
    json_decref(resp);
    free(pad);
    return st;
}

static bool response_kept(llmr_store *s, const char *id, const char *key)
{
    json_t *in = NULL, *resp = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_store_response_get(s, id, key, &in, &resp, &err);
    json_decref(in);
    json_decref(resp);
    llmr_strbuf_free(&err);
    return st == LLMR_OK;
}

/* The stored responses are bounded by age, per key (count and bytes) and in all: the
 * oldest go first, and one key's many responses push out only its own until the table
 * is full. */
TEST(stored_responses_stay_within_their_bounds_oldest_first)
{
    llmr_store *s = open_new(NULL);
    if (!s)
        return;
    llmr_store_response_bounds b = llmr_store_response_default_bounds();
    CHECK(b.keep >= 1000 && b.keep_per_key >= 100 && b.bytes_per_key >= 2ull * LLMR_STORE_RESPONSE_MAX &&
          b.max_age_ms >= 24ll * 3600 * 1000);
    b.keep = 4;
    b.keep_per_key = 2;
    llmr_store_set_response_bounds(s, &b);
    /* a's third pushes out a's first; b's are untouched */
    CHECK_EQ_INT(put_response(s, "b1", "key-b", 10, 10), LLMR_OK);
    CHECK_EQ_INT(put_response(s, "a1", "key-a", 11, 10), LLMR_OK);
    CHECK_EQ_INT(put_response(s, "a2", "key-a", 12, 10), LLMR_OK);
    CHECK_EQ_INT(put_response(s, "a3", "key-a", 13, 10), LLMR_OK);
    CHECK(!response_kept(s, "a1", "key-a"));
    CHECK(response_kept(s, "a2", "key-a") && response_kept(s, "a3", "key-a"));
    CHECK(response_kept(s, "b1", "key-b"));
    /* five in all past keep 4: the oldest of the table goes, whoever's */
    CHECK_EQ_INT(put_response(s, "c1", "key-c", 14, 10), LLMR_OK);
    CHECK_EQ_INT(put_response(s, "c2", "key-c", 15, 10), LLMR_OK);
    CHECK(!response_kept(s, "b1", "key-b"));
    CHECK(response_kept(s, "a2", "key-a") && response_kept(s, "c2", "key-c"));
    /* bytes: a key's newest that fit in bytes_per_key stay */
    b = llmr_store_response_default_bounds();
    b.bytes_per_key = 2500;
    llmr_store_set_response_bounds(s, &b);
    CHECK_EQ_INT(put_response(s, "d1", "key-d", 20, 1000), LLMR_OK);
    CHECK_EQ_INT(put_response(s, "d2", "key-d", 21, 1000), LLMR_OK);
    CHECK(response_kept(s, "d1", "key-d"));
    CHECK_EQ_INT(put_response(s, "d3", "key-d", 22, 1000), LLMR_OK);
    CHECK(!response_kept(s, "d1", "key-d"));
    CHECK(response_kept(s, "d2", "key-d") && response_kept(s, "d3", "key-d"));
    /* the table's bytes */
    b.bytes_per_key = b.bytes = 2500;
    llmr_store_set_response_bounds(s, &b);
    CHECK_EQ_INT(put_response(s, "e1", "key-e", 23, 1000), LLMR_OK);
    CHECK(!response_kept(s, "d2", "key-d"));
    CHECK(response_kept(s, "d3", "key-d") && response_kept(s, "e1", "key-e"));
    CHECK(!response_kept(s, "a2", "key-a")); /* older and small, but past the bytes */
    /* age: one created a day past the bound sweeps out everything before it */
    b = llmr_store_response_default_bounds();
    b.max_age_ms = 1000;
    llmr_store_set_response_bounds(s, &b);
    CHECK_EQ_INT(put_response(s, "f1", "key-f", 100000, 10), LLMR_OK);
    CHECK(!response_kept(s, "d3", "key-d") && !response_kept(s, "e1", "key-e"));
    CHECK(response_kept(s, "f1", "key-f"));
    llmr_store_close(s);
}

/* A version 6 table of responses (no sizes) migrates: each row's size is counted. */
TEST(a_version_6_responses_table_gets_its_sizes)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    CHECK_EQ_INT(put_response(s, "old", "key-a", 1, 500), LLMR_OK);
    llmr_store_close(s);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "DROP INDEX responses_key; DROP INDEX responses_created;"
                              "ALTER TABLE responses DROP COLUMN bytes;"
                              "CREATE INDEX responses_created ON responses (created_ms);"
                              "PRAGMA user_version = 6",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    s = reopen(path);
    if (!s)
        return;
    CHECK(response_kept(s, "old", "key-a"));
    llmr_store_close(s);
    CHECK(raw_int(path, "SELECT bytes FROM responses WHERE id = 'old'") > 500);
}

TEST(a_key_keeps_its_limits_and_an_update_changes_only_those_given)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *id = NULL, *secret = NULL, *got = NULL;
    CHECK_EQ_INT(llmr_store_key_create(s, "lim", LLMR_SCOPE_INFERENCE, NULL, &id, &secret, &err), LLMR_OK);
    llmr_store_key_limits l = {0, 0, 0};
    CHECK_EQ_INT(llmr_store_key_check_limits(s, secret, NULL, &got, &l), LLMR_OK);
    CHECK_EQ_INT(l.requests_per_minute, LLMR_LIMIT_DEFAULT); /* none of its own yet */
    CHECK_EQ_INT(l.concurrent_requests, LLMR_LIMIT_DEFAULT);
    CHECK_EQ_INT(l.tokens_per_minute, LLMR_LIMIT_DEFAULT);
    free(got);
    llmr_store_key_limits set = {60, 4, LLMR_LIMIT_KEEP};
    CHECK_EQ_INT(llmr_store_key_set_limits(s, id, &set, &err), LLMR_OK);
    llmr_store_key_limits more = {LLMR_LIMIT_KEEP, 0, 1000};
    CHECK_EQ_INT(llmr_store_key_set_limits(s, id, &more, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_check_limits(s, secret, NULL, NULL, &l), LLMR_OK);
    CHECK_EQ_INT(l.requests_per_minute, 60);
    CHECK_EQ_INT(l.concurrent_requests, 0);
    CHECK_EQ_INT(l.tokens_per_minute, 1000);
    llmr_store_key_limits back = {LLMR_LIMIT_DEFAULT, LLMR_LIMIT_KEEP, LLMR_LIMIT_KEEP};
    CHECK_EQ_INT(llmr_store_key_set_limits(s, id, &back, &err), LLMR_OK);
    json_t *list = llmr_store_key_list(s);
    json_t *lim = json_object_get(json_array_get(list, 0), "limits");
    CHECK(json_is_null(json_object_get(lim, "requests_per_minute")));
    CHECK_EQ_INT(json_integer_value(json_object_get(lim, "tokens_per_minute")), 1000);
    json_decref(list);
    llmr_store_key_limits bad = {-5, 0, 0};
    CHECK_EQ_INT(llmr_store_key_set_limits(s, id, &bad, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmr_store_key_set_limits(s, "key_none", &set, &err), LLMR_NOT_FOUND);
    CHECK_EQ_INT(llmr_store_key_revoke(s, id, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_store_key_set_limits(s, id, &set, &err), LLMR_NOT_FOUND); /* a revoked key */
    free(id);
    free(secret);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

TEST(the_audit_log_keeps_who_what_when_and_the_result_newest_first)
{
    const char *path;
    llmr_store *s = open_new(&path);
    if (!s)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_store_audit a = {1000, "key_a", "POST", "/v0/keys", "key_new", 201, "rid1"};
    CHECK_EQ_INT(llmr_store_audit_add(s, &a, &err), LLMR_OK);
    llmr_store_audit b = {2000, NULL, "DELETE", "/v0/models/m", NULL, 404, NULL};
    CHECK_EQ_INT(llmr_store_audit_add(s, &b, &err), LLMR_OK);
    json_t *rows = llmr_store_audit_list(s, 10);
    CHECK_EQ_INT(json_array_size(rows), 2);
    json_t *first = json_array_get(rows, 0), *second = json_array_get(rows, 1);
    CHECK_EQ_STR(json_string_value(json_object_get(first, "path")), "/v0/models/m");
    CHECK(json_is_null(json_object_get(first, "key_id")));
    CHECK_EQ_INT(json_integer_value(json_object_get(first, "status")), 404);
    CHECK_EQ_STR(json_string_value(json_object_get(second, "key_id")), "key_a");
    CHECK_EQ_STR(json_string_value(json_object_get(second, "target")), "key_new");
    CHECK_EQ_INT(json_integer_value(json_object_get(second, "time_ms")), 1000);
    json_decref(rows);
    rows = llmr_store_audit_list(s, 1);
    CHECK_EQ_INT(json_array_size(rows), 1);
    json_decref(rows);
    llmr_strbuf_free(&err);
    llmr_store_close(s);
}

int main(void)
{
    RUN(open_creates_a_database_that_survives_reopening);
    RUN(the_database_is_in_wal_mode_with_its_schema_version);
    RUN(a_database_from_a_newer_llmr_is_refused_untouched);
    RUN(a_file_that_is_not_a_database_is_refused);
    RUN(models_insert_get_list_delete);
    RUN(a_model_keeps_its_chat_format);
    RUN(a_version_1_database_migrates_with_its_models);
    RUN(a_second_registration_of_a_name_changes_nothing);
    RUN(nodes_upsert_list_drain_delete);
    RUN(scopes_parse_and_format);
    RUN(keys_are_made_checked_and_revoked);
    RUN(admin_keys_and_given_secrets);
    RUN(the_request_log_never_waits_for_the_disk);
    RUN(the_request_log_reads_newest_first_and_survives_close);
    RUN(the_request_log_keeps_the_newest_rows);
    RUN(a_full_queue_drops_the_oldest_and_counts_them);
    RUN(a_committed_model_survives_sigkill_and_a_half_transaction_does_not);
    RUN(threads_share_one_store);
    RUN(a_stored_response_is_never_replaced_by_another_key);
    RUN(stored_responses_stay_within_their_bounds_oldest_first);
    RUN(a_version_6_responses_table_gets_its_sizes);
    RUN(a_key_keeps_its_limits_and_an_update_changes_only_those_given);
    RUN(the_audit_log_keeps_who_what_when_and_the_result_newest_first);
    return llmr_test_finish();
}
