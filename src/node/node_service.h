/* `llmr node`: runs a node on this machine: the engine host with the installed
 * engine plugins and the models under DATA_DIR/models, the control socket, and the
 * signals an operator sends (SIGHUP reloads the plugins, SIGINT and SIGTERM stop the
 * node, ending running requests), the HTTP API (node_http.h) and, with a router, the
 * link to it (router_link.h). */
#ifndef LLMR_NODE_NODE_SERVICE_H
#define LLMR_NODE_NODE_SERVICE_H

#include "common/config.h"
#include "engine_host/engine_host.h"
#include "http/http_server.h"

/* The plugin directories the settings give (plugin_dirs, else DATA_DIR/engines and
 * the engines installed beside the llmr binary).  A NULL-terminated array; free
 * with llmr_node_plugin_dirs_free. */
char **llmr_node_plugin_dirs(const llmr_config *cfg, size_t *count);
void llmr_node_plugin_dirs_free(char **dirs);

/* Fills host options from the settings (plugin_dirs must outlive the options). */
void llmr_node_host_options(const llmr_config *cfg, char **plugin_dirs, size_t count,
                            llmr_engine_host_options *o);

/* What `llmr node` takes beyond the common settings (llmr_config). */
typedef struct llmr_node_options {
    const char *router_url;       /* register with this router; NULL: none */
    const char *node_key;         /* presented to the router (Bearer) */
    const char *node_url;         /* how the router reaches this node; NULL: http://HOST:PORT */
    const char *node_name;        /* NULL: the host name */
    const char *api_key;          /* clients of this node's API must present it; NULL: none */
    const char *origin_allowlist; /* hosts a model file may come from directly */
    bool prefer_origin;           /* fetch from an allowed origin before the router */
    const char *local_dirs;       /* directories whose registered models are used in place
                                     (model_in_place.h): comma-separated; NULL none */
    bool allow_cpu;               /* register even without a GPU */
    bool no_http;                 /* no HTTP API (the control socket only) */
    unsigned heartbeat_ms;        /* default 5000 */
    const char *engine_options;   /* load options for every model the node adds (a JSON
                                     object, the engine's options_json); NULL: none */
    unsigned default_max_tokens;  /* a request without max_tokens gets this many at most;
                                     0: LLMR_NODE_DEFAULT_MAX_TOKENS (node_http.h) */
    unsigned shutdown_grace_s;    /* at stop, running requests have this long to finish;
                                     default 30 */
    llmr_http_limits http_limits; /* the HTTP API's connections; 0 fields: defaults */
} llmr_node_options;

void llmr_node_options_default(llmr_node_options *o);

/* A node started in this process: the engine host, the models under
 * DATA_DIR/models, the control socket, the HTTP API and the router link.  err says
 * what could not start (another node on the data directory, a port in use, engine
 * options that are not a JSON object, ...). */
typedef struct llmr_node llmr_node;
llmr_status llmr_node_start(const llmr_config *cfg, const llmr_node_options *o, llmr_node **out,
                            llmr_strbuf *err);
/* Its HTTP port (0 without HTTP). */
unsigned llmr_node_port(const llmr_node *n);
/* Reloads the engine plugins (what SIGHUP does). */
void llmr_node_reload(llmr_node *n);
/* Stops everything: no new request, running ones have shutdown_grace_s to finish, then
 * end CANCELLED (a stream with an error event). */
void llmr_node_stop(llmr_node *n);

/* Runs until SIGINT or SIGTERM; returns the exit code.  The HTTP API listens on the
 * settings' host and port (port 0: any free port); the port is logged and written to
 * DATA_DIR/run/http.port. */
int llmr_node_run(const llmr_config *cfg, const llmr_node_options *o);

#endif
