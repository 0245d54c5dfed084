/* Host services inside an engine worker: see host_services.h. */
#include "engine_host/host_services.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* Each block carries its size in front, padded so the engine's pointer keeps the
 * alignment malloc gives. */
#define BLOCK_HEADER 16u

static char model_name[128];
static atomic_uint_fast64_t allocated;

static void host_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    llmr_log_level l = level <= LLMR_ENGINE_LOG_DEBUG  ? LLMR_LOG_DEBUG
                       : level == LLMR_ENGINE_LOG_INFO ? LLMR_LOG_INFO
                       : level == LLMR_ENGINE_LOG_WARN ? LLMR_LOG_WARN
                                                       : LLMR_LOG_ERROR;
    llmr_log_write(l, "engine", "%s: %s", model_name, message ? message : "");
}

static void *host_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size > SIZE_MAX - BLOCK_HEADER)
        return NULL;
    unsigned char *block = malloc(size + BLOCK_HEADER);
    if (!block)
        return NULL;
    memcpy(block, &size, sizeof size);
    atomic_fetch_add(&allocated, size);
    return block + BLOCK_HEADER;
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    if (!ptr)
        return;
    unsigned char *block = (unsigned char *)ptr - BLOCK_HEADER;
    size_t size;
    memcpy(&size, block, sizeof size);
    atomic_fetch_sub(&allocated, size);
    free(block);
}

static uint64_t host_now_ns(void *ctx)
{
    (void)ctx;
    return llmr_now_ns();
}

void llmr_host_services_init(llmr_host_api *api, const char *model)
{
    snprintf(model_name, sizeof model_name, "%s", model ? model : "?");
    memset(api, 0, sizeof *api);
    api->struct_size = sizeof *api;
    api->abi_major = LLMR_ENGINE_ABI_MAJOR;
    api->abi_minor = LLMR_ENGINE_ABI_MINOR;
    api->log = host_log;
    api->alloc = host_alloc;
    api->free = host_free;
    api->now_ns = host_now_ns;
}

uint64_t llmr_host_services_allocated(void)
{
    return atomic_load(&allocated);
}
