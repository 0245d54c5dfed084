/* The router's API keys (store.h): secrets, their salted hashes, scopes.
 *
 * A secret is never stored.  A row keeps
 *   lookup  8 hex digits of SHA-256("llmr key lookup" NUL secret): finds the candidate
 *           rows through an index, and says almost nothing about the secret (32 bits,
 *           shared with about one secret in four billion);
 *   salt    32 hex digits of fresh random bytes;
 *   hash    hex SHA-256 of salt || secret, compared in constant time.
 * The lookup is derived rather than a literal prefix of the secret so that a short
 * given secret (8 characters is allowed) is not stored whole.
 *
 * A check hashes the secret once per candidate row, and once against nothing when
 * there is none, so an unknown key, a revoked one and a wrong one take the same work. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/list_item.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "common/random.h"
#include "router/store_internal.h"

#define SECRET_PREFIX "llmr-"
#define SECRET_RANDOM_CHARS 40
#define GIVEN_MIN 8
#define GIVEN_MAX 256
#define ID_PREFIX "key_"
#define ID_RANDOM_CHARS 12
#define SALT_BYTES 16
#define LOOKUP_HEX 8
#define NAME_MAX_BYTES 256
#define LAST_USED_EVERY_S 60
#define ALL_SCOPES (LLMR_SCOPE_INFERENCE | LLMR_SCOPE_NODE | LLMR_SCOPE_ADMIN)

static const struct {
    unsigned bit;
    const char *name;
} SCOPES[] = {
    {LLMR_SCOPE_INFERENCE, "inference"},
    {LLMR_SCOPE_NODE, "node"},
    {LLMR_SCOPE_ADMIN, "admin"},
};
#define N_SCOPES (sizeof SCOPES / sizeof SCOPES[0])

/* ---- scopes --------------------------------------------------------------------------- */

bool llmr_scopes_parse(const char *text, unsigned *scopes)
{
    return llmr_scopes_parse_report(text, scopes, NULL);
}

bool llmr_scopes_parse_report(const char *text, unsigned *scopes, llmr_strbuf *bad)
{
    if (!text)
        return false;
    unsigned bits = 0;
    const char *rest = text, *p;
    size_t n;
    while (llmr_list_next(&rest, &p, &n)) {
        size_t i = 0;
        while (i < N_SCOPES && !(strlen(SCOPES[i].name) == n && strncasecmp(SCOPES[i].name, p, n) == 0))
            i++;
        if (i == N_SCOPES) { /* an unknown name, or an empty one */
            if (bad)
                llmr_strbuf_append(bad, p, n);
            return false;
        }
        bits |= SCOPES[i].bit;
    }
    *scopes = bits;
    return true;
}

void llmr_scopes_format(unsigned scopes, llmr_strbuf *out)
{
    bool first = true;
    for (size_t i = 0; i < N_SCOPES; i++) {
        if (!(scopes & SCOPES[i].bit))
            continue;
        if (!first)
            llmr_strbuf_putc(out, ',');
        llmr_strbuf_puts(out, SCOPES[i].name);
        first = false;
    }
}

/* ---- secrets -------------------------------------------------------------------------- */

/* n random bytes from the kernel: getrandom, else /dev/urandom.  No weaker fallback:
 * these make secrets. */
/* n characters of [A-Za-z0-9], uniformly (bytes of 248 and up are drawn again, so
 * the modulo has no bias), and a NUL. */
