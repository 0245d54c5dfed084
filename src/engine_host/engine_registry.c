/* The EngineRegistry: see engine_registry.h.  This file owns plugin discovery and
 * the selection rule; what a manifest may say is plugin_manifest.c's. */
#include "engine_host/engine_registry.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"

/* Names of a list shown in a reason at most ("runs a, b, c or d, ..."). */
#define SHOW_LIST_MAX 4
/* Bytes of a name from outside shown in a message. */
#define SHOW_MAX 64

struct llmr_engine_registry {
    llmr_plugin_manifest **plugins;
    size_t count;
    size_t cap;
};

llmr_engine_registry *llmr_engine_registry_create(void)
{
    return calloc(1, sizeof(llmr_engine_registry));
}

void llmr_engine_registry_free(llmr_engine_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++)
        llmr_plugin_manifest_free(r->plugins[i]);
    free(r->plugins);
    free(r);
}

size_t llmr_engine_registry_count(const llmr_engine_registry *r)
{
    return r->count;
}

const llmr_plugin_manifest *llmr_engine_registry_get(const llmr_engine_registry *r, size_t i)
{
    return i < r->count ? r->plugins[i] : NULL;
}

const llmr_plugin_manifest *llmr_engine_registry_find(const llmr_engine_registry *r,
                                                      const char *id)
{
    for (size_t i = 0; id && i < r->count; i++)
        if (strcmp(r->plugins[i]->id, id) == 0)
            return r->plugins[i];
    return NULL;
}

/* Appends bytes from outside, escaped, cut to SHOW_MAX. */
static void put_shown(llmr_strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    llmr_strbuf_put_display(sb, s, n > SHOW_MAX ? SHOW_MAX : n);
    if (n > SHOW_MAX)
        llmr_strbuf_puts(sb, "...");
}

/* "the plugin directory D" for messages: a path in full, escaped. */
static void put_path(llmr_strbuf *sb, const char *path)
{
    llmr_strbuf_put_display(sb, path, path ? strlen(path) : 0);
}

static void put_duplicate(llmr_strbuf *sb, const llmr_plugin_manifest *kept,
                          const llmr_plugin_manifest *m)
{
    llmr_strbuf_printf(sb, "plugin id \"%s\" of ", m->id);
    put_path(sb, m->dir ? m->dir : "(no directory)");
    llmr_strbuf_puts(sb, " is already provided by ");
    put_path(sb, kept->dir ? kept->dir : "(no directory)");
    llmr_strbuf_puts(sb, "; the second one is skipped");
}

llmr_status llmr_engine_registry_add(llmr_engine_registry *r, llmr_plugin_manifest *m,
                                     llmr_strbuf *err)
{
    const llmr_plugin_manifest *kept = llmr_engine_registry_find(r, m->id);
    if (kept) {
        put_duplicate(err, kept, m);
        return LLMR_LOAD_FAILED;
    }
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        llmr_plugin_manifest **grown = realloc(r->plugins, cap * sizeof *grown);
        if (!grown) {
            llmr_strbuf_puts(err, "out of memory adding an engine plugin");
            return LLMR_OOM_RAM;
        }
        r->plugins = grown;
        r->cap = cap;
    }
    r->plugins[r->count++] = m;
    return LLMR_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds a problem whose file is a path from the file system, escaped. */
static void add_problem(llmr_problems *problems, llmr_status code, const char *path,
                        const char *message)
{
    llmr_strbuf file = LLMR_STRBUF_INIT;
    put_path(&file, path);
    llmr_problems_add(problems, code, llmr_strbuf_cstr(&file), "%s", message);
    llmr_strbuf_free(&file);
}

/* The names in dir that may be plugins (not hidden), sorted; NULL after a problem. */
static char **list_dir(const char *dir, size_t *count, llmr_problems *problems)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        llmr_strbuf why = LLMR_STRBUF_INIT;
        llmr_status code = e == ENOENT ? LLMR_NOT_FOUND
                           : e == ENOTDIR ? LLMR_INVALID_ARGUMENT
                                          : LLMR_IO;
        if (e == ENOENT)
            llmr_strbuf_puts(&why, "the plugin directory does not exist");
        else if (e == ENOTDIR)
            llmr_strbuf_puts(&why, "the plugin directory is not a directory");
        else
            llmr_strbuf_printf(&why, "the plugin directory cannot be read: %s", strerror(e));
        add_problem(problems, code, dir, llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    bool oom = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (*count == LLMR_ENGINE_REGISTRY_MAX_ENTRIES) {
            llmr_strbuf why = LLMR_STRBUF_INIT;
            llmr_strbuf_printf(&why,
                               "the plugin directory holds more than %u entries; only the "
                               "first %u read are looked at",
                               LLMR_ENGINE_REGISTRY_MAX_ENTRIES, LLMR_ENGINE_REGISTRY_MAX_ENTRIES);
            add_problem(problems, LLMR_LIMIT_EXCEEDED, dir, llmr_strbuf_cstr(&why));
            llmr_strbuf_free(&why);
            break;
        }
        if (*count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = realloc(names, ncap * sizeof *grown);
            if (!grown) {
                oom = true;
                break;
            }
            names = grown;
            cap = ncap;
        }
        if (!(names[*count] = strdup(de->d_name))) {
            oom = true;
            break;
        }
        (*count)++;
    }
    closedir(d);
    if (oom) {
        add_problem(problems, LLMR_OOM_RAM, dir, "out of memory listing the plugin directory");
        for (size_t i = 0; i < *count; i++)
            free(names[i]);
        free(names);
        *count = 0;
        return NULL;
    }
    if (*count)
        qsort(names, *count, sizeof *names, compare_names);
    return names;
}

