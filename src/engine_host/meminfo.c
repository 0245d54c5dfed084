/* Host memory readings: see meminfo.h. */
#include "engine_host/meminfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Kernel files report a size of 0 (proc) or 4096 (sysfs), so they are read to the end
 * instead of by their size.  On success *data is malloc'd and NUL-terminated. */
static llmr_status read_text(const char *path, size_t max_bytes, char **data, size_t *len,
                             llmr_strbuf *err)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        llmr_strbuf_printf(err, "%s: cannot open: %s", path, strerror(e));
        return e == ENOENT || e == ESRCH ? LLMR_NOT_FOUND : LLMR_IO;
    }
    size_t cap = 4096 < max_bytes ? 4096 : max_bytes, got = 0;
    char *buf = malloc(cap + 1);
    llmr_status status = LLMR_OK;
    while (buf) {
        if (got == cap) {
            if (cap >= max_bytes) {
                llmr_strbuf_printf(err, "%s: more than %zu bytes", path, max_bytes);
                status = LLMR_LIMIT_EXCEEDED;
                break;
            }
            cap = cap * 2 < max_bytes ? cap * 2 : max_bytes;
            char *bigger = realloc(buf, cap + 1);
            if (!bigger)
                break;
            buf = bigger;
        }
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            llmr_strbuf_printf(err, "%s: read failed: %s", path, strerror(errno));
            status = errno == ESRCH ? LLMR_NOT_FOUND : LLMR_IO;
            break;
        }
        if (r == 0) {
            close(fd);
            buf[got] = '\0';
            *data = buf;
            *len = got;
            return LLMR_OK;
        }
        got += (size_t)r;
    }
    close(fd);
    if (!buf || status == LLMR_OK) {
        llmr_strbuf_printf(err, "%s: out of memory", path);
        status = LLMR_OOM_RAM;
    }
    free(buf);
    return status;
}

/* --- /proc/meminfo ------------------------------------------------------------ */

enum { F_TOTAL, F_AVAILABLE, F_FREE, F_BUFFERS, F_CACHED, F_COUNT };
static const char *const field_names[F_COUNT] = {"MemTotal", "MemAvailable", "MemFree",
                                                 "Buffers", "Cached"};

static void describe_line(llmr_strbuf *err, unsigned line_no, const char *line, size_t n)
{
    const size_t shown = 60;
    llmr_strbuf_printf(err, "meminfo line %u (\"", line_no);
    llmr_strbuf_put_display(err, line, n < shown ? n : shown);
    llmr_strbuf_puts(err, n > shown ? "...\")" : "\")");
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

llmr_status llmr_meminfo_parse(const char *text, size_t len, llmr_ram_reading *out,
                               llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    if (!text)
        text = "", len = 0;
    uint64_t kb[F_COUNT] = {0};
    bool seen[F_COUNT] = {false};
    const char *p = text, *end = text + len;
    unsigned line_no = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line = p, *line_end = nl ? nl : end;
        p = nl ? nl + 1 : end;
        line_no++;
        if (line == line_end)
            continue;

        /* Name: number [kB] */
        const char *q = line;
        while (q < line_end && *q != ':' && (unsigned char)*q > ' ')
            q++;
        if (q == line || q == line_end || *q != ':') {
            describe_line(err, line_no, line, (size_t)(line_end - line));
            llmr_strbuf_puts(err, ": expected \"Name: number kB\"");
            return LLMR_INVALID_ARGUMENT;
        }
        size_t name_len = (size_t)(q - line);
        q++;
        while (q < line_end && is_blank(*q))
            q++;
        uint64_t value = 0;
        const char *digits = q;
        bool overflow = false;
        for (; q < line_end && *q >= '0' && *q <= '9'; q++) {
            unsigned d = (unsigned)(*q - '0');
            if (value > (UINT64_MAX - d) / 10)
                overflow = true;
            else
                value = value * 10 + d;
        }
        bool has_kb = false;
        const char *after = q;
        while (q < line_end && is_blank(*q))
            q++;
        if (q + 2 <= line_end && q > after && q[0] == 'k' && q[1] == 'B') {
            has_kb = true;
            q += 2;
        }
        while (q < line_end && is_blank(*q))
            q++;
        if (digits == after || q != line_end) {
            describe_line(err, line_no, line, (size_t)(line_end - line));
            llmr_strbuf_puts(err, ": expected \"Name: number kB\"");
            return LLMR_INVALID_ARGUMENT;
        }
        if (overflow || (has_kb && value > UINT64_MAX / 1024)) {
            describe_line(err, line_no, line, (size_t)(line_end - line));
            llmr_strbuf_puts(err, ": the number does not fit in 64 bits of bytes");
            return LLMR_INVALID_ARGUMENT;
        }
        for (int f = 0; f < F_COUNT; f++) {
            if (strlen(field_names[f]) != name_len ||
                memcmp(field_names[f], line, name_len) != 0)
                continue;
            if (!has_kb) {
                describe_line(err, line_no, line, (size_t)(line_end - line));
                llmr_strbuf_printf(err, ": %s has no kB unit", field_names[f]);
                return LLMR_INVALID_ARGUMENT;
            }
            kb[f] = value;
            seen[f] = true;
        }
    }
    if (!seen[F_TOTAL] || kb[F_TOTAL] == 0) {
        llmr_strbuf_puts(err, seen[F_TOTAL] ? "meminfo says MemTotal is 0 kB"
                                            : "meminfo has no MemTotal line");
        return LLMR_INVALID_ARGUMENT;
    }
    uint64_t available_kb;
    if (seen[F_AVAILABLE]) {
        available_kb = kb[F_AVAILABLE];
    } else if (seen[F_FREE]) {
        /* Before MemAvailable: free pages plus what the kernel can drop at once. */
        available_kb = kb[F_FREE] + kb[F_BUFFERS] + kb[F_CACHED];
        if (available_kb < kb[F_FREE]) /* wrapped */
            available_kb = UINT64_MAX;
    } else {
        llmr_strbuf_puts(err, "meminfo has neither MemAvailable nor MemFree");
        return LLMR_INVALID_ARGUMENT;
    }
    if (available_kb > kb[F_TOTAL])
        available_kb = kb[F_TOTAL];
    out->total_bytes = kb[F_TOTAL] * 1024;
    out->available_bytes = available_kb * 1024;
    out->used_bytes = out->total_bytes - out->available_bytes;
    out->cgroup_limited = false;
    return LLMR_OK;
}

