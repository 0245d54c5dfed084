/* The dashboard's view of the router at one moment (docs/router.md, "The dashboard"),
 * which /v0/events streams (router_events.c):
 *
 *   {"time_ms":   unix milliseconds, the router's clock,
 *    "nodes":     GET /v0/nodes' nodes,
 *    "models":    GET /v0/models' models, each with the "nodes" of GET /v0/models/{name},
 *    "requests":  the newest SNAPSHOT_REQUESTS entries of GET /v0/requests,
 *    "stats":     {"window_s", "requests", "completion_tokens", "tokens_per_s",
 *                  "ttft_ms_p50", "ttft_ms_p90", "duration_ms_p50", "duration_ms_p90",
 *                  "errors", "in_flight"}}
 *
 * The lists are made by the same functions as the endpoints' (router_admin.c).  The
 * stats cover the requests logged that arrived in the last SNAPSHOT_WINDOW_S seconds
 * (store_stats.c); a percentile is null when no request has the value, and in_flight
 * sums the requests the online nodes reported generating in their last heartbeat. */
#include "router/router_internal.h"

#include <math.h>

#define SNAPSHOT_REQUESTS 50
#define SNAPSHOT_WINDOW_S 10

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The sum of metrics.in_flight over the online nodes of a GET /v0/nodes list. */
static json_int_t nodes_in_flight(const json_t *nodes)
{
    json_int_t sum = 0;
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const json_t *v = json_object_get(json_object_get(n, "metrics"), "in_flight");
        if (json_is_true(json_object_get(n, "online")) && json_is_integer(v) && json_integer_value(v) > 0)
            sum += json_integer_value(v);
    }
    return sum;
}

static json_t *stats_json(llmr_router *r, int64_t now_ms, const json_t *nodes)
{
    llmr_store_request_stats st;
    if (!llmr_store_request_stats_since(r->store, now_ms - SNAPSHOT_WINDOW_S * 1000, &st))
        st.ttft_ms_p50 = st.ttft_ms_p90 = st.duration_ms_p50 = st.duration_ms_p90 = NAN;
    return json_pack("{s:i, s:I, s:I, s:f, s:o, s:o, s:o, s:o, s:I, s:I}", "window_s", SNAPSHOT_WINDOW_S,
                     "requests", (json_int_t)st.requests, "completion_tokens",
                     (json_int_t)st.completion_tokens, "tokens_per_s",
                     (double)st.completion_tokens / SNAPSHOT_WINDOW_S, "ttft_ms_p50",
                     real_or_null(st.ttft_ms_p50), "ttft_ms_p90", real_or_null(st.ttft_ms_p90),
                     "duration_ms_p50", real_or_null(st.duration_ms_p50), "duration_ms_p90",
                     real_or_null(st.duration_ms_p90), "errors", (json_int_t)st.errors, "in_flight",
                     nodes_in_flight(nodes));
}

json_t *router_snapshot_json(llmr_router *r)
{
    int64_t now_ms = router_unix_ms();
    json_t *nodes = router_nodes_json(r);
    json_t *requests = router_requests_json(r, SNAPSHOT_REQUESTS);
    json_t *stats = stats_json(r, now_ms, nodes);
    /* o: the object takes each reference, NULL ones included (json_pack then fails) */
    return json_pack("{s:I, s:o, s:o, s:o, s:o}", "time_ms", (json_int_t)now_ms, "nodes", nodes, "models",
                     router_models_json(r, true), "requests", requests ? requests : json_array(), "stats",
                     stats);
}
