/* The router's admin key at start (router.h): the key file DATA_DIR/admin.key (mode
 * 0600) and LLMR_ADMIN_KEY.
 *
 *   - No live admin key in the store: a new one is made, written to the key file and
 *     printed.  The file is written before the server starts, so a start that fails
 *     afterwards (a port in use) leaves the key in the store and in the file: the next
 *     start uses it.
 *   - LLMR_ADMIN_KEY set: when it is a live admin key already, nothing changes.  A new
 *     secret becomes the admin key ("bootstrap admin"), the earlier bootstrap admin keys
 *     are revoked, and the log says which.  A secret that is another key's (without the
 *     admin scope) or not a valid secret stops the start with the reason.
 *   - In both cases the key file is made to hold the admin key, so that local commands
 *     (`llmr list`, `llmr keys`, ...) find it.
 *   - A key file whose key is no longer an admin key (revoked through the API) is left
 *     alone, and the log says how to replace it. */
#include "router/router_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"
#include "common/log.h"

#define COMPONENT "router"
#define BOOTSTRAP_NAME "bootstrap admin"
#define KEY_FILE_MAX 1024

char *llmr_router_key_file_path(const char *data_dir)
{
    return data_dir ? llmr_path_join(data_dir, LLMR_ROUTER_KEY_FILE) : NULL;
}

llmr_status llmr_router_read_key_file(const char *data_dir, char **key, llmr_strbuf *err)
{
    *key = NULL;
    char *path = llmr_router_key_file_path(data_dir), *data = NULL;
    size_t len = 0;
    if (!path) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = llmr_read_file(path, KEY_FILE_MAX, &data, &len, &why);
    if (st == LLMR_OK) {
        while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
            data[--len] = 0;
        if (len == 0 || strpbrk(data, " \t\r\n")) {
            llmr_strbuf_printf(err, "%s does not hold one key on one line", path);
            st = LLMR_INVALID_ARGUMENT;
        } else {
            *key = data;
            data = NULL;
        }
    } else if (st != LLMR_NOT_FOUND) {
        llmr_strbuf_printf(err, "cannot read %s: %s", path, llmr_strbuf_cstr(&why));
    }
    if (data) {
        memset(data, 0, len);
        free(data);
    }
    llmr_strbuf_free(&why);
    free(path);
    return st;
}

/* Writes the key file (the key and a newline, mode 0600); false after a warning. */
static bool write_key_file(const char *path, const char *secret)
{
    llmr_strbuf text = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&text, "%s\n", secret);
    bool ok = !llmr_strbuf_failed(&text) &&
              llmr_write_file_atomic_mode(path, llmr_strbuf_cstr(&text), text.len, 0600, &err) == LLMR_OK;
    if (!ok)
        llmr_log_warn(COMPONENT, "cannot write the admin key to %s: %s; local commands will need the key "
                                 "given (--api-key or LLMR_API_KEY)",
                      path, err.len ? llmr_strbuf_cstr(&err) : "out of memory");
    if (text.data)
        memset(text.data, 0, text.len);
    llmr_strbuf_free(&text);
    llmr_strbuf_free(&err);
    return ok;
}

