/* Every HTTP client handle llmr makes (libcurl): made here so that each one trusts what
 * the operator said to trust for llmr's own HTTPS (a router, a node, or a proxy in front
 * of either, whose certificate a private CA signed), besides the system's CAs.  The
 * certificate of an https:// URL is always verified: there is no switch to turn that
 * off. */
#ifndef LLMR_NET_CURL_HANDLE_H
#define LLMR_NET_CURL_HANDLE_H

#include <curl/curl.h>

/* The PEM file of CA certificates that every later handle trusts for HTTPS
 * (--tls-ca, LLMR_TLS_CA), or NULL / "" for the system's alone.  Set once at start,
 * before any handle is made. */
void llmr_curl_set_ca_file(const char *path);

/* curl_easy_init, with the CA file set (CURLOPT_CAINFO) when one was given; NULL when
 * libcurl cannot make a handle. */
CURL *llmr_curl_new(void);

#endif
