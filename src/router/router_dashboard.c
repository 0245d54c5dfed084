/* The dashboard's files (docs/router.md, "The dashboard"): the browser app, embedded
 * in the binary when it was built (dashboard_assets.h).  They are served without a
 * key, since they hold no secret: the app asks the user for a key and reads /v0 with
 * it.
 *
 *   GET /                 302 to /dashboard
 *   GET /dashboard[/]     index.html
 *   GET /dashboard/PATH   that file of the app: 404 for one it lacks, 400 for a path
 *                         holding "..", "//", a backslash or a control character
 *
 * HEAD is answered as GET (without the body); other methods get 405.  Every answer
 * carries a Content-Security-Policy that lets the page load only its own files, talk
 * only to its own router and never be framed, plus nosniff and no-referrer.  Files
 * are sent with Cache-Control: no-cache and an ETag, so a browser revalidates each
 * (a 304 without the body) and never keeps an app older than the router's.  A binary
 * built without the app answers 404 with how to build it. */
#include "router/router_internal.h"

#include <stdio.h>
#include <string.h>

#include "router/dashboard_assets.h"

#define PREFIX "/dashboard"
#define PREFIX_LEN (sizeof PREFIX - 1)

static const char CSP[] = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
                          "script-src 'self'; frame-ancestors 'none'";

static void security_headers(llmr_http_reply *reply)
{
    llmr_http_reply_header(reply, "Content-Security-Policy", CSP);
    llmr_http_reply_header(reply, "X-Content-Type-Options", "nosniff");
    llmr_http_reply_header(reply, "Referrer-Policy", "no-referrer");
}

/* A short HTML page (the texts are the router's own: nothing from the request). */
static void page(llmr_http_reply *reply, unsigned status, const char *title, const char *html)
{
    char body[1024];
    int n = snprintf(body, sizeof body,
                     "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>llmr: %s</title>"
                     "</head>\n<body><h1>%s</h1>\n<p>%s</p></body></html>\n",
                     title, title, html);
    security_headers(reply);
    llmr_http_reply_header(reply, "Cache-Control", "no-cache");
    llmr_http_reply_text(reply, status, "text/html; charset=utf-8", body,
                         n < 0 ? 0 : (size_t)n < sizeof body ? (size_t)n : sizeof body - 1);
}

static const llmr_asset *find_asset(const char *path)
{
    for (size_t i = 0; i < llmr_dashboard_asset_count; i++)
        if (strcmp(llmr_dashboard_assets[i].path, path) == 0)
            return &llmr_dashboard_assets[i];
    return NULL;
}

/* Whether a path under /dashboard/ may name a file: no "..", no empty segment, no
 * backslash, no control character (the server decoded %XX already). */
static bool safe_path(const char *rel)
{
    if (strstr(rel, "..") || strstr(rel, "//") || rel[0] == '/')
        return false;
    for (const unsigned char *p = (const unsigned char *)rel; *p; p++)
        if (*p == '\\' || *p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* Whether the client has this version already (If-None-Match lists its ETag, or *). */
static bool client_has(const llmr_http_request *req, const llmr_asset *a)
{
    const char *h = llmr_http_request_header(req, "If-None-Match");
    return h && a->etag && (strstr(h, a->etag) || strcmp(h, "*") == 0);
}

static void serve_asset(const llmr_http_request *req, llmr_http_reply *reply, const llmr_asset *a)
{
    security_headers(reply);
    llmr_http_reply_header(reply, "Cache-Control", "no-cache");
    if (a->etag)
        llmr_http_reply_header(reply, "ETag", a->etag);
    if (client_has(req, a))
        llmr_http_reply_text(reply, 304, a->content_type, "", 0);
    else
        llmr_http_reply_text(reply, 200, a->content_type, (const char *)a->data, a->size);
}

bool router_dashboard_route(const llmr_http_request *req, llmr_http_reply *reply)
{
    const char *path = req->path;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    if (strcmp(path, "/") == 0) {
        if (!get)
            return false; /* the API's own answer (a key, then 404) */
        llmr_http_reply_header(reply, "Location", PREFIX);
        page(reply, 302, "Moved", "The dashboard is at <a href=\"" PREFIX "\">" PREFIX "</a>.");
        return true;
    }
    if (strncmp(path, PREFIX, PREFIX_LEN) != 0 || (path[PREFIX_LEN] != 0 && path[PREFIX_LEN] != '/'))
        return false;
    if (!get) {
        llmr_http_reply_header(reply, "Allow", "GET, HEAD");
        page(reply, 405, "Method not allowed", "The dashboard's files are read with GET.");
        return true;
    }
    const char *rel = path[PREFIX_LEN] ? path + PREFIX_LEN + 1 : "";
    if (!safe_path(rel)) {
        page(reply, 400, "Bad path", "That path cannot name a file of the dashboard.");
        return true;
    }
    if (llmr_dashboard_asset_count == 0) {
        page(reply, 404, "The dashboard is not built into this binary",
             "This llmr was built without its dashboard. <code>make</code> builds the dashboard with llmr "
             "(the first build needs npm and the npm registry, to fetch what the app is built with); "
             "<code>LLMR_DASHBOARD=OFF</code> leaves it out. The API (/v0, /v1) works either way.");
        return true;
    }
    const llmr_asset *a = find_asset(rel[0] ? rel : "index.html");
    if (!a) {
        page(reply, 404, "Not found", "The dashboard has no such file.");
        return true;
    }
    serve_asset(req, reply, a);
    return true;
}
