/* embed_assets: a build-time tool that writes a C file holding every file under a
 * directory, so that the binary serves them without reading the disk (the dashboard:
 * src/router/dashboard_assets.h).  CMake runs it; it is never installed.
 *
 *   embed_assets OUT.c DIR [NAME]
 *
 * OUT.c defines `const llmr_asset NAME_assets[]`, sorted by path, and `const size_t
 * NAME_asset_count` (NAME defaults to llmr_dashboard).  Each asset has its path
 * relative to DIR ("index.html", "img/logo.svg"), a content type chosen by its
 * extension, its bytes, and an ETag: the first 16 hex digits of its SHA-256, quoted.
 * A DIR that does not exist, or holds no file, gives an empty table (count 0), so a
 * build without the app still links.  Hidden entries (a name starting with '.') and
 * whatever is neither a regular file nor a directory are left out; links are
 * followed.  OUT.c is written beside itself first and renamed into place, so an
 * interrupted run never leaves half a file.
 *
 * Exit status: 0 written, 1 an error (said on stderr), 2 a usage error. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"

#define MAX_DEPTH 32

typedef struct file_list {
    char **paths; /* relative to the directory, malloc'd */
    size_t n, cap;
} file_list;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "embed_assets: out of memory\n");
        exit(1);
    }
    return p;
}

/* a + "/" + b (a may be empty: b alone). */
static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = xmalloc(la + lb + 2);
    if (la) {
        memcpy(s, a, la);
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    } else {
        memcpy(s, b, lb + 1);
    }
    return s;
}

static void list_push(file_list *l, char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **grown = realloc(l->paths, cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "embed_assets: out of memory\n");
            exit(1);
        }
        l->paths = grown;
        l->cap = cap;
    }
    l->paths[l->n++] = path;
}

/* Adds the regular files under root/rel to out.  False (said on stderr) on an error;
 * a root that does not exist is no error. */
static int walk(const char *root, const char *rel, file_list *out, int depth)
{
    if (depth > MAX_DEPTH) {
        fprintf(stderr, "embed_assets: %s/%s: directories nest deeper than %d (a link loop?)\n", root, rel,
                MAX_DEPTH);
        return 0;
    }
    char *dir = join(root, rel);
    DIR *d = opendir(rel[0] ? dir : root);
    if (!d) {
        int e = errno;
        free(dir);
        if (depth == 0 && e == ENOENT)
            return 1;
        fprintf(stderr, "embed_assets: cannot read the directory %s%s%s: %s\n", root, rel[0] ? "/" : "", rel,
                strerror(e));
        return 0;
    }
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue; /* ".", ".." and hidden files */
        char *r = join(rel, e->d_name);
        char *full = join(root, r);
        struct stat st;
        if (stat(full, &st) != 0) {
            fprintf(stderr, "embed_assets: %s: %s\n", full, strerror(errno));
            ok = 0;
            free(r);
        } else if (S_ISDIR(st.st_mode)) {
            ok = walk(root, r, out, depth + 1);
            free(r);
        } else if (S_ISREG(st.st_mode)) {
            list_push(out, r);
        } else {
            free(r);
        }
        free(full);
    }
    closedir(d);
    free(dir);
    return ok;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The whole file into *data (malloc'd), its length into *len. */
static int read_file(const char *path, unsigned char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "embed_assets: cannot open %s: %s\n", path, strerror(errno));
        return 0;
    }
    size_t cap = 64 * 1024, n = 0;
    unsigned char *buf = xmalloc(cap);
    for (;;) {
        if (n == cap) {
            unsigned char *grown = realloc(buf, cap * 2);
            if (!grown) {
                fprintf(stderr, "embed_assets: out of memory reading %s\n", path);
                exit(1);
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        fprintf(stderr, "embed_assets: cannot read %s\n", path);
        free(buf);
        return 0;
    }
    *data = buf;
    *len = n;
    return 1;
}

/* The content type a browser needs for the file's extension. */
static const char *content_type(const char *path)
{
    static const struct {
        const char *ext, *type;
    } TYPES[] = {
        {"html", "text/html; charset=utf-8"},
        {"htm", "text/html; charset=utf-8"},
        {"js", "text/javascript; charset=utf-8"},
        {"mjs", "text/javascript; charset=utf-8"},
        {"css", "text/css; charset=utf-8"},
        {"svg", "image/svg+xml"},
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"webp", "image/webp"},
        {"ico", "image/x-icon"},
        {"json", "application/json"},
        {"map", "application/json"},
        {"txt", "text/plain; charset=utf-8"},
        {"woff", "font/woff"},
        {"woff2", "font/woff2"},
    };
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
            if (strcasecmp(dot + 1, TYPES[i].ext) == 0)
                return TYPES[i].type;
    return "application/octet-stream";
}

