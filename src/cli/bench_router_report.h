/* `llmr bench router` inside: what its run and its report share.  bench_router.c
 * owns the run (the options, the router and node processes, the setup, the load, the
 * kill) and fills a brr_input once the load is over; bench_router_report.c owns the
 * report (percentiles, the summary by phase around the kill, the JSON, the table,
 * whether the run passed).  The load generator is bench_router_client.h.  Not used
 * elsewhere. */
#ifndef LLMR_CLI_BENCH_ROUTER_REPORT_H
#define LLMR_CLI_BENCH_ROUTER_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/bench_router_client.h"

/* What the report needs: the options it states and the finished run. */
typedef struct brr_input {
    unsigned concurrency, nodes, tokens;
    double duration_s;
    unsigned long token_delay_us;
    bool chat;              /* /v1/chat/completions, else /v1/completions */
    bool json;              /* the JSON on stdout, the table on stderr */
    brc_load *load;         /* after brc_join; still owned by the caller */
    uint64_t start_ns;      /* the load's start (llmr_now_ns) */
    uint64_t kill_ns;       /* when node 1 was killed; 0: no kill */
    int killed_outstanding; /* the router's count on the killed node; -1: unknown */
    long router_threads_peak; /* the router process's most threads seen during the load;
                                 -1: unknown */
    long router_rss_peak_kib; /* its peak resident memory (VmHWM) in KiB; -1: unknown */
} brr_input;

/* Prints the report (the JSON first with --json) and notes on stderr; LLMR_EXIT_OK
 * when the run passed, else LLMR_EXIT_FAILED. */
int brr_report(const brr_input *in);

#endif