/* The key file's key (malloc'd) or NULL, with a warning when it cannot be read. */
static char *file_key(const char *data_dir)
{
    char *key = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_router_read_key_file(data_dir, &key, &err);
    if (st != LLMR_OK && st != LLMR_NOT_FOUND)
        llmr_log_warn(COMPONENT, "%s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return key;
}

static void free_secret(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

/* Makes the key file hold secret (written when it holds something else), and warns
 * when others may read it. */
static void keep_in_file(const char *data_dir, const char *path, const char *secret)
{
    char *have = file_key(data_dir);
    if (!have || strcmp(have, secret) != 0) {
        write_key_file(path, secret);
    } else {
        struct stat st;
        if (stat(path, &st) == 0 && (st.st_mode & 077))
            llmr_log_warn(COMPONENT, "%s holds the admin key and others may read it (mode %03o): chmod 600 it",
                          path, (unsigned)(st.st_mode & 0777));
    }
    free_secret(have);
}

/* Revokes the live bootstrap admin keys other than keep; their ids, ", "-separated,
 * into revoked. */
static void revoke_earlier(llmr_store *s, const char *keep, llmr_strbuf *revoked)
{
    json_t *keys = llmr_store_key_list(s), *k;
    size_t i;
    json_array_foreach(keys, i, k)
    {
        const char *id = json_string_value(json_object_get(k, "id"));
        const char *name = json_string_value(json_object_get(k, "name"));
        unsigned scopes = 0;
        if (!id || !name || strcmp(name, BOOTSTRAP_NAME) != 0 || !strcmp(id, keep) ||
            json_is_true(json_object_get(k, "revoked")) ||
            !llmr_scopes_parse(json_string_value(json_object_get(k, "scopes")), &scopes) ||
            !(scopes & LLMR_SCOPE_ADMIN))
            continue;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_store_key_revoke(s, id, &err) == LLMR_OK)
            llmr_strbuf_printf(revoked, "%s%s", revoked->len ? ", " : "", id);
        else
            llmr_log_warn(COMPONENT, "cannot revoke the earlier admin key %s: %s", id, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
    }
    json_decref(keys);
}

/* LLMR_ADMIN_KEY is set: it becomes the admin key unless it is one already. */
static llmr_status from_env(llmr_router *r, const char *path, llmr_strbuf *err)
{
    const char *given = r->o.admin_key;
    unsigned scopes = 0;
    char *id = NULL, *secret = NULL;
    llmr_status st = LLMR_OK;
    if (llmr_store_key_check(r->store, given, &scopes, &id) == LLMR_OK) {
        if (!(scopes & LLMR_SCOPE_ADMIN)) {
            llmr_strbuf s = LLMR_STRBUF_INIT;
            llmr_scopes_format(scopes, &s);
            llmr_strbuf_printf(err, "LLMR_ADMIN_KEY is the secret of key %s, whose scopes are %s, not admin: it "
                                    "cannot become the admin key; revoke that key (llmr keys revoke %s) or "
                                    "choose another secret",
                               id, llmr_strbuf_cstr(&s), id);
            llmr_strbuf_free(&s);
            st = LLMR_INVALID_ARGUMENT;
        } else {
            llmr_log_info(COMPONENT, "admin key %s (LLMR_ADMIN_KEY's)", id);
            keep_in_file(r->o.data_dir, path, given);
        }
        free(id);
        return st;
    }
    llmr_strbuf why = LLMR_STRBUF_INIT, revoked = LLMR_STRBUF_INIT;
    st = llmr_store_key_create(r->store, BOOTSTRAP_NAME, LLMR_SCOPE_ADMIN, given, &id, &secret, &why);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "LLMR_ADMIN_KEY cannot become the admin key: %s", llmr_strbuf_cstr(&why));
    } else {
        revoke_earlier(r->store, id, &revoked);
        if (revoked.len)
            llmr_log_info(COMPONENT, "admin key %s created from LLMR_ADMIN_KEY; it replaces %s (revoked)", id,
                          llmr_strbuf_cstr(&revoked));
        else
            llmr_log_info(COMPONENT, "admin key %s created from LLMR_ADMIN_KEY", id);
        keep_in_file(r->o.data_dir, path, given);
    }
    llmr_strbuf_free(&why);
    llmr_strbuf_free(&revoked);
    free(id);
    free_secret(secret);
    return st;
}

/* No LLMR_ADMIN_KEY: the key file's key, or a new one when the store has no admin key. */
static llmr_status from_file(llmr_router *r, const char *path, llmr_strbuf *err)
{
    char *have = file_key(r->o.data_dir), *id = NULL, *secret = NULL;
    unsigned scopes = 0;
    llmr_status st = LLMR_OK;
    if (have && llmr_store_key_check(r->store, have, &scopes, &id) == LLMR_OK && (scopes & LLMR_SCOPE_ADMIN)) {
        llmr_log_info(COMPONENT, "admin key %s, kept in %s", id, path);
        keep_in_file(r->o.data_dir, path, have);
    } else if (llmr_store_has_admin_key(r->store)) {
        if (have)
            llmr_log_warn(COMPONENT, "%s holds no admin key of this router (revoked?): local commands cannot use "
                                     "it; set LLMR_ADMIN_KEY to a new secret once to replace the admin key and "
                                     "the file",
                          path);
        else
            llmr_log_info(COMPONENT, "no key file %s: local commands need the admin key given (--api-key or "
                                     "LLMR_API_KEY); set LLMR_ADMIN_KEY once to write one",
                          path);
    } else if ((st = llmr_store_key_create(r->store, BOOTSTRAP_NAME, LLMR_SCOPE_ADMIN, NULL, &id, &secret, err)) ==
               LLMR_OK) {
        bool kept = write_key_file(path, secret);
        if (kept && llmr_log_get_format() == LLMR_LOG_FORMAT_JSON) {
            /* the log stays JSON lines, and a secret stays out of logs: the file has it */
            llmr_log_write(LLMR_LOG_INFO, COMPONENT,
                           "the admin key of this router is kept in %s (mode 0600), where local llmr "
                           "commands find it; use it as \"Authorization: Bearer KEY\", manage keys "
                           "with `llmr keys` or /v0/keys",
                           path);
        } else { /* on the terminal (also in JSON mode when the file could not keep it) */
            fprintf(stderr,
                    "\n  llmr: the admin key of this router%s:\n\n    %s\n\n"
                    "  Use it as \"Authorization: Bearer KEY\"; manage keys with `llmr keys` or /v0/keys.\n",
                    kept ? "" : " (shown once, keep it)", secret);
            if (kept)
                fprintf(stderr, "  It is kept in %s (mode 0600), where local llmr commands find it.\n", path);
            fputc('\n', stderr);
        }
    }
    free(id);
    free_secret(secret);
    free_secret(have);
    return st;
}

llmr_status router_bootstrap_admin(llmr_router *r, llmr_strbuf *err)
{
    char *path = llmr_router_key_file_path(r->o.data_dir);
    if (!path) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = r->o.admin_key ? from_env(r, path, err) : from_file(r, path, err);
    free(path);
    return st;
}
