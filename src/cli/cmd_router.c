/* `llmr router`: run the router alone (docs/router.md). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/log.h"
#include "router/router.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr router [--no-auth] [--artifact-allowlist ORGS] [--cors-origins LIST]\n"
            "                   [--node-url-allow NETS] [--node-offline S] [--node-expire S]\n"
            "                   [--key-rpm N] [--key-concurrent N] [--key-tpm N]\n"
            "                   [--shutdown-grace SECONDS] [--node-max-outstanding N]\n"
            "                   [--max-connections N] [--max-connections-per-client N]\n"
            "                   [--header-timeout SECONDS] [--body-timeout SECONDS]\n"
            "                   [--responses-retention HOURS]\n\n"
            "Runs the router on --host and --port: the OpenAI API (/v1) in front of the nodes\n"
            "that register with it, model registration and manifests, node registration and\n"
            "heartbeats, API keys (/v0).  Its store is DATA_DIR/router.db.  On first start it\n"
            "creates an admin key, prints it and keeps it in DATA_DIR/admin.key (mode 0600),\n"
            "where local commands (llmr list, llmr keys, llmr pull) find it.  LLMR_ADMIN_KEY\n"
            "sets the admin key instead, and set on a later start replaces the earlier one.\n"
            "With --tls-cert FILE and --tls-key FILE (PEM) it speaks HTTPS only; --tls-ca FILE\n"
            "is the CA it trusts for nodes' certificates besides the system's (docs/security.md).\n\n"
            "Each answer gets an id (the client's x-request-id, else a new one), sent back as\n"
            "x-request-id, passed to the node, and written with an access line to the log\n"
            "(--log-format json: JSON lines) and to the request log (GET /v0/requests).\n"
            "GET /metrics (no key) is Prometheus text: requests by model, node and status,\n"
            "latency, the queue, the nodes (docs/router.md, \"Metrics\").  Admin actions\n"
            "(who, what, when, the result) go to the audit log: GET /v0/audit, llmr audit.\n"
            "DATA_DIR is made mode 0700 and router.db 0600.\n\n"
            "  --no-auth                 no keys checked (only on a loopback address); then\n"
            "                            only requests to localhost, 127.0.0.1 or [::1] are\n"
            "                            answered, and a write from another web origin than\n"
            "                            the router's own or --cors-origins' is refused\n"
            "  --key-rpm N, --key-concurrent N, --key-tpm N\n"
            "                            the limits of a key that has none of its own:\n"
            "                            requests per minute, requests at once (waiting ones\n"
            "                            included), tokens per minute; over one a request\n"
            "                            gets 429 with Retry-After (default 0: no limit;\n"
            "                            llmr keys create|limits sets a key's own)\n"
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
            "  --node-max-outstanding N  requests sent to one node at once; more wait in\n"
            "                            the queue (default 256)\n"
            "  --max-connections N       client connections at once (default 4096)\n"
            "  --max-connections-per-client N\n"
            "                            connections at once from one IP address (default:\n"
            "                            no limit but --max-connections; behind a proxy every\n"
            "                            client has the proxy's address)\n"
            "  --header-timeout S        a connection that has not sent a request's headers\n"
            "                            S seconds after it opened is closed (default 10)\n"
            "  --body-timeout S          likewise for its body, from the headers (default 60)\n"
            "  --responses-retention H   stored responses (POST /v1/responses with store) go\n"
            "                            after H hours, 1 to 87600 (default 720: 30 days)\n"
            "SIGINT or SIGTERM stops it: it stops accepting, lets running requests finish\n"
            "for up to --shutdown-grace seconds (default 30), then ends the streams still\n"
            "open with an error event (a request still waiting for a node gets one at once).\n"
            "A second signal stops it at once.\n");
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
        bool bad = false;
        if (llmr_cli_http_limit(argc, argv, &i, "router", &o.http_limits, &bad)) {
            if (bad)
                return LLMR_EXIT_USAGE;
        } else if (!strcmp(argv[i], "--no-auth")) {
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
        } else if ((!strcmp(argv[i], "--key-rpm") || !strcmp(argv[i], "--key-concurrent") ||
                    !strcmp(argv[i], "--key-tpm") || !strcmp(argv[i], "--shutdown-grace") ||
                    !strcmp(argv[i], "--node-max-outstanding") || !strcmp(argv[i], "--responses-retention")) &&
                   i + 1 < argc) {
            char *end = NULL;
            const char *flag = argv[i], *v = argv[++i];
            unsigned long n = strtoul(v, &end, 10);
            if (!*v || *end || *v == '-' || n > 1000000000ul) {
                llmr_cli_error("router", "%s takes a whole number, not \"%s\"", flag, v);
                return LLMR_EXIT_USAGE;
            }
            unsigned *to = !strcmp(flag, "--key-rpm")          ? &o.key_requests_per_minute
                           : !strcmp(flag, "--key-concurrent") ? &o.key_concurrent_requests
                           : !strcmp(flag, "--key-tpm")        ? &o.key_tokens_per_minute
                           : !strcmp(flag, "--shutdown-grace") ? &o.shutdown_grace_s
                           : !strcmp(flag, "--responses-retention") ? &o.responses_retention_h
                                                               : &o.node_max_outstanding;
            if (to == &o.node_max_outstanding && n == 0) {
                llmr_cli_error("router", "--node-max-outstanding takes 1 or more");
                return LLMR_EXIT_USAGE;
            }
            if (to == &o.responses_retention_h && (n == 0 || n > 87600)) {
                llmr_cli_error("router", "--responses-retention takes hours, 1 to 87600, not \"%s\"", v);
                return LLMR_EXIT_USAGE;
            }
            *to = (unsigned)n;
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
    if (!llmr_cli_tls_read(cfg, "router", &o.http_limits))
        return LLMR_EXIT_FAILED;
    if (llmr_router_start(&o, &r, &err) != LLMR_OK) {
        llmr_cli_error("router", "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        llmr_cli_tls_free(&o.http_limits);
        return LLMR_EXIT_FAILED;
    }
    llmr_log_info("router", "listening on %s://%s:%u%s", llmr_cli_scheme(&o.http_limits), o.host,
                  llmr_router_port(r), o.no_auth ? " (no keys checked)" : "");
    int sig = 0;
    while (sigwait(&waited, &sig) != 0)
        ;
    llmr_log_info("router", "%s: stopping; running requests have %u s to finish (a second signal stops at once)",
                  sig == SIGINT ? "SIGINT" : "SIGTERM", o.shutdown_grace_s);
    llmr_router_drain(r);
    struct timespec poll = {0, 100 * 1000000L};
    for (unsigned waited_ms = 0; !llmr_router_idle(r, 0); waited_ms += 100) {
        if (waited_ms >= o.shutdown_grace_s * 1000u) {
            llmr_log_warn("router", "requests still running after %u s: they end now with an error",
                          o.shutdown_grace_s);
            break;
        }
        if (sigtimedwait(&waited, NULL, &poll) > 0) {
            llmr_log_warn("router", "a second signal: stopping now");
            break;
        }
    }
    llmr_router_stop(r);
    llmr_strbuf_free(&err);
    llmr_cli_tls_free(&o.http_limits);
    return LLMR_EXIT_OK;
}

const llmr_command llmr_cmd_router = {"router", "run the router (the OpenAI API in front of nodes)", run, help};
