/* The services an engine gets from its worker (llmr_host_api in llmr/engine.h):
 * logging into the node's log under the model's name, RAM accounted to the model,
 * and the monotonic clock of token timestamps.  One set per worker process. */
#ifndef LLMR_ENGINE_HOST_HOST_SERVICES_H
#define LLMR_ENGINE_HOST_HOST_SERVICES_H

#include <stdint.h>

#include "llmr/engine.h"

/* Fills *api; log lines name `model` (copied). */
void llmr_host_services_init(llmr_host_api *api, const char *model);

/* Bytes the engine holds through api->alloc now. */
uint64_t llmr_host_services_allocated(void);

#endif
