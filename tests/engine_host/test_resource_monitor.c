/* Tests of the resource monitor and its readers: /proc/meminfo parsing, cgroup v2
 * limits from files the test writes, process RSS, NVML when it is absent (and, on a
 * machine with an NVIDIA driver, when it is there), and the monitor itself with a fake
 * reader: pressure callbacks, one alert per crossing, failed samples, metrics text, and
 * a short run of its thread. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "engine_host/meminfo.h"
#include "engine_host/nvml.h"
#include "engine_host/resource_monitor.h"
#include "fixture.h"

#define GIB (1024ull * 1024ull * 1024ull)

/* --- a log sink that keeps the lines ------------------------------------------------ */

#define MAX_LINES 64
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[MAX_LINES][512];
static llmr_log_level log_levels[MAX_LINES];
static int log_count;

static void keep_line(void *ctx, llmr_log_level level, const char *line)
{
    (void)ctx;
    pthread_mutex_lock(&log_lock);
    if (log_count < MAX_LINES) {
        snprintf(log_lines[log_count], sizeof log_lines[0], "%s", line);
        log_levels[log_count] = level;
    }
    log_count++;
    pthread_mutex_unlock(&log_lock);
}

static void log_capture(void)
{
    pthread_mutex_lock(&log_lock);
    log_count = 0;
    pthread_mutex_unlock(&log_lock);
    llmr_log_set_sink(keep_line, NULL);
}

static int lines_at(llmr_log_level level)
{
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_count && i < MAX_LINES; i++)
        n += log_levels[i] == level;
    pthread_mutex_unlock(&log_lock);
    return n;
}

static const char *last_line(void)
{
    return log_count > 0 && log_count <= MAX_LINES ? log_lines[log_count - 1] : "";
}

/* --- /proc/meminfo --------------------------------------------------------------- */

static const char meminfo_text[] = "MemTotal:       65536000 kB\n"
                                   "MemFree:         1000000 kB\n"
                                   "MemAvailable:   16384000 kB\n"
                                   "Buffers:          200000 kB\n"
                                   "Cached:          3000000 kB\n"
                                   "Active(anon):    1234567 kB\n"
                                   "HugePages_Total:       0\n"
                                   "Hugepagesize:       2048 kB\n";

static llmr_status parse(const char *text, llmr_ram_reading *r, llmr_strbuf *err)
{
    llmr_strbuf_reset(err);
    return llmr_meminfo_parse(text, strlen(text), r, err);
}

TEST(meminfo_parses_total_and_available)
{
    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(parse(meminfo_text, &r, &err), LLMR_OK);
    CHECK_EQ_INT(r.total_bytes, 65536000ull * 1024);
    CHECK_EQ_INT(r.available_bytes, 16384000ull * 1024);
    CHECK_EQ_INT(r.used_bytes, (65536000ull - 16384000ull) * 1024);
    CHECK(!r.cgroup_limited);
    /* No newline at the end, tabs for spaces. */
    CHECK_EQ_INT(parse("MemTotal:\t100 kB\nMemAvailable:\t40 kB", &r, &err), LLMR_OK);
    CHECK_EQ_INT(r.used_bytes, 60 * 1024);
    /* More available than total (never seen, but no negative use). */
    CHECK_EQ_INT(parse("MemTotal: 100 kB\nMemAvailable: 400 kB\n", &r, &err), LLMR_OK);
    CHECK_EQ_INT(r.used_bytes, 0);
    llmr_strbuf_free(&err);
}

