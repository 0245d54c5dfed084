/* placeholder until implemented */
#include "common/sha256.h"