/* s as a C string literal: quotes, backslashes, '?' (no trigraphs) and bytes outside
 * printable ASCII escaped. */
static void put_c_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(out, "\\%03o", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* A C identifier: letters, digits and '_', not starting with a digit. */
static int valid_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* Writes the table of the files in l (under dir) to out. */
static int write_table(FILE *out, const char *dir, const file_list *l, const char *name)
{
    fprintf(out, "/* Written by embed_assets from the files of a directory when the binary was built:\n"
                 " * not to be edited (src/router/dashboard_assets.h says what it holds). */\n"
                 "#include \"router/dashboard_assets.h\"\n\n");
    char (*etags)[19] = xmalloc((l->n ? l->n : 1) * sizeof *etags);
    size_t *sizes = xmalloc((l->n ? l->n : 1) * sizeof *sizes);
    for (size_t i = 0; i < l->n; i++) {
        char *full = join(dir, l->paths[i]);
        unsigned char *data = NULL;
        size_t len = 0;
        int ok = read_file(full, &data, &len);
        free(full);
        if (!ok) {
            free(etags);
            free(sizes);
            return 0;
        }
        llmr_sha256 c;
        uint8_t digest[32];
        char hex[65];
        llmr_sha256_init(&c);
        llmr_sha256_update(&c, data, len);
        llmr_sha256_final(&c, digest);
        llmr_sha256_hex(digest, hex);
        snprintf(etags[i], sizeof etags[i], "\"%.16s\"", hex);
        sizes[i] = len;
        fprintf(out, "/* %zu bytes */\nstatic const unsigned char asset_%zu[%zu] = {", len, i, len ? len : 1);
        for (size_t k = 0; k < len; k++)
            fprintf(out, "%s0x%02x,", k % 16 == 0 ? "\n    " : " ", data[k]);
        fprintf(out, "%s};\n\n", len ? "\n" : "0");
        free(data);
    }
    if (l->n == 0) {
        fprintf(out, "/* No files: the table is empty. */\n"
                     "const llmr_asset %s_assets[1] = {{NULL, NULL, NULL, 0, NULL}};\n"
                     "const size_t %s_asset_count = 0;\n",
                name, name);
    } else {
        fprintf(out, "const llmr_asset %s_assets[%zu] = {\n", name, l->n);
        for (size_t i = 0; i < l->n; i++) {
            fputs("    {", out);
            put_c_string(out, l->paths[i]);
            fputs(", ", out);
            put_c_string(out, content_type(l->paths[i]));
            fprintf(out, ", asset_%zu, %zu, ", i, sizes[i]);
            put_c_string(out, etags[i]);
            fputs("},\n", out);
        }
        fprintf(out, "};\nconst size_t %s_asset_count = %zu;\n", name, l->n);
    }
    free(etags);
    free(sizes);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (argc == 4 && !valid_name(argv[3]))) {
        fprintf(stderr, "usage: embed_assets OUT.c DIR [NAME]\n"
                        "Writes OUT.c: the files under DIR as a table, NAME_assets and NAME_asset_count\n"
                        "(NAME, a C identifier, defaults to llmr_dashboard).\n");
        return 2;
    }
    const char *out_path = argv[1], *dir = argv[2], *name = argc == 4 ? argv[3] : "llmr_dashboard";
    file_list l = {0};
    if (!walk(dir, "", &l, 0))
        return 1;
    if (l.n)
        qsort(l.paths, l.n, sizeof *l.paths, by_path);

    size_t tlen = strlen(out_path) + 32;
    char *tmp = xmalloc(tlen);
    snprintf(tmp, tlen, "%s.tmp%ld", out_path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    int ok = out != NULL;
    if (!out)
        fprintf(stderr, "embed_assets: cannot write %s: %s\n", tmp, strerror(errno));
    if (ok)
        ok = write_table(out, dir, &l, name);
    if (out) {
        int bad = ferror(out);
        if (fclose(out) != 0)
            bad = 1;
        if (bad && ok) {
            fprintf(stderr, "embed_assets: cannot write %s\n", tmp);
            ok = 0;
        }
    }
    if (ok && rename(tmp, out_path) != 0) {
        fprintf(stderr, "embed_assets: cannot rename %s to %s: %s\n", tmp, out_path, strerror(errno));
        ok = 0;
    }
    if (!ok && out)
        unlink(tmp);
    free(tmp);
    for (size_t i = 0; i < l.n; i++)
        free(l.paths[i]);
    free(l.paths);
    return ok ? 0 : 1;
}
