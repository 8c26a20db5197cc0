// Parsing of chorusrun's command line. Every rejection names the argument, the value seen and
// what was expected, so the user can fix the call from the message alone.
#include "bindings/cli/chorusrun/options.hpp"

#include <charconv>
#include <string_view>

namespace chorus::chorusrun {
namespace {

// Variables chorusrun sets differently for every rank; `-x` cannot override them.
constexpr std::string_view per_rank_names[] = {
    "CHORUS_RANK",       "CHORUS_SIZE",        "CHORUS_LOCAL_RANK",  "CHORUS_LOCAL_SIZE",  "HOROVOD_RANK",
    "HOROVOD_SIZE",      "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",  "CHORUS_ELASTIC_WORKER", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};

status usage_error(std::string message) { return {errc::invalid_argument, std::move(message)}; }

result<int> parse_positive_int(std::string_view option, std::string_view text, int min = 1) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    return usage_error(std::string(option) + " expects " + (min > 0 ? "a positive" : "a non-negative") + " integer, got '" +
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
  // The value of `name` (as take_value), which must not be empty.
  auto take_text = [&](std::string_view name, std::optional<std::string_view> inline_value) -> result<std::string> {
    auto v = take_value(name, inline_value);
    if (!v) return v.error();
    if (v->empty()) return usage_error(std::string(name) + " needs a non-empty value");
    return v;
  };
  // The value of `name` (as take_value) as an integer of at least `min`.
  auto take_int = [&](std::string_view name, std::optional<std::string_view> inline_value,
                      int min = 1) -> result<int> {
    auto v = take_value(name, inline_value);
    if (!v) return v.error();
    return parse_positive_int(name, *v, min);
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
      auto n = take_int(name, inline_value);
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
      auto n = take_int(name, inline_value);
      if (!n) return n.error();
      opts.num_streams = *n;
      continue;
    }
    if (name == "-H" || name == "--hosts") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto hosts = parse_host_list(*v);
      if (!hosts) return hosts.error();
      opts.hosts = std::move(*hosts);
      continue;
    }
    if (name == "--host-discovery-script") {
      auto v = take_text(name, inline_value);
      if (!v) return v.error();
      opts.discovery_script = *v;
      continue;
    }
    if (name == "--hostfile" || name == "--launcher" || name == "--rendezvous") {
      auto v = take_text(name, inline_value);
      if (!v) return v.error();
      (name == "--hostfile" ? opts.hostfile : name == "--launcher" ? opts.launcher_template : opts.rendezvous) = *v;
      continue;
    }
    if (name == "--min-np" || name == "--max-np") {
      auto n = take_int(name, inline_value);
      if (!n) return n.error();
      (name == "--min-np" ? opts.min_np : opts.max_np) = *n;
      continue;
    }
    if (name == "--no-blacklist" && !inline_value) {
      opts.blacklist = false;
      continue;
    }
    if (name == "--reset-limit") {
      auto n = take_int(name, inline_value, 0);
      if (!n) return n.error();
      opts.reset_limit = *n;
      continue;
    }
    if (name == "--blacklist-cooldown-range") {
      // Two values, as horovodrun's nargs=2: `--blacklist-cooldown-range MIN MAX`.
      if (inline_value || i + 2 >= argv.size())
        return usage_error(std::string(name) + " needs two values: MIN MAX (seconds)");
      auto lo = parse_positive_int(name, argv[i + 1]);
      if (!lo) return lo.error();
      auto hi = parse_positive_int(name, argv[i + 2]);
      if (!hi) return hi.error();
      i += 2;
      if (*lo < cooldown_lowest_s || *hi > cooldown_highest_s || *lo > *hi)
        return usage_error(std::string(name) + " " + std::to_string(*lo) + " " + std::to_string(*hi) +
                           ": expected " + std::to_string(cooldown_lowest_s) + " <= MIN <= MAX <= " +
                           std::to_string(cooldown_highest_s) + " seconds (horovodrun's bounds)");
      opts.blacklist_cooldown = cooldown_range{*lo, *hi};
      continue;
    }
    if (name == "--nnodes" || name == "--node-rank") {
      auto n = take_int(name, inline_value, name == "--nnodes" ? 1 : 0);
      if (!n) return n.error();
      if (name == "--nnodes") opts.nnodes = *n;
      else opts.node_rank = *n;
      continue;
    }
    if (name == "--timeout" || name == "--elastic-timeout") {
      auto v = take_value(name, inline_value);
      if (!v) return v.error();
      auto s = parse_positive_seconds(name, *v);
      if (!s) return s.error();
      (name == "--timeout" ? opts.timeout_seconds : opts.elastic_timeout_seconds) = *s;
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

status check_options(const launch_options& opts) {
  if (!opts.hosts.empty() && opts.hostfile) return usage_error("give -H or --hostfile, not both");
  if (opts.launcher_template && opts.launcher_template->find("{host}") == std::string::npos)
    return usage_error("--launcher '" + *opts.launcher_template + "' has no {host}");
  if (opts.nnodes) {
    if (!opts.hosts.empty() || opts.hostfile)
      return usage_error("--nnodes (one chorusrun per node) cannot be combined with -H or --hostfile");
    if (!opts.rendezvous) return usage_error("--nnodes needs --rendezvous ADDR:PORT (reachable from every node)");
    if (opts.node_rank >= *opts.nnodes)
      return usage_error("--node-rank " + std::to_string(opts.node_rank) + " is not below --nnodes " +
                         std::to_string(*opts.nnodes));
  } else if (opts.node_rank != 0) {
    return usage_error("--node-rank needs --nnodes");
  }
  if (opts.elastic_timeout_seconds && !opts.elastic())
    return usage_error("--elastic-timeout needs an elastic job (--min-np, --max-np or --host-discovery-script)");
  if (!opts.elastic() && (opts.blacklist_cooldown || opts.reset_limit || !opts.blacklist))
    return usage_error(std::string(opts.blacklist_cooldown ? "--blacklist-cooldown-range"
                                   : opts.reset_limit    ? "--reset-limit"
                                                         : "--no-blacklist") +
                       " needs an elastic job (--min-np, --max-np or --host-discovery-script)");
  if (!opts.blacklist && opts.blacklist_cooldown)
    return usage_error("--no-blacklist and --blacklist-cooldown-range contradict each other; give only one");
  if (opts.elastic()) {
    const int min_np = opts.min_np.value_or(opts.num_ranks), max_np = opts.max_np.value_or(opts.num_ranks);
    if (!(min_np <= opts.num_ranks && opts.num_ranks <= max_np))
      return usage_error("elastic mode needs --min-np <= -np <= --max-np, got " + std::to_string(min_np) + ", " +
                         std::to_string(opts.num_ranks) + ", " + std::to_string(max_np));
    for (const auto& [name, value] : opts.extra_env)
      if (name == "CHORUS_ELASTIC_TIMEOUT_SECONDS" || name == "HOROVOD_ELASTIC_TIMEOUT")
        return usage_error("-x " + name + "=" + value + ": chorusrun sets " + name +
                           " for elastic workers from --elastic-timeout; give that instead");
    if (opts.nnodes || opts.rendezvous)
      return usage_error("--min-np/--max-np: chorusrun serves the elastic store itself; --nnodes and --rendezvous "
                         "cannot be used with them (give the hosts with -H, --hostfile or --host-discovery-script)");
  }
  if (!opts.hosts.empty()) {
    auto placed = place_ranks(opts.hosts, opts.num_ranks);
    if (!placed) return placed.error();
  }
  return {};
}

std::string usage_text() {
  return "usage: chorusrun -np N [options] [--] command [args...]\n"
         "Starts N ranks of `command` with CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK,\n"
         "CHORUS_LOCAL_SIZE, CHORUS_RENDEZVOUS, CHORUS_JOB_SECRET and CHORUS_JOB_ID set, and\n"
         "horovodrun's HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE,\n"
         "_HOSTNAME, and torch.distributed's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "MASTER_ADDR and MASTER_PORT (not in elastic jobs; MASTER_* kept when set). Remote\n"
         "ranks read their variables (the secret too) from stdin, not argv.\n"
         "\n"
         "options:\n"
         "  -np N, -n N         number of ranks to start (required)\n"
         "  -x NAME=VALUE       extra environment variable for every rank (repeatable)\n"
         "  --streams S         set CHORUS_NUM_STREAMS=S for every rank\n"
         "  --timeout SECONDS   stop the whole job if it runs longer (exit status 124)\n"
         "  -H h1:S1,h2:S2      run on these hosts (S ranks each, filled in order); [v6addr]:S\n"
         "  --hostfile FILE     hosts from FILE, horovodrun's format: 'host slots=N' per line\n"
         "  --launcher 'TMPL'   start remote ranks with TMPL ({host} replaced; the rank command\n"
         "                      follows as words) instead of 'ssh -o BatchMode=yes {host}'\n"
         "  --nnodes M --node-rank R --rendezvous ADDR:PORT\n"
         "                      per-node mode: this chorusrun starts ranks R*N..R*N+N-1 of M*N\n"
         "                      (needs CHORUS_JOB_SECRET set alike on every node)\n"
         "  --rendezvous A:P    where rank 0 serves the store (default: rank 0's host, free port)\n"
         "  --min-np N, --max-np M\n"
         "                      elastic (hvd.elastic): a worker that dies does not end the job; the\n"
         "                      others form a new round without it, as long as N are left (its\n"
         "                      host is blacklisted: --blacklist-cooldown-range below)\n"
         "                      (-H/--hostfile: the hosts to start on; the elastic store listens on\n"
         "                      this host's address toward the first remote one)\n"
         "  --host-discovery-script S\n"
         "                      elastic: run S every second ('host[:slots]' lines, any hosts;\n"
         "                      remote ones start through --launcher); start workers on new slots,\n"
         "                      up to --max-np, and stop the workers of hosts it no longer offers\n"
         "                      (highest ids first), down to --min-np. Without -H, S also gives\n"
         "                      the first hosts: up to -np workers once it offers --min-np slots\n"
         "  --elastic-timeout SECONDS\n"
         "                      elastic with S: below --min-np (at the start too), wait this long\n"
         "                      for S to offer slots before ending the job (default 600, or\n"
         "                      CHORUS_ELASTIC_TIMEOUT_SECONDS / HOROVOD_ELASTIC_TIMEOUT)\n"
         "  --blacklist-cooldown-range MIN MAX\n"
         "                      elastic: a worker that fails (not exit 0) blacklists its host, as\n"
         "                      horovodrun does: its other workers there are stopped and no worker\n"
         "                      starts there again; with this range it comes back after\n"
         "                      MIN*2^k + U(0,1)*MIN s at its k-th failure, at most MAX\n"
         "                      (1 <= MIN <= MAX <= 3600); without, it stays out. A job with no\n"
         "                      worker left off blacklisted hosts ends (one host: at the first\n"
         "                      failure)\n"
         "  --no-blacklist      elastic: keep failed workers' hosts (chorusrun's own; for jobs on\n"
         "                      one host, whose survivors then form a new round)\n"
         "  --reset-limit N     elastic: end the job instead of forming a new round for the N+1th\n"
         "                      time (every round after the first counts, as in horovodrun)\n"
         "  --no-prefix         do not prefix output lines with [rank]\n"
         "  -h, --help          print this help\n"
         "\n"
         "CHORUS_JOB_SECRET and CHORUS_RENDEZVOUS are kept when already set in the environment.\n"
         "Ranks read stdin from /dev/null. When a rank fails, the others are stopped (SIGTERM,\n"
         "then SIGKILL after 3 s) and chorusrun exits with that rank's status; on SIGINT or\n"
         "SIGTERM it forwards the signal to all ranks and exits with 128 + signal number.\n";
}

}  // namespace chorus::chorusrun
