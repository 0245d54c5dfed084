/* `llmr router`: run the router alone (docs/router.md). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "router/router.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr router [--no-auth] [--artifact-allowlist ORGS] [--cors-origins LIST]\n"
            "                   [--node-url-allow NETS] [--node-offline S] [--node-expire S]\n\n"
            "Runs the router on --host and --port: the OpenAI API (/v1) in front of the nodes\n"
            "that register with it, model registration and manifests, node registration and\n"
            "heartbeats, API keys (/v0).  Its store is DATA_DIR/router.db.  On first start it\n"
            "creates an admin key, prints it and keeps it in DATA_DIR/admin.key (mode 0600),\n"
            "where local commands (llmr list, llmr keys, llmr pull) find it.  LLMR_ADMIN_KEY\n"
            "sets the admin key instead, and set on a later start replaces the earlier one.\n\n"
            "Each answer gets an id (the client's x-request-id, else a new one), sent back as\n"
            "x-request-id, passed to the node, and written with an access line to the log\n"
            "(--log-format json: JSON lines) and to the request log (GET /v0/requests).\n"
            "GET /metrics (no key) is Prometheus text: requests by model, node and status,\n"
            "latency, the queue, the nodes (docs/router.md, \"Metrics\").\n\n"
            "  --no-auth                 no keys checked (only on a loopback address)\n"
            "  --cors-origins LIST       origins a browser app may call from, comma-separated,\n"
            "                            or * (or LLMR_CORS_ORIGINS); default: no CORS\n"
            "  --artifact-allowlist ORGS the publishers whose GPU artifacts become optional\n"
            "                            manifest entries (default openai/*,nvidia/*)\n"
            "  --node-url-allow NETS     networks (CIDR, comma-separated) a node's URL may be in\n"
            "                            besides the address it registers from (NAT, proxies);\n"
            "                            default: none (docs/security.md)\n"
            "  --node-offline S          a node without a heartbeat for S seconds gets no\n"
            "                            requests (default 15)\n"
            "  --node-expire S           and is removed after S seconds (default 600; 0: never)\n"
            "SIGINT or SIGTERM stops it.\n");
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    llmr_router_options o;
    llmr_router_options_default(&o);
    o.host = llmr_config_get(cfg, LLMR_CONFIG_HOST);
    o.port = llmr_config_port(cfg);
    o.data_dir = llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR);
    o.admin_key = getenv("LLMR_ADMIN_KEY");
    o.cors_origins = llmr_config_get(cfg, LLMR_CONFIG_CORS_ORIGINS);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-auth")) {
            o.no_auth = true;
        } else if (!strcmp(argv[i], "--artifact-allowlist") && i + 1 < argc) {
            o.artifact_allowlist = argv[++i];
        } else if (!strcmp(argv[i], "--node-url-allow") && i + 1 < argc) {
            o.node_url_allow = argv[++i];
        } else if ((!strcmp(argv[i], "--node-offline") || !strcmp(argv[i], "--node-expire")) && i + 1 < argc) {
            const char *name = argv[i], *v = argv[++i];
            char *end = NULL;
            double s = strtod(v, &end);
            if (end == v || *end || !(s >= 0 && s <= 86400) || (s == 0 && !strcmp(name, "--node-offline"))) {
                llmr_cli_error("router", "%s takes seconds, 0 to 86400 (above 0 for --node-offline), not \"%s\"",
                               name, v);
                return LLMR_EXIT_USAGE;
            }
            if (!strcmp(name, "--node-offline"))
                o.node_offline_ms = (unsigned)(s * 1000);
            else
                o.node_expire_ms = (unsigned)(s * 1000);
        } else {
            llmr_cli_error("router", "unexpected argument \"%s\"; see llmr router --help", argv[i]);
            return LLMR_EXIT_USAGE;
        }
    }
    sigset_t waited;
    sigemptyset(&waited);
    sigaddset(&waited, SIGINT);
    sigaddset(&waited, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &waited, NULL);
    llmr_router *r = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_router_start(&o, &r, &err) != LLMR_OK) {
        llmr_cli_error("router", "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return LLMR_EXIT_FAILED;
    }
    llmr_log_info("router", "listening on http://%s:%u%s", o.host, llmr_router_port(r),
                  o.no_auth ? " (no keys checked)" : "");
    int sig = 0;
    while (sigwait(&waited, &sig) != 0)
        ;
    llmr_log_info("router", "%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    llmr_router_stop(r);
    llmr_strbuf_free(&err);
    return LLMR_EXIT_OK;
}

const llmr_command llmr_cmd_router = {"router", "run the router (the OpenAI API in front of nodes)", run, help};
