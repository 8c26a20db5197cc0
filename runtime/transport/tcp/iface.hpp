// The address of a network interface by name (CHORUS_IFACE), through getifaddrs(3).
#pragma once

#include <string>

#include "runtime/core/status.hpp"

namespace chorus::tcp {

/// The interface's IPv4 address, else its first IPv6 address that is not link-local (without
/// brackets). errc::config naming the interface and the ones that exist when it has neither.
result<std::string> interface_address(const std::string& iface);

}  // namespace chorus::tcp
