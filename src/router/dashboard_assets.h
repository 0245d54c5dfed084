/* The dashboard's files, embedded in the binary when it is built: the browser app's
 * build leaves them in BUILD/dashboard, and tools/embed_assets writes this table from
 * them (BUILD/generated/dashboard_assets.c).  When the app was not built the table is
 * empty (count 0).  router_dashboard.c serves it. */
#ifndef LLMR_ROUTER_DASHBOARD_ASSETS_H
#define LLMR_ROUTER_DASHBOARD_ASSETS_H

#include <stddef.h>

typedef struct llmr_asset {
    const char *path;          /* relative to the app's directory: "index.html", "img/logo.svg" */
    const char *content_type;  /* from the extension: "text/html; charset=utf-8" */
    const unsigned char *data; /* size bytes */
    size_t size;
    const char *etag;          /* "\"<first 16 hex digits of the SHA-256>\"", quotes included */
} llmr_asset;

/* Sorted by path (strcmp order). */
extern const llmr_asset llmr_dashboard_assets[];
extern const size_t llmr_dashboard_asset_count;

#endif
