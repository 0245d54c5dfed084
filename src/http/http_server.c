/* placeholder until implemented */
#include "http/http_server.h"
