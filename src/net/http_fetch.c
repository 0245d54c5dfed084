/* Downloading one URL into a file: see http_fetch.h.
 *
 * The part file and its running SHA-256 live across tries: bytes already on disk are
 * hashed once, then every try asks for the rest with a Range request
 * (CURLOPT_RESUME_FROM_LARGE) and hashes what it appends.  A server that cannot serve
 * the range (a 200 answer, a Content-Range that starts elsewhere, a 416 for a file
 * that is not complete) makes the file start over from byte 0. */
#include "net/http_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/log.h"
#include "common/sha256.h"
#include "net/curl_handle.h"

#define COMPONENT "fetch"

#ifndef LLMR_VERSION
#define LLMR_VERSION "0.0.0-dev"
#endif

/* ---- libcurl's process-wide setup, once -------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool curl_ready(void)
{
    pthread_once(&curl_once, curl_init_once);
    return curl_init_result == CURLE_OK;
}

void llmr_fetch_options_default(llmr_fetch_options *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_s = 10;
    o->stall_timeout_s = 30;
    o->retries = 3;
}

/* ---- one transfer ------------------------------------------------------------------ */

typedef enum stop_reason {
    STOP_NONE,
    STOP_DISK,      /* writing the part file failed (stop_errno) */
    STOP_TOO_LONG,  /* the body runs past expected_size */
    STOP_BAD_RANGE, /* a 206 whose Content-Range does not start where we asked */
} stop_reason;

typedef struct fetch_state {
    const llmr_fetch_options *o;
    CURL *curl;
    int fd;
    llmr_sha256 sha;   /* of bytes [0, have) of the file */
    uint64_t have;     /* bytes in the file */
    /* per try */
    uint64_t asked;    /* the offset this try asked for (0: the whole file) */
    bool body_started; /* the answer's status was looked at */
    bool to_file;      /* the body goes to the file (200 or 206) */
    bool resumed;      /* a 206: the body starts at `asked` */
    bool range_seen;   /* the last answer's Content-Range */
    uint64_t range_start, range_total;
    bool range_total_known;
    stop_reason stop;
    int stop_errno;
    bool cancelled;
    bool stalled;      /* no byte for stall_timeout_s */
    uint64_t last_have, last_change_ms;
    uint64_t reported; /* `have` at the last progress call, UINT64_MAX: none yet */
} fetch_state;

/* Empties the part file and the digest: the next bytes are the file's first. */
static bool restart_file(fetch_state *s)
{
    llmr_sha256_init(&s->sha);
    s->have = 0;
    return ftruncate(s->fd, 0) == 0;
}

static bool parse_u64(const char **p, uint64_t *out)
{
    const char *q = *p;
    if (*q < '0' || *q > '9')
        return false;
    uint64_t v = 0;
    while (*q >= '0' && *q <= '9') {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        q++;
    }
    *out = v;
    *p = q;
    return true;
}

/* "Content-Range: bytes 100-199/1000" or "bytes * /1000" (without the space). */
static void parse_content_range(fetch_state *s, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    if (strncasecmp(v, "bytes", 5) != 0)
        return;
    v += 5;
    while (*v == ' ')
        v++;
    uint64_t a = 0, b = 0, t = 0;
    if (*v == '*') {
        v++;
    } else {
        if (!parse_u64(&v, &a) || *v != '-')
            return;
        v++;
        if (!parse_u64(&v, &b))
            return;
        s->range_seen = true;
        s->range_start = a;
    }
    if (*v != '/')
        return;
    v++;
    if (parse_u64(&v, &t)) {
        s->range_total = t;
        s->range_total_known = true;
    }
}