/* --- cgroup v2 limits ----------------------------------------------------------- */

/* A whole small file as one number ("max\n" and garbage: false). */
static bool read_number_file(const char *dir, const char *name, uint64_t *value)
{
    llmr_strbuf path = LLMR_STRBUF_INIT, ignored = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&path, "%s/%s", dir, name);
    char *text = NULL;
    size_t len = 0;
    bool ok = !llmr_strbuf_failed(&path) &&
              read_text(llmr_strbuf_cstr(&path), 4096, &text, &len, &ignored) == LLMR_OK;
    if (ok) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        ok = end != text && errno == 0 && text[0] >= '0' && text[0] <= '9' &&
             (*end == '\n' || *end == '\0');
        *value = (uint64_t)v;
    }
    free(text);
    llmr_strbuf_free(&path);
    llmr_strbuf_free(&ignored);
    return ok;
}

/* The value of `key` in a "key value" per line file (memory.stat); 0 when absent. */
static uint64_t read_stat_value(const char *dir, const char *key)
{
    llmr_strbuf path = LLMR_STRBUF_INIT, ignored = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&path, "%s/memory.stat", dir);
    char *text = NULL;
    size_t len = 0, key_len = strlen(key);
    uint64_t value = 0;
    if (!llmr_strbuf_failed(&path) &&
        read_text(llmr_strbuf_cstr(&path), 1 << 16, &text, &len, &ignored) == LLMR_OK) {
        for (const char *line = text; line && *line;) {
            if (strncmp(line, key, key_len) == 0 && line[key_len] == ' ') {
                value = strtoull(line + key_len + 1, NULL, 10);
                break;
            }
            line = strchr(line, '\n');
            if (line)
                line++;
        }
    }
    free(text);
    llmr_strbuf_free(&path);
    llmr_strbuf_free(&ignored);
    return value;
}

/* Replaces the machine's numbers in *r by the cgroup's when a cgroup limit is lower
 * (see meminfo.h).  Any file that cannot be read leaves *r as it is. */
