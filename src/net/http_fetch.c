/* placeholder until implemented */
#include "net/http_fetch.h"