static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    fetch_state *s = user;
    size_t len = size * n;
    /* A status line starts a new answer (a redirect's, or the final one). */
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        s->range_seen = false;
        s->range_total_known = false;
        return len;
    }
    static const char name[] = "content-range:";
    size_t nl = sizeof name - 1;
    if (len > nl && len < 256 && strncasecmp(data, name, nl) == 0) {
        char line[256];
        memcpy(line, data + nl, len - nl);
        line[len - nl] = '\0';
        parse_content_range(s, line);
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    fetch_state *s = user;
    size_t len = size * n;
    if (!s->body_started) {
        s->body_started = true;
        long code = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code == 206) {
            if (!s->range_seen || s->range_start != s->have) {
                s->stop = STOP_BAD_RANGE;
                return 0;
            }
            s->to_file = true;
            s->resumed = true;
        } else if (code == 200) {
            /* The whole body: what the file held is replaced. */
            if (s->have > 0 && !restart_file(s)) {
                s->stop = STOP_DISK;
                s->stop_errno = errno;
                return 0;
            }
            s->to_file = true;
        }
    }
    if (!s->to_file)
        return len; /* an error page: read and dropped */
    uint64_t expected = s->o->expected_size;
    if (expected > 0 && s->have + len > expected) {
        s->stop = STOP_TOO_LONG;
        return 0;
    }
    if (len > 0 && !llmr_pwrite_all(s->fd, data, len, s->have)) {
        s->stop = STOP_DISK;
        s->stop_errno = errno;
        return 0;
    }
    llmr_sha256_update(&s->sha, data, len);
    s->have += len;
    return len;
}

static unsigned stall_seconds(const llmr_fetch_options *o)
{
    return o->stall_timeout_s ? o->stall_timeout_s : 30;
}

/* Calls the caller's progress when the bytes on disk changed; false to abort. */
static bool report(fetch_state *s, uint64_t total)
{
    if (!s->o->progress || s->reported == s->have)
        return true;
    s->reported = s->have;
    if (!s->o->progress(s->o->user, s->have, total)) {
        s->cancelled = true;
        return false;
    }
    return true;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    fetch_state *s = user;
    /* libcurl's own low-speed check averages over several seconds; this one counts
     * from the last byte (libcurl calls here about once a second while idle). */
    uint64_t now = llmr_now_ms();
    if (s->have != s->last_have) {
        s->last_have = s->have;
        s->last_change_ms = now;
    } else if (now - s->last_change_ms >= 1000ull * stall_seconds(s->o)) {
        s->stalled = true;
        return 1;
    }
    uint64_t total = s->o->expected_size;
    if (total == 0 && dltotal > 0)
        total = (s->resumed ? s->asked : 0) + (uint64_t)dltotal;
    return report(s, total) ? 0 : 1;
}

/* ---- the tries --------------------------------------------------------------------- */

typedef enum try_result {
    TRY_DONE,
    TRY_RETRY,   /* a network error or a 5xx: try again, resuming */
    TRY_RESTART, /* the server cannot resume: start the file over, try again */
    TRY_FAIL,    /* final: status and err set */
} try_result;

static bool is_client_error(long code)
{
    return code >= 400 && code < 500;
}

