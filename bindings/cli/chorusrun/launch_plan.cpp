// Placements, job variables and launch commands of chorusrun's ranks.
#include "bindings/cli/chorusrun/launch_plan.hpp"

#include <map>
#include <sstream>

#include "runtime/config/variables.hpp"

namespace chorus::chorusrun {
namespace {

// Reads NAME=VALUE lines up to an empty one from stdin into the environment, then runs the rank.
constexpr const char* env_prologue =
    "while IFS= read -r l && [ -n \"$l\" ]; do export \"$l\"; done; exec \"$@\"";

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// A store address only this host reaches.
bool is_loopback_address(const std::string& host_port) {
  return host_port.rfind("127.", 0) == 0 || host_port.rfind("[::1]", 0) == 0 || host_port.rfind("localhost", 0) == 0;
}

bool is_ssh(const std::vector<std::string>& words) {
  if (words.empty()) return false;
  const auto& w = words.front();
  return w == "ssh" || (w.size() > 4 && w.compare(w.size() - 4, 4, "/ssh") == 0);
}

}  // namespace

result<std::vector<placement>> plan_placements(const launch_options& opts, const std::string& local_host_name) {
  if (opts.nnodes) {
    std::vector<placement> out;
    for (int l = 0; l < opts.num_ranks; ++l) {
      placement p;
      p.rank = opts.node_rank * opts.num_ranks + l;
      p.host = local_host_name;
      p.local_rank = l;
      p.local_size = opts.num_ranks;
      p.cross_rank = opts.node_rank;
      p.cross_size = *opts.nnodes;
      out.push_back(p);
    }
    return out;
  }
  if (opts.hosts.empty()) return place_ranks({{local_host_name, opts.num_ranks}}, opts.num_ranks);
  return place_ranks(opts.hosts, opts.num_ranks);
}

std::vector<std::pair<std::string, std::string>> job_variables(const launch_options& opts, const job_identity& job,
                                                               const placement& p, int world_size, int worker) {
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back("CHORUS_RENDEZVOUS", job.rendezvous);
  v.emplace_back("CHORUS_JOB_SECRET", job.secret);
  if (!job.job_id.empty()) v.emplace_back("CHORUS_JOB_ID", job.job_id);
  if (opts.num_streams) v.emplace_back("CHORUS_NUM_STREAMS", std::to_string(*opts.num_streams));
  for (const auto& kv : opts.extra_env) v.push_back(kv);
  v.emplace_back("CHORUS_RANK", std::to_string(p.rank));
  v.emplace_back("CHORUS_SIZE", std::to_string(world_size));
  v.emplace_back("CHORUS_LOCAL_RANK", std::to_string(p.local_rank));
  v.emplace_back("CHORUS_LOCAL_SIZE", std::to_string(p.local_size));
  v.emplace_back("HOROVOD_RANK", std::to_string(p.rank));
  v.emplace_back("HOROVOD_SIZE", std::to_string(world_size));
  v.emplace_back("HOROVOD_LOCAL_RANK", std::to_string(p.local_rank));
  v.emplace_back("HOROVOD_LOCAL_SIZE", std::to_string(p.local_size));
  v.emplace_back("HOROVOD_CROSS_RANK", std::to_string(p.cross_rank));
  v.emplace_back("HOROVOD_CROSS_SIZE", std::to_string(p.cross_size));
  v.emplace_back("HOROVOD_HOSTNAME", p.host);
  if (!opts.elastic() && !job.master_port.empty()) {  // torch.distributed's (init_process_group("chorus"))
    v.emplace_back("RANK", std::to_string(p.rank));
    v.emplace_back("WORLD_SIZE", std::to_string(world_size));
    v.emplace_back("LOCAL_RANK", std::to_string(p.local_rank));
    v.emplace_back("LOCAL_WORLD_SIZE", std::to_string(p.local_size));
    v.emplace_back("MASTER_ADDR", job.master_addr);
    v.emplace_back("MASTER_PORT", job.master_port);
  }
  if (opts.elastic()) {  // the worker id is its first rank; rounds renumber ranks, not workers
    v.emplace_back("CHORUS_ELASTIC_WORKER", std::to_string(worker >= 0 ? worker : p.rank));
    // How long chorusrun may wait for slots, so a worker waits as long for the next round. Both
    // names, alike: an alias inherited with another value would contradict it.
    if (opts.elastic_timeout_seconds) {
      const std::string seconds = cfg::number_text(*opts.elastic_timeout_seconds);
      v.emplace_back("CHORUS_ELASTIC_TIMEOUT_SECONDS", seconds);
      v.emplace_back("HOROVOD_ELASTIC_TIMEOUT", seconds);
    }
  }
  return v;
}

bool starts_directly(const launch_options& opts, const std::string& host, const std::string& this_host) {
  if (opts.elastic()) return is_loopback_name(host) || host == this_host;
  if (opts.hosts.empty() && !opts.elastic()) return true;
  return !opts.launcher_template && is_loopback_name(host);
}

std::string shell_quote(const std::string& s) { return "'" + replace_all(s, "'", "'\\''") + "'"; }

namespace {

// One rank's (or elastic worker's) start: its variables in its environment, or on the stdin of
// the launcher that starts it on its host.
result<rank_launch> launch_of(const launch_options& opts, const job_identity& job, const placement& p,
                              int world_size, int worker, bool direct, const std::vector<std::string>& base_env,
                              const std::string& workdir) {
  rank_launch l;
  l.rank = worker >= 0 ? worker : p.rank;
  l.host = opts.hosts.empty() && direct ? "" : p.host;
  auto vars = job_variables(opts, job, p, world_size, worker);
  // Later entries replace earlier ones of the same name; ordered by name for stable runs.
  std::map<std::string, std::string> env;
  for (const auto& e : base_env) {
    auto eq = e.find('=');
    if (eq != std::string::npos) env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  // Only the rank handed chorusrun's listener may name one (not a value left in our own
  // environment by an outer launcher).
  env.erase("CHORUS_RENDEZVOUS_FD");
  // CHORUS_HOST names an address of this host: a rank elsewhere cannot listen there (a launcher
  // that passes its environment on, such as nsenter or srun, would hand it over). -x still can.
  if (!direct) env.erase("CHORUS_HOST");
  if (direct) {
    for (const auto& [k, v] : vars) env[k] = v;
    if (p.rank == 0 && job.store_listener >= 0 && !opts.elastic()) {  // elastic: chorusrun serves
      l.inherit_fd = job.store_listener;
      env["CHORUS_RENDEZVOUS_FD"] = std::to_string(job.store_listener);
    }
    l.argv = opts.command;
  } else {
    for (const auto& [k, v] : vars) {
      if (v.find('\n') != std::string::npos)
        return status{errc::invalid_argument, "rank " + std::to_string(l.rank) + " on " + p.host + ": " + k +
                                                  " holds a newline; it cannot be passed to a remote rank"};
      l.stdin_data += k + "=" + v + "\n";
    }
    l.stdin_data += "\n";
    auto words = split_words(opts.launcher_template.value_or(default_ssh_template));
    for (auto& w : words) w = replace_all(w, "{host}", p.host);
    if (is_ssh(words)) {
      // ssh hands one string to the remote shell: quote every word, start in our directory.
      std::string remote = "cd " + shell_quote(workdir) + " 2>/dev/null; exec sh -c " + shell_quote(env_prologue) +
                           " chorus-rank";
      for (const auto& a : opts.command) remote += " " + shell_quote(a);
      words.push_back(remote);
    } else {
      words.insert(words.end(), {"sh", "-c", env_prologue, "chorus-rank"});
      words.insert(words.end(), opts.command.begin(), opts.command.end());
    }
    l.argv = std::move(words);
  }
  for (auto& [k, v] : env) l.env.push_back(k + "=" + v);
  return l;
}

}  // namespace

result<std::vector<rank_launch>> plan_launch(const launch_options& opts, const job_identity& job,
                                             const std::vector<placement>& placements,
                                             const std::vector<std::string>& base_env, const std::string& workdir,
                                             const std::string& this_host) {
  // An elastic job may start fewer workers than -np (the slots its script offered).
  const int world_size = opts.nnodes ? *opts.nnodes * opts.num_ranks
                                     : opts.elastic() ? static_cast<int>(placements.size()) : opts.num_ranks;
  std::vector<rank_launch> out;
  for (const auto& p : placements) {
    auto l = launch_of(opts, job, p, world_size, -1, starts_directly(opts, p.host, this_host), base_env, workdir);
    if (!l) return l.error();
    out.push_back(std::move(*l));
  }
  return out;
}

result<rank_launch> elastic_worker_launch(const launch_options& opts, const job_identity& job, const placement& p,
                                          int world_size, int worker, const std::vector<std::string>& base_env,
                                          const std::string& workdir, const std::string& this_host) {
  const bool direct = starts_directly(opts, p.host, this_host);
  if (!direct && is_loopback_address(job.rendezvous))
    return status{errc::config, "the elastic store listens on " + job.rendezvous +
                                    " (every worker started on this host), which host " + p.host +
                                    " cannot reach; name a remote host at the start (-H, --hostfile or the "
                                    "script's first offer), or give this host's address in CHORUS_HOST or "
                                    "CHORUS_IFACE"};
  return launch_of(opts, job, p, world_size, worker, direct, base_env, workdir);
}

}  // namespace chorus::chorusrun
