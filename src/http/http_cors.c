/* CORS headers and preflights: see http_cors.h. */
#include "http/http_cors.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/list_item.h"

#define MAX_ORIGIN 256

/* What a preflight is told.  The headers are what the OpenAI SDKs send (the Stainless
 * ones, OpenAI-*) and what llmr reads (X-Request-Id); Max-Age is the most Chromium
 * keeps. */
#define ALLOW_METHODS "GET, POST, PATCH, DELETE, OPTIONS"
#define ALLOW_HEADERS                                                                                    \
    "Authorization, Content-Type, Accept, OpenAI-Organization, OpenAI-Project, OpenAI-Beta, "           \
    "X-Request-Id, X-Stainless-Arch, X-Stainless-Lang, X-Stainless-OS, X-Stainless-Package-Version, "   \
    "X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, "  \
    "X-Stainless-Helper-Method, X-Stainless-Poll-Helper, X-Stainless-Custom-Poll-Interval"
#define EXPOSE_HEADERS "X-Request-Id, Retry-After"
#define MAX_AGE "7200"

struct llmr_http_cors {
    bool any;        /* "*" */
    size_t n;
    char **origins;  /* without a trailing '/' */
};

void llmr_http_cors_free(llmr_http_cors *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->origins[i]);
    free(c->origins);
    free(c);
}

/* "http://host[:port]" or "https://...": a scheme, a host of letters, digits, '.', '-',
 * '_' or an IPv6 literal in brackets, an optional port; nothing after. */
static bool is_origin(const char *s, size_t n)
{
    size_t skip = n >= 7 && !strncasecmp(s, "http://", 7) ? 7 : n >= 8 && !strncasecmp(s, "https://", 8) ? 8 : 0;
    if (!skip || n == skip || n > MAX_ORIGIN)
        return false;
    const char *p = s + skip, *end = s + n;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (!close || close == p + 1)
            return false;
        for (const char *q = p + 1; q < close; q++)
            if (!strchr("0123456789abcdefABCDEF:.", *q))
                return false;
        p = close + 1;
    } else {
        const char *start = p;
        while (p < end && (strchr(".-_", *p) || (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z')))
            p++;
        if (p == start)
            return false;
    }
    if (p < end && *p == ':') {
        const char *digits = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == digits || p - digits > 5)
            return false;
    }
    return p == end;
}

llmr_status llmr_http_cors_new(const char *list, llmr_http_cors **out, llmr_strbuf *err)
{
    *out = NULL;
    if (!list || !*list)
        return LLMR_OK;
    llmr_http_cors *c = calloc(1, sizeof *c);
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    if (!c || !(c->origins = calloc(cap, sizeof *c->origins))) {
        free(c);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    const char *rest = list, *p;
    size_t n;
    while (llmr_list_next(&rest, &p, &n)) {
        if (n > 0 && p[n - 1] == '/')
            n--; /* "https://app.example.com/": the origin is without it */
        if (n == 1 && *p == '*') {
            c->any = true;
        } else if (is_origin(p, n)) {
            if (!(c->origins[c->n] = strndup(p, n))) {
                llmr_http_cors_free(c);
                llmr_strbuf_puts(err, "out of memory");
                return LLMR_OOM_RAM;
            }
            c->n++;
        } else {
            llmr_strbuf_printf(err, "--cors-origins: \"%.*s\" is not an origin; give origins as a browser sends "
                                    "them (http://HOST[:PORT] or https://HOST[:PORT], no path), comma-separated, "
                                    "or * for any",
                               (int)(n > 80 ? 80 : n), p);
            llmr_http_cors_free(c);
            return LLMR_INVALID_ARGUMENT;
        }
    }
    *out = c;
    return LLMR_OK;
}

bool llmr_http_cors_allows(const llmr_http_cors *c, const char *origin)
{
    if (!c || !origin || !*origin)
        return false;
    if (c->any)
        return true;
    for (size_t i = 0; i < c->n; i++)
        if (!strcasecmp(c->origins[i], origin))
            return true;
    return false;
}

bool llmr_http_cors_handle(const llmr_http_cors *c, const llmr_http_request *req, llmr_http_reply *reply)
{
    if (!c)
        return false;
    const char *origin = llmr_http_request_header(req, "Origin");
    if (!origin)
        return false;
    bool preflight = !strcmp(req->method, "OPTIONS") &&
                     llmr_http_request_header(req, "Access-Control-Request-Method") != NULL;
    if (!llmr_http_cors_allows(c, origin)) {
        if (!preflight)
            return false; /* answered as ever, with no CORS header: the browser keeps it from the page */
        llmr_http_reply_error(reply, 403, "permission_error", NULL, "origin_not_allowed",
                              "This origin is not in the server's --cors-origins list.");
        return true;
    }
    llmr_http_reply_header(reply, "Access-Control-Allow-Origin", c->any ? "*" : origin);
    llmr_http_reply_header(reply, "Vary", "Origin");
    if (!preflight) {
        llmr_http_reply_header(reply, "Access-Control-Expose-Headers", EXPOSE_HEADERS);
        return false;
    }
    llmr_http_reply_header(reply, "Access-Control-Allow-Methods", ALLOW_METHODS);
    llmr_http_reply_header(reply, "Access-Control-Allow-Headers", ALLOW_HEADERS);
    llmr_http_reply_header(reply, "Access-Control-Max-Age", MAX_AGE);
    llmr_http_reply_text(reply, 204, NULL, "", 0);
    return true;
}