static try_result one_try(fetch_state *s, struct curl_slist *headers, llmr_strbuf *why,
                          llmr_status *status)
{
    const llmr_fetch_options *o = s->o;
    char errbuf[CURL_ERROR_SIZE];
    errbuf[0] = '\0';
    s->asked = s->have;
    s->body_started = false;
    s->to_file = false;
    s->resumed = false;
    s->range_seen = false;
    s->range_total_known = false;
    s->stop = STOP_NONE;
    s->stalled = false;
    s->last_have = s->have;
    s->last_change_ms = llmr_now_ms();

    CURL *c = llmr_curl_new();
    if (!c) {
        llmr_strbuf_puts(why, "cannot start a transfer (libcurl: out of memory?)");
        *status = LLMR_IO;
        return TRY_FAIL;
    }
    s->curl = c;
    curl_easy_setopt(c, CURLOPT_URL, o->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_USERAGENT, "llmr/" LLMR_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)(o->connect_timeout_s ? o->connect_timeout_s : 10));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)stall_seconds(o));
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (headers)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (s->have > 0)
        curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)s->have);

    CURLcode res = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    s->curl = NULL;

    if (s->cancelled) {
        llmr_strbuf_puts(why, "cancelled");
        *status = LLMR_CANCELLED;
        return TRY_FAIL;
    }
    switch (s->stop) {
    case STOP_DISK:
        llmr_strbuf_printf(why, "writing %s failed: %s", o->part_path, strerror(s->stop_errno));
        *status = LLMR_IO;
        return TRY_FAIL;
    case STOP_TOO_LONG:
        llmr_strbuf_printf(why, "HTTP %ld: the body is longer than the expected %llu bytes", code,
                           (unsigned long long)o->expected_size);
        restart_file(s);
        *status = LLMR_MODEL_CORRUPT;
        return TRY_FAIL;
    case STOP_BAD_RANGE:
        llmr_strbuf_printf(why, "HTTP %ld: asked for bytes from %llu, the answer starts elsewhere",
                           code, (unsigned long long)s->asked);
        return TRY_RESTART;
    case STOP_NONE:
        break;
    }
    if (res == CURLE_RANGE_ERROR) {
        llmr_strbuf_printf(why, "HTTP %ld: the server does not resume (Range) requests", code);
        return TRY_RESTART;
    }
    if (res == CURLE_OK || code >= 400) {
        if (code == 200 || code == 206) {
            if (o->expected_size > 0 && s->have != o->expected_size) {
                llmr_strbuf_printf(why, "HTTP %ld: the body ended after %llu of %llu bytes", code,
                                   (unsigned long long)s->have,
                                   (unsigned long long)o->expected_size);
                return TRY_RETRY;
            }
            return TRY_DONE;
        }
        if (code == 416) {
            /* Nothing left to send: done when the file is already whole. */
            if ((o->expected_size > 0 && s->have == o->expected_size) ||
                (o->expected_size == 0 && s->range_total_known && s->range_total == s->have))
                return TRY_DONE;
            llmr_strbuf_printf(why, "HTTP 416: the server has no bytes from %llu",
                               (unsigned long long)s->asked);
            return TRY_RESTART;
        }
        if (code == 404) {
            llmr_strbuf_puts(why, "HTTP 404: the server has no such file");
            *status = LLMR_NOT_FOUND;
            return TRY_FAIL;
        }
        if (is_client_error(code)) {
            llmr_strbuf_printf(why, "HTTP %ld: the server refused the request", code);
            *status = LLMR_IO;
            return TRY_FAIL;
        }
        if (code >= 500) {
            llmr_strbuf_printf(why, "HTTP %ld: server error", code);
            return TRY_RETRY;
        }
        llmr_strbuf_printf(why, "HTTP %ld: not a file (wanted 200 or 206)", code);
        *status = LLMR_IO;
        return TRY_FAIL;
    }
    /* A network failure. */
    if (s->stalled || (res == CURLE_OPERATION_TIMEDOUT && s->body_started))
        llmr_strbuf_printf(why, "stalled: no byte for %u seconds (after %llu bytes)",
                           stall_seconds(o), (unsigned long long)s->have);
    else
        llmr_strbuf_printf(why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(res));
    if (code > 0)
        llmr_strbuf_printf(why, " (HTTP %ld)", code);
    if (res == CURLE_UNSUPPORTED_PROTOCOL || res == CURLE_URL_MALFORMAT ||
        res == CURLE_TOO_MANY_REDIRECTS) {
        *status = LLMR_IO;
        return TRY_FAIL;
    }
    return TRY_RETRY;
}

/* Opens the part file and hashes what it holds.  One longer than expected starts
 * over. */
static llmr_status open_part(fetch_state *s, llmr_strbuf *err)
{
    const llmr_fetch_options *o = s->o;
    s->fd = open(o->part_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->fd < 0) {
        llmr_strbuf_printf(err, "cannot open %s: %s", o->part_path, strerror(errno));
        return LLMR_IO;
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        llmr_strbuf_printf(err, "%s is not a regular file", o->part_path);
        return LLMR_IO;
    }
    llmr_sha256_init(&s->sha);
    s->have = 0;
    uint64_t size = (uint64_t)st.st_size;
    if (o->expected_size > 0 && size > o->expected_size) {
        llmr_log_warn(COMPONENT, "%s holds %llu bytes, more than the expected %llu: starting over",
                      o->part_path, (unsigned long long)size,
                      (unsigned long long)o->expected_size);
        size = 0;
    }
    uint8_t *buf = malloc(1 << 20);
    if (!buf) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    while (s->have < size) {
        size_t want = size - s->have < (1u << 20) ? (size_t)(size - s->have) : (1u << 20);
        if (!llmr_pread_all(s->fd, buf, want, s->have)) {
            /* Shorter than fstat said, or unreadable: keep what was hashed. */
            break;
        }
        llmr_sha256_update(&s->sha, buf, want);
        s->have += want;
    }
    free(buf);
    if (ftruncate(s->fd, (off_t)s->have) != 0) {
        llmr_strbuf_printf(err, "cannot truncate %s: %s", o->part_path, strerror(errno));
        return LLMR_IO;
    }
    return LLMR_OK;
}

