/* placeholder until implemented */
#include "node/model_sync.h"
