/* Model directory listing: see dir_listing.h. */
#define _GNU_SOURCE
#include "storage/dir_listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs_util.h"

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const llmr_dir_entry *)a)->name, ((const llmr_dir_entry *)b)->name);
}

void llmr_dir_listing_free(llmr_dir_listing *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->entries[i].name);
    free(l->entries);
    memset(l, 0, sizeof *l);
}

llmr_status llmr_dir_list(const char *dir, llmr_dir_listing *out, llmr_problems *problems)
{
    memset(out, 0, sizeof *out);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        llmr_status code = errno == ENOENT ? LLMR_NOT_FOUND
                           : errno == ENOTDIR ? LLMR_INVALID_ARGUMENT
                                              : LLMR_IO;
        llmr_problems_add(problems, code, NULL, "%s: %s", dir,
                          errno == ENOTDIR ? "not a directory" : strerror(errno));
        return code;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        llmr_problems_add(problems, LLMR_IO, NULL, "%s: %s", dir, strerror(errno));
        close(dfd);
        return LLMR_IO;
    }
    size_t cap = 0;
    llmr_status status = LLMR_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (out->count >= LLMR_DIR_MAX_ENTRIES) {
            llmr_problems_add(problems, LLMR_LIMIT_EXCEEDED, NULL,
                              "%s holds more than %u entries; a model directory has a few dozen",
                              dir, LLMR_DIR_MAX_ENTRIES);
            status = LLMR_LIMIT_EXCEEDED;
            break;
        }
        if (out->count == cap) {
            cap = cap ? cap * 2 : 32;
            llmr_dir_entry *e = realloc(out->entries, cap * sizeof *e);
            if (!e) {
                status = LLMR_OOM_RAM;
                break;
            }
            out->entries = e;
        }
        llmr_dir_entry *e = &out->entries[out->count];
        memset(e, 0, sizeof *e);
        if (!(e->name = strdup(de->d_name))) {
            status = LLMR_OOM_RAM;
            break;
        }
        out->count++;
        e->name_ok = llmr_file_name_is_safe(e->name);
        struct stat st;
        if (fstatat(dfd, e->name, &st, 0) == 0) {
            e->kind = S_ISREG(st.st_mode) ? LLMR_DIR_FILE : LLMR_DIR_OTHER;
            e->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        } else if (fstatat(dfd, e->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            e->kind = LLMR_DIR_BROKEN_LINK;
        } else {
            e->kind = LLMR_DIR_OTHER;
        }
    }
    closedir(d);
    if (status == LLMR_OOM_RAM)
        llmr_problems_add(problems, LLMR_OOM_RAM, NULL, "out of memory listing %s", dir);
    if (status != LLMR_OK) {
        llmr_dir_listing_free(out);
        return status;
    }
    if (out->count)
        qsort(out->entries, out->count, sizeof *out->entries, compare_entries);
    return LLMR_OK;
}

const llmr_dir_entry *llmr_dir_find(const llmr_dir_listing *l, const char *name)
{
    llmr_dir_entry key = {.name = (char *)name};
    if (l->count == 0)
        return NULL;
    return bsearch(&key, l->entries, l->count, sizeof *l->entries, compare_entries);
}
