/* Cross-origin requests (CORS) for the router and the node: which origins a browser app
 * may call from (--cors-origins), the headers an allowed one gets, and the answer to a
 * browser's preflight.  Off by default: without a list no CORS header is ever sent.
 *
 * The list is comma-separated origins as browsers send them ("https://app.example.com",
 * "http://localhost:3000": scheme, host and port, no path), or "*" for any.  For a
 * request whose Origin header is in the list, every answer carries
 * Access-Control-Allow-Origin (the origin itself, or "*" with "*"), Vary: Origin and
 * Access-Control-Expose-Headers; a preflight (OPTIONS with
 * Access-Control-Request-Method) is answered 204 here, before any key is checked, with
 * Allow-Methods, Allow-Headers (Authorization, Content-Type and the headers the OpenAI
 * SDKs send) and Max-Age.  A preflight from an origin not in the list is answered 403
 * with no CORS header, so the browser refuses the real request. */
#ifndef LLMR_HTTP_HTTP_CORS_H
#define LLMR_HTTP_HTTP_CORS_H

#include <stdbool.h>

#include "common/strbuf.h"
#include "http/http_server.h"
#include "llmr/status.h"

typedef struct llmr_http_cors llmr_http_cors;

/* Parses the list.  NULL or "" (CORS off): *out = NULL and LLMR_OK.  An entry that is
 * not "*" nor an origin (http:// or https://, a host, no path): INVALID_ARGUMENT and err
 * names it. */
llmr_status llmr_http_cors_new(const char *list, llmr_http_cors **out, llmr_strbuf *err);
void llmr_http_cors_free(llmr_http_cors *c);

/* Whether origin is allowed (false when c is NULL). */
bool llmr_http_cors_allows(const llmr_http_cors *c, const char *origin);

/* Call first in a handler: adds the CORS headers to reply when the request's Origin is
 * allowed, and answers a preflight itself.  True when it answered (the handler returns
 * then); false otherwise (always with c NULL). */
bool llmr_http_cors_handle(const llmr_http_cors *c, const llmr_http_request *req, llmr_http_reply *reply);

#endif
