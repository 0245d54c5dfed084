/* The router's store: the nodes it has known (see store.h).  The live state of a node
 * (load, health, what it is syncing) is in memory; this keeps what a restarted router
 * should remember: each node's id, name, address, its last report, when it was last
 * seen and whether an operator drained it.  A node's upsert keeps `drained`, which only
 * llmr_store_node_set_drained changes. */
#include <stdlib.h>

#include "common/log.h"
#include "router/store_internal.h"

llmr_status llmr_store_node_upsert(llmr_store *s, const char *id, const char *name, const char *url,
                                   const json_t *info, int64_t last_seen, llmr_strbuf *err)
{
    if (!id || !id[0]) {
        llmr_strbuf_puts(err, "a node needs an id");
        return LLMR_INVALID_ARGUMENT;
    }
    char *info_text = NULL;
    if (!llmr_store_json_text(info, &info_text)) {
        llmr_strbuf_puts(err, "out of memory writing a node's information");
        return LLMR_OOM_RAM;
    }
    llmr_status status = LLMR_OK;
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO nodes (id, name, url, info, last_seen) VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
                           "url = excluded.url, info = excluded.info, last_seen = excluded.last_seen",
                           -1, &st, NULL) != SQLITE_OK) {
        status = llmr_store_sql_fail(s, err, "recording a node");
        goto done;
    }
    llmr_store_bind_text(st, 1, id);
    llmr_store_bind_text(st, 2, name);
    llmr_store_bind_text(st, 3, url);
    llmr_store_bind_text(st, 4, info_text);
    sqlite3_bind_int64(st, 5, last_seen);
    if (sqlite3_step(st) != SQLITE_DONE)
        status = llmr_store_sql_fail(s, err, "recording a node");

done:
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->db_lock);
    free(info_text);
    return status;
}

json_t *llmr_store_node_list(llmr_store *s)
{
    json_t *list = json_array();
    sqlite3_stmt *st = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&s->db_lock);
    if (!list)
        goto fail;
    if (sqlite3_prepare_v2(s->db, "SELECT id, name, url, info, last_seen, drained FROM nodes "
                                  "ORDER BY name, id", -1, &st, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "listing nodes");
        goto fail;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_object();
        if (!o || json_array_append_new(list, o) != 0 ||
            json_object_set_new(o, "id", llmr_store_column_string(st, 0)) != 0 ||
            json_object_set_new(o, "name", llmr_store_column_string(st, 1)) != 0 ||
            json_object_set_new(o, "url", llmr_store_column_string(st, 2)) != 0 ||
            json_object_set_new(o, "info", llmr_store_column_json(st, 3)) != 0 ||
            json_object_set_new(o, "last_seen", json_integer(sqlite3_column_int64(st, 4))) != 0 ||
            json_object_set_new(o, "drained", json_boolean(sqlite3_column_int(st, 5) != 0)) != 0) {
            llmr_strbuf_puts(&err, "listing nodes: out of memory");
            goto fail;
        }
    }
    return llmr_store_list_end(s, st, rc, list, &err, "listing nodes");

fail: /* err says why, or is empty: out of memory */
    return llmr_store_list_end(s, st, SQLITE_NOMEM, list, &err, "listing nodes");
}

llmr_status llmr_store_node_set_drained(llmr_store *s, const char *id, bool drained, llmr_strbuf *err)
{
    int64_t v = drained ? 1 : 0;
    return llmr_store_change_one(s, "UPDATE nodes SET drained = ? WHERE id = ?", id, &v, 1,
                      "draining a node", "node", err);
}

llmr_status llmr_store_node_delete(llmr_store *s, const char *id, llmr_strbuf *err)
{
    return llmr_store_change_one(s, "DELETE FROM nodes WHERE id = ?", id, NULL, 0, "forgetting a node",
                      "node", err);
}
