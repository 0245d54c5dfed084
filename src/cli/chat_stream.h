/* One streamed chat completion from a running router (POST /v1/chat/completions with
 * "stream": true), for `llmr run MODEL`: the answer's pieces handed to a callback as
 * they come, the reasoning (delta.reasoning_content, gpt-oss's analysis channel) told
 * apart from the answer (delta.content), and the end: done, stopped by the caller,
 * refused (the router's status and message) or cut (a stream error event).  Owns the
 * libcurl handle and the event parsing of the request; the router and the key come
 * from a finished llmr_router_client. */
#ifndef LLMR_CLI_CHAT_STREAM_H
#define LLMR_CLI_CHAT_STREAM_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/router_client.h"

typedef void (*llmr_chat_piece_fn)(void *user, bool reasoning, const char *text, size_t len);

typedef struct llmr_chat_outcome {
    long status;         /* the HTTP status */
    bool stopped;        /* *stop was set: the answer was cut short on purpose */
    char error[512];     /* the router's message (status not 200, or an error event), "" if none */
    char finish[32];     /* the last choice's finish_reason, "" if none came */
} llmr_chat_outcome;

/* Sends body (a chat completion request; "stream" is set here) and hands every piece
 * of the answer to piece as it comes.  While it runs, a non-zero *stop (set by a
 * signal handler) ends the request.  True when an HTTP answer came, whatever its
 * status (*out says how it ended); false when none did, after printing why (no router
 * answers at the URL: how to start one). */
bool llmr_chat_stream(const llmr_router_client *c, json_t *body, volatile sig_atomic_t *stop, llmr_chat_piece_fn piece,
                      void *user, llmr_chat_outcome *out);

#endif