TEST(meminfo_without_memavailable_adds_free_buffers_and_cached)
{
    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(parse("MemTotal: 8000 kB\nMemFree: 1000 kB\nBuffers: 500 kB\n"
                       "Cached: 1500 kB\nSwapCached: 9 kB\n",
                       &r, &err),
                 LLMR_OK);
    CHECK_EQ_INT(r.available_bytes, 3000 * 1024);
    CHECK_EQ_INT(r.used_bytes, 5000 * 1024);
    /* Neither MemAvailable nor MemFree: an error that says so. */
    CHECK_EQ_INT(parse("MemTotal: 8000 kB\nCached: 1500 kB\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "MemFree");
    llmr_strbuf_free(&err);
}

TEST(meminfo_errors_name_the_field_or_line)
{
    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(parse("MemFree: 1000 kB\nMemAvailable: 2000 kB\n", &r, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no MemTotal");

    CHECK_EQ_INT(parse("", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no MemTotal");
    CHECK_EQ_INT(llmr_meminfo_parse(NULL, 0, &r, &err), LLMR_INVALID_ARGUMENT);

    /* Too many digits for 64 bits. */
    CHECK_EQ_INT(parse("MemTotal: 99999999999999999999999 kB\n", &r, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "line 1");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "does not fit");
    /* Fits as kB, not as bytes: 2^54 kB. */
    CHECK_EQ_INT(parse("MemAvailable: 1 kB\nMemTotal: 18014398509481984 kB\n", &r, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "line 2");
    /* 2^54 - 1 kB is the most that fits. */
    CHECK_EQ_INT(parse("MemAvailable: 1 kB\nMemTotal: 18014398509481983 kB\n", &r, &err),
                 LLMR_OK);

    /* Garbage: the line's number and text are in the message. */
    CHECK_EQ_INT(parse("MemTotal: 100 kB\nthis is not meminfo\n", &r, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "line 2");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "this is not meminfo");
    CHECK_EQ_INT(parse("MemTotal: 100 kB\nMemAvailable: lots kB\n", &r, &err),
                 LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "MemAvailable: lots");
    CHECK_EQ_INT(parse("MemTotal: 100 kB trailing\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(parse("MemTotal: -5 kB\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(parse(": 5 kB\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(parse("MemTotal: 100 MB\n", &r, &err), LLMR_INVALID_ARGUMENT);
    /* A used field must be in kB; a control byte is shown escaped. */
    CHECK_EQ_INT(parse("MemTotal: 100\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no kB unit");
    CHECK_EQ_INT(parse("MemTotal: 1 kB\n\x01zz\n", &r, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "\\x01zz");
    llmr_strbuf_free(&err);
}

/* --- cgroup limits from written files ---------------------------------------------- */

static const char *make_cgroup(const char *root, const char *rel, const char *max,
                               const char *current, const char *stat)
{
    static char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/%s", root, rel) >= (int)sizeof dir)
        abort(); /* the fixture's own short paths */
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_mkdir_p(dir, &err), LLMR_OK);
    llmr_strbuf_free(&err);
    if (max)
        fx_write_text(dir, "memory.max", max);
    if (current)
        fx_write_text(dir, "memory.current", current);
    if (stat)
        fx_write_text(dir, "memory.stat", stat);
    return dir;
}

TEST(cgroup_limit_below_memtotal_becomes_the_total)
{
    const char *tmp = fx_tmpdir();
    char root[4096];
    snprintf(root, sizeof root, "%s/cgroup", tmp);
    fx_write_text(tmp, "meminfo", meminfo_text); /* 62.5 GiB, 15.6 GiB available */
    fx_write_text(tmp, "self_cgroup", "0::/kubepods/pod1/ctr\n");
    make_cgroup(root, "kubepods", "max\n", "0\n", NULL);
    make_cgroup(root, "kubepods/pod1", "max\n", "0\n", NULL);
    make_cgroup(root, "kubepods/pod1/ctr", "8589934592\n", "6442450944\n",
                "anon 4294967296\nfile 2147483648\ninactive_file 1073741824\n");
    char meminfo[4096], self[4096];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", tmp);
    snprintf(self, sizeof self, "%s/self_cgroup", tmp);

    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(r.cgroup_limited);
    CHECK_EQ_INT(r.total_bytes, 8 * GIB);
    CHECK_EQ_INT(r.used_bytes, 5 * GIB); /* 6 GiB current less 1 GiB inactive file */
    CHECK_EQ_INT(r.available_bytes, 3 * GIB);

    /* A parent's lower limit binds the child. */
    make_cgroup(root, "kubepods/pod1", "4294967296\n", "3221225472\n", NULL);
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(r.cgroup_limited);
    CHECK_EQ_INT(r.total_bytes, 4 * GIB);
    CHECK_EQ_INT(r.used_bytes, 3 * GIB);

    /* The machine has less available than the cgroup has room: the smaller counts. */
    fx_write_text(tmp, "meminfo", "MemTotal: 65536000 kB\nMemAvailable: 524288 kB\n");
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK_EQ_INT(r.total_bytes, 4 * GIB);
    CHECK_EQ_INT(r.available_bytes, GIB / 2);
    CHECK_EQ_INT(llmr_strbuf_cstr(&err)[0], '\0');
    llmr_strbuf_free(&err);
}

TEST(cgroup_without_a_lower_limit_leaves_the_machine_numbers)
{
    const char *tmp = fx_tmpdir();
    char root[4096], meminfo[4096], self[4096];
    snprintf(root, sizeof root, "%s/cgroup", tmp);
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", tmp);
    snprintf(self, sizeof self, "%s/self_cgroup", tmp);
    fx_write_text(tmp, "meminfo", meminfo_text);
    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;

    /* "max" everywhere. */
    fx_write_text(tmp, "self_cgroup", "0::/svc\n");
    make_cgroup(root, "svc", "max\n", "123\n", NULL);
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(!r.cgroup_limited);
    CHECK_EQ_INT(r.total_bytes, 65536000ull * 1024);

    /* A limit above MemTotal changes nothing. */
    make_cgroup(root, "svc", "1099511627776\n", "123\n", NULL);
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(!r.cgroup_limited);
    CHECK_EQ_INT(r.used_bytes, (65536000ull - 16384000ull) * 1024);

    /* The cgroup directory is absent. */
    fx_write_text(tmp, "self_cgroup", "0::/elsewhere\n");
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(!r.cgroup_limited);

    /* cgroup v1 only: no "0::" line.  A path outside the namespace is not followed. */
    make_cgroup(root, "svc", "1073741824\n", "123\n", NULL);
    fx_write_text(tmp, "self_cgroup", "4:memory:/svc\n1:cpu:/\n");
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(!r.cgroup_limited);
    fx_write_text(tmp, "self_cgroup", "0::/../svc\n");
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(!r.cgroup_limited);
    /* The same file with the right path is limited (so the two above mean something). */
    fx_write_text(tmp, "self_cgroup", "4:memory:/svc\n0::/svc\n");
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, self, root, &r, &err), LLMR_OK);
    CHECK(r.cgroup_limited);
    CHECK_EQ_INT(r.total_bytes, GIB);

    /* No cgroup file at all: the machine's numbers, no error. */
    CHECK_EQ_INT(llmr_meminfo_read_from(meminfo, fx_path(tmp, "nothing"), root, &r, &err),
                 LLMR_OK);
    CHECK(!r.cgroup_limited);
    CHECK_EQ_INT(llmr_strbuf_cstr(&err)[0], '\0');

    /* A missing meminfo is an error naming it. */
    CHECK_EQ_INT(llmr_meminfo_read_from(fx_path(tmp, "no-meminfo"), self, root, &r, &err),
                 LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no-meminfo");
    llmr_strbuf_free(&err);
}

TEST(meminfo_of_this_machine_reads)
{
    llmr_ram_reading r;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_meminfo_read(&r, &err), LLMR_OK);
    CHECK(r.total_bytes > 0);
    CHECK(r.used_bytes <= r.total_bytes);
    CHECK(r.available_bytes <= r.total_bytes);
    llmr_strbuf_free(&err);
}

TEST(process_rss_of_this_process_and_of_none)
{
    uint64_t bytes = 0;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_process_rss((int)getpid(), &bytes, &err), LLMR_OK);
    CHECK(bytes > 0);
    CHECK(bytes % (uint64_t)sysconf(_SC_PAGESIZE) == 0);
    /* Touching 64 MiB makes it grow by about that. */
    size_t big = 64u << 20;
    char *p = malloc(big);
    CHECK(p != NULL);
    if (p) {
        /* volatile: an optimiser may not drop the stores, so every page is touched */
        for (size_t i = 0; i < big; i += 1024)
            ((volatile char *)p)[i] = 1;
        ((volatile char *)p)[big - 1] = 1;
        uint64_t after = 0;
        CHECK_EQ_INT(llmr_process_rss((int)getpid(), &after, &err), LLMR_OK);
        CHECK(after >= bytes + big / 2);
        CHECK(p[big - 1] == 1);
        free(p);
    }
    /* No process has the largest pid number. */
    CHECK_EQ_INT(llmr_process_rss(INT_MAX, &bytes, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no process 2147483647");
    CHECK_EQ_INT(bytes, 0);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_process_rss(0, &bytes, &err), LLMR_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmr_process_rss(-3, &bytes, &err), LLMR_INVALID_ARGUMENT);
    llmr_strbuf_free(&err);
}

/* --- NVML ---------------------------------------------------------------------------- */

TEST(nvml_absent_says_what_it_means)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_nvml *nvml = llmr_nvml_open("libllmr-no-such-nvml.so.1", &err);
    CHECK(nvml == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "NVML not available (libllmr-no-such-nvml.so.1");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "only CPU engines can run");
    llmr_strbuf_reset(&err);
    /* A library that exists but is not NVML: the missing entry point is named. */
    nvml = llmr_nvml_open("libm.so.6", &err);
    CHECK(nvml == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "libm.so.6 has no nvmlInit_v2");
    llmr_nvml_close(NULL);
    CHECK_EQ_INT(llmr_nvml_device_count(NULL), 0);
    llmr_gpu_reading g;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_nvml_read(NULL, 0, &g, &err), LLMR_INVALID_ARGUMENT);
    llmr_strbuf_free(&err);
}

/* Only where the NVIDIA driver is installed: real readings of every GPU. */
TEST(nvml_present_reads_every_gpu)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_nvml *nvml = llmr_nvml_open(NULL, &err);
    if (!nvml) {
        fprintf(stderr, "  (no NVML here: %s)\n", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return;
    }
    uint32_t n = llmr_nvml_device_count(nvml);
    fprintf(stderr, "  NVML sees %u GPU(s)\n", n);
    for (uint32_t i = 0; i < n; i++) {
        llmr_gpu_reading g;
        llmr_strbuf_reset(&err);
        CHECK_EQ_INT(llmr_nvml_read(nvml, i, &g, &err), LLMR_OK);
        CHECK_EQ_INT(g.index, i);
        CHECK(g.name[0] != '\0');
        CHECK(strncmp(g.uuid, "GPU-", 4) == 0 || strncmp(g.uuid, "MIG-", 4) == 0);
        CHECK(g.total_bytes > 0);
        CHECK(g.used_bytes <= g.total_bytes);
        CHECK(g.cc_major >= 3);
        fprintf(stderr, "  GPU %u: %s, %s, cc %d.%d, %.1f of %.1f GiB used\n", i, g.name,
                g.uuid, g.cc_major, g.cc_minor, (double)g.used_bytes / GIB,
                (double)g.total_bytes / GIB);
        llmr_gpu_process procs[64];
        size_t count = 99;
        llmr_strbuf_reset(&err);
        llmr_status st = llmr_nvml_processes(nvml, i, procs, 64, &count, &err);
        CHECK(st == LLMR_OK || st == LLMR_UNSUPPORTED || st == LLMR_IO);
        if (st == LLMR_OK) {
            CHECK(count <= 64);
            for (size_t k = 0; k < count; k++) {
                CHECK(procs[k].pid > 0);
                CHECK(procs[k].used_bytes == LLMR_GPU_BYTES_UNKNOWN ||
                      procs[k].used_bytes <= g.total_bytes);
                fprintf(stderr, "    pid %u uses %.2f GiB\n", procs[k].pid,
                        (double)procs[k].used_bytes / GIB);
            }
            /* No room at all: the number running comes back with LIMIT_EXCEEDED. */
            size_t needed = 99;
            llmr_status st0 = llmr_nvml_processes(nvml, i, NULL, 0, &needed, &err);
            CHECK(count == 0 ? st0 == LLMR_OK && needed == 0
                             : st0 == LLMR_LIMIT_EXCEEDED && needed >= 1);
        } else {
            fprintf(stderr, "  processes of GPU %u: %s\n", i, llmr_strbuf_cstr(&err));
        }
    }
    llmr_gpu_reading g;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_nvml_read(nvml, n, &g, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "does not exist");
    llmr_nvml_close(nvml);
    llmr_strbuf_free(&err);
}

TEST(system_reader_without_nvml_reads_ram_and_says_why_no_gpus)
{
    llmr_resource_reader reader = llmr_resource_system_reader(NULL);
    llmr_resource_snapshot snap;
    memset(&snap, 0, sizeof snap);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(reader.read(reader.ctx, &snap, &err), LLMR_OK);
    CHECK(snap.have_ram);
    CHECK(snap.ram.total_bytes > 0);
    CHECK(!snap.have_gpus);
    CHECK_EQ_INT(snap.gpu_count, 0);
    CHECK_CONTAINS(snap.gpu_note, "no GPU memory readings");
    llmr_strbuf_free(&err);
}

/* --- the monitor with a fake reader --------------------------------------------------- */

typedef struct fake_reader {
    pthread_mutex_t lock;
    llmr_resource_snapshot next; /* what the next read returns */
    llmr_status fail;            /* not OK: the next reads fail with it */
    int reads;
} fake_reader;

static llmr_status fake_read(void *ctx, llmr_resource_snapshot *out, llmr_strbuf *err)
{
    fake_reader *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->reads++;
    llmr_status st = f->fail;
    if (st == LLMR_OK)
        *out = f->next;
    else
        llmr_strbuf_puts(err, "the fake reader was told to fail");
    pthread_mutex_unlock(&f->lock);
    return st;
}

static void fake_init(fake_reader *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->next.have_ram = true;
    f->next.ram.total_bytes = 64 * GIB;
    f->next.ram.used_bytes = 16 * GIB;
    f->next.ram.available_bytes = 48 * GIB;
    f->next.have_gpus = true;
    f->next.gpu_count = 2;
    for (uint32_t i = 0; i < 2; i++) {
        llmr_gpu_reading *g = &f->next.gpus[i];
        g->index = i;
        snprintf(g->name, sizeof g->name, "Fake GPU %u", i);
        snprintf(g->uuid, sizeof g->uuid, "GPU-fake-%u", i);
        g->total_bytes = 80 * GIB;
        g->used_bytes = 10 * GIB;
        g->free_bytes = 70 * GIB;
        g->cc_major = 9;
    }
}

static void fake_set(fake_reader *f, int gpu, uint64_t used)
{
    pthread_mutex_lock(&f->lock);
    if (gpu < 0)
        f->next.ram.used_bytes = used;
    else
        f->next.gpus[gpu].used_bytes = used;
    pthread_mutex_unlock(&f->lock);
}

typedef struct pressure_calls {
    int count;
    llmr_resource_kind kind[16];
    int gpu[16];
    double fraction[16];
} pressure_calls;

static void record_pressure(void *ctx, const llmr_resource_snapshot *snap,
                            llmr_resource_kind kind, int gpu, double used_fraction)
{
    pressure_calls *p = ctx;
    CHECK(snap != NULL);
    if (p->count < 16) {
        p->kind[p->count] = kind;
        p->gpu[p->count] = gpu;
        p->fraction[p->count] = used_fraction;
    }
    p->count++;
}

static llmr_resource_monitor *start_fake(fake_reader *f, pressure_calls *calls, bool thread,
                                         unsigned interval_ms)
{
    llmr_resource_monitor_options o;
    llmr_resource_monitor_options_default(&o);
    CHECK_EQ_INT(o.interval_ms, 1000);
    CHECK(o.threshold == 0.90);
    o.reader.ctx = f;
    o.reader.read = fake_read;
    o.on_pressure = calls ? record_pressure : NULL;
    o.pressure_ctx = calls;
    o.no_thread = !thread;
    if (interval_ms)
        o.interval_ms = interval_ms;
    llmr_resource_monitor *m = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_resource_monitor_start(&o, &m, &err), LLMR_OK);
    CHECK(m != NULL);
    llmr_strbuf_free(&err);
    return m;
}

static llmr_status sample(llmr_resource_monitor *m)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_resource_monitor_sample_now(m, &err);
    llmr_strbuf_free(&err);
    return st;
}

TEST(vram_above_threshold_alerts_once_per_crossing)
{
    fake_reader f;
    fake_init(&f);
    pressure_calls calls = {0};
    log_capture();
    llmr_resource_monitor *m = start_fake(&f, &calls, false, 0);
    CHECK_EQ_INT(f.reads, 1); /* the first sample is taken by start */
    CHECK_EQ_INT(calls.count, 0);
    CHECK(llmr_resource_monitor_threshold(m) == 0.90);

    /* GPU 1 goes to 93% (74.4 of 80 GiB). */
    fake_set(&f, 1, 80 * GIB * 93 / 100);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(calls.count, 1);
    CHECK_EQ_INT(calls.kind[0], LLMR_RESOURCE_VRAM);
    CHECK_EQ_INT(calls.gpu[0], 1);
    CHECK(fabs(calls.fraction[0] - 0.93) < 1e-6);
    llmr_resource_counters c;
    llmr_resource_monitor_counters(m, &c);
    CHECK_EQ_INT(c.vram_alerts[1], 1);
    CHECK_EQ_INT(c.vram_alerts[0], 0);
    CHECK(c.vram_pressure[1]);
    CHECK(!c.vram_pressure[0]);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 1);
    CHECK_CONTAINS(last_line(), "WARN");
    CHECK_CONTAINS(last_line(), "resources");
    CHECK_CONTAINS(last_line(), "VRAM of GPU 1 (Fake GPU 1) at 93.0% (74.4 of 80.0 GiB), "
                                "above the 90% threshold: unloading idle models");

    /* Still above: the callback runs each sample, no new line, no new alert. */
    fake_set(&f, 1, 80 * GIB * 95 / 100);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(calls.count, 3);
    CHECK(fabs(calls.fraction[2] - 0.95) < 1e-6);
    llmr_resource_monitor_counters(m, &c);
    CHECK_EQ_INT(c.vram_alerts[1], 1);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 1);

    /* Back below: one INFO line, no callback. */
    fake_set(&f, 1, 40 * GIB);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(calls.count, 3);
    CHECK_EQ_INT(lines_at(LLMR_LOG_INFO), 1);
    CHECK_CONTAINS(last_line(), "VRAM of GPU 1 (Fake GPU 1) back to 50.0%");
    CHECK_CONTAINS(last_line(), "below the 90% threshold");
    llmr_resource_monitor_counters(m, &c);
    CHECK(!c.vram_pressure[1]);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(lines_at(LLMR_LOG_INFO), 1);

    /* Exactly at the threshold is not above it; just over is a second alert. */
    fake_set(&f, 1, 72 * GIB);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(calls.count, 3);
    fake_set(&f, 1, 72 * GIB + 1);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    CHECK_EQ_INT(calls.count, 4);
    llmr_resource_monitor_counters(m, &c);
    CHECK_EQ_INT(c.vram_alerts[1], 2);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 2);
    CHECK_EQ_INT(c.samples, 8);
    CHECK_EQ_INT(c.sample_errors, 0);
    CHECK_EQ_INT(c.ram_alerts, 0);

    llmr_resource_monitor_stop(m);
    llmr_log_set_sink(NULL, NULL);
    pthread_mutex_destroy(&f.lock);
}

TEST(ram_pressure_calls_back_with_gpu_minus_one)
{
    fake_reader f;
    fake_init(&f);
    f.next.have_gpus = false;
    f.next.gpu_count = 0;
    f.next.ram.cgroup_limited = true;
    f.next.ram.used_bytes = 62 * GIB; /* 96.9% from the first sample */
    pressure_calls calls = {0};
    log_capture();
    llmr_resource_monitor *m = start_fake(&f, &calls, false, 0);
    CHECK_EQ_INT(calls.count, 1);
    CHECK_EQ_INT(calls.kind[0], LLMR_RESOURCE_RAM);
    CHECK_EQ_INT(calls.gpu[0], -1);
    CHECK(fabs(calls.fraction[0] - 62.0 / 64.0) < 1e-9);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 1);
    CHECK_CONTAINS(last_line(), "RAM (cgroup limit) at 96.9% (62.0 of 64.0 GiB)");
    llmr_resource_counters c;
    llmr_resource_monitor_counters(m, &c);
    CHECK_EQ_INT(c.ram_alerts, 1);
    CHECK(c.ram_pressure);
    llmr_resource_monitor_stop(m);
    llmr_log_set_sink(NULL, NULL);
    pthread_mutex_destroy(&f.lock);
}

TEST(failed_sample_keeps_the_last_snapshot_and_is_logged_once)
{
    fake_reader f;
    fake_init(&f);
    log_capture();
    llmr_resource_monitor *m = start_fake(&f, NULL, false, 0);
    llmr_resource_snapshot before, after;
    llmr_resource_monitor_latest(m, &before);
    CHECK(before.taken_ns > 0);
    CHECK_EQ_INT(before.gpus[0].used_bytes, 10 * GIB);

    pthread_mutex_lock(&f.lock);
    f.fail = LLMR_IO;
    f.next.gpus[0].used_bytes = 11 * GIB; /* not seen: the read fails */
    pthread_mutex_unlock(&f.lock);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(m, &err), LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "told to fail");
    CHECK_EQ_INT(sample(m), LLMR_IO);
    CHECK_EQ_INT(sample(m), LLMR_IO);
    llmr_resource_monitor_latest(m, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    llmr_resource_counters c;
    llmr_resource_monitor_counters(m, &c);
    CHECK_EQ_INT(c.sample_errors, 3);
    CHECK_EQ_INT(c.samples, 1);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 1);
    CHECK_CONTAINS(last_line(), "cannot read memory use (IO): the fake reader was told to fail");

    /* Another kind of failure gets its own line; then it works again. */
    pthread_mutex_lock(&f.lock);
    f.fail = LLMR_TIMEOUT;
    pthread_mutex_unlock(&f.lock);
    CHECK_EQ_INT(sample(m), LLMR_TIMEOUT);
    CHECK_EQ_INT(lines_at(LLMR_LOG_WARN), 2);
    pthread_mutex_lock(&f.lock);
    f.fail = LLMR_OK;
    pthread_mutex_unlock(&f.lock);
    CHECK_EQ_INT(sample(m), LLMR_OK);
    llmr_resource_monitor_latest(m, &after);
    CHECK_EQ_INT(after.gpus[0].used_bytes, 11 * GIB);

    llmr_strbuf metrics = LLMR_STRBUF_INIT;
    llmr_resource_monitor_metrics(m, &metrics);
    CHECK_CONTAINS(llmr_strbuf_cstr(&metrics), "\nllmr_resource_sample_errors_total 4\n");
    llmr_strbuf_free(&metrics);
    llmr_strbuf_free(&err);
    llmr_resource_monitor_stop(m);
    llmr_log_set_sink(NULL, NULL);
    pthread_mutex_destroy(&f.lock);
}

