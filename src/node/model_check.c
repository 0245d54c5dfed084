/* The check of a synced model's files before a load: see model_check.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "node/model_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_sample.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/sha256.h"
#include "node/model_sync.h"

#define MAX_MARKER_BYTES (64u << 20)
#define FULL_HASH_MAX (64u << 20) /* files up to this size are hashed whole */

static llmr_status check_one(const char *model_dir, const json_t *e, llmr_strbuf *why)
{
    const char *path = json_string_value(json_object_get(e, "path"));
    const json_t *size_v = json_object_get(e, "size");
    if (!path || llmr_sync_path_problem(path) || !json_is_integer(size_v)) {
        llmr_strbuf_printf(why, "%s/" LLMR_SYNC_MARKER_NAME " is damaged (an entry without a usable "
                                "path or size): remove the model and sync it again", model_dir);
        return LLMR_MODEL_CORRUPT;
    }
    uint64_t size = (uint64_t)json_integer_value(size_v);
    const char *sample = json_string_value(json_object_get(e, "sample_sha256"));
    const char *sha = json_string_value(json_object_get(e, "sha256"));
    char *full = llmr_path_join(model_dir, path);
    if (!full) {
        llmr_strbuf_puts(why, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    struct stat s;
    char hex[65];
    if (fd < 0 || fstat(fd, &s) != 0) {
        llmr_strbuf_printf(why, "%s is gone (%s)", full, strerror(errno));
        st = LLMR_MODEL_CORRUPT;
    } else if (!S_ISREG(s.st_mode) || (uint64_t)s.st_size != size) {
        llmr_strbuf_printf(why, "%s changed on disk since it was synced: %llu bytes, not %llu", full,
                           (unsigned long long)s.st_size, (unsigned long long)size);
        st = LLMR_MODEL_CORRUPT;
    } else if (sample && size > FULL_HASH_MAX) {
        if (llmr_file_sample_sha256_fd(fd, size, hex) != 0 || strcmp(hex, sample) != 0) {
            llmr_strbuf_printf(why, "%s changed on disk since it was synced (its sampled digest "
                                    "differs)", full);
            st = LLMR_MODEL_CORRUPT;
        }
    } else if (sha && size <= FULL_HASH_MAX) {
        if (llmr_sha256_fd(fd, hex) != 0 || strcasecmp(hex, sha) != 0) {
            llmr_strbuf_printf(why, "%s changed on disk since it was synced (its sha256 differs)", full);
            st = LLMR_MODEL_CORRUPT;
        }
    }
    if (fd >= 0)
        close(fd);
    free(full);
    return st;
}

llmr_status llmr_model_files_check(const char *model_dir, llmr_strbuf *why)
{
    char *marker = llmr_path_join(model_dir, LLMR_SYNC_MARKER_NAME);
    if (!marker) {
        llmr_strbuf_puts(why, "out of memory");
        return LLMR_OOM_RAM;
    }
    struct stat st;
    if (lstat(marker, &st) != 0) { /* not synced from a router: nothing recorded */
        free(marker);
        return LLMR_OK;
    }
    llmr_status status;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *doc = llmr_json_load_file(marker, MAX_MARKER_BYTES, &status, &err);
    if (!doc || !json_is_array(json_object_get(doc, "files"))) {
        llmr_strbuf_printf(why, "%s cannot be read (%s): remove the model and sync it again", marker,
                           doc ? "no files list" : llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        json_decref(doc);
        free(marker);
        return LLMR_MODEL_CORRUPT;
    }
    llmr_strbuf_free(&err);
    size_t i;
    const json_t *e;
    status = LLMR_OK;
    const char *corrupt = json_string_value(json_object_get(doc, "corrupt"));
    if (corrupt) { /* the background hash found a file changed (model_hasher.h) */
        llmr_strbuf_puts(why, corrupt);
        status = LLMR_MODEL_CORRUPT;
    }
    json_array_foreach(json_object_get(doc, "files"), i, e)
    {
        if (status != LLMR_OK)
            break;
        status = check_one(model_dir, e, why);
        if (status != LLMR_OK)
            break;
    }
    if (status == LLMR_MODEL_CORRUPT)
        llmr_strbuf_puts(why, ": delete the model and pull it again (llmr rm, llmr pull), or put "
                              "the file back");
    json_decref(doc);
    free(marker);
    return status;
}
