// The runtime's name for the public status type (include/chorus/status.hpp).
#pragma once

#include "chorus/status.hpp"