static bool random_alnum(char *out, size_t n)
{
    static const char ALNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char buf[64];
    size_t done = 0;
    while (done < n) {
        if (!llmr_random_bytes(buf, sizeof buf))
            return false;
        for (size_t i = 0; i < sizeof buf && done < n; i++)
            if (buf[i] < 248)
                out[done++] = ALNUM[buf[i] % 62];
    }
    out[n] = '\0';
    return true;
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    static const char HEX[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX[b[i] >> 4];
        out[2 * i + 1] = HEX[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* A secret a key may have: 8 to 256 visible ASCII characters (no spaces: it travels in
 * an Authorization header).  Made ones ("llmr-" and 40 letters and digits) are too. */
static bool secret_is_valid(const char *secret)
{
    if (!secret)
        return false;
    size_t n = 0;
    for (; secret[n]; n++)
        if ((unsigned char)secret[n] < 0x21 || (unsigned char)secret[n] > 0x7e || n >= GIVEN_MAX)
            return false;
    return n >= GIVEN_MIN;
}

static void lookup_of(const char *secret, char out[LOOKUP_HEX + 1])
{
    static const char LABEL[] = "llmr key lookup"; /* with its NUL */
    llmr_sha256 c;
    uint8_t d[32];
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, LABEL, sizeof LABEL);
    llmr_sha256_update(&c, secret, strlen(secret));
    llmr_sha256_final(&c, d);
    to_hex(d, LOOKUP_HEX / 2, out);
}

static void hash_of(const char *salt, const char *secret, char out[65])
{
    llmr_sha256 c;
    uint8_t d[32];
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, salt, strlen(salt));
    llmr_sha256_update(&c, secret, strlen(secret));
    llmr_sha256_final(&c, d);
    llmr_sha256_hex(d, out);
}

/* Whether two 64-character hashes are equal, looking at every character whatever
 * the first difference. */
static bool hash_equal(const char *a, const char *b)
{
    volatile unsigned char diff = 0;
    for (size_t i = 0; i < 64; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* The work of a check against one row, when there is none. */
static void hash_nothing(const char *secret)
{
    static const char ZERO_HASH[65] =
        "0000000000000000000000000000000000000000000000000000000000000000";
    char h[65];
    hash_of("00000000000000000000000000000000", secret, h);
    (void)hash_equal(h, ZERO_HASH);
}

/* ---- keys ----------------------------------------------------------------------------- */

/* The id of a live key whose secret is `secret`, malloc'd into *id (NULL: none).
 * With db_lock held. */
static llmr_status find_live(llmr_store *s, const char *secret, char **id, llmr_strbuf *err)
{
    *id = NULL;
    char lookup[LOOKUP_HEX + 1];
    lookup_of(secret, lookup);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT id, salt, hash FROM api_keys "
                                  "WHERE lookup = ? AND revoked = 0", -1, &st, NULL) != SQLITE_OK)
        return llmr_store_sql_fail(s, err, "looking for an existing key");
    llmr_store_bind_text(st, 1, lookup);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && !*id) {
        const char *salt = (const char *)sqlite3_column_text(st, 1);
        const char *hash = (const char *)sqlite3_column_text(st, 2);
        char h[65];
        if (!salt || !hash || strlen(hash) != 64)
            continue;
        hash_of(salt, secret, h);
        if (hash_equal(h, hash))
            *id = llmr_store_column_dup(st, 0);
    }
    llmr_status status = LLMR_OK;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        status = llmr_store_sql_fail(s, err, "looking for an existing key");
    sqlite3_finalize(st);
    return status;
}

