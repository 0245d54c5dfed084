/* The node's resource monitor: see resource_monitor.h.
 *
 * A sample: the reader runs without the lock; the snapshot, the counters and the
 * above/below state are updated under `lock`; the lines are logged and the pressure
 * callback called after it is released.  `sampling` keeps two samples (the thread's
 * and a sample_now) from overlapping, so crossings are seen in order. */
#include "engine_host/resource_monitor.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

#define COMPONENT "resources"
/* A failing reader is logged once per kind of failure in this time, not every sample. */
#define ERROR_LOG_EVERY_NS (600ull * 1000000000ull)

/* --- the system reader ----------------------------------------------------------- */

static llmr_status read_system(llmr_nvml *nvml, const char *no_nvml_note,
                               llmr_resource_snapshot *out, llmr_strbuf *err)
{
    llmr_status st = llmr_meminfo_read(&out->ram, err);
    if (st != LLMR_OK)
        return st;
    out->have_ram = true;
    if (!nvml) {
        snprintf(out->gpu_note, sizeof out->gpu_note, "%s", no_nvml_note);
        return LLMR_OK;
    }
    uint32_t n = llmr_nvml_device_count(nvml);
    if (n == 0) {
        snprintf(out->gpu_note, sizeof out->gpu_note, "NVML sees no GPU on this machine");
        return LLMR_OK;
    }
    if (n > LLMR_MAX_GPUS) {
        snprintf(out->gpu_note, sizeof out->gpu_note,
                 "only the first %u of the %u GPUs are watched", LLMR_MAX_GPUS, n);
        n = LLMR_MAX_GPUS;
    }
    for (uint32_t i = 0; i < n; i++) {
        st = llmr_nvml_read(nvml, i, &out->gpus[i], err);
        if (st != LLMR_OK)
            return st;
    }
    out->gpu_count = n;
    out->have_gpus = true;
    return LLMR_OK;
}

static llmr_status read_system_given_nvml(void *ctx, llmr_resource_snapshot *out,
                                          llmr_strbuf *err)
{
    return read_system(ctx, "no NVML handle was given: no GPU memory readings", out, err);
}

llmr_resource_reader llmr_resource_system_reader(llmr_nvml *nvml)
{
    llmr_resource_reader r = {nvml, read_system_given_nvml};
    return r;
}

/* The monitor's own system reader: the NVML it opened, and why it could not. */
typedef struct own_system_reader {
    llmr_nvml *nvml;
    char note[192];
} own_system_reader;

static llmr_status read_own_system(void *ctx, llmr_resource_snapshot *out, llmr_strbuf *err)
{
    own_system_reader *r = ctx;
    return read_system(r->nvml, r->note, out, err);
}

/* --- the monitor ------------------------------------------------------------------- */

struct llmr_resource_monitor {
    llmr_resource_monitor_options opt;
    own_system_reader own_reader;
    llmr_nvml *own_nvml; /* opened by the monitor: closed at stop */

    pthread_mutex_t sampling; /* one sample at a time */
    pthread_mutex_t lock;     /* everything below */
    pthread_cond_t wake;
    bool stopping;
    bool thread_started;
    pthread_t thread;
    llmr_resource_snapshot latest;
    llmr_resource_counters counters;
    uint64_t error_logged_ns[LLMR_STATUS_COUNT]; /* 0: never */
};

/* One resource's crossing or continued pressure in a sample. */
typedef struct pressure_event {
    llmr_resource_kind kind;
    int gpu;
    double fraction;
    bool above;
    int crossed; /* +1 went above, -1 fell below, 0 no change */
} pressure_event;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void llmr_resource_monitor_options_default(llmr_resource_monitor_options *o)
{
    memset(o, 0, sizeof *o);
    o->interval_ms = 1000;
    o->threshold = 0.90;
}

/* Updates one resource's state under the lock; returns true when there is something
 * to say or do (a crossing, or pressure that goes on). */
static bool evaluate(double threshold, uint64_t used, uint64_t total, bool *pressure,
                     uint64_t *alerts, pressure_event *ev)
{
    ev->fraction = total ? (double)used / (double)total : 0.0;
    ev->above = total > 0 && ev->fraction > threshold;
    ev->crossed = 0;
    if (ev->above && !*pressure) {
        ev->crossed = 1;
        (*alerts)++;
    } else if (!ev->above && *pressure) {
        ev->crossed = -1;
    }
    *pressure = ev->above;
    return ev->above || ev->crossed;
}

static void put_gib(llmr_strbuf *sb, uint64_t used, uint64_t total)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    llmr_strbuf_printf(sb, "(%.1f of %.1f GiB)", (double)used / gib, (double)total / gib);
}

