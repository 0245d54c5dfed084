/* embed_assets (tools/embed_assets): the table it writes, compiled and loaded.  A
 * directory of files (in folders, binary, empty, odd names, hidden ones) goes through
 * the tool; its C file is compiled with the build's compiler, strict warnings as
 * errors, into a shared object that the test opens to compare each asset's path,
 * content type, bytes, size and ETag with the files.  A directory that does not
 * exist, or is empty, gives an empty table that compiles too; bad arguments are a
 * usage error. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/sha256.h"
#include "fixture.h"
#include "router/dashboard_assets.h"

/* Runs argv (argv[0] a path), its output to /dev/null unless quiet is false; the exit
 * status, or -1. */
static int run(char *const argv[], bool quiet)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (quiet && !freopen("/dev/null", "w", stderr))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* The table of dir, through the tool and the compiler, loaded: *handle to dlclose. */
static bool load_table(const char *dir, const char *work, void **handle, const llmr_asset **assets,
                       size_t *count)
{
    *handle = NULL;
    char c_file[512], so_file[512], include[512];
    snprintf(c_file, sizeof c_file, "%s/table.c", work);
    snprintf(so_file, sizeof so_file, "%s/table.so", work);
    snprintf(include, sizeof include, "-I%s", LLMR_SOURCE_DIR "/src");
    char *tool[] = {LLMR_EMBED_ASSETS, c_file, (char *)dir, "t", NULL};
    int rc = run(tool, false);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0)
        return false;
    char *cc[] = {LLMR_TEST_CC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC", "-shared", include,
                  "-o", so_file, c_file, NULL};
    rc = run(cc, false);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0)
        return false;
    *handle = dlopen(so_file, RTLD_NOW | RTLD_LOCAL);
    CHECK(*handle != NULL);
    if (!*handle)
        return false;
    *assets = dlsym(*handle, "t_assets");
    const size_t *n = dlsym(*handle, "t_asset_count");
    CHECK(*assets != NULL && n != NULL);
    if (!*assets || !n)
        return false;
    *count = *n;
    return true;
}

typedef struct expected {
    const char *path, *type;
} expected;

TEST(files_become_the_table)
{
    const char *dir = fx_tmpdir(), *work = fx_tmpdir();
    unsigned char all[512];
    for (size_t i = 0; i < sizeof all; i++)
        all[i] = (unsigned char)(i * 7 + 3);
    all[0] = 0;
    all[1] = 0xff;
    mkdir(fx_path(dir, "img"), 0755);
    mkdir(fx_path(dir, "img/deep"), 0755);
    mkdir(fx_path(dir, ".git"), 0755);
    fx_write_text(dir, "index.html", "<!doctype html>\n<p class=\"x\">a \\ b ?\?/ c ?\?= d</p>\n");
    fx_write_text(dir, "img/logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n");
    fx_write(dir, "img/deep/raw.bin", all, sizeof all);
    fx_write_text(dir, "app.JS", "console.log('caps');\n");
    fx_write(dir, "empty.css", "", 0);
    fx_write_text(dir, "we\"ird?na\\me.json", "{}\n");
    fx_write(dir, "favicon.ico", all, 40);
    fx_write(dir, "pic.png", all + 100, 60);
    fx_write(dir, "f.woff2", all + 7, 33);
    fx_write_text(dir, "noext", "plain\n");
    fx_write_text(dir, "caf\xc3\xa9.txt", "utf-8 name\n");
    fx_write_text(dir, ".hidden", "left out\n");
    fx_write_text(dir, ".git/config", "left out\n");

    /* strcmp order */
    static const expected WANT[] = {
        {"app.JS", "text/javascript; charset=utf-8"},
        {"caf\xc3\xa9.txt", "text/plain; charset=utf-8"},
        {"empty.css", "text/css; charset=utf-8"},
        {"f.woff2", "font/woff2"},
        {"favicon.ico", "image/x-icon"},
        {"img/deep/raw.bin", "application/octet-stream"},
        {"img/logo.svg", "image/svg+xml"},
        {"index.html", "text/html; charset=utf-8"},
        {"noext", "application/octet-stream"},
        {"pic.png", "image/png"},
        {"we\"ird?na\\me.json", "application/json"},
    };
    size_t n_want = sizeof WANT / sizeof WANT[0];
    void *h;
    const llmr_asset *t;
    size_t n;
    if (!load_table(dir, work, &h, &t, &n))
        return;
    CHECK_EQ_INT(n, n_want);
    for (size_t i = 0; i < n && i < n_want; i++) {
        CHECK_EQ_STR(t[i].path, WANT[i].path);
        CHECK_EQ_STR(t[i].content_type, WANT[i].type);
        FILE *f = fopen(fx_path(dir, WANT[i].path), "rb");
        unsigned char buf[1024];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        CHECK(f != NULL);
        CHECK_EQ_INT(t[i].size, len);
        CHECK(t[i].data != NULL && memcmp(t[i].data, buf, len) == 0);
        llmr_sha256 c;
        uint8_t digest[32];
        char hex[65], etag[24];
        llmr_sha256_init(&c);
        llmr_sha256_update(&c, buf, len);
        llmr_sha256_final(&c, digest);
        llmr_sha256_hex(digest, hex);
        snprintf(etag, sizeof etag, "\"%.16s\"", hex);
        CHECK_EQ_STR(t[i].etag, etag);
    }
    dlclose(h);
}

TEST(no_files_no_table)
{
    const char *work = fx_tmpdir(), *empty = fx_tmpdir();
    mkdir(fx_path(empty, ".cache"), 0755);
    fx_write_text(empty, ".cache/x", "hidden\n");
    const char *dirs[] = {fx_path(work, "does-not-exist"), empty};
    for (size_t i = 0; i < 2; i++) {
        void *h;
        const llmr_asset *t;
        size_t n = 99;
        if (!load_table(dirs[i], work, &h, &t, &n))
            continue;
        CHECK_EQ_INT(n, 0);
        dlclose(h);
    }
}

TEST(bad_arguments)
{
    const char *work = fx_tmpdir();
    char out[512];
    snprintf(out, sizeof out, "%s/x.c", work);
    char *none[] = {LLMR_EMBED_ASSETS, NULL};
    char *bad_name[] = {LLMR_EMBED_ASSETS, out, (char *)work, "not a name", NULL};
    char *unwritable[] = {LLMR_EMBED_ASSETS, "/nonexistent-dir/x.c", (char *)work, NULL};
    CHECK_EQ_INT(run(none, true), 2);
    CHECK_EQ_INT(run(bad_name, true), 2);
    CHECK_EQ_INT(run(unwritable, true), 1);
    CHECK(access(out, F_OK) != 0);
}

int main(void)
{
    RUN(files_become_the_table);
    RUN(no_files_no_table);
    RUN(bad_arguments);
    return llmr_test_finish();
}
