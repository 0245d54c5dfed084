/* The sampled digest of a file: see file_sample.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "common/file_sample.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"

/* Reads exactly n bytes at off, or -1 (errno; EIO at an early end). */
static int read_at(int fd, unsigned char *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

int llmr_file_sample_sha256_fd(int fd, uint64_t size, char hex[65])
{
    unsigned char *buf = malloc(LLMR_SAMPLE_PIECE_BYTES);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    llmr_sha256 c;
    llmr_sha256_init(&c);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(size >> (8 * i));
    llmr_sha256_update(&c, le, sizeof le);
    const uint64_t piece = LLMR_SAMPLE_PIECE_BYTES;
    int rc = 0;
    if (size <= piece * LLMR_SAMPLE_PIECES) {
        for (uint64_t off = 0; rc == 0 && off < size; off += piece) {
            size_t n = (size_t)(size - off < piece ? size - off : piece);
            rc = read_at(fd, buf, n, off);
            if (rc == 0)
                llmr_sha256_update(&c, buf, n);
        }
    } else {
        for (uint64_t i = 0; rc == 0 && i < LLMR_SAMPLE_PIECES; i++) {
            uint64_t off = i * (size - piece) / (LLMR_SAMPLE_PIECES - 1);
            rc = read_at(fd, buf, (size_t)piece, off);
            if (rc == 0)
                llmr_sha256_update(&c, buf, (size_t)piece);
        }
    }
    free(buf);
    if (rc != 0)
        return -1;
    uint8_t digest[32];
    llmr_sha256_final(&c, digest);
    llmr_sha256_hex(digest, hex);
    return 0;
}

int llmr_file_sample_sha256(const char *path, uint64_t *size, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0) {
        /* errno from fstat */
    } else if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
    } else {
        *size = (uint64_t)st.st_size;
        rc = llmr_file_sample_sha256_fd(fd, (uint64_t)st.st_size, hex);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}
