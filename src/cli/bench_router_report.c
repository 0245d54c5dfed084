/* The report of `llmr bench router` (the run itself is bench_router.c): from the
 * recorded requests of a finished load (bench_router_client.h), the percentiles of
 * the router-added latency, the client's and the node's time to first byte, the
 * outcomes (split before, during and after a node kill), the router process's
 * threads and memory at peak (sampled by bench_router.c), the JSON of --json on
 * stdout, the table (on stdout, or on stderr with --json) and whether the run
 * passed.  It owns the table's text, the JSON's fields and the pass rule; it starts
 * nothing and reads only what bench_router.c hands it in a brr_input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_router_report.h"
#include "cli/cli.h"
#include "common/json_util.h"

#define GOAL_P99_US 2000

typedef struct pct {
    size_t n;
    double p50, p90, p99, max;
} pct;

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static pct percentiles(int64_t *v, size_t n)
{
    pct p = {n, 0, 0, 0, 0};
    if (!n)
        return p;
    qsort(v, n, sizeof *v, compare_i64);
    size_t i50 = (size_t)ceil(0.50 * n) - 1, i90 = (size_t)ceil(0.90 * n) - 1, i99 = (size_t)ceil(0.99 * n) - 1;
    p.p50 = (double)v[i50];
    p.p90 = (double)v[i90];
    p.p99 = (double)v[i99];
    p.max = (double)v[n - 1];
    return p;
}

typedef enum { PHASE_BEFORE, PHASE_DURING, PHASE_AFTER } phase;

static phase phase_of(const brc_result *r, uint64_t kill_ns)
{
    if (!kill_ns || r->end_ns <= kill_ns)
        return PHASE_BEFORE;
    return r->start_ns < kill_ns ? PHASE_DURING : PHASE_AFTER;
}

typedef struct report {
    size_t requests, ok, outcomes[BRC_OUTCOMES], statuses[6]; /* statuses: by hundreds */
    uint64_t tokens;
    double seconds;
    pct added, client, upstream, added_after;
    size_t no_header; /* ok streams without the router's header */
    size_t during[BRC_OUTCOMES], after_total, after_ok;
    size_t failures;  /* what makes the run fail */
} report;

/* The latencies of the ok requests (in the given phase, or all when only_after is
 * false). */
static void latencies(const brc_result *r, size_t n, uint64_t kill_ns, bool only_after, report *rep, bool full)
{
    int64_t *added = malloc((n ? n : 1) * sizeof *added), *client = malloc((n ? n : 1) * sizeof *client),
            *up = malloc((n ? n : 1) * sizeof *up);
    size_t k = 0, kc = 0;
    for (size_t i = 0; added && client && up && i < n; i++) {
        if (r[i].outcome != BRC_OK || (only_after && phase_of(&r[i], kill_ns) != PHASE_AFTER))
            continue;
        if (r[i].ttfb_us >= 0)
            client[kc++] = r[i].ttfb_us;
        if (r[i].ttfb_us >= 0 && r[i].upstream_us >= 0) {
            added[k] = r[i].ttfb_us - r[i].upstream_us;
            up[k++] = r[i].upstream_us;
        } else if (full) {
            rep->no_header++;
        }
    }
    if (full) {
        rep->added = percentiles(added, k);
        rep->upstream = percentiles(up, k);
        rep->client = percentiles(client, kc);
    } else {
        rep->added_after = percentiles(added, k);
    }
    free(added);
    free(client);
    free(up);
}

static void summarize(const brc_result *r, size_t n, const brr_input *in, report *rep)
{
    memset(rep, 0, sizeof *rep);
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < n; i++) {
        const brc_result *x = &r[i];
        rep->requests++;
        rep->outcomes[x->outcome]++;
        rep->ok += x->outcome == BRC_OK;
        rep->tokens += x->tokens;
        if (x->status >= 100 && x->status < 600)
            rep->statuses[x->status / 100]++;
        first = x->start_ns < first ? x->start_ns : first;
        last = x->end_ns > last ? x->end_ns : last;
        phase p = phase_of(x, in->kill_ns);
        if (p == PHASE_DURING) {
            rep->during[x->outcome]++;
            rep->failures += x->outcome != BRC_OK && x->outcome != BRC_ERROR_EVENT;
        } else {
            rep->failures += x->outcome != BRC_OK;
        }
        if (p == PHASE_AFTER) {
            rep->after_total++;
            rep->after_ok += x->outcome == BRC_OK;
        }
    }
    rep->seconds = n ? (last - first) / 1e9 : 0;
    latencies(r, n, in->kill_ns, false, rep, true);
    if (in->kill_ns)
        latencies(r, n, in->kill_ns, true, rep, false);
}

