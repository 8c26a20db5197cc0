// A listening socket rank 0 inherits from its launcher (CHORUS_RENDEZVOUS_FD): chorusrun binds
// the store's port and holds it until rank 0 runs, so no other process can take the port in
// between. Here: checking that such a descriptor is what it claims before the store serves on it.
#pragma once

#include <cstdint>

#include "runtime/core/status.hpp"

namespace chorus {

/// Ok when `fd` is an open TCP socket in the listening state, bound to `port`, and marks it
/// close-on-exec (children of this process do not inherit the store's port). Otherwise
/// errc::rendezvous saying which check failed, e.g. "CHORUS_RENDEZVOUS_FD=7 is not open" or
/// "... listens on port 4100, not the rendezvous port 4200".
status check_inherited_listener(int fd, uint16_t port);

}  // namespace chorus
