// Parsing of chorusrun's command line. Every rejection names the argument, the value seen and
// what was expected, so the user can fix the call from the message alone.
#include "bindings/cli/chorusrun/options.hpp"

#include <charconv>
#include <string_view>

namespace chorus::chorusrun {
namespace {

// Variables chorusrun sets differently for every rank; `-x` cannot override them.
constexpr std::string_view per_rank_names[] = {"CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK",
                                               "CHORUS_LOCAL_SIZE"};

status usage_error(std::string message) { return {errc::invalid_argument, std::move(message)}; }

result<int> parse_positive_int(std::string_view option, std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    return usage_error(std::string(option) + " expects a positive integer, got '" +
                       std::string(text) + "'");
  }
  return value;
}

result<double> parse_positive_seconds(std::string_view option, std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > 0)) {
    return usage_error(std::string(option) + " expects a positive number of seconds, got '" +
                       std::string(text) + "'");
  }
  return value;
}

result<std::pair<std::string, std::string>> parse_env_assignment(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return usage_error("-x expects NAME=VALUE, got '" + std::string(text) + "'");
  }
  std::string name(text.substr(0, eq));
  for (auto reserved : per_rank_names) {
    if (name == reserved) {
      return usage_error("-x " + name + ": chorusrun sets " + name +
                         " per rank; it cannot be overridden");
    }
  }
  return std::pair{std::move(name), std::string(text.substr(eq + 1))};
}

}  // namespace

result<launch_options> parse_options(std::span<const char* const> argv) {
  launch_options opts;
  size_t i = 1;
  // Returns the value of option `name`: the part after '=' in `--name=value`, else the next arg.
  auto take_value = [&](std::string_view name,
                        std::optional<std::string_view> inline_value) -> result<std::string> {
    if (inline_value) return std::string(*inline_value);
    if (i + 1 >= argv.size()) return usage_error(std::string(name) + " needs a value");
    return std::string(argv[++i]);
  };

  for (; i < argv.size(); ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the command starts here (mpirun style)

    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (arg.starts_with("--")) {
      if (auto eq = arg.find('='); eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    }

    if (name == "-h" || name == "--help") {
      opts.show_help = true;
      return opts;
    }
    if (name == "--no-prefix" && !inline_value) {
      opts.prefix_output = false;
      continue;
    }
    if (name == "-np" || name == "-n" || name == "--np") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto n = parse_positive_int(name, *v);
      if (!n) return n.error();
      opts.num_ranks = *n;
      continue;
    }
    if (name == "-x") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto kv = parse_env_assignment(*v);
      if (!kv) return kv.error();
      opts.extra_env.push_back(std::move(*kv));
      continue;
    }
    if (name == "--streams") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto n = parse_positive_int(name, *v);
      if (!n) return n.error();
      opts.num_streams = *n;
      continue;
    }
    if (name == "--timeout") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto s = parse_positive_seconds(name, *v);
      if (!s) return s.error();
      opts.timeout_seconds = *s;
      continue;
    }
    return usage_error("unknown option '" + std::string(arg) + "'");
  }

  for (; i < argv.size(); ++i) opts.command.emplace_back(argv[i]);
  if (opts.num_ranks == 0) return usage_error("-np N is required (the number of ranks to start)");
  if (opts.command.empty()) return usage_error("no command given after the options");
  if (opts.num_streams) {
    for (const auto& [name, value] : opts.extra_env) {
      if (name == "CHORUS_NUM_STREAMS") {
        return usage_error("--streams " + std::to_string(*opts.num_streams) + " and -x " + name +
                           "=" + value + " contradict each other; give only one");
      }
    }
  }
  return opts;
}

std::string usage_text() {
  return "usage: chorusrun -np N [options] [--] command [args...]\n"
         "Starts N local ranks of `command` with CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK,\n"
         "CHORUS_LOCAL_SIZE, CHORUS_RENDEZVOUS, CHORUS_JOB_SECRET and CHORUS_JOB_ID set.\n"
         "\n"
         "options:\n"
         "  -np N, -n N         number of ranks to start (required)\n"
         "  -x NAME=VALUE       extra environment variable for every rank (repeatable)\n"
         "  --streams S         set CHORUS_NUM_STREAMS=S for every rank\n"
         "  --timeout SECONDS   stop the whole job if it runs longer (exit status 124)\n"
         "  --no-prefix         do not prefix output lines with [rank]\n"
         "  -h, --help          print this help\n"
         "\n"
         "CHORUS_JOB_SECRET and CHORUS_RENDEZVOUS are kept when already set in the environment.\n"
         "Ranks read stdin from /dev/null. When a rank fails, the others are stopped (SIGTERM,\n"
         "then SIGKILL after 3 s) and chorusrun exits with that rank's status; on SIGINT or\n"
         "SIGTERM it forwards the signal to all ranks and exits with 128 + signal number.\n";
}

}  // namespace chorus::chorusrun
