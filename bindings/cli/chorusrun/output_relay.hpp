// The ranks' output on chorusrun's own stdout and stderr: whole lines read from each rank's two
// pipes, prefixed "[rank] " (line_prefixer.hpp), with chorusrun's own "chorusrun: ..." lines in
// between. Used by the supervisor's loop only; not thread-safe.
#pragma once

#include <string>

#include "bindings/cli/chorusrun/line_prefixer.hpp"
#include "bindings/cli/chorusrun/rank_process.hpp"

namespace chorus::chorusrun {

/// One started rank (an elastic worker: named by its worker id) and its two prefixers.
struct rank_slot {
  rank_process proc;
  line_prefixer out;
  line_prefixer err;
};

/// `proc`'s slot; its lines get "[rank] " unless `prefix` is false (--no-prefix).
rank_slot make_slot(const rank_process& proc, bool prefix);

class output_relay {
 public:
  /// Reads per stream in a final drain: bounds the work if something outside the ranks' process
  /// groups (a daemonised grandchild) keeps writing into a pipe after the job ended.
  static constexpr int max_final_reads = 256;

  /// Reads once from a readable pipe of `slot` (stderr when `is_err`). Returns true when bytes
  /// came (more may follow); at EOF or an error that makes the pipe useless, closes it.
  bool read(rank_slot& slot, bool is_err);
  /// Reads until the pipe is empty, closed, or `max_reads` reads were made.
  void drain(rank_slot& slot, bool is_err, int max_reads = max_final_reads);
  /// Closes the pipe and passes on the partial line it left, if any.
  void close(rank_slot& slot, bool is_err);
  /// Writes every whole line read so far. A closed or broken stdout/stderr loses the output but
  /// does not stop the job (SIGPIPE is ignored while the supervisor runs).
  void flush();
  /// "chorusrun: <message>" on stderr, after any rank output already read.
  void say(const std::string& message);

 private:
  std::string out_buf_;  // prefixed lines for chorusrun's stdout, not yet written
  std::string err_buf_;  // prefixed lines for chorusrun's stderr, not yet written
};

}  // namespace chorus::chorusrun
