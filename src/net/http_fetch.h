/* Downloads one URL into a file with libcurl: resuming a partial file with an HTTP
 * Range request, hashing (SHA-256) as the bytes arrive, reporting progress, with
 * retries and a stall timeout.  Used by the node's model sync. */
#ifndef LLMR_NET_HTTP_FETCH_H
#define LLMR_NET_HTTP_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* Progress: bytes of this file on disk so far and its expected size (0: unknown).
 * Return false to abort (CANCELLED). */
typedef bool (*llmr_fetch_progress_fn)(void *user, uint64_t have, uint64_t total);

typedef struct llmr_fetch_options {
    const char *url;
    const char *part_path;      /* where the bytes go; an existing file is resumed */
    uint64_t expected_size;     /* 0: unknown */
    const char *auth_header;    /* "Authorization: Bearer ..." or NULL */
    unsigned connect_timeout_s; /* default 10 */
    unsigned stall_timeout_s;   /* no byte for this long fails the try; default 30 */
    unsigned retries;           /* further tries after a failed one (each resumes); default 3 */
    llmr_fetch_progress_fn progress;
    void *user;
} llmr_fetch_options;

void llmr_fetch_options_default(llmr_fetch_options *o);

/* Fetches o->url into o->part_path, resuming what is there (a server that ignores the
 * Range starts the file over).  On success the file holds the whole body and
 * sha256_hex its digest (of the whole file, resumed bytes included).  A 4xx answer is
 * NOT_FOUND (404) or IO without retries; network errors and 5xx are retried.  err
 * says what failed, with the URL and the HTTP status. */
llmr_status llmr_fetch(const llmr_fetch_options *o, char sha256_hex[65], uint64_t *size,
                       llmr_strbuf *err);

/* The host of an http:// or https:// URL, lowercased, without port, user or brackets
 * around an IPv6 address, parsed as the fetch itself will parse it.  False for another
 * scheme, a URL that does not parse, or a host longer than cap - 1. */
bool llmr_url_http_host(const char *url, char *host, size_t cap);

#endif