/* Loads dir/name when it is a directory holding a manifest.json; adds it or records
 * why not.  Returns true when a plugin was added. */
static bool scan_one(llmr_engine_registry *r, const char *dir, const char *name,
                     llmr_problems *problems)
{
    char *sub = llmr_path_join(dir, name);
    char *manifest = sub ? llmr_path_join(sub, LLMR_PLUGIN_MANIFEST_FILE) : NULL;
    bool added = false;
    struct stat st;
    if (!manifest) {
        add_problem(problems, LLMR_OOM_RAM, dir, "out of memory scanning the plugin directory");
        goto done;
    }
    /* a plain file, or a subdirectory without a manifest, is not a plugin */
    if (stat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
        goto done;
    if (stat(manifest, &st) != 0 && errno == ENOENT)
        goto done;
    llmr_plugin_manifest *m = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status status = llmr_plugin_manifest_load(sub, &m, &err);
    if (status == LLMR_OK) {
        status = llmr_engine_registry_add(r, m, &err);
        if (status == LLMR_OK)
            added = true;
        else
            llmr_plugin_manifest_free(m);
    }
    if (status != LLMR_OK)
        add_problem(problems, status, manifest, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
done:
    free(manifest);
    free(sub);
    return added;
}

size_t llmr_engine_registry_scan(llmr_engine_registry *r, const char *const *dirs,
                                 size_t dir_count, llmr_problems *problems)
{
    size_t added = 0;
    for (size_t i = 0; i < dir_count; i++) {
        size_t n;
        char **names = list_dir(dirs[i], &n, problems);
        for (size_t j = 0; j < n; j++) {
            added += scan_one(r, dirs[i], names[j], problems);
            free(names[j]);
        }
        free(names);
    }
    return added;
}

/* ---- selection ----------------------------------------------------------------- */

static bool lists(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

static int best_score(const llmr_plugin_manifest *m, int cc_major, int cc_minor)
{
    int best = 0;
    for (size_t i = 0; i < m->gpu_target_count; i++) {
        int s = llmr_gpu_target_score(&m->gpu_targets[i], cc_major, cc_minor);
        if (s > best)
            best = s;
    }
    return best;
}

/* "a, b or c", at most SHOW_LIST_MAX then ", ..." (names from a checked manifest). */
static void put_names(llmr_strbuf *sb, char *const *v, size_t n, const char *last_sep)
{
    for (size_t i = 0; i < n && i < SHOW_LIST_MAX; i++) {
        if (i > 0)
            llmr_strbuf_puts(sb, i + 1 == n ? last_sep : ", ");
        put_shown(sb, v[i]);
    }
    if (n > SHOW_LIST_MAX)
        llmr_strbuf_puts(sb, ", ...");
}

static void put_targets(llmr_strbuf *sb, const llmr_plugin_manifest *m)
{
    size_t n = m->gpu_target_count;
    for (size_t i = 0; i < n && i < SHOW_LIST_MAX; i++) {
        if (i > 0)
            llmr_strbuf_puts(sb, i + 1 == n ? " or " : ", ");
        llmr_gpu_target_format(&m->gpu_targets[i], sb);
    }
    if (n > SHOW_LIST_MAX)
        llmr_strbuf_puts(sb, ", ...");
}

/* The best target score of m for q, or 0 with the reason appended to why (may be
 * NULL): "ID VERSION runs llama_cpp, not gpt_oss". */
static int fit(const llmr_plugin_manifest *m, const llmr_engine_query *q, llmr_strbuf *why)
{
    if (q->format && !lists(m->formats, m->format_count, q->format)) {
        if (why) {
            llmr_strbuf_printf(why, "%s %s reads ", m->id, m->version);
            put_names(why, m->formats, m->format_count, " and ");
            llmr_strbuf_puts(why, ", not ");
            put_shown(why, q->format);
        }
        return 0;
    }
    if (!lists(m->runtimes, m->runtime_count, q->runtime)) {
        if (why) {
            llmr_strbuf_printf(why, "%s %s runs ", m->id, m->version);
            put_names(why, m->runtimes, m->runtime_count, " and ");
            llmr_strbuf_puts(why, ", not ");
            put_shown(why, q->runtime);
        }
        return 0;
    }
    if (q->architecture && !lists(m->architectures, m->architecture_count, "*") &&
        !lists(m->architectures, m->architecture_count, q->architecture)) {
        if (why) {
            llmr_strbuf_printf(why, "%s %s does not list architecture ", m->id, m->version);
            put_shown(why, q->architecture);
        }
        return 0;
    }
    int score = best_score(m, q->cc_major, q->cc_minor);
    if (score == 0 && why) {
        llmr_strbuf_printf(why, "%s %s needs ", m->id, m->version);
        put_targets(why, m);
        if (q->cc_major < 0)
            llmr_strbuf_puts(why, " and this machine has no GPU");
        else
            llmr_strbuf_printf(why, " and the GPU is compute capability %d.%d", q->cc_major,
                               q->cc_minor);
    }
    return score;
}

/* >0 when a (of best score sa) ranks before b (sb). */
static int compare_rank(const llmr_plugin_manifest *a, int sa, const llmr_plugin_manifest *b,
                        int sb)
{
    if (sa != sb)
        return sa - sb;
    if (a->priority != b->priority)
        return a->priority - b->priority;
    int c = llmr_semver_compare(a->version, b->version);
    if (c != 0)
        return c;
    return strcmp(b->id, a->id); /* the smaller id first */
}

/* "a safetensors model of runtime gpt_oss and architecture X on a GPU of compute
 * capability 9.0" */
static void put_query(llmr_strbuf *sb, const llmr_engine_query *q)
{
    llmr_strbuf_puts(sb, "a ");
    if (q->format) {
        put_shown(sb, q->format);
        llmr_strbuf_putc(sb, ' ');
    }
    llmr_strbuf_puts(sb, "model");
    if (q->runtime) {
        llmr_strbuf_puts(sb, " of runtime ");
        put_shown(sb, q->runtime);
    }
    if (q->architecture) {
        llmr_strbuf_puts(sb, q->runtime ? " and architecture " : " of architecture ");
        put_shown(sb, q->architecture);
    }
    if (q->cc_major < 0)
        llmr_strbuf_puts(sb, " on a machine with no GPU");
    else
        llmr_strbuf_printf(sb, " on a GPU of compute capability %d.%d", q->cc_major, q->cc_minor);
}

const llmr_plugin_manifest *llmr_engine_registry_select(const llmr_engine_registry *r,
                                                        const llmr_engine_query *q,
                                                        int *gpu_score, llmr_strbuf *why_not)
{
    if (gpu_score)
        *gpu_score = 0;
    const llmr_plugin_manifest *best = NULL;
    int best_sc = 0;
    if (r->count > 0 && q->runtime) {
        for (size_t i = 0; i < r->count; i++) {
            const llmr_plugin_manifest *m = r->plugins[i];
            int sc = fit(m, q, NULL);
            if (sc > 0 && (!best || compare_rank(m, sc, best, best_sc) > 0)) {
                best = m;
                best_sc = sc;
            }
        }
    }
    if (best) {
        if (gpu_score)
            *gpu_score = best_sc;
        return best;
    }
    if (!why_not)
        return NULL;
    if (r->count == 0) {
        llmr_strbuf_puts(why_not, "no engine plugins are installed, so nothing can run ");
        put_query(why_not, q);
        return NULL;
    }
    if (!q->runtime) {
        llmr_strbuf_puts(why_not, "no engine plugin can run ");
        put_query(why_not, q);
        llmr_strbuf_puts(why_not, ": the model has no runtime that an engine could provide");
        return NULL;
    }
    llmr_strbuf_puts(why_not, "no engine plugin fits ");
    put_query(why_not, q);
    llmr_strbuf_puts(why_not, ": ");
    for (size_t i = 0; i < r->count && i < LLMR_ENGINE_REGISTRY_WHY_MAX; i++) {
        if (i > 0)
            llmr_strbuf_puts(why_not, "; ");
        fit(r->plugins[i], q, why_not);
    }
    if (r->count > LLMR_ENGINE_REGISTRY_WHY_MAX)
        llmr_strbuf_printf(why_not, "; and %zu more", r->count - LLMR_ENGINE_REGISTRY_WHY_MAX);
    return NULL;
}
