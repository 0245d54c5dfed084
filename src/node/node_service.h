/* `llmr node`: runs a node on this machine: the engine host with the installed
 * engine plugins and the models under DATA_DIR/models, the control socket, and the
 * signals an operator sends (SIGHUP reloads the plugins, SIGINT and SIGTERM stop the
 * node, ending running requests).  The HTTP API and the router link come on top. */
#ifndef LLMR_NODE_NODE_SERVICE_H
#define LLMR_NODE_NODE_SERVICE_H

#include "common/config.h"
#include "engine_host/engine_host.h"

/* The plugin directories the settings give (plugin_dirs, else DATA_DIR/engines and
 * the engines installed beside the llmr binary).  A NULL-terminated array; free
 * with llmr_node_plugin_dirs_free. */
char **llmr_node_plugin_dirs(const llmr_config *cfg, size_t *count);
void llmr_node_plugin_dirs_free(char **dirs);

/* Fills host options from the settings (plugin_dirs must outlive the options). */
void llmr_node_host_options(const llmr_config *cfg, char **plugin_dirs, size_t count,
                            llmr_engine_host_options *o);

/* Runs until SIGINT or SIGTERM; returns the exit code. */
int llmr_node_run(const llmr_config *cfg);

#endif
