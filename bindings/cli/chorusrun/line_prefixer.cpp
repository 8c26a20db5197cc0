// Line splitting and prefixing for rank output.
#include "bindings/cli/chorusrun/line_prefixer.hpp"

namespace chorus::chorusrun {

void line_prefixer::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      // Emit over-long lines in max_line_bytes pieces rather than buffering without bound.
      while (partial_.size() >= max_line_bytes) {
        out += prefix_;
        out.append(partial_, 0, max_line_bytes);
        out += '\n';
        partial_.erase(0, max_line_bytes);
      }
      return;
    }
    out += prefix_;
    out += partial_;
    out.append(bytes.substr(0, nl + 1));
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

void line_prefixer::finish(std::string& out) {
  if (partial_.empty()) return;
  out += prefix_;
  out += partial_;
  out += '\n';
  partial_.clear();
}

}  // namespace chorus::chorusrun
