/* Host memory readings: how much RAM the node has and uses, from /proc/meminfo and,
 * when the node runs in a memory-limited cgroup (a container), from that cgroup;
 * and the resident size of one process (an engine's worker).
 *
 * Everything here reads small kernel files on each call and keeps no state, so any
 * thread may call it.  The resource monitor (resource_monitor.h) calls it once a
 * second. */
#ifndef LLMR_ENGINE_HOST_MEMINFO_H
#define LLMR_ENGINE_HOST_MEMINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_ram_reading {
    uint64_t total_bytes;     /* MemTotal, or the cgroup's limit when that is lower */
    uint64_t available_bytes; /* what can still be taken without swapping */
    uint64_t used_bytes;      /* what the pressure check compares with total_bytes */
    bool cgroup_limited;      /* the numbers are the cgroup's, not the machine's */
} llmr_ram_reading;

/* Parses /proc/meminfo text: MemTotal and MemAvailable (kB); without MemAvailable
 * (kernels before 3.14), MemFree + Buffers + Cached.  used = total - available.
 * Every line must read "Name: number" with an optional " kB"; anything else (a line
 * without a colon, a number that overflows, a missing MemTotal, empty text) is
 * INVALID_ARGUMENT, with err naming the line (or the missing field). */
llmr_status llmr_meminfo_parse(const char *text, size_t len, llmr_ram_reading *out,
                               llmr_strbuf *err);

/* llmr_meminfo_read with the files named: meminfo_path for /proc/meminfo,
 * self_cgroup_path for /proc/self/cgroup and cgroup_root for /sys/fs/cgroup (the
 * cgroup v2 mount).  self_cgroup_path NULL: no cgroup check.
 *
 * The cgroup check: the "0::/path" line of self_cgroup_path names the process's
 * cgroup; it and each parent up to cgroup_root is looked at, and the lowest numeric
 * memory.max there (not "max") that is below MemTotal becomes total_bytes.  The use
 * is that cgroup's memory.current less its inactive_file (memory.stat): page cache
 * the kernel drops before it fails an allocation, which would otherwise make a
 * container that has read a big model file look full.  available is the smaller of
 * the cgroup's room and the machine's MemAvailable.  Unreadable cgroup files are not
 * an error: the machine's numbers stand. */
llmr_status llmr_meminfo_read_from(const char *meminfo_path, const char *self_cgroup_path,
                                   const char *cgroup_root, llmr_ram_reading *out,
                                   llmr_strbuf *err);

/* The running system's numbers (the paths above). */
llmr_status llmr_meminfo_read(llmr_ram_reading *out, llmr_strbuf *err);

/* Resident set size of process `pid` from /proc/PID/statm (pages x page size).
 * NOT_FOUND when there is no such process; INVALID_ARGUMENT for pid <= 0. */
llmr_status llmr_process_rss(int pid, uint64_t *bytes, llmr_strbuf *err);

#endif
