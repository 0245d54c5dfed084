/* The node's control socket: a Unix socket in DATA_DIR/run (mode 0700, so only the
 * node's user reaches it) where `llmr node status|reload-plugins|load|unload|generate`
 * talk to a running node.  One JSON object per line each way:
 *
 *   {"op": "status"}                      -> the engine host's status
 *   {"op": "metrics"}                     -> {"metrics": Prometheus text}
 *   {"op": "reload-plugins"}              -> the reload report
 *   {"op": "load", "model": M}            -> {"ok": true} or {"error": ..., "status": ...}
 *   {"op": "unload", "model": M}
 *   {"op": "generate", "model": M, "prompt_ids": [...], "max_tokens": N,
 *    "temperature": T, "seed": S, "stop": [...], "stop_ids": [...], "logprobs": K}
 *                                          -> {"event": "token", ...} lines, then
 *                                             {"event": "end", ...}
 *
 * A client that goes away cancels its generation.  Every error is a line
 * {"error": sentence, "status": CODE}; the connection then closes. */
#ifndef LLMR_NODE_CONTROL_SERVER_H
#define LLMR_NODE_CONTROL_SERVER_H

#include "common/strbuf.h"
#include "engine_host/engine_host.h"

#define LLMR_CONTROL_LINE_MAX (1u << 20)

typedef struct llmr_control_server llmr_control_server;

/* Binds `path` (a stale socket file is replaced; a live one is an error: another
 * node runs there) and serves on a thread of its own. */
llmr_status llmr_control_server_start(const char *path, llmr_engine_host *host,
                                      llmr_control_server **out, llmr_strbuf *err);
/* Stops accepting, ends open connections, removes the socket file. */
void llmr_control_server_stop(llmr_control_server *s);

/* The socket path for a data directory (DATA_DIR/run/node.sock), or NULL with err
 * set when it is too long for a Unix socket. */
char *llmr_control_socket_path(const char *data_dir, llmr_strbuf *err);

#endif
