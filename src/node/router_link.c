/* placeholder until implemented */
#include "node/router_link.h"
