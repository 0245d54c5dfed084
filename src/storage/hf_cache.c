/* The Hugging Face Hub cache, read only: see hf_cache.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "storage/hf_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"
#include "common/strbuf.h"

char *llmr_hf_cache_dir(void)
{
    const char *hub = getenv("HF_HUB_CACHE");
    if (hub && *hub)
        return strdup(hub);
    const char *home = getenv("HF_HOME");
    if (home && *home)
        return llmr_path_join(home, "hub");
    home = getenv("HOME");
    return home && *home ? llmr_path_join(home, ".cache/huggingface/hub") : NULL;
}

static bool is_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_commit(const char *s)
{
    if (strlen(s) != 40)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* A revision or ref name usable as one path component below refs/ (branch names may
 * hold '/': "refs/pr/1" is refs/pr/1 there). */
static bool ref_usable(const char *r)
{
    if (!*r || r[0] == '/' || strstr(r, "..") || strlen(r) > 255)
        return false;
    for (const char *c = r; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '\\')
            return false;
    return true;
}

char *llmr_hf_cache_find(const char *hub, const char *repo, const char *revision, const char *path,
                         const char *sha256)
{
    if (!hub || !repo || !revision || !path || !strchr(repo, '/') || strstr(repo, "..") ||
        !ref_usable(revision))
        return NULL;
    llmr_strbuf dir = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&dir, "%s/models--", hub);
    for (const char *c = repo; *c; c++) {
        if (*c == '/')
            llmr_strbuf_puts(&dir, "--");
        else
            llmr_strbuf_putc(&dir, *c);
    }
    char *out = NULL;
    if (llmr_strbuf_failed(&dir))
        goto done;
    if (sha256) {
        llmr_strbuf blob = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&blob, "%s/blobs/%s", dir.data, sha256);
        if (!llmr_strbuf_failed(&blob) && is_file(blob.data)) {
            out = llmr_strbuf_take(&blob);
            goto done;
        }
        llmr_strbuf_free(&blob);
    }
    char commit[41] = {0};
    if (is_commit(revision)) {
        memcpy(commit, revision, 40);
    } else {
        llmr_strbuf ref = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&ref, "%s/refs/%s", dir.data, revision);
        FILE *f = llmr_strbuf_failed(&ref) ? NULL : fopen(ref.data, "r");
        llmr_strbuf_free(&ref);
        if (!f)
            goto done;
        size_t n = fread(commit, 1, 40, f);
        fclose(f);
        if (n != 40 || !is_commit(commit))
            goto done;
    }
    llmr_strbuf snap = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&snap, "%s/snapshots/%s/%s", dir.data, commit, path);
    if (!llmr_strbuf_failed(&snap) && is_file(snap.data))
        out = llmr_strbuf_take(&snap);
    else
        llmr_strbuf_free(&snap);
done:
    llmr_strbuf_free(&dir);
    return out;
}
