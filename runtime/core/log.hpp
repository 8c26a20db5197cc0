// The one logging facility: every line tagged with rank and component, key=value fields,
// level changeable at run time: warn until runtime/config sets it from CHORUS_LOG_LEVEL
// (read_config(), apply_log_level()).
// Thread-safe: a line is written with one write(2) call.
#pragma once

#include <sstream>
#include <string_view>

namespace chorus::log {

enum class level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

void set_level(level l);
level current_level();
/// Sets the rank printed in every line (-1 before the rank is known).
void set_rank(int rank);
inline bool enabled(level l) { return static_cast<int>(l) <= static_cast<int>(current_level()); }
void write(level l, std::string_view component, std::string_view message);

}  // namespace chorus::log

/// CHORUS_LOG(warn, "tcp", "peer closed rank=" << r);
#define CHORUS_LOG(lvl, component, expr)                                   \
  do {                                                                     \
    if (::chorus::log::enabled(::chorus::log::level::lvl)) {               \
      std::ostringstream chorus_log_os_;                                   \
      chorus_log_os_ << expr;                                              \
      ::chorus::log::write(::chorus::log::level::lvl, component, chorus_log_os_.str()); \
    }                                                                      \
  } while (0)