static size_t during_total(const report *rep)
{
    size_t t = 0;
    for (int i = 0; i < BRC_OUTCOMES; i++)
        t += rep->during[i];
    return t;
}

static json_t *pct_json(const pct *p)
{
    return json_pack("{s:I, s:f, s:f, s:f, s:f}", "n", (json_int_t)p->n, "p50", p->p50, "p90", p->p90, "p99",
                     p->p99, "max", p->max);
}

static json_t *report_json(const brr_input *in, const report *rep, bool kernel, bool passed, const char *first_error)
{
    json_t *errors = json_object();
    for (int i = 1; i < BRC_OUTCOMES; i++)
        if (rep->outcomes[i])
            json_object_set_new(errors, brc_outcome_name((brc_outcome)i), json_integer((json_int_t)rep->outcomes[i]));
    json_t *j = json_pack("{s:s, s:{s:i, s:f, s:i, s:i, s:I, s:s}, s:I, s:I, s:I, s:f, s:f, s:o, s:o, s:o, s:o, "
                          "s:i, s:b, s:s, s:b}",
                          "benchmark", "router", "config", "concurrency", (int)in->concurrency, "duration_s",
                          in->duration_s, "nodes", (int)in->nodes, "tokens", (int)in->tokens, "token_delay_us",
                          (json_int_t)in->token_delay_us, "endpoint", in->chat ? "chat" : "completions",
                          "requests", (json_int_t)rep->requests, "ok", (json_int_t)rep->ok, "tokens",
                          (json_int_t)rep->tokens, "seconds", rep->seconds, "tokens_per_s",
                          rep->seconds > 0 ? rep->tokens / rep->seconds : 0.0, "errors", errors,
                          "router_added_us", pct_json(&rep->added), "client_ttfb_us", pct_json(&rep->client),
                          "node_ttfb_us", pct_json(&rep->upstream), "goal_p99_us", GOAL_P99_US, "goal_met",
                          rep->added.n && rep->added.p99 < GOAL_P99_US, "client_timestamps",
                          kernel ? "kernel" : "user", "passed", passed);
    json_t *statuses = json_object();
    for (int c = 3; c < 6; c++)
        if (rep->statuses[c]) {
            char key[8];
            snprintf(key, sizeof key, "%dxx", c);
            json_object_set_new(statuses, key, json_integer((json_int_t)rep->statuses[c]));
        }
    json_object_set_new(j, "http_error_statuses", statuses);
    json_object_set_new(j, "router_process",
                        json_pack("{s:o, s:o}", "threads_peak",
                                  in->router_threads_peak >= 0 ? json_integer(in->router_threads_peak) : json_null(),
                                  "rss_peak_kib",
                                  in->router_rss_peak_kib >= 0 ? json_integer(in->router_rss_peak_kib) : json_null()));
    if (first_error && *first_error)
        json_object_set_new(j, "first_error", json_string(first_error));
    if (in->kill_ns) {
        json_t *during = json_object();
        for (int i = 0; i < BRC_OUTCOMES; i++)
            json_object_set_new(during, brc_outcome_name((brc_outcome)i), json_integer((json_int_t)rep->during[i]));
        json_object_set_new(j, "kill",
                            json_pack("{s:f, s:i, s:I, s:o, s:I, s:I, s:o}", "at_s",
                                      (in->kill_ns - in->start_ns) / 1e9, "router_outstanding_on_node",
                                      in->killed_outstanding, "in_flight", (json_int_t)during_total(rep),
                                      "in_flight_outcomes", during, "after_requests", (json_int_t)rep->after_total,
                                      "after_ok", (json_int_t)rep->after_ok, "after_router_added_us",
                                      pct_json(&rep->added_after)));
    }
    return j;
}

