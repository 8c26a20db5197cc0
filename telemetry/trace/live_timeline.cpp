// live_timeline: scratch recording → Chrome-trace JSON (live_timeline.hpp).
#include "telemetry/trace/live_timeline.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/log.hpp"
#include "telemetry/trace/reader.hpp"
#include "telemetry/trace/timeline.hpp"

namespace chorus::telemetry::trace {

namespace fs = std::filesystem;

namespace {

status timeline_error(const std::string& path, const std::string& what) {
  return {errc::config, "timeline '" + path + "': " + what};
}

}  // namespace

result<std::unique_ptr<live_timeline>> live_timeline::start(const live_timeline_options& options) {
  if (options.path.empty()) return timeline_error(options.path, "the file path is empty");
  // Horovod creates the file when the timeline starts: a bad path fails here, not at the end.
  std::FILE* out = std::fopen(options.path.c_str(), "w");
  if (!out) return timeline_error(options.path, std::string("cannot create the file: ") + std::strerror(errno));
  std::fclose(out);
  std::unique_ptr<live_timeline> t(new live_timeline(options));
  t->scratch_dir_ = options.path + ".chorus-trace";
  recorder_options ro;
  ro.dir = t->scratch_dir_;
  ro.rank = options.rank;
  ro.size = options.size;
  ro.max_bytes = options.max_bytes;
  auto rec = recorder::open(ro);
  if (!rec) return timeline_error(options.path, "cannot record: " + rec.error().message());
  t->recorder_ = std::move(*rec);
  return t;
}

live_timeline::~live_timeline() {
  if (auto file = close_recording(); !file.empty()) remove_scratch(file);
}

std::string live_timeline::close_recording() {
  if (!recorder_) return {};
  std::string file = recorder_->path();
  // Writes what is buffered and the end record. Should the slot still hold a reference (it
  // must not), flush() first makes what was recorded so far readable anyway.
  recorder_->flush();
  recorder_.reset();
  return file;
}

void live_timeline::remove_scratch(const std::string& file) {
  std::error_code ec;
  fs::remove(file, ec);
  fs::remove(scratch_dir_, ec);  // only when empty: never anything of the user's
}

status live_timeline::finish() {
  auto file = close_recording();
  if (file.empty()) return {};
  auto trace = read_trace(file);
  if (!trace) {
    remove_scratch(file);
    return timeline_error(opts_.path, "reading the recording failed: " + trace.error().message());
  }
  if (!trace->damage.ok())
    CHORUS_LOG(warn, "trace", "timeline " << opts_.path << ": " << trace->damage.message()
                                          << "; the timeline holds the records before it");
  if (trace->limited)
    CHORUS_LOG(warn, "trace", "timeline " << opts_.path << ": the recording reached its size bound ("
                                          << opts_.max_bytes << " bytes); the timeline ends there");
  std::vector<trace_file> ranks;
  ranks.push_back(std::move(*trace));
  std::string tmp = opts_.path + ".tmp";
  status st;
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) {
      st = timeline_error(opts_.path, "cannot create " + tmp + ": " + std::strerror(errno));
    } else {
      timeline_options to;
      to.mark_cycles = opts_.mark_cycles;
      write_timeline(ranks, os, to);
      os.flush();
      if (!os) st = timeline_error(opts_.path, "writing " + tmp + " failed: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  if (st.ok()) {
    fs::rename(tmp, opts_.path, ec);
    if (ec) st = timeline_error(opts_.path, "renaming " + tmp + " into place failed: " + ec.message());
  }
  if (!st.ok()) fs::remove(tmp, ec);
  remove_scratch(file);
  return st;
}

}  // namespace chorus::telemetry::trace
