/* placeholder until implemented */
#include "node/node_http.h"