TEST(start_refuses_bad_options_and_a_failing_first_sample)
{
    fake_reader f;
    fake_init(&f);
    llmr_resource_monitor_options o;
    llmr_resource_monitor_options_default(&o);
    o.reader.ctx = &f;
    o.reader.read = fake_read;
    o.no_thread = true;
    llmr_resource_monitor *m = (llmr_resource_monitor *)&f; /* must be cleared */
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const double bad[] = {0.0, -0.5, 1.5, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.threshold = bad[i];
        llmr_strbuf_reset(&err);
        CHECK_EQ_INT(llmr_resource_monitor_start(&o, &m, &err), LLMR_INVALID_ARGUMENT);
        CHECK(m == NULL);
        CHECK_CONTAINS(llmr_strbuf_cstr(&err), "outside (0, 1]");
    }
    o.threshold = 1.0;
    o.interval_ms = 0;
    CHECK_EQ_INT(llmr_resource_monitor_start(&o, &m, &err), LLMR_INVALID_ARGUMENT);
    o.interval_ms = 1000;
    f.fail = LLMR_NOT_FOUND;
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_resource_monitor_start(&o, &m, &err), LLMR_NOT_FOUND);
    CHECK(m == NULL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "first resource sample failed: the fake reader");
    llmr_resource_monitor_stop(NULL);
    llmr_strbuf_free(&err);
    pthread_mutex_destroy(&f.lock);
}