static void apply_cgroup_limit(const char *self_cgroup_path, const char *cgroup_root,
                               llmr_ram_reading *r)
{
    llmr_strbuf ignored = LLMR_STRBUF_INIT, dir = LLMR_STRBUF_INIT, best_dir = LLMR_STRBUF_INIT;
    char *text = NULL;
    size_t len = 0;
    if (read_text(self_cgroup_path, 1 << 16, &text, &len, &ignored) != LLMR_OK)
        goto done;
    /* The unified hierarchy's line is "0::/path". */
    const char *path = NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "0::", 3) == 0)
            path = line + 3;
        line = nl ? nl + 1 : NULL;
    }
    /* A path outside this cgroup namespace ("/../x") cannot be found under the root. */
    if (!path || path[0] != '/' || strstr(path, "/..") || strstr(path, "//"))
        goto done;

    size_t root_len = strlen(cgroup_root);
    while (root_len > 0 && cgroup_root[root_len - 1] == '/')
        root_len--;
    llmr_strbuf_append(&dir, cgroup_root, root_len);
    if (strcmp(path, "/") != 0)
        llmr_strbuf_puts(&dir, path);
    if (llmr_strbuf_failed(&dir))
        goto done;

    /* The tightest limit on the way up: a parent's limit binds its children. */
    uint64_t best = UINT64_MAX;
    for (;;) {
        uint64_t limit;
        if (read_number_file(llmr_strbuf_cstr(&dir), "memory.max", &limit) && limit < best) {
            best = limit;
            llmr_strbuf_reset(&best_dir);
            llmr_strbuf_puts(&best_dir, llmr_strbuf_cstr(&dir));
        }
        if (dir.len <= root_len)
            break;
        size_t cut = dir.len;
        while (cut > root_len && dir.data[cut - 1] != '/')
            cut--;
        dir.len = cut > root_len ? cut - 1 : root_len;
        dir.data[dir.len] = '\0';
    }
    uint64_t current;
    if (best >= r->total_bytes || llmr_strbuf_failed(&best_dir) ||
        !read_number_file(llmr_strbuf_cstr(&best_dir), "memory.current", &current))
        goto done;
    uint64_t inactive_file = read_stat_value(llmr_strbuf_cstr(&best_dir), "inactive_file");
    uint64_t used = current > inactive_file ? current - inactive_file : 0;
    if (used > best)
        used = best;
    r->total_bytes = best;
    r->used_bytes = used;
    if (r->available_bytes > best - used)
        r->available_bytes = best - used;
    r->cgroup_limited = true;

done:
    free(text);
    llmr_strbuf_free(&ignored);
    llmr_strbuf_free(&dir);
    llmr_strbuf_free(&best_dir);
}

llmr_status llmr_meminfo_read_from(const char *meminfo_path, const char *self_cgroup_path,
                                   const char *cgroup_root, llmr_ram_reading *out,
                                   llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    llmr_status st = read_text(meminfo_path, 1 << 16, &text, &len, err);
    if (st != LLMR_OK)
        return st;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    st = llmr_meminfo_parse(text, len, out, &why);
    free(text);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "%s: %s", meminfo_path, llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        return st;
    }
    llmr_strbuf_free(&why);
    if (self_cgroup_path && cgroup_root)
        apply_cgroup_limit(self_cgroup_path, cgroup_root, out);
    return LLMR_OK;
}

llmr_status llmr_meminfo_read(llmr_ram_reading *out, llmr_strbuf *err)
{
    return llmr_meminfo_read_from("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup", out,
                                  err);
}

/* --- one process ---------------------------------------------------------------- */

llmr_status llmr_process_rss(int pid, uint64_t *bytes, llmr_strbuf *err)
{
    *bytes = 0;
    if (pid <= 0) {
        llmr_strbuf_printf(err, "%d is not a process id", pid);
        return LLMR_INVALID_ARGUMENT;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", pid);
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = read_text(path, 4096, &text, &len, &why);
    if (st != LLMR_OK) {
        if (st == LLMR_NOT_FOUND)
            llmr_strbuf_printf(err, "no process %d (%s)", pid, llmr_strbuf_cstr(&why));
        else
            llmr_strbuf_puts(err, llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        return st;
    }
    llmr_strbuf_free(&why);
    /* "size resident shared text lib data dt", in pages. */
    unsigned long long size_pages = 0, resident_pages = 0;
    int fields = sscanf(text, "%llu %llu", &size_pages, &resident_pages);
    free(text);
    long page = sysconf(_SC_PAGESIZE);
    if (fields != 2 || page <= 0) {
        llmr_strbuf_printf(err, "%s: not the \"size resident ...\" the kernel writes", path);
        return LLMR_IO;
    }
    if (resident_pages > UINT64_MAX / (uint64_t)page) {
        llmr_strbuf_printf(err, "%s: %llu resident pages is more than 64 bits of bytes", path,
                           resident_pages);
        return LLMR_IO;
    }
    *bytes = (uint64_t)resident_pages * (uint64_t)page;
    return LLMR_OK;
}