static void log_crossing(const llmr_resource_monitor *m, const llmr_resource_snapshot *snap,
                         const pressure_event *ev)
{
    llmr_strbuf line = LLMR_STRBUF_INIT;
    uint64_t used, total;
    if (ev->kind == LLMR_RESOURCE_RAM) {
        llmr_strbuf_puts(&line, snap->ram.cgroup_limited ? "RAM (cgroup limit)" : "RAM");
        used = snap->ram.used_bytes;
        total = snap->ram.total_bytes;
    } else {
        const llmr_gpu_reading *g = &snap->gpus[ev->gpu];
        llmr_strbuf_printf(&line, "VRAM of GPU %d (", ev->gpu);
        llmr_strbuf_put_display(&line, g->name, strnlen(g->name, sizeof g->name));
        llmr_strbuf_putc(&line, ')');
        used = g->used_bytes;
        total = g->total_bytes;
    }
    llmr_strbuf_printf(&line, " %s %.1f%% ", ev->crossed > 0 ? "at" : "back to",
                       ev->fraction * 100.0);
    put_gib(&line, used, total);
    llmr_strbuf_printf(&line, ", %s the %.4g%% threshold", ev->crossed > 0 ? "above" : "below",
                       m->opt.threshold * 100.0);
    if (ev->crossed > 0) {
        if (m->opt.on_pressure)
            llmr_strbuf_puts(&line, ": unloading idle models");
        llmr_log_warn(COMPONENT, "%s", llmr_strbuf_cstr(&line));
    } else {
        llmr_log_info(COMPONENT, "%s", llmr_strbuf_cstr(&line));
    }
    llmr_strbuf_free(&line);
}

/* Takes one sample.  log_errors false: the caller reports the error itself (start). */
static llmr_status sample_once(llmr_resource_monitor *m, bool log_errors, llmr_strbuf *err)
{
    llmr_resource_snapshot snap;
    memset(&snap, 0, sizeof snap);
    llmr_strbuf why = LLMR_STRBUF_INIT;
    pressure_event events[1 + LLMR_MAX_GPUS];
    size_t n_events = 0;
    bool log_error = false;

    pthread_mutex_lock(&m->sampling);
    llmr_status st = m->opt.reader.read(m->opt.reader.ctx, &snap, &why);
    if (st == LLMR_OK && snap.taken_ns == 0)
        snap.taken_ns = now_ns();
    if (snap.gpu_count > LLMR_MAX_GPUS)
        snap.gpu_count = LLMR_MAX_GPUS;

    pthread_mutex_lock(&m->lock);
    llmr_resource_counters *c = &m->counters;
    if (st != LLMR_OK) {
        c->sample_errors++;
        size_t kind = (unsigned)st < LLMR_STATUS_COUNT ? (size_t)st : (size_t)LLMR_INTERNAL;
        uint64_t now = now_ns();
        if (log_errors && (m->error_logged_ns[kind] == 0 ||
                           now - m->error_logged_ns[kind] >= ERROR_LOG_EVERY_NS)) {
            m->error_logged_ns[kind] = now ? now : 1;
            log_error = true;
        }
    } else {
        m->latest = snap;
        c->samples++;
        double t = m->opt.threshold;
        if (snap.have_ram) {
            pressure_event *ev = &events[n_events];
            ev->kind = LLMR_RESOURCE_RAM;
            ev->gpu = -1;
            if (evaluate(t, snap.ram.used_bytes, snap.ram.total_bytes, &c->ram_pressure,
                         &c->ram_alerts, ev))
                n_events++;
        }
        uint32_t gpus = snap.have_gpus ? snap.gpu_count : 0;
        for (uint32_t i = 0; i < gpus; i++) {
            pressure_event *ev = &events[n_events];
            ev->kind = LLMR_RESOURCE_VRAM;
            ev->gpu = (int)i;
            if (evaluate(t, snap.gpus[i].used_bytes, snap.gpus[i].total_bytes,
                         &c->vram_pressure[i], &c->vram_alerts[i], ev))
                n_events++;
        }
        /* A GPU no longer read is no longer under pressure. */
        if (snap.have_gpus)
            for (uint32_t i = gpus; i < LLMR_MAX_GPUS; i++)
                c->vram_pressure[i] = false;
    }
    pthread_mutex_unlock(&m->lock);

    if (log_error)
        llmr_log_warn(COMPONENT,
                      "cannot read memory use (%s): %s; the last good readings stay in use "
                      "(this failure is logged at most once in 10 minutes)",
                      llmr_status_name(st), llmr_strbuf_cstr(&why));
    for (size_t i = 0; i < n_events; i++)
        if (events[i].crossed)
            log_crossing(m, &snap, &events[i]);
    pthread_mutex_unlock(&m->sampling);

    if (m->opt.on_pressure)
        for (size_t i = 0; i < n_events; i++)
            if (events[i].above)
                m->opt.on_pressure(m->opt.pressure_ctx, &snap, events[i].kind, events[i].gpu,
                                   events[i].fraction);
    if (st != LLMR_OK && err)
        llmr_strbuf_puts(err, llmr_strbuf_cstr(&why));
    llmr_strbuf_free(&why);
    return st;
}

