// Moved to common/backoff.h (the config-server link uses it too); this forwarding header keeps the
// remaining includes of the old path building until they are updated.
#pragma once

#include "common/backoff.h"