llmr_status llmr_store_key_create(llmr_store *s, const char *name, unsigned scopes, const char *given,
                                  char **id, char **secret, llmr_strbuf *err)
{
    *id = NULL;
    *secret = NULL;
    if (!name)
        name = "";
    if (scopes == 0 || (scopes & ~(unsigned)ALL_SCOPES)) {
        llmr_strbuf_printf(err, "a key needs one or more of the scopes inference, node and admin "
                                "(got the bits %#x)", scopes);
        return LLMR_INVALID_ARGUMENT;
    }
    if (strlen(name) > NAME_MAX_BYTES || !llmr_utf8_valid(name, strlen(name), NULL)) {
        llmr_strbuf_printf(err, "a key's name must be valid UTF-8 of at most %d bytes",
                           NAME_MAX_BYTES);
        return LLMR_INVALID_ARGUMENT;
    }
    if (given && !secret_is_valid(given)) {
        llmr_strbuf_printf(err, "the given key must be %d to %d visible ASCII characters "
                                "(letters, digits and punctuation; no spaces); make one with "
                                "at least 32 random characters",
                           GIVEN_MIN, GIVEN_MAX);
        return LLMR_INVALID_ARGUMENT;
    }

    llmr_status status = LLMR_OK;
    char *the_secret = NULL, *the_id = NULL, *existing = NULL;
    unsigned char salt_bytes[SALT_BYTES];
    char salt[2 * SALT_BYTES + 1], hash[65], lookup[LOOKUP_HEX + 1];
    sqlite3_stmt *st = NULL;
    bool locked = false, in_tx = false;

    the_secret = given ? strdup(given) : malloc(sizeof SECRET_PREFIX + SECRET_RANDOM_CHARS);
    the_id = malloc(sizeof ID_PREFIX + ID_RANDOM_CHARS);
    if (!the_secret || !the_id) {
        llmr_strbuf_puts(err, "out of memory making a key");
        status = LLMR_OOM_RAM;
        goto done;
    }
    if (!given) {
        memcpy(the_secret, SECRET_PREFIX, sizeof SECRET_PREFIX - 1);
        if (!random_alnum(the_secret + sizeof SECRET_PREFIX - 1, SECRET_RANDOM_CHARS))
            goto no_random;
    }
    if (!llmr_random_bytes(salt_bytes, sizeof salt_bytes))
        goto no_random;
    to_hex(salt_bytes, sizeof salt_bytes, salt);
    hash_of(salt, the_secret, hash);
    lookup_of(the_secret, lookup);

    pthread_mutex_lock(&s->db_lock);
    locked = true;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "creating a key");
        goto done;
    }
    in_tx = true;
    status = find_live(s, the_secret, &existing, err);
    if (status != LLMR_OK)
        goto done;
    if (existing) {
        llmr_strbuf_printf(err, "a key with this secret exists already (%s); use it, or revoke "
                                "it first", existing);
        status = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    if (sqlite3_prepare_v2(s->db, "INSERT INTO api_keys (id, name, scopes, lookup, salt, hash, "
                                  "created) VALUES (?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "creating a key");
        goto done;
    }
    for (int attempt = 0;; attempt++) { /* a new id on the rare collision */
        memcpy(the_id, ID_PREFIX, sizeof ID_PREFIX - 1);
        if (!random_alnum(the_id + sizeof ID_PREFIX - 1, ID_RANDOM_CHARS))
            goto no_random;
        sqlite3_reset(st);
        llmr_store_bind_text(st, 1, the_id);
        llmr_store_bind_text(st, 2, name);
        sqlite3_bind_int64(st, 3, (int64_t)scopes);
        llmr_store_bind_text(st, 4, lookup);
        llmr_store_bind_text(st, 5, salt);
        llmr_store_bind_text(st, 6, hash);
        sqlite3_bind_int64(st, 7, llmr_store_unix_now());
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_CONSTRAINT_PRIMARYKEY || attempt == 3) {
            status = llmr_store_sql_fail(s, err, "creating a key");
            goto done;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "creating a key");
        goto done;
    }
    in_tx = false;
    *id = the_id;
    *secret = the_secret;
    the_id = the_secret = NULL;
    goto done;

no_random:
    llmr_strbuf_puts(err, "the kernel gave no random bytes (getrandom and /dev/urandom both "
                          "failed); a key cannot be made safely without them");
    status = LLMR_INTERNAL;
done:
    sqlite3_finalize(st);
    if (in_tx)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (locked)
        pthread_mutex_unlock(&s->db_lock);
    free(existing);
    free(the_id);
    if (the_secret) {
        memset(the_secret, 0, strlen(the_secret));
        free(the_secret);
    }
    return status;
}

llmr_status llmr_store_key_check(llmr_store *s, const char *secret, unsigned *scopes, char **id)
{
    return llmr_store_key_check_limits(s, secret, scopes, id, NULL);
}

static int64_t limit_column(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? LLMR_LIMIT_DEFAULT : sqlite3_column_int64(st, col);
}

