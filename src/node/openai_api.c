/* placeholder until implemented */
#include "node/openai_api.h"
