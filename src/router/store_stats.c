/* The request log summed up over a recent window (store.h): how many requests arrived
 * since a time, their completion tokens and errors, and the median and 90th
 * percentile of their time to first token and duration, for the dashboard's live
 * view.  Read from the table (its time_ms index keeps the window's rows cheap to
 * find), after the entries still queued are written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "router/store_internal.h"

typedef struct values {
    double *v;
    size_t n, cap;
} values;

static bool values_push(values *a, double x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        double *grown = realloc(a->v, cap * sizeof *grown);
        if (!grown)
            return false;
        a->v = grown;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return true;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of the values, interpolated linearly between the two nearest
 * ranks (so the median of an even count is the mean of the middle two); NAN for none.
 * Sorts them. */
static double quantile(values *a, double q)
{
    if (a->n == 0)
        return NAN;
    qsort(a->v, a->n, sizeof *a->v, by_value);
    double pos = q * (double)(a->n - 1);
    size_t lo = (size_t)pos;
    double frac = pos - (double)lo;
    return lo + 1 < a->n ? a->v[lo] + (a->v[lo + 1] - a->v[lo]) * frac : a->v[lo];
}

bool llmr_store_request_stats_since(llmr_store *s, int64_t since_ms, llmr_store_request_stats *out)
{
    memset(out, 0, sizeof *out);
    llmr_store_log_write_queued(s);
    values ttft = {0}, duration = {0};
    llmr_store_request_stats st = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    sqlite3_stmt *q = NULL;
    int rc = SQLITE_OK;
    bool ok = true;
    pthread_mutex_lock(&s->db_lock);
    if (sqlite3_prepare_v2(s->db, "SELECT status, completion_tokens, ttft_ms, duration_ms FROM requests "
                                  "WHERE time_ms >= ?",
                           -1, &q, NULL) != SQLITE_OK) {
        llmr_store_sql_fail(s, &err, "reading the request log");
        ok = false;
    } else {
        sqlite3_bind_int64(q, 1, since_ms);
        while (ok && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            st.requests++;
            if (sqlite3_column_int64(q, 0) >= 400)
                st.errors++;
            sqlite3_int64 tokens = sqlite3_column_int64(q, 1);
            st.completion_tokens += tokens > 0 ? (uint64_t)tokens : 0;
            /* no first token: logged as -1 (or NULL) */
            if (sqlite3_column_type(q, 2) != SQLITE_NULL && sqlite3_column_double(q, 2) >= 0)
                ok = values_push(&ttft, sqlite3_column_double(q, 2));
            if (ok && sqlite3_column_type(q, 3) != SQLITE_NULL)
                ok = values_push(&duration, sqlite3_column_double(q, 3));
            if (!ok)
                llmr_strbuf_puts(&err, "reading the request log: out of memory");
        }
        if (ok && rc != SQLITE_DONE) {
            llmr_store_sql_fail(s, &err, "reading the request log");
            ok = false;
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&s->db_lock);
    if (ok) {
        st.ttft_ms_p50 = quantile(&ttft, 0.5);
        st.ttft_ms_p90 = quantile(&ttft, 0.9);
        st.duration_ms_p50 = quantile(&duration, 0.5);
        st.duration_ms_p90 = quantile(&duration, 0.9);
        *out = st;
    } else {
        llmr_log_error(STORE_COMPONENT, "%s", llmr_strbuf_cstr(&err));
    }
    llmr_strbuf_free(&err);
    free(ttft.v);
    free(duration.v);
    return ok;
}