llmr_status llmr_store_key_check_limits(llmr_store *s, const char *secret, unsigned *scopes, char **id,
                                        llmr_store_key_limits *limits)
{
    if (id)
        *id = NULL;
    llmr_store_key_limits found_limits = {LLMR_LIMIT_DEFAULT, LLMR_LIMIT_DEFAULT, LLMR_LIMIT_DEFAULT};
    if (!secret_is_valid(secret)) {
        hash_nothing(SECRET_PREFIX "0000000000000000000000000000000000000000");
        return LLMR_NOT_FOUND;
    }
    char lookup[LOOKUP_HEX + 1];
    lookup_of(secret, lookup);

    llmr_status status = LLMR_NOT_FOUND;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    sqlite3_stmt *st = NULL;
    char *found_id = NULL;
    unsigned found_scopes = 0;
    bool stale = false;
    int64_t now = llmr_store_unix_now();
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "SELECT id, scopes, salt, hash, revoked, last_used, requests_per_minute, "
                                  "concurrent_requests, tokens_per_minute FROM api_keys WHERE lookup = ?", -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, &err, "checking a key");
        goto done;
    }
    llmr_store_bind_text(st, 1, lookup);
    int rc, rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rows++;
        const char *salt = (const char *)sqlite3_column_text(st, 2);
        const char *hash = (const char *)sqlite3_column_text(st, 3);
        if (!salt || !hash || strlen(hash) != 64) {
            hash_nothing(secret);
            continue;
        }
        char h[65];
        hash_of(salt, secret, h);
        bool match = hash_equal(h, hash);
        if (match && sqlite3_column_int(st, 4) == 0 && !found_id) {
            found_id = llmr_store_column_dup(st, 0);
            if (!found_id) {
                status = LLMR_OOM_RAM;
                goto done;
            }
            found_scopes = (unsigned)sqlite3_column_int64(st, 1);
            found_limits.requests_per_minute = limit_column(st, 6);
            found_limits.concurrent_requests = limit_column(st, 7);
            found_limits.tokens_per_minute = limit_column(st, 8);
            stale = sqlite3_column_type(st, 5) == SQLITE_NULL ||
                    now - sqlite3_column_int64(st, 5) >= LAST_USED_EVERY_S;
        }
    }
    if (rows == 0)
        hash_nothing(secret);
    if (rc != SQLITE_DONE) {
        status = llmr_store_sql_fail(s, &err, "checking a key");
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!found_id)
        goto done;
    status = LLMR_OK;
    if (stale) { /* at most once a minute: the write waits for the disk */
        if (sqlite3_prepare_v2(s->db, "UPDATE api_keys SET last_used = ? WHERE id = ?", -1, &st,
                               NULL) != SQLITE_OK) {
            llmr_store_sql_fail(s, &err, "noting a key's use");
        } else {
            sqlite3_bind_int64(st, 1, now);
            llmr_store_bind_text(st, 2, found_id);
            if (sqlite3_step(st) != SQLITE_DONE)
                llmr_store_sql_fail(s, &err, "noting a key's use");
        }
        if (err.len) /* not worth refusing the request over */
            llmr_log_warn(STORE_COMPONENT, "%s", llmr_strbuf_cstr(&err));
    }

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    if (status != LLMR_OK && status != LLMR_NOT_FOUND)
        llmr_log_error(STORE_COMPONENT, "%s", err.len ? llmr_strbuf_cstr(&err) : "checking a key: out of memory");
    llmr_strbuf_free(&err);
    if (status == LLMR_OK) {
        if (scopes)
            *scopes = found_scopes;
        if (limits)
            *limits = found_limits;
        if (id) {
            *id = found_id;
            found_id = NULL;
        }
    }
    free(found_id);
    return status;
}

llmr_status llmr_store_key_revoke(llmr_store *s, const char *id, llmr_strbuf *err)
{
    return llmr_store_change_one(s, "UPDATE api_keys SET revoked = 1 WHERE id = ?", id, NULL, 0,
                                 "revoking a key", "key", err);
}

