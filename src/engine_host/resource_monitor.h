/* The node's resource monitor: samples host RAM and the memory of each GPU once a
 * second on its own thread, keeps the latest snapshot for the scheduler and the
 * metrics endpoint, and raises an alert when a memory goes above a threshold
 * (default 90%): one WARN line when it crosses, a callback on every sample while it
 * stays above (the node unloads idle models from there), one INFO line when it falls
 * back.
 *
 * Where the numbers come from is a reader: the system one (meminfo.h and nvml.h), or
 * a test's.  The monitor owns its thread, its snapshot and counters (behind one
 * mutex), and, when it opened NVML itself, that NVML handle; a reader handed in stays
 * the caller's and must outlive the monitor. */
#ifndef LLMR_ENGINE_HOST_RESOURCE_MONITOR_H
#define LLMR_ENGINE_HOST_RESOURCE_MONITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "engine_host/meminfo.h"
#include "engine_host/nvml.h"
#include "llmr/status.h"

#define LLMR_MAX_GPUS 16

typedef struct llmr_resource_snapshot {
    uint64_t taken_ns; /* CLOCK_MONOTONIC */
    bool have_ram;
    llmr_ram_reading ram;
    bool have_gpus;
    uint32_t gpu_count;
    llmr_gpu_reading gpus[LLMR_MAX_GPUS];
    char gpu_note[192]; /* why there are no GPU readings (or not all of them); "" otherwise */
} llmr_resource_snapshot;

/* Where readings come from.  read fills *out (zeroed by the caller) and returns OK,
 * or returns an error with a sentence in err; taken_ns left 0 is set by the monitor. */
typedef struct llmr_resource_reader {
    void *ctx;
    llmr_status (*read)(void *ctx, llmr_resource_snapshot *out, llmr_strbuf *err);
} llmr_resource_reader;

/* The system reader: RAM from llmr_meminfo_read, GPUs from nvml (NULL: no GPU
 * readings, gpu_note says why).  A GPU that cannot be read fails the whole sample.
 * nvml stays the caller's. */
llmr_resource_reader llmr_resource_system_reader(llmr_nvml *nvml);

typedef enum llmr_resource_kind { LLMR_RESOURCE_RAM, LLMR_RESOURCE_VRAM } llmr_resource_kind;

/* Called on every sample while a resource is above the threshold: gpu is the GPU's
 * index for VRAM, -1 for RAM; used_fraction is used / total.  Runs on the sampling
 * thread (the monitor's, or the caller of sample_now), never with the monitor's lock
 * held: it may call llmr_resource_monitor_latest, _counters, _metrics and _threshold,
 * but not _stop (it would wait for itself) or _sample_now. */
typedef void (*llmr_pressure_fn)(void *ctx, const llmr_resource_snapshot *snap,
                                 llmr_resource_kind kind, int gpu, double used_fraction);

typedef struct llmr_resource_monitor_options {
    unsigned interval_ms;       /* default 1000; at least 1 */
    double threshold;           /* fraction of total, default 0.90; valid (0, 1] */
    llmr_resource_reader reader; /* .read NULL: the system reader, with NVML opened by
                                    the monitor itself (closed at stop) */
    const char *nvml_library;   /* for that NVML; NULL: LLMR_NVML_DEFAULT_LIBRARY */
    llmr_pressure_fn on_pressure; /* may be NULL */
    void *pressure_ctx;
    bool no_thread; /* tests: no background thread; sample with ..._sample_now */
} llmr_resource_monitor_options;

typedef struct llmr_resource_monitor llmr_resource_monitor;

/* What the monitor has counted since it started. */
typedef struct llmr_resource_counters {
    uint64_t samples;       /* successful samples */
    uint64_t sample_errors; /* failed samples */
    bool ram_pressure;      /* RAM is above the threshold now */
    uint64_t ram_alerts;    /* times RAM went above the threshold */
    bool vram_pressure[LLMR_MAX_GPUS];
    uint64_t vram_alerts[LLMR_MAX_GPUS];
} llmr_resource_counters;

void llmr_resource_monitor_options_default(llmr_resource_monitor_options *o);

/* Checks the options, takes the first sample before returning (a reader error there
 * is returned, with nothing left running), then samples every interval on its own
 * thread unless no_thread. */
llmr_status llmr_resource_monitor_start(const llmr_resource_monitor_options *o,
                                        llmr_resource_monitor **out, llmr_strbuf *err);
/* Stops and joins the thread (promptly: it does not wait out the interval), closes
 * NVML when the monitor opened it, frees the monitor.  NULL is fine. */
void llmr_resource_monitor_stop(llmr_resource_monitor *m);

/* A copy of the latest good snapshot. */
void llmr_resource_monitor_latest(const llmr_resource_monitor *m, llmr_resource_snapshot *out);
void llmr_resource_monitor_counters(const llmr_resource_monitor *m,
                                    llmr_resource_counters *out);
/* Takes a sample now, on the calling thread (alerts and callbacks as on the monitor's
 * thread).  A reader error is returned, counted and logged like the thread's. */
llmr_status llmr_resource_monitor_sample_now(llmr_resource_monitor *m, llmr_strbuf *err);
double llmr_resource_monitor_threshold(const llmr_resource_monitor *m);

/* Appends the Prometheus text exposition (HELP and TYPE lines) to out:
 * llmr_memory_threshold_ratio; llmr_ram_total_bytes, llmr_ram_used_bytes; per GPU
 * llmr_gpu_memory_total_bytes{gpu="0",name="..."} and llmr_gpu_memory_used_bytes;
 * llmr_memory_pressure{resource="ram"} and {resource="vram",gpu="0"}, 0 or 1;
 * llmr_memory_alerts_total with the same labels; llmr_resource_sample_errors_total. */
void llmr_resource_monitor_metrics(const llmr_resource_monitor *m, llmr_strbuf *out);

#endif