static void *monitor_thread(void *arg)
{
    llmr_resource_monitor *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + (uint64_t)m->opt.interval_ms * 1000000ull;
        deadline.tv_sec += (time_t)(ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
        int rc = 0;
        while (!m->stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&m->wake, &m->lock, &deadline);
        if (m->stopping)
            break;
        pthread_mutex_unlock(&m->lock);
        sample_once(m, true, NULL);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

static void monitor_free(llmr_resource_monitor *m)
{
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->sampling);
    llmr_nvml_close(m->own_nvml);
    free(m);
}

llmr_status llmr_resource_monitor_start(const llmr_resource_monitor_options *o,
                                        llmr_resource_monitor **out, llmr_strbuf *err)
{
    *out = NULL;
    llmr_resource_monitor_options defaults;
    if (!o) {
        llmr_resource_monitor_options_default(&defaults);
        o = &defaults;
    }
    if (o->interval_ms == 0) {
        llmr_strbuf_puts(err, "the resource sampling interval must be at least 1 ms");
        return LLMR_INVALID_ARGUMENT;
    }
    if (!(o->threshold > 0.0 && o->threshold <= 1.0)) {
        llmr_strbuf_printf(err,
                           "memory threshold %g is outside (0, 1]: it is a fraction of the "
                           "total, 0.9 for 90%%",
                           o->threshold);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_resource_monitor *m = calloc(1, sizeof *m);
    if (!m) {
        llmr_strbuf_puts(err, "out of memory starting the resource monitor");
        return LLMR_OOM_RAM;
    }
    m->opt = *o;
    llmr_cond_init_monotonic(&m->wake);
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->sampling, NULL);

    if (!m->opt.reader.read) {
        llmr_strbuf why = LLMR_STRBUF_INIT;
        m->own_nvml = llmr_nvml_open(o->nvml_library, &why);
        if (!m->own_nvml) {
            snprintf(m->own_reader.note, sizeof m->own_reader.note, "%s",
                     llmr_strbuf_cstr(&why));
            llmr_log_info(COMPONENT, "%s", llmr_strbuf_cstr(&why));
        }
        llmr_strbuf_free(&why);
        m->own_reader.nvml = m->own_nvml;
        m->opt.reader.ctx = &m->own_reader;
        m->opt.reader.read = read_own_system;
    }

    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = sample_once(m, false, &why);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "the first resource sample failed: %s", llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        monitor_free(m);
        return st;
    }
    llmr_strbuf_free(&why);
    if (!o->no_thread) {
        int rc = pthread_create(&m->thread, NULL, monitor_thread, m);
        if (rc != 0) {
            llmr_strbuf_printf(err, "cannot start the resource monitor's thread: %s",
                               strerror(rc));
            monitor_free(m);
            return LLMR_INTERNAL;
        }
        m->thread_started = true;
    }
    *out = m;
    return LLMR_OK;
}

void llmr_resource_monitor_stop(llmr_resource_monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopping = true;
    pthread_cond_broadcast(&m->wake);
    pthread_mutex_unlock(&m->lock);
    if (m->thread_started)
        pthread_join(m->thread, NULL);
    monitor_free(m);
}

/* The readers lock a mutex inside a monitor they were given as const. */
static llmr_resource_monitor *unconst(const llmr_resource_monitor *m)
{
    return (llmr_resource_monitor *)m;
}

void llmr_resource_monitor_latest(const llmr_resource_monitor *m, llmr_resource_snapshot *out)
{
    llmr_resource_monitor *w = unconst(m);
    pthread_mutex_lock(&w->lock);
    *out = m->latest;
    pthread_mutex_unlock(&w->lock);
}

void llmr_resource_monitor_counters(const llmr_resource_monitor *m,
                                    llmr_resource_counters *out)
{
    llmr_resource_monitor *w = unconst(m);
    pthread_mutex_lock(&w->lock);
    *out = m->counters;
    pthread_mutex_unlock(&w->lock);
}

llmr_status llmr_resource_monitor_sample_now(llmr_resource_monitor *m, llmr_strbuf *err)
{
    return sample_once(m, true, err);
}

double llmr_resource_monitor_threshold(const llmr_resource_monitor *m)
{
    return m->opt.threshold; /* set at start, never changed */
}

/* --- Prometheus text ---------------------------------------------------------------- */