static void print_table(FILE *f, const brr_input *in, const report *rep, bool kernel, bool passed,
                        const char *first_error)
{
    fprintf(f, "llmr bench router: %u connections, %.1f s, %u node%s, %u tokens at %lu us each, %s\n",
            in->concurrency, in->duration_s, in->nodes, in->nodes == 1 ? "" : "s", in->tokens,
            in->token_delay_us, in->chat ? "/v1/chat/completions" : "/v1/completions");
    fprintf(f, "  requests        %zu completed, %zu ok, %zu not ok\n", rep->requests, rep->ok,
            rep->requests - rep->ok);
    fprintf(f, "  tokens          %llu in %.1f s: %.0f tokens/s through the router\n",
            (unsigned long long)rep->tokens, rep->seconds, rep->seconds > 0 ? rep->tokens / rep->seconds : 0.0);
    fprintf(f, "  router process  ");
    if (in->router_threads_peak >= 0)
        fprintf(f, "%ld threads at peak", in->router_threads_peak);
    else
        fprintf(f, "threads unknown");
    if (in->router_rss_peak_kib >= 0)
        fprintf(f, ", %.1f MiB peak memory (VmHWM)\n", in->router_rss_peak_kib / 1024.0);
    else
        fprintf(f, ", peak memory unknown\n");
    fprintf(f, "  %-22s %10s %10s %10s %10s %8s\n", "latency (us)", "p50", "p90", "p99", "max", "n");
    const struct {
        const char *name;
        const pct *p;
    } rows[] = {{"router-added", &rep->added}, {"client TTFB", &rep->client}, {"node TTFB (router's)", &rep->upstream}};
    for (size_t i = 0; i < 3; i++)
        fprintf(f, "  %-22s %10.0f %10.0f %10.0f %10.0f %8zu\n", rows[i].name, rows[i].p->p50, rows[i].p->p90,
                rows[i].p->p99, rows[i].p->max, rows[i].p->n);
    if (in->kill_ns)
        fprintf(f, "  %-22s %10.0f %10.0f %10.0f %10.0f %8zu\n", "router-added, post-kill", rep->added_after.p50,
                rep->added_after.p90, rep->added_after.p99, rep->added_after.max, rep->added_after.n);
    if (rep->no_header)
        fprintf(f, "  %zu ok streams had no X-Llmr-Upstream-Ttfb-Us header (not in the latencies)\n",
                rep->no_header);
    fprintf(f, "  goal            router-added p99 < %d us: %s\n", GOAL_P99_US,
            !rep->added.n ? "unknown (no measurement)" : rep->added.p99 < GOAL_P99_US ? "met" : "NOT met");
    fprintf(f, "  errors         ");
    bool any = false;
    for (int i = 1; i < BRC_OUTCOMES; i++)
        if (rep->outcomes[i]) {
            fprintf(f, " %s %zu", brc_outcome_name((brc_outcome)i), rep->outcomes[i]);
            any = true;
        }
    for (int s = 3; s < 6; s++)
        if (rep->statuses[s])
            fprintf(f, "%s HTTP %dxx: %zu", any ? ";" : "", s, rep->statuses[s]);
    fprintf(f, "%s\n", any ? "" : " none");
    if (first_error && *first_error)
        fprintf(f, "  first error     %s\n", first_error);
    if (in->kill_ns) {
        fprintf(f, "  kill            node 1 at %.1f s (the router counted %d requests outstanding on it)\n",
                (in->kill_ns - in->start_ns) / 1e9, in->killed_outstanding);
        fprintf(f, "    in flight     %zu: %zu ended with an error event and [DONE], %zu completed; %zu cut, "
                   "%zu hung, %zu other\n",
                during_total(rep), rep->during[BRC_ERROR_EVENT], rep->during[BRC_OK], rep->during[BRC_CUT],
                rep->during[BRC_HUNG],
                during_total(rep) - rep->during[BRC_ERROR_EVENT] - rep->during[BRC_OK] - rep->during[BRC_CUT] -
                    rep->during[BRC_HUNG]);
        fprintf(f, "    after it      %zu requests: %zu ok, %zu failed\n", rep->after_total, rep->after_ok,
                rep->after_total - rep->after_ok);
    }
    fprintf(f, "  timestamps      client first bytes at the %s's receive time\n", kernel ? "kernel" : "client thread");
    fprintf(f, "  result          %s\n", passed ? "PASS" : "FAIL");
}

int brr_report(const brr_input *in)
{
    size_t n = 0;
    const brc_result *r = brc_results(in->load, &n);
    report rep;
    summarize(r, n, in, &rep);
    bool passed = rep.failures == 0 && rep.ok > 0;
    bool kernel = brc_kernel_timestamps(in->load);
    const char *first_error = brc_first_error(in->load);
    if (in->json) {
        json_t *j = report_json(in, &rep, kernel, passed, first_error);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(8)) : NULL;
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    }
    print_table(in->json ? stderr : stdout, in, &rep, kernel, passed, first_error);
    if (in->kill_ns && rep.during[BRC_ERROR_EVENT] == 0)
        fprintf(stderr, "bench router: note: no stream in flight ended with an error event; the killed node "
                        "may have had none\n");
    return passed ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
}