TEST(metrics_text_has_the_readings_and_the_alerts)
{
    fake_reader f;
    fake_init(&f);
    snprintf(f.next.gpus[1].name, sizeof f.next.gpus[1].name, "Fake \"GPU\" \\ 1\n");
    f.next.gpus[1].used_bytes = 79 * GIB;
    log_capture();
    llmr_resource_monitor *m = start_fake(&f, NULL, false, 0);
    llmr_strbuf out = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&out, "# before\n");
    llmr_resource_monitor_metrics(m, &out);
    const char *t = llmr_strbuf_cstr(&out);
    CHECK(strncmp(t, "# before\n# HELP llmr_memory_threshold_ratio ", 44) == 0);
    CHECK_CONTAINS(t, "# TYPE llmr_memory_threshold_ratio gauge\nllmr_memory_threshold_ratio "
                      "0.9\n");
    CHECK_CONTAINS(t, "# TYPE llmr_ram_total_bytes gauge\nllmr_ram_total_bytes 68719476736\n");
    CHECK_CONTAINS(t, "\nllmr_ram_used_bytes 17179869184\n");
    CHECK_CONTAINS(t, "# TYPE llmr_gpu_memory_total_bytes gauge\n");
    CHECK_CONTAINS(t, "\nllmr_gpu_memory_total_bytes{gpu=\"0\",name=\"Fake GPU 0\"} 85899345920\n");
    CHECK_CONTAINS(t, "\nllmr_gpu_memory_used_bytes{gpu=\"0\",name=\"Fake GPU 0\"} 10737418240\n");
    CHECK_CONTAINS(t, "\nllmr_gpu_memory_used_bytes{gpu=\"1\",name=\"Fake \\\"GPU\\\" \\\\ 1\\n\"} "
                      "84825604096\n");
    CHECK_CONTAINS(t, "# TYPE llmr_memory_pressure gauge\n");
    CHECK_CONTAINS(t, "\nllmr_memory_pressure{resource=\"ram\"} 0\n");
    CHECK_CONTAINS(t, "\nllmr_memory_pressure{resource=\"vram\",gpu=\"0\"} 0\n");
    CHECK_CONTAINS(t, "\nllmr_memory_pressure{resource=\"vram\",gpu=\"1\"} 1\n");
    CHECK_CONTAINS(t, "# TYPE llmr_memory_alerts_total counter\n");
    CHECK_CONTAINS(t, "\nllmr_memory_alerts_total{resource=\"ram\"} 0\n");
    CHECK_CONTAINS(t, "\nllmr_memory_alerts_total{resource=\"vram\",gpu=\"1\"} 1\n");
    CHECK_CONTAINS(t, "# TYPE llmr_resource_sample_errors_total counter\n"
                      "llmr_resource_sample_errors_total 0\n");
    CHECK(t[out.len - 1] == '\n');
    /* The GPU's name in the log line is shown escaped, on one line. */
    CHECK_CONTAINS(last_line(), "VRAM of GPU 1 (Fake \"GPU\" \\\\ 1\\n) at 98.8%");
    /* Without the callback the line does not promise an unload. */
    CHECK(strstr(last_line(), "unloading") == NULL);
    llmr_strbuf_free(&out);
    llmr_resource_monitor_stop(m);
    llmr_log_set_sink(NULL, NULL);
    pthread_mutex_destroy(&f.lock);
}

