// Failures as values: a status names what went wrong, with a code a caller can branch on.
// Nothing in Chorus throws across threads; functions return status or result<T>. Part of the
// public API (include/chorus/): it includes nothing of Chorus's own.
// Thread-safety: plain values; copy freely.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace chorus {

/// Error codes. Each failure an operation can end with maps to exactly one.
enum class errc {
  ok = 0,
  invalid_argument,   ///< bad input at an API boundary (dtype, count, root rank)
  config,             ///< missing or contradictory environment / settings
  rendezvous,         ///< rendezvous unreachable or ranks never arrived
  connection_lost,    ///< a peer died or its connection broke
  protocol,           ///< a frame failed validation
  auth,               ///< handshake failed (wrong job secret)
  timeout,            ///< an operation outlived its deadline
  mismatch,           ///< ranks disagree on a tensor's spec
  shutdown,           ///< the runtime shut down with the operation pending
  internal,           ///< a broken invariant inside Chorus
};

/// Short lower-case name of a code, e.g. "connection_lost".
const char* to_string(errc code);

/// The outcome of an operation: ok, or a code with a message for a human.
class status {
 public:
  status() = default;
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static status ok_status() { return {}; }

  bool ok() const { return code_ == errc::ok; }
  explicit operator bool() const { return ok(); }
  errc code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "connection_lost: rank 2 (127.0.0.1:4711) closed the connection"
  std::string to_string() const;

 private:
  errc code_ = errc::ok;
  std::string message_;
};

/// The status a peer sent as text (status::to_string(), e.g. in an abort notice): its code and
/// its words; `otherwise` when the text does not start with a known code.
status status_from_string(const std::string& text, errc otherwise);

/// A value or the status that explains why there is none.
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(status st) : v_(std::move(st)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const status& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, status> v_;
};

}  // namespace chorus