llmr_status llmr_fetch(const llmr_fetch_options *o, char sha256_hex[65], uint64_t *size,
                       llmr_strbuf *err)
{
    sha256_hex[0] = '\0';
    if (size)
        *size = 0;
    if (!curl_ready()) {
        llmr_strbuf_printf(err, "GET %s: libcurl failed to initialise", o->url);
        return LLMR_IO;
    }
    fetch_state s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.fd = -1;
    s.reported = UINT64_MAX;
    llmr_status status = open_part(&s, err);
    struct curl_slist *headers = NULL;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    if (status != LLMR_OK)
        goto done;
    if (o->auth_header && o->auth_header[0]) {
        headers = curl_slist_append(NULL, o->auth_header);
        if (!headers) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto done;
        }
    }
    if (!report(&s, o->expected_size)) {
        llmr_strbuf_printf(err, "GET %s: cancelled", o->url);
        status = LLMR_CANCELLED;
        goto done;
    }

    unsigned tries = 0, restarts = 0;
    for (;;) {
        llmr_strbuf_reset(&why);
        status = LLMR_IO;
        tries++;
        try_result r = one_try(&s, headers, &why, &status);
        if (r == TRY_DONE) {
            status = LLMR_OK;
            break;
        }
        if (r == TRY_FAIL) {
            llmr_strbuf_printf(err, "GET %s: %s", o->url, llmr_strbuf_cstr(&why));
            goto done;
        }
        if (r == TRY_RESTART) {
            if (!restart_file(&s)) {
                llmr_strbuf_printf(err, "cannot truncate %s: %s", o->part_path, strerror(errno));
                status = LLMR_IO;
                goto done;
            }
            /* Starting over is not a failed try, but only once or twice. */
            if (restarts++ < 2) {
                llmr_log_info(COMPONENT, "GET %s: %s: starting the file over", o->url, why.data);
                tries--;
                continue;
            }
        }
        if (tries > o->retries) {
            llmr_strbuf_printf(err, "GET %s: %s (after %u %s)", o->url, llmr_strbuf_cstr(&why),
                               tries, tries == 1 ? "try" : "tries");
            status = LLMR_IO;
            goto done;
        }
        uint64_t wait_ms = 250u << (tries - 1 < 5 ? tries - 1 : 5);
        if (wait_ms > 5000)
            wait_ms = 5000;
        llmr_log_warn(COMPONENT, "GET %s: %s: try %u of %u again in %llu ms (resuming at %llu)",
                      o->url, llmr_strbuf_cstr(&why), tries + 1, o->retries + 1,
                      (unsigned long long)wait_ms, (unsigned long long)s.have);
        llmr_sleep_ms(wait_ms);
    }

    if (fsync(s.fd) != 0) {
        llmr_strbuf_printf(err, "cannot flush %s to disk: %s", o->part_path, strerror(errno));
        status = LLMR_IO;
        goto done;
    }
    if (!report(&s, o->expected_size ? o->expected_size : s.have)) {
        llmr_strbuf_printf(err, "GET %s: cancelled", o->url);
        status = LLMR_CANCELLED;
        goto done;
    }
    uint8_t digest[32];
    llmr_sha256_final(&s.sha, digest);
    llmr_sha256_hex(digest, sha256_hex);
    if (size)
        *size = s.have;

done:
    if (s.fd >= 0 && close(s.fd) != 0 && status == LLMR_OK) {
        llmr_strbuf_printf(err, "closing %s failed: %s", o->part_path, strerror(errno));
        status = LLMR_IO;
    }
    if (status != LLMR_OK)
        sha256_hex[0] = '\0';
    curl_slist_free_all(headers);
    llmr_strbuf_free(&why);
    return status;
}

/* ---- URLs -------------------------------------------------------------------------- */

bool llmr_url_http_host(const char *url, char *host, size_t cap)
{
    if (cap == 0 || !curl_ready())
        return false;
    CURLU *u = curl_url();
    if (!u)
        return false;
    bool ok = false;
    char *scheme = NULL, *h = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        goto done;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
        goto done;
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
        goto done;
    const char *p = h;
    size_t n = strlen(p);
    if (n >= 2 && p[0] == '[' && p[n - 1] == ']') {
        p++;
        n -= 2;
    }
    if (n == 0 || n >= cap)
        goto done;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        host[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    host[n] = '\0';
    ok = true;
done:
    curl_free(scheme);
    curl_free(h);
    curl_url_cleanup(u);
    return ok;
}
