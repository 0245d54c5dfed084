/* Inside the router's store (store.h): what its files share.
 *
 *   store.c       opening, the schema and its migrations, models
 *   store_nodes.c the nodes the router has known
 *   store_keys.c  API keys: secrets, salted hashes, scopes
 *   store_log.c   the request log: an in-memory queue and the thread that writes it
 *   store_stats.c the request log summed up over a recent window (the dashboard's)
  *   store_responses.c the Responses API's stored responses
 *   store_audit.c the audit log of admin actions
 *
 * Locking: s->db_lock guards the connection for every operation, from the first
 * statement to the last (SQLite's own mutex keeps single calls safe; ours keeps a
 * statement and sqlite3_changes or a transaction together).  The log queue has its
 * own lock, log_lock, never held while waiting for db_lock, so logging a request
 * never waits for the disk.  flush_lock orders flushes: batches reach the table in
 * the order they were queued. */
#ifndef LLMR_ROUTER_STORE_INTERNAL_H
#define LLMR_ROUTER_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "router/store.h"

#define STORE_COMPONENT "store"
#define STORE_LOG_QUEUE_MAX 10000    /* entries waiting; the oldest go when it is full */
#define STORE_LOG_KEEP_ROWS 100000   /* the request table keeps the newest this many */
#define STORE_LOG_FLUSH_MS 200
#define STORE_LOG_TRIM_EVERY 1000    /* rows written between two trims */
#define STORE_LOG_TEXT_MAX 1024      /* bytes kept of each text of an entry */

typedef struct store_log_entry {
    int64_t time_ms;
    char *model, *node, *key_id, *endpoint, *error, *request_id;
    unsigned status;
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms, duration_ms;
} store_log_entry;

struct llmr_store {
    sqlite3 *db;
    char *path;
    int schema_version;
    pthread_mutex_t db_lock;
    llmr_store_response_bounds response_bounds; /* under db_lock */

    /* the request log */
    pthread_mutex_t log_lock;
    pthread_cond_t log_wake;      /* stop, or a flush asked for */
    pthread_mutex_t flush_lock;
    pthread_t log_thread;
    bool log_thread_running;
    bool log_stop;
    store_log_entry *queue;       /* a ring of STORE_LOG_QUEUE_MAX */
    size_t queue_head, queue_len;
    uint64_t dropped;             /* entries dropped because the queue was full */
    uint64_t dropped_reported;    /* how many of those the log has told of */
    uint64_t written_since_trim;  /* under flush_lock */
};

/* Appends "what: SQLite's message (path)" to err and returns INTERNAL (IO for a disk
 * failure or a full disk).  Call with db_lock held, right after the failing call. */
llmr_status llmr_store_sql_fail(llmr_store *s, llmr_strbuf *err, const char *what);
/* The end of a list query run under db_lock: finalizes st, unlocks, frees err and
 * returns list when rc is SQLITE_DONE and err is empty.  Otherwise (the database's
 * error for `what`, SQLITE_NOMEM for out of memory, or what err says already) it logs
 * why, frees list and returns NULL. */
json_t *llmr_store_list_end(llmr_store *s, sqlite3_stmt *st, int rc, json_t *list, llmr_strbuf *err,
                            const char *what);
/* A text column, malloc'd; NULL for SQL NULL (and when out of memory). */
char *llmr_store_column_dup(sqlite3_stmt *st, int col);
/* A text column as a JSON string (invalid UTF-8 replaced by U+FFFD), or null. */
json_t *llmr_store_column_string(sqlite3_stmt *st, int col);
/* A column of JSON text parsed; JSON null for SQL NULL or text that does not parse. */
json_t *llmr_store_column_json(sqlite3_stmt *st, int col);
/* JSON as compact text for a column, malloc'd; *text NULL for a NULL value.  False
 * when out of memory. */
bool llmr_store_json_text(const json_t *v, char **text);
/* Binds text, or NULL for a NULL pointer. */
int llmr_store_bind_text(sqlite3_stmt *st, int idx, const char *text);
/* "no KIND \"NAME\"" into err, the name shown safely. */
void llmr_store_not_found(llmr_strbuf *err, const char *kind, const char *name);
/* Runs a change of one row: sql takes n_ints integers, then the row's key.  NOT_FOUND
 * (err naming the KIND) when no row has that key; `what` heads other errors. */
llmr_status llmr_store_change_one(llmr_store *s, const char *sql, const char *key,
                                  const int64_t *ints, int n_ints, const char *what,
                                  const char *kind, llmr_strbuf *err);
/* Unix seconds now. */
int64_t llmr_store_unix_now(void);

/* store_log.c: the queue and its thread, started last by open and stopped first by
 * close (which writes what is queued). */
llmr_status llmr_store_log_start(llmr_store *s, llmr_strbuf *err);
void llmr_store_log_stop(llmr_store *s);
/* Writes what is queued now, without trimming (before a read of the table). */
void llmr_store_log_write_queued(llmr_store *s);

#endif
