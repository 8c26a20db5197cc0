// The one reader of environment variables, with one rule: an unset or empty variable takes the
// table's default; anything else must parse as the table says, or the read is errc::config
// naming the variable, the value and what is allowed. No clamping, no warning-and-go-on.
// A HOROVOD_* alias counts as its CHORUS_* variable; both set to different values is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "runtime/config/variables.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// Returns the value of an environment variable, or nullptr when it is unset.
using env_lookup = std::function<const char*(const char*)>;

namespace cfg {

/// The process environment (std::getenv). The only getenv for CHORUS_/HOROVOD_ variables
/// outside runtime/env's launcher discovery; tests/runtime/config_docs_test.cpp checks that.
env_lookup process_lookup();

/// "NAME='text' is not allowed: expected <what>" as errc::config.
status bad_value(std::string_view name, std::string_view text, std::string_view expected);

/// A whole number in [min, max]: decimal digits only (no sign, no spaces, no suffix).
result<uint64_t> parse_whole(std::string_view name, std::string_view text, uint64_t min, uint64_t max);
/// A finite decimal number in [min, max] ("0.25", "3").
result<double> parse_decimal(std::string_view name, std::string_view text, double min, double max);

/// Reads variables of the table (variables.hpp) through a lookup. Asking for a name that is not
/// in the table, or as the wrong kind, is errc::internal (a bug, not a user error).
class reader {
 public:
  /// An empty `get` reads nothing: every variable takes its default.
  explicit reader(env_lookup get);

  result<uint64_t> whole(std::string_view name) const;
  result<double> decimal(std::string_view name) const;
  /// One of the table's choices, as written there; a synonym (variable::synonyms) reads as the
  /// word it stands for, so a name and its alias set to synonyms agree ("on" and "1").
  result<std::string> choice(std::string_view name) const;
  /// A "0|1" choice as a bool.
  result<bool> flag(std::string_view name) const;
  /// The text as set, else the default ("" when none).
  result<std::string> text(std::string_view name) const;
  /// Whether `name` or its alias is set to a non-empty value.
  bool is_set(std::string_view name) const;

 private:
  result<const variable*> entry(std::string_view name, kind k) const;
  const char* get(std::string_view name) const;
  env_lookup get_;
};

}  // namespace cfg
}  // namespace chorus
