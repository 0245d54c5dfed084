/* Guards for a server that checks no keys (the router's --no-auth): it trusts the
 * loopback interface, so it must make sure a request really is a local program's and
 * not a web page's that a browser sends for it.
 *
 *   - DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1
 *     reaches the port, but its browser sends "Host: evil.example".  Only the loopback
 *     names pass: localhost, 127.0.0.1, [::1] (and the address the server is bound to),
 *     each with the server's own port or none.  A request with no Host header (HTTP/1.0
 *     tools) passes: a browser always sends one.
 *   - Cross-origin writes: a page may POST a "simple" request (a form, text/plain)
 *     without a preflight.  A POST, PUT, PATCH or DELETE whose Origin header is neither
 *     the server's own (its scheme://host:port is what the Host header names) nor
 *     allowed by the CORS list (http_cors.h) is refused.  No Origin header (curl, SDKs)
 *     passes. */
#ifndef LLMR_HTTP_HTTP_LOCAL_H
#define LLMR_HTTP_HTTP_LOCAL_H

#include <stdbool.h>

#include "http/http_cors.h"
#include "http/http_server.h"

/* Whether the Host header value (NULL: none) names this server on loopback: bound is
 * the address the server listens on, port its port. */
bool llmr_http_local_host_ok(const char *host, const char *bound, unsigned port);

/* Whether the request may go on as far as its Origin goes (see above). */
bool llmr_http_local_origin_ok(const llmr_http_cors *cors, const llmr_http_request *req);

/* Both checks; false after answering 403 with an OpenAI-style error (code
 * "forbidden_host" or "cross_origin_write"). */
bool llmr_http_local_guard(const llmr_http_cors *cors, const char *bound, unsigned port,
                           const llmr_http_request *req, llmr_http_reply *reply);

#endif