llmr_status llmr_store_key_set_limits(llmr_store *s, const char *id, const llmr_store_key_limits *l,
                                      llmr_strbuf *err)
{
    const int64_t v[3] = {l->requests_per_minute, l->concurrent_requests, l->tokens_per_minute};
    for (int i = 0; i < 3; i++)
        if (v[i] < LLMR_LIMIT_KEEP || v[i] > LLMR_LIMIT_MAX) {
            llmr_strbuf_printf(err, "a limit is a count from 0 (none) to %d", LLMR_LIMIT_MAX);
            return LLMR_INVALID_ARGUMENT;
        }
    return llmr_store_change_one(s,
                                 "UPDATE api_keys SET "
                                 "requests_per_minute = CASE ?1 WHEN -2 THEN requests_per_minute "
                                 "WHEN -1 THEN NULL ELSE ?1 END, "
                                 "concurrent_requests = CASE ?2 WHEN -2 THEN concurrent_requests "
                                 "WHEN -1 THEN NULL ELSE ?2 END, "
                                 "tokens_per_minute = CASE ?3 WHEN -2 THEN tokens_per_minute "
                                 "WHEN -1 THEN NULL ELSE ?3 END "
                                 "WHERE id = ?4 AND revoked = 0",
                                 id, v, 3, "changing a key's limits", "key", err);
}

/* A key's limits as listed: each a count or null (the router's default). */
static json_t *limits_json(sqlite3_stmt *st, int col)
{
    static const char *const names[] = {"requests_per_minute", "concurrent_requests", "tokens_per_minute"};
    json_t *o = json_object();
    for (int i = 0; o && i < 3; i++)
        if (json_object_set_new(o, names[i], sqlite3_column_type(st, col + i) == SQLITE_NULL
                                                  ? json_null()
                                                  : json_integer(sqlite3_column_int64(st, col + i))) != 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

json_t *llmr_store_key_list(llmr_store *s)
{
    json_t *list = json_array();
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT, names = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&s->db_lock);
    if (!list)
        goto fail;
    if (sqlite3_prepare_v2(s->db, "SELECT id, name, scopes, created, revoked, last_used, "
                                  "requests_per_minute, concurrent_requests, tokens_per_minute "
                                  "FROM api_keys ORDER BY created, rowid", -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "listing keys");
        goto fail;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        llmr_strbuf_reset(&names);
        llmr_scopes_format((unsigned)sqlite3_column_int64(st, 2), &names);
        json_t *o = json_object();
        if (!o || json_array_append_new(list, o) != 0 || llmr_strbuf_failed(&names) ||
            json_object_set_new(o, "id", llmr_store_column_string(st, 0)) != 0 ||
            json_object_set_new(o, "name", llmr_store_column_string(st, 1)) != 0 ||
            json_object_set_new(o, "scopes", json_string(llmr_strbuf_cstr(&names))) != 0 ||
            json_object_set_new(o, "created", json_integer(sqlite3_column_int64(st, 3))) != 0 ||
            json_object_set_new(o, "revoked", json_boolean(sqlite3_column_int(st, 4) != 0)) != 0 ||
            json_object_set_new(o, "last_used", sqlite3_column_type(st, 5) == SQLITE_NULL
                                                    ? json_null()
                                                    : json_integer(sqlite3_column_int64(st, 5))) != 0 ||
            json_object_set_new(o, "limits", limits_json(st, 6)) != 0) {
            llmr_strbuf_puts(&err, "listing keys: out of memory");
            goto fail;
        }
    }
    llmr_strbuf_free(&names);
    return llmr_store_list_end(s, st, rc, list, &err, "listing keys");

fail: /* err says why, or is empty: out of memory */
    llmr_strbuf_free(&names);
    return llmr_store_list_end(s, st, SQLITE_NOMEM, list, &err, "listing keys");
}

bool llmr_store_has_admin_key(llmr_store *s)
{
    bool yes = false;
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked = 0 "
                                  "AND (scopes & ?) != 0)", -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "looking for an admin key");
        goto done;
    }
    sqlite3_bind_int(st, 1, LLMR_SCOPE_ADMIN);
    if (sqlite3_step(st) == SQLITE_ROW)
        yes = sqlite3_column_int(st, 0) != 0;
    else
        llmr_store_sql_fail(s, &err, "looking for an admin key");

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    if (err.len)
        llmr_log_error(STORE_COMPONENT, "%s", llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return yes;
}
