/* The node's handle on one engine worker process (worker_main.h is the other end):
 * starting it, control calls that wait for a reply (open, estimate, load), the
 * frames that do not (submit, cancel, ping, exit), and noticing its end.
 *
 * Each worker has a reader thread that delivers token events and pongs through the
 * callbacks, in the order the worker sent them, and calls on_exit once, after the
 * last event, when the process has ended (it reaps it).  Callbacks run on that
 * thread and must not call llmr_worker_free on their own worker. */
#ifndef LLMR_ENGINE_HOST_WORKER_CLIENT_H
#define LLMR_ENGINE_HOST_WORKER_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "engine_host/worker_protocol.h"

typedef struct llmr_worker llmr_worker;

typedef struct llmr_worker_callbacks {
    void *ctx;
    void (*on_event)(void *ctx, llmr_worker *w, uint64_t request_id, const llmr_wire_event *ev);
    void (*on_pong)(void *ctx, llmr_worker *w, const llmr_wire_pong *pong);
    /* wait_status as waitpid reports it. */
    void (*on_exit)(void *ctx, llmr_worker *w, int wait_status);
} llmr_worker_callbacks;

/* Starts `exe engine-worker --fd 3 --name model_name`.  `tag` is the caller's, kept
 * for it (llmr_worker_tag). */
llmr_status llmr_worker_start(const char *exe, const char *model_name,
                              const llmr_worker_callbacks *callbacks, void *tag,
                              llmr_worker **out, llmr_strbuf *err);

/* Sends a control message and waits up to timeout_ms for the reply, one call at a
 * time per worker.  Returns the status the worker replied with (its message in err)
 * and gives the reply object to *reply (may be NULL).  LLMR_TIMEOUT when no reply
 * came in time; LLMR_INTERNAL when the worker ended first (err says how). */
llmr_status llmr_worker_call(llmr_worker *w, llmr_wire_type type, const json_t *msg,
                             unsigned timeout_ms, json_t **reply, llmr_strbuf *err);

/* Sends one frame without waiting.  LLMR_IO when the worker is gone. */
llmr_status llmr_worker_send(llmr_worker *w, llmr_wire_type type, uint64_t request_id,
                             const void *payload, size_t len);

/* SIGKILL; the reader thread then sees the end and calls on_exit. */
void llmr_worker_kill(llmr_worker *w);

bool llmr_worker_exited(const llmr_worker *w);
int llmr_worker_pid(const llmr_worker *w);
void *llmr_worker_tag(const llmr_worker *w);

/* Waits up to timeout_ms for the process to end by itself, then kills it, joins the
 * reader thread and frees the handle. */
void llmr_worker_free(llmr_worker *w, unsigned timeout_ms);

/* "exited with status 1", "was killed by signal 11 (SIGSEGV)". */
void llmr_worker_describe_exit(int wait_status, llmr_strbuf *out);

#endif
