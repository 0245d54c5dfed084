/* Every HTTP client handle llmr makes: see curl_handle.h. */
#include "net/curl_handle.h"

#include <stdlib.h>
#include <string.h>

static char *ca_file; /* set once at start (llmr_curl_set_ca_file), read by every thread */

void llmr_curl_set_ca_file(const char *path)
{
    free(ca_file);
    ca_file = path && *path ? strdup(path) : NULL;
}

CURL *llmr_curl_new(void)
{
    CURL *c = curl_easy_init();
    if (c && ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    return c;
}