/* A label value: valid UTF-8 with backslash, double quote and newline escaped. */
static void put_label_value(llmr_strbuf *out, const char *s, size_t n)
{
    llmr_strbuf utf8 = LLMR_STRBUF_INIT;
    llmr_strbuf_append_lossy(&utf8, s, n);
    const char *p = llmr_strbuf_cstr(&utf8);
    for (size_t i = 0; i < utf8.len; i++) {
        if (p[i] == '\\')
            llmr_strbuf_puts(out, "\\\\");
        else if (p[i] == '"')
            llmr_strbuf_puts(out, "\\\"");
        else if (p[i] == '\n')
            llmr_strbuf_puts(out, "\\n");
        else
            llmr_strbuf_putc(out, p[i]);
    }
    llmr_strbuf_free(&utf8);
}

static void put_header(llmr_strbuf *out, const char *name, const char *type, const char *help)
{
    llmr_strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_gpu_labels(llmr_strbuf *out, const llmr_gpu_reading *g, uint32_t i)
{
    llmr_strbuf_printf(out, "{gpu=\"%u\",name=\"", i);
    put_label_value(out, g->name, strnlen(g->name, sizeof g->name));
    llmr_strbuf_puts(out, "\"}");
}

void llmr_resource_monitor_metrics(const llmr_resource_monitor *m, llmr_strbuf *out)
{
    /* Copied under the lock, formatted after. */
    llmr_resource_snapshot copy, *snap = &copy;
    llmr_resource_counters c;
    llmr_resource_monitor *w = unconst(m);
    pthread_mutex_lock(&w->lock);
    *snap = m->latest;
    c = m->counters;
    pthread_mutex_unlock(&w->lock);
    uint32_t gpus = snap->have_gpus ? snap->gpu_count : 0;

    put_header(out, "llmr_memory_threshold_ratio", "gauge",
               "Fraction of a memory's total above which idle models are unloaded.");
    llmr_strbuf_printf(out, "llmr_memory_threshold_ratio %.6g\n", m->opt.threshold);
    if (snap->have_ram) {
        put_header(out, "llmr_ram_total_bytes", "gauge",
                   "Host memory the node may use (its cgroup's limit when that is lower).");
        llmr_strbuf_printf(out, "llmr_ram_total_bytes %llu\n",
                           (unsigned long long)snap->ram.total_bytes);
        put_header(out, "llmr_ram_used_bytes", "gauge",
                   "Host memory in use, as the pressure check counts it.");
        llmr_strbuf_printf(out, "llmr_ram_used_bytes %llu\n",
                           (unsigned long long)snap->ram.used_bytes);
    }
    if (gpus) {
        put_header(out, "llmr_gpu_memory_total_bytes", "gauge", "Memory of each GPU.");
        for (uint32_t i = 0; i < gpus; i++) {
            llmr_strbuf_puts(out, "llmr_gpu_memory_total_bytes");
            put_gpu_labels(out, &snap->gpus[i], i);
            llmr_strbuf_printf(out, " %llu\n", (unsigned long long)snap->gpus[i].total_bytes);
        }
        put_header(out, "llmr_gpu_memory_used_bytes", "gauge",
                   "Memory in use on each GPU, by all processes.");
        for (uint32_t i = 0; i < gpus; i++) {
            llmr_strbuf_puts(out, "llmr_gpu_memory_used_bytes");
            put_gpu_labels(out, &snap->gpus[i], i);
            llmr_strbuf_printf(out, " %llu\n", (unsigned long long)snap->gpus[i].used_bytes);
        }
    }
    put_header(out, "llmr_memory_pressure", "gauge",
               "1 while the memory is above the threshold, else 0.");
    if (snap->have_ram)
        llmr_strbuf_printf(out, "llmr_memory_pressure{resource=\"ram\"} %d\n",
                           c.ram_pressure ? 1 : 0);
    for (uint32_t i = 0; i < gpus; i++)
        llmr_strbuf_printf(out, "llmr_memory_pressure{resource=\"vram\",gpu=\"%u\"} %d\n", i,
                           c.vram_pressure[i] ? 1 : 0);
    put_header(out, "llmr_memory_alerts_total", "counter",
               "Times the memory went above the threshold.");
    if (snap->have_ram)
        llmr_strbuf_printf(out, "llmr_memory_alerts_total{resource=\"ram\"} %llu\n",
                           (unsigned long long)c.ram_alerts);
    for (uint32_t i = 0; i < gpus; i++)
        llmr_strbuf_printf(out, "llmr_memory_alerts_total{resource=\"vram\",gpu=\"%u\"} %llu\n",
                           i, (unsigned long long)c.vram_alerts[i]);
    put_header(out, "llmr_resource_sample_errors_total", "counter",
               "Memory samples that failed (the last good readings stayed in use).");
    llmr_strbuf_printf(out, "llmr_resource_sample_errors_total %llu\n",
                       (unsigned long long)c.sample_errors);
}
