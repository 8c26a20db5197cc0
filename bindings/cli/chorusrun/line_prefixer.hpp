// Turns the byte stream of one rank's stdout or stderr into whole, prefixed lines. Pure: it
// only fills strings; the supervisor writes them. Not thread-safe (one per stream, one thread).
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace chorus::chorusrun {

class line_prefixer {
 public:
  /// A line longer than this without a newline is emitted in pieces of this size, each as its
  /// own prefixed line, so a rank that never writes '\n' cannot grow chorusrun's memory.
  static constexpr size_t max_line_bytes = 64 * 1024;

  /// `prefix` goes before every line, e.g. "[3] "; empty for --no-prefix.
  explicit line_prefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  /// Consumes `bytes` and appends every line they complete (prefix, text, '\n') to `out`.
  /// Bytes after the last '\n' are kept until more arrive or finish() is called.
  void feed(std::string_view bytes, std::string& out);

  /// At end of stream: appends the kept partial line, prefixed and with a '\n', if any.
  void finish(std::string& out);

 private:
  std::string prefix_;
  std::string partial_;  // bytes of the current line not yet ended by '\n'
};

}  // namespace chorus::chorusrun
