/* Guards for a server that checks no keys: see http_local.h. */
#include "http/http_local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* host[:port] split: the name (brackets kept for IPv6) into name, and whether a port
 * came, into *port.  false when malformed. */
static bool split_host(const char *h, char *name, size_t size, long *port)
{
    const char *colon;
    if (*h == '[') {
        const char *close = strchr(h, ']');
        if (!close)
            return false;
        colon = close[1] == ':' ? close + 1 : close[1] ? NULL : close + 1;
        if (!colon)
            return false;
    } else {
        colon = strchr(h, ':');
        if (!colon)
            colon = h + strlen(h);
    }
    size_t n = (size_t)(colon - h);
    if (n == 0 || n >= size)
        return false;
    memcpy(name, h, n);
    name[n] = 0;
    *port = -1;
    if (*colon == ':') {
        char *end = NULL;
        *port = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || *port < 0 || *port > 65535)
            return false;
    }
    return true;
}

bool llmr_http_local_host_ok(const char *host, const char *bound, unsigned port)
{
    if (!host)
        return true;
    char name[300];
    long p;
    if (!split_host(host, name, sizeof name, &p))
        return false;
    if (p >= 0 && (unsigned long)p != port)
        return false;
    if (!strcasecmp(name, "localhost") || !strcmp(name, "127.0.0.1") || !strcmp(name, "[::1]"))
        return true;
    if (bound && *bound && strcmp(bound, "0.0.0.0") && strcmp(bound, "::")) {
        char b[300];
        snprintf(b, sizeof b, strchr(bound, ':') ? "[%s]" : "%s", bound);
        return !strcasecmp(name, b);
    }
    return false;
}

static bool is_write(const char *method)
{
    return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH") ||
           !strcmp(method, "DELETE");
}

bool llmr_http_local_origin_ok(const llmr_http_cors *cors, const llmr_http_request *req)
{
    const char *origin = llmr_http_request_header(req, "Origin");
    if (!origin || !is_write(req->method))
        return true;
    if (llmr_http_cors_allows(cors, origin))
        return true;
    const char *host = llmr_http_request_header(req, "Host");
    const char *authority = !strncasecmp(origin, "http://", 7)    ? origin + 7
                            : !strncasecmp(origin, "https://", 8) ? origin + 8
                                                                  : NULL;
    size_t n = authority ? strlen(authority) : 0;
    if (n && authority[n - 1] == '/')
        n--;
    return authority && host && strlen(host) == n && !strncasecmp(authority, host, n);
}

bool llmr_http_local_guard(const llmr_http_cors *cors, const char *bound, unsigned port,
                           const llmr_http_request *req, llmr_http_reply *reply)
{
    const char *host = llmr_http_request_header(req, "Host");
    if (!llmr_http_local_host_ok(host, bound, port)) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "This server checks no keys (--no-auth), so it answers only requests addressed to "
                 "localhost, 127.0.0.1 or [::1] on port %u, not to \"%.200s\".",
                 port, host);
        llmr_http_reply_error(reply, 403, "permission_error", NULL, "forbidden_host", msg);
        return false;
    }
    if (!llmr_http_local_origin_ok(cors, req)) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "This server checks no keys (--no-auth), so it refuses a %s from the web page at "
                 "\"%.200s\": only its own pages and the origins of --cors-origins may change it.",
                 req->method, llmr_http_request_header(req, "Origin"));
        llmr_http_reply_error(reply, 403, "permission_error", NULL, "cross_origin_write", msg);
        return false;
    }
    return true;
}
