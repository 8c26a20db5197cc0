// chorus-trace: reads the traces CHORUS_TRACE=<dir> records (telemetry/trace/).
//   chorus-trace dump FILE...                 every record as a JSON line
//   chorus-trace timeline DIR [--c10d] -o OUT.json
//                                             one Chrome/Perfetto trace of all ranks (--c10d, or
//                                             when there are no others: torch.distributed
//                                             groups' calls, c10d-rank-<r>.trace)
//   chorus-trace stragglers DIR               which rank was last, per tensor and per cycle
//   chorus-trace replay DIR                   re-runs the recorded job's negotiation and fusion
//                                             on the real actors and compares every decision
//                                             (on the gossip strategy; a cycle's decisions depend
//                                             only on the ranks' contributions, so a job recorded
//                                             with the central one should replay alike: untested)
// Exit status: 0 success (replay: a match), 1 a damaged trace or a replay that differs,
// 2 bad usage or unreadable input.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "actors/trace_replay.hpp"
#include "telemetry/trace/dump.hpp"
#include "telemetry/trace/reader.hpp"
#include "telemetry/trace/replay.hpp"
#include "telemetry/trace/stragglers.hpp"
#include "telemetry/trace/timeline.hpp"

namespace {

using namespace chorus::telemetry::trace;

int usage(const std::string& why) {
  std::cerr << "chorus-trace: " << why << "\n"
            << "usage: chorus-trace dump FILE...\n"
            << "       chorus-trace timeline DIR [--c10d] -o OUT.json\n"
            << "       chorus-trace stragglers DIR\n"
            << "       chorus-trace replay DIR\n";
  return 2;
}

int error(const chorus::status& st) {
  std::cerr << "chorus-trace: " << st.message() << "\n";
  return st.code() == chorus::errc::protocol ? 1 : 2;
}

int run_dump(const std::vector<std::string>& files) {
  if (files.empty()) return usage("dump needs at least one file");
  int rc = 0;
  for (const auto& path : files) {
    auto f = read_trace(path);
    if (!f) {
      rc = std::max(rc, error(f.error()));
      continue;
    }
    dump(*f, std::cout);
    if (!f->damage.ok()) rc = std::max(rc, error(f->damage));
  }
  std::cout.flush();
  return rc;
}

int run_timeline(const std::vector<std::string>& args) {
  std::string dir, out;
  bool c10d = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" && i + 1 < args.size()) out = args[++i];
    else if (args[i] == "--c10d") c10d = true;
    else if (dir.empty()) dir = args[i];
    else return usage("timeline: unexpected argument '" + args[i] + "'");
  }
  if (dir.empty() || out.empty()) return usage("timeline needs DIR and -o OUT.json");
  // The actor pipeline's files; torch.distributed groups' (c10d-rank-<r>.trace) with --c10d, or
  // when there are no others.
  const bool pipeline = !c10d && std::filesystem::exists(std::filesystem::path(dir) / "rank-0.trace");
  auto ranks = read_trace_dir(dir, pipeline ? "rank-" : "c10d-rank-");
  if (!ranks) return error(ranks.error());
  std::ofstream os(out, std::ios::trunc);
  if (!os) return usage("timeline: cannot write " + out);
  auto stats = write_timeline(*ranks, os);
  os.close();
  if (!os) return usage("timeline: writing " + out + " failed");
  std::cout << "timeline: " << stats.events << " events from " << ranks->size() << " ranks in " << out << "\n";
  return 0;
}

int run_stragglers(const std::vector<std::string>& args) {
  if (args.size() != 1) return usage("stragglers needs DIR");
  auto ranks = read_trace_dir(args[0]);
  if (!ranks) return error(ranks.error());
  print(find_stragglers(*ranks), std::cout);
  return 0;
}

int run_replay(const std::vector<std::string>& args) {
  if (args.size() != 1) return usage("replay needs DIR");
  const auto& dir = args[0];
  auto ranks = read_trace_dir(dir);
  if (!ranks) return error(ranks.error());
  auto in = replay_input_from(*ranks);
  if (!in) return error(in.error());
  auto got = chorus::replay_trace(*in);
  if (!got) return error(got.error());
  auto verdict = compare(*in, *got);
  std::cout << verdict.text() << "\n";
  return verdict.match ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("missing command");
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "dump") return run_dump(args);
  if (cmd == "timeline") return run_timeline(args);
  if (cmd == "stragglers") return run_stragglers(args);
  if (cmd == "replay") return run_replay(args);
  if (cmd == "-h" || cmd == "--help") return usage("reads Chorus traces") == 2 ? 0 : 0;
  return usage("unknown command '" + cmd + "'");
}
