/* Where a node may be: the check of the URL a node registers (docs/security.md).  The
 * router sends users' requests to that URL, so a URL must name the machine the
 * registration came from: its host resolves to the registration's source address, or
 * to an address inside a network the operator allowed (--node-url-allow, for nodes
 * behind NAT or a proxy).  The address found is pinned: the router connects to it
 * and never resolves the name again (a name that later resolves elsewhere changes
 * nothing). */
#ifndef LLMR_ROUTER_NODE_ADDRESS_H
#define LLMR_ROUTER_NODE_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"

/* Whether text is a list of networks, comma-separated ("10.0.0.0/8, fd00::/8", an
 * address alone is one host); err says which is not.  NULL or "" is none. */
bool llmr_node_allow_valid(const char *text, llmr_strbuf *err);

/* Whether a node at url may register from the address remote ("127.0.0.1", "::1"),
 * with allow the operator's networks (NULL: none).  true: pin gets curl's
 * "host:port:address" for the address checked ("" when the host is an address
 * already).  false: why says what is wrong (for the 403). */
bool llmr_node_url_check(const char *url, const char *remote, const char *allow, char *pin, size_t pin_size,
                         llmr_strbuf *why);

#endif
