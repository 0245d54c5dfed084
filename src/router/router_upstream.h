/* The router's transfers to its nodes (router_upstream.c): one thread runs one libcurl
 * multi handle, and every proxied request's transfer to a node runs on it, so a running
 * stream costs no thread of its own, and the connections to the nodes are kept in the
 * multi handle's cache and reused by later requests to the same node.
 *
 * Any thread adds a transfer (an easy handle it made with llmr_curl_new and set up, its
 * callbacks included); from then on the loop's thread runs the handle's callbacks
 * (write, progress) and, when the transfer ends, done(user, easy, result) with the
 * handle out of the multi handle (done may clean it up).  cancel(user), when given, is
 * asked on the loop's thread every ROUTER_UPSTREAM_CHECK_MS while the transfer runs, and
 * at once after router_upstream_wake: true stops the transfer (its connection closes,
 * which tells the node the request is cancelled) and done then gets
 * CURLE_ABORTED_BY_CALLBACK.  Callbacks run one at a time and must not block for long:
 * every other transfer waits meanwhile. */
#ifndef LLMR_ROUTER_ROUTER_UPSTREAM_H
#define LLMR_ROUTER_ROUTER_UPSTREAM_H

#include <curl/curl.h>
#include <stdbool.h>

#define ROUTER_UPSTREAM_CHECK_MS 100

typedef struct router_upstream router_upstream;
typedef void (*router_upstream_done_fn)(void *user, CURL *easy, CURLcode result);
typedef bool (*router_upstream_cancel_fn)(void *user);

/* Starts the loop's thread; NULL when it cannot (out of memory, no thread). */
router_upstream *router_upstream_new(void);
/* Hands easy to the loop; false (nothing taken: no callback will run) when the loop
 * stops or is out of memory. */
bool router_upstream_add(router_upstream *u, CURL *easy, router_upstream_done_fn done,
                         router_upstream_cancel_fn cancel, void *user);
/* A transfer whose write callback paused it (CURL_WRITEFUNC_PAUSE) goes on: the loop
 * unpauses the running transfer whose user this is (none: nothing), and the paused
 * bytes come to the write callback again.  Any thread. */
void router_upstream_resume(router_upstream *u, void *user);
/* The loop asks every running transfer's cancel now (a client left, the router stops). */
void router_upstream_wake(router_upstream *u);
/* How many transfers the loop runs now (for tests and metrics). */
unsigned router_upstream_running(router_upstream *u);
/* Stops the loop (a transfer still running is cancelled: its done runs) and frees it.
 * NULL: nothing. */
void router_upstream_free(router_upstream *u);

#endif
