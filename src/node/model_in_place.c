/* A local directory's files used in place: see model_in_place.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* linkat's AT_SYMLINK_FOLLOW on /proc/self/fd */
#endif
#include "node/model_in_place.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_sample.h"
#include "common/list_item.h"
#include "common/sha256.h"

bool llmr_in_place_allowed(const char *path, const char *roots)
{
    if (!path || !roots)
        return false;
    char *real = realpath(path, NULL);
    if (!real)
        return false;
    bool ok = false;
    const char *rest = roots, *item;
    size_t len;
    while (!ok && llmr_list_next(&rest, &item, &len)) {
        char root[PATH_MAX];
        if (len == 0 || len >= sizeof root)
            continue;
        memcpy(root, item, len);
        root[len] = 0;
        char *rroot = realpath(root, NULL);
        if (!rroot)
            continue;
        size_t n = strlen(rroot);
        if (strcmp(rroot, "/") == 0)
            ok = true;
        else
            ok = strncmp(real, rroot, n) == 0 && (real[n] == 0 || real[n] == '/');
        free(rroot);
    }
    free(real);
    return ok;
}

llmr_status llmr_in_place_link(const llmr_in_place_file *f, const char *roots, const char *tmp,
                               const char *dest, llmr_strbuf *why)
{
    llmr_status status = LLMR_OK;
    char *real = realpath(f->source, NULL);
    int fd = -1;
    if (!real) {
        llmr_strbuf_printf(why, "%s: %s", f->source, strerror(errno));
        return errno == ENOENT ? LLMR_NOT_FOUND : LLMR_IO;
    }
    if (!llmr_in_place_allowed(real, roots)) {
        llmr_strbuf_printf(why, "%s is outside the directories this node may use in place", real);
        status = LLMR_NOT_FOUND;
        goto done;
    }
    /* the real path has no link left: one swapped in now is not followed */
    fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        llmr_strbuf_printf(why, "%s: %s", real, strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
        llmr_strbuf_printf(why, "%s is %s%llu bytes, the manifest says %llu", real,
                           S_ISREG(st.st_mode) ? "" : "not a regular file, ",
                           (unsigned long long)st.st_size, (unsigned long long)f->size);
        status = LLMR_MODEL_CORRUPT;
        goto done;
    }
    char hex[65];
    const char *want = f->sample ? f->sample : f->sha256;
    if (!want) {
        llmr_strbuf_printf(why, "the manifest has no digest of %s to check it by", real);
        status = LLMR_MODEL_CORRUPT;
        goto done;
    }
    if ((f->sample ? llmr_file_sample_sha256_fd(fd, f->size, hex) : llmr_sha256_fd(fd, hex)) != 0) {
        llmr_strbuf_printf(why, "cannot read %s: %s", real, strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    if (strcmp(hex, want) != 0) {
        llmr_strbuf_printf(why, "%s has changed since it was registered (its %s is %s, not %s)",
                           real, f->sample ? "sampled digest" : "sha256", hex, want);
        status = LLMR_MODEL_CORRUPT;
        goto done;
    }
    /* link the very file checked (its descriptor), else its path */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    unlink(tmp);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) != 0 && link(real, tmp) != 0) {
        llmr_strbuf_printf(why, "cannot link %s into the node's store: %s", real, strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    if (rename(tmp, dest) != 0) {
        llmr_strbuf_printf(why, "cannot move %s to %s: %s", tmp, dest, strerror(errno));
        unlink(tmp);
        status = LLMR_IO;
    }
done:
    if (fd >= 0)
        close(fd);
    free(real);
    return status;
}