static uint64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

TEST(the_thread_samples_every_interval_and_stops_promptly)
{
    fake_reader f;
    fake_init(&f);
    llmr_resource_monitor *m = start_fake(&f, NULL, true, 20);
    uint64_t start = monotonic_ms();
    llmr_resource_counters c;
    do {
        struct timespec ms5 = {0, 5 * 1000000};
        nanosleep(&ms5, NULL);
        llmr_resource_monitor_counters(m, &c);
    } while (c.samples < 4 && monotonic_ms() - start < 5000);
    CHECK(c.samples >= 4); /* the first from start, three from the thread */
    /* Not much faster than the interval either. */
    CHECK(monotonic_ms() - start >= 3 * 20 - 5);

    /* The thread sees a change without being asked. */
    fake_set(&f, 0, 20 * GIB);
    start = monotonic_ms();
    llmr_resource_snapshot snap;
    do {
        struct timespec ms5 = {0, 5 * 1000000};
        nanosleep(&ms5, NULL);
        llmr_resource_monitor_latest(m, &snap);
    } while (snap.gpus[0].used_bytes != 20 * GIB && monotonic_ms() - start < 5000);
    CHECK_EQ_INT(snap.gpus[0].used_bytes, 20 * GIB);

    /* With a long interval, stop does not wait it out. */
    llmr_resource_monitor_stop(m);
    m = start_fake(&f, NULL, true, 60000);
    struct timespec ms20 = {0, 20 * 1000000};
    nanosleep(&ms20, NULL);
    uint64_t before_stop = monotonic_ms();
    llmr_resource_monitor_stop(m);
    CHECK(monotonic_ms() - before_stop < 200);
    pthread_mutex_destroy(&f.lock);
}

