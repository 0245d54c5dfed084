/* The node's HTTP metrics, in Prometheus text: requests by endpoint and status class,
 * prompt and completion tokens, requests in flight and cancelled (llmr_http_*); and
 * per model: requests by status, tokens, and histograms of the time to the first
 * token, between tokens and of the whole request (docs/node.md lists them with the
 * vLLM names they match).  Thread-safe. */
#ifndef LLMR_NODE_NODE_METRICS_H
#define LLMR_NODE_NODE_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "common/strbuf.h"

#include "common/histogram.h"

typedef struct node_model_metrics node_model_metrics;

typedef enum llmr_endpoint {
    LLMR_EP_CHAT, LLMR_EP_COMPLETIONS, LLMR_EP_MODELS, LLMR_EP_HEALTH, LLMR_EP_METRICS,
    LLMR_EP_RESPONSES, LLMR_EP_OTHER, LLMR_EP_COUNT
} llmr_endpoint;

#define LLMR_STATUS_CLASSES 5 /* 1xx .. 5xx */

typedef struct llmr_node_metrics {
    pthread_mutex_t lock;
    uint64_t requests[LLMR_EP_COUNT][LLMR_STATUS_CLASSES];
    uint64_t prompt_tokens, completion_tokens, cancelled;
    unsigned in_flight;
    node_model_metrics *models; /* per model, in the order first seen */
} llmr_node_metrics;

void llmr_node_metrics_init(llmr_node_metrics *m);
void llmr_node_metrics_destroy(llmr_node_metrics *m);
/* A request answered with this HTTP status. */
void llmr_node_metrics_request(llmr_node_metrics *m, llmr_endpoint ep, unsigned status);
void llmr_node_metrics_tokens(llmr_node_metrics *m, const char *model, uint32_t prompt,
                              uint32_t completion);
void llmr_node_metrics_ttft(llmr_node_metrics *m, const char *model, double seconds);
void llmr_node_metrics_per_token(llmr_node_metrics *m, const char *model, double seconds);
/* A request for model answered with this status after seconds (499: its client left). */
void llmr_node_metrics_done(llmr_node_metrics *m, const char *model, unsigned status,
                            double seconds);
void llmr_node_metrics_in_flight(llmr_node_metrics *m, int delta);
void llmr_node_metrics_cancelled(llmr_node_metrics *m);
unsigned llmr_node_metrics_get_in_flight(llmr_node_metrics *m);
void llmr_node_metrics_write(llmr_node_metrics *m, llmr_strbuf *out);

#endif
