// Names of error codes and the printable form of a status.
#include "runtime/core/status.hpp"

namespace chorus {

const char* to_string(errc code) {
  switch (code) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::config: return "config";
    case errc::rendezvous: return "rendezvous";
    case errc::connection_lost: return "connection_lost";
    case errc::protocol: return "protocol";
    case errc::auth: return "auth";
    case errc::timeout: return "timeout";
    case errc::mismatch: return "mismatch";
    case errc::shutdown: return "shutdown";
    case errc::internal: return "internal";
  }
  return "unknown";
}

std::string status::to_string() const {
  if (ok()) return "ok";
  return std::string(chorus::to_string(code_)) + ": " + message_;
}

status status_from_string(const std::string& text, errc otherwise) {
  for (int c = 1; c <= static_cast<int>(errc::internal); ++c) {
    std::string name = std::string(to_string(static_cast<errc>(c))) + ": ";
    if (text.rfind(name, 0) == 0) return {static_cast<errc>(c), text.substr(name.size())};
  }
  return {otherwise, text};
}

}  // namespace chorus