TEST(monitor_with_the_system_reader_starts_without_nvml)
{
    llmr_resource_monitor_options o;
    llmr_resource_monitor_options_default(&o);
    o.nvml_library = "libllmr-no-such-nvml.so.1";
    o.no_thread = true;
    log_capture();
    llmr_resource_monitor *m = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_resource_monitor_start(&o, &m, &err), LLMR_OK);
    llmr_resource_snapshot snap;
    llmr_resource_monitor_latest(m, &snap);
    CHECK(snap.have_ram);
    CHECK(!snap.have_gpus);
    CHECK_CONTAINS(snap.gpu_note, "NVML not available (libllmr-no-such-nvml.so.1");
    CHECK_EQ_INT(lines_at(LLMR_LOG_INFO), 1); /* the note is logged once at start */
    CHECK_EQ_INT(llmr_resource_monitor_sample_now(m, &err), LLMR_OK);
    llmr_strbuf out = LLMR_STRBUF_INIT;
    llmr_resource_monitor_metrics(m, &out);
    CHECK_CONTAINS(llmr_strbuf_cstr(&out), "\nllmr_ram_total_bytes ");
    CHECK(strstr(llmr_strbuf_cstr(&out), "llmr_gpu_memory") == NULL);
    llmr_strbuf_free(&out);
    llmr_resource_monitor_stop(m);
    llmr_log_set_sink(NULL, NULL);
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(meminfo_parses_total_and_available);
    RUN(meminfo_without_memavailable_adds_free_buffers_and_cached);
    RUN(meminfo_errors_name_the_field_or_line);
    RUN(cgroup_limit_below_memtotal_becomes_the_total);
    RUN(cgroup_without_a_lower_limit_leaves_the_machine_numbers);
    RUN(meminfo_of_this_machine_reads);
    RUN(process_rss_of_this_process_and_of_none);
    RUN(nvml_absent_says_what_it_means);
    RUN(nvml_present_reads_every_gpu);
    RUN(system_reader_without_nvml_reads_ram_and_says_why_no_gpus);
    RUN(vram_above_threshold_alerts_once_per_crossing);
    RUN(ram_pressure_calls_back_with_gpu_minus_one);
    RUN(failed_sample_keeps_the_last_snapshot_and_is_logged_once);
    RUN(start_refuses_bad_options_and_a_failing_first_sample);
    RUN(metrics_text_has_the_readings_and_the_alerts);
    RUN(the_thread_samples_every_interval_and_stops_promptly);
    RUN(monitor_with_the_system_reader_starts_without_nvml);
    return llmr_test_finish();
}
