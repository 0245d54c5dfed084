/* File-system helpers: see fs_util.h. */
#define _GNU_SOURCE
#include "common/fs_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/utf8.h"

char *llmr_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    bool slash = a > 0 && dir[a - 1] != '/';
    char *out = malloc(a + slash + b + 1);
    if (!out)
        return NULL;
    memcpy(out, dir, a);
    if (slash)
        out[a] = '/';
    memcpy(out + a + slash, name, b + 1);
    return out;
}

bool llmr_file_name_is_safe(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 255)
        return false;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '/' || c == '\\' || c < 0x20 || c == 0x7f)
            return false;
    }
    return llmr_utf8_valid(name, n, NULL);
}

bool llmr_name_has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && memcmp(name + n - m, suffix, m) == 0;
}

/* A large buffer (a 28 MB tokenizer.json) is filled once from start to end: offered
 * transparent huge pages, that costs a few page faults instead of thousands.  Advice
 * on the 2 MiB-aligned middle of the block only; it changes nothing else. */
static void advise_huge_pages(char *buf, size_t size)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (size < 4 * huge)
        return;
    uintptr_t from = ((uintptr_t)buf + huge - 1) & ~(huge - 1);
    uintptr_t to = ((uintptr_t)buf + size) & ~(huge - 1);
    if (to > from)
        madvise((void *)from, (size_t)(to - from), MADV_HUGEPAGE);
#else
    (void)buf;
    (void)size;
#endif
}

llmr_status llmr_read_file(const char *path, size_t max_bytes, char **data, size_t *len,
                           llmr_strbuf *err)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llmr_strbuf_printf(err, "cannot open: %s", strerror(errno));
        return errno == ENOENT ? LLMR_NOT_FOUND : LLMR_IO;
    }
    llmr_status status = LLMR_OK;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        llmr_strbuf_printf(err, "cannot stat: %s", strerror(errno));
        status = LLMR_IO;
        goto close_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        llmr_strbuf_puts(err, "not a regular file");
        status = LLMR_INVALID_ARGUMENT;
        goto close_fd;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        llmr_strbuf_printf(err, "file is %lld bytes, more than the limit of %zu bytes",
                           (long long)st.st_size, max_bytes);
        status = LLMR_LIMIT_EXCEEDED;
        goto close_fd;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        llmr_strbuf_printf(err, "out of memory reading %zu bytes", size);
        status = LLMR_OOM_RAM;
        goto close_fd;
    }
    advise_huge_pages(buf, size);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            llmr_strbuf_printf(err, "read failed: %s", strerror(errno));
            status = LLMR_IO;
            goto free_buf;
        }
        if (r == 0)
            break; /* shrank while we read: take what is there */
        got += (size_t)r;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    goto close_fd;

free_buf:
    free(buf);
close_fd:
    close(fd);
    return status;
}

bool llmr_pread_all(int fd, void *buf, size_t n, uint64_t offset)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return true;
}

bool llmr_pwrite_all(int fd, const void *buf, size_t n, uint64_t offset)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)offset);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return true;
}

llmr_status llmr_write_file_atomic(const char *path, const void *data, size_t len,
                                   llmr_strbuf *err)
{
    return llmr_write_file_atomic_mode(path, data, len, 0644, err);
}

llmr_status llmr_write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode,
                                        llmr_strbuf *err)
{
    llmr_strbuf tmp = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (llmr_strbuf_failed(&tmp)) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status status = LLMR_OK;
    /* a new file of our own: a stale one of the same name (or a link planted there) goes
     * first, and the open neither follows a link nor takes a file it did not make, so
     * the mode (less the umask) is what the data gets */
    (void)unlink(tmp.data);
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        llmr_strbuf_printf(err, "cannot create %s: %s", tmp.data, strerror(errno));
        status = LLMR_IO;
        goto free_tmp;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            llmr_strbuf_printf(err, "write to %s failed: %s", tmp.data, strerror(errno));
            status = LLMR_IO;
            goto remove_tmp;
        }
        p += w;
        left -= (size_t)w;
    }
    if (close(fd) != 0) {
        fd = -1;
        llmr_strbuf_printf(err, "closing %s failed: %s", tmp.data, strerror(errno));
        status = LLMR_IO;
        goto remove_tmp;
    }
    fd = -1;
    if (rename(tmp.data, path) != 0) {
        llmr_strbuf_printf(err, "cannot rename %s to %s: %s", tmp.data, path, strerror(errno));
        status = LLMR_IO;
        goto remove_tmp;
    }
    goto free_tmp;

remove_tmp:
    if (fd >= 0)
        close(fd);
    unlink(tmp.data);
free_tmp:
    llmr_strbuf_free(&tmp);
    return status;
}

llmr_status llmr_mkdir_p(const char *path, llmr_strbuf *err)
{
    char *copy = strdup(path);
    if (!copy) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status status = LLMR_OK;
    for (char *p = copy + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
                llmr_strbuf_printf(err, "cannot create directory %s: %s", copy, strerror(errno));
                status = LLMR_IO;
                break;
            }
            if (end)
                break;
            *p = '/';
        }
    }
    struct stat st;
    if (status == LLMR_OK && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        llmr_strbuf_printf(err, "%s exists and is not a directory", path);
        status = LLMR_IO;
    }
    free(copy);
    return status;
}

llmr_status llmr_copy_file(const char *from_dir, const char *to_dir, const char *name,
                           llmr_strbuf *err)
{
    char *src = llmr_path_join(from_dir, name), *dst = llmr_path_join(to_dir, name);
    char *data = NULL;
    size_t len;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = src && dst ? llmr_read_file(src, 1u << 30, &data, &len, &why) : LLMR_OOM_RAM;
    if (st == LLMR_OK)
        st = llmr_write_file_atomic(dst, data, len, &why);
    if (st != LLMR_OK)
        llmr_strbuf_printf(err, "copying %s: %s", src ? src : name, llmr_strbuf_cstr(&why));
    llmr_strbuf_free(&why);
    free(src);
    free(dst);
    free(data);
    return st;
}

bool llmr_dir_has_file(const char *dir, const char *name)
{
    char *path = llmr_path_join(dir, name);
    struct stat sb;
    bool yes = path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
    free(path);
    return yes;
}

bool llmr_dir_is_empty_or_absent(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT;
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}
