// Reads rank, size, local rank/size, rendezvous address, job secret/id and timeout from the
// variables of the launcher families (chorus, torchrun, Open MPI, PMI, Slurm), checks that the
// families that are set agree, and validates every value at this boundary.
#include "runtime/env/process_env.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "runtime/core/hex.hpp"
#include "runtime/env/slurm_step.hpp"

namespace chorus {
namespace {

status config_error(std::string message) { return {errc::config, std::move(message)}; }

// An empty value counts as unset: shells and launchers export empty variables freely.
const char* lookup(const env_lookup& get, const char* var) {
  const char* v = get(var);
  return (v && *v) ? v : nullptr;
}

// One integer read from one variable, remembered with its name for messages.
struct field {
  int value = 0;
  std::string var;
  std::string text;
  std::string partner;  // the same family's variable for the other half: rank <-> size
  std::string show() const { return var + "=" + text; }
};

// What one launcher family says. Fields it does not set stay empty.
struct family {
  const char* name = "";
  std::optional<field> rank, size, local_rank, local_size;
  bool any() const { return rank || size || local_rank || local_size; }
};

// Ranks and sizes: the config module's whole-number rule, within an int.
result<int> parse_count(const char* var, std::string_view text) {
  auto value = cfg::parse_whole(var, text, 0, std::numeric_limits<int>::max());
  if (!value) return value.error();
  return static_cast<int>(*value);
}

// Reads `var` into `slot`; a second alias of the same field within one family must agree.
status read_field(const env_lookup& get, const char* var, const char* partner,
                  std::optional<field>& slot) {
  const char* text = lookup(get, var);
  if (!text) return {};
  auto value = parse_count(var, text);
  if (!value) return value.error();
  field f{*value, var, text, partner};
  if (slot && slot->value != f.value) {
    return config_error(slot->show() + " contradicts " + f.show());
  }
  if (!slot) slot = std::move(f);
  return {};
}

// The variables of one family; where a field has two spellings, both are read and must agree.
struct family_vars {
  const char* name;
  std::vector<const char*> rank, size, local_rank, local_size;
};

result<family> read_family(const env_lookup& get, const family_vars& vars) {
  family fam;
  fam.name = vars.name;
  auto read_all = [&](const std::vector<const char*>& names, const char* partner,
                      std::optional<field>& slot) {
    for (const char* var : names) {
      if (auto st = read_field(get, var, partner, slot); !st) return st;
    }
    return status{};
  };
  auto first = [](const std::vector<const char*>& names) { return names.empty() ? "" : names[0]; };
  if (auto st = read_all(vars.rank, first(vars.size), fam.rank); !st) return st;
  if (auto st = read_all(vars.size, first(vars.rank), fam.size); !st) return st;
  if (auto st = read_all(vars.local_rank, first(vars.local_size), fam.local_rank); !st) return st;
  if (auto st = read_all(vars.local_size, first(vars.local_rank), fam.local_size); !st) return st;
  return fam;
}

// SLURM_TASKS_PER_NODE is always set by srun, in the compressed form "2(x3),1": this node's
// entry (SLURM_NODEID, else the first), right also where the tasks do not divide evenly.
// SLURM_NTASKS_PER_NODE (only with --ntasks-per-node, the most per node) is the fallback.
status read_slurm_local_size(const env_lookup& get, std::optional<field>& slot) {
  const char* text = lookup(get, "SLURM_TASKS_PER_NODE");
  if (!text) {
    if (const char* most = lookup(get, "SLURM_NTASKS_PER_NODE"))
      if (auto value = parse_count("SLURM_NTASKS_PER_NODE", most))
        slot = field{*value, "SLURM_NTASKS_PER_NODE", most, "SLURM_LOCALID"};
    return {};
  }
  int node = 0;
  if (const char* id = lookup(get, "SLURM_NODEID")) {
    auto parsed = parse_count("SLURM_NODEID", id);
    if (!parsed) return parsed.error();
    node = *parsed;
  }
  auto value = tasks_on_node(text, node);
  if (!value) return value.error();
  slot = field{*value, "SLURM_TASKS_PER_NODE", text, "SLURM_LOCALID"};
  return {};
}

// Each field from the first family that sets it; all others that set it must agree.
status merge_field(const std::vector<family>& fams, std::optional<field> family::*member,
                   std::optional<field>& out, std::string& out_family) {
  for (const auto& fam : fams) {
    const auto& slot = fam.*member;
    if (!slot) continue;
    if (!out) {
      out = slot;
      out_family = fam.name;
    } else if (out->value != slot->value) {
      return config_error(out->show() + " contradicts " + slot->show());
    }
  }
  return {};
}

struct host_port {
  std::string host;
  uint16_t port = 0;
};

result<host_port> parse_host_port(const char* var, std::string_view text) {
  auto bad = [&](const std::string& why) {
    return config_error(std::string(var) + "='" + std::string(text) + "' " + why);
  };
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("is not host:port");
  std::string_view host = text.substr(0, colon);
  std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("is not host:port (write an IPv6 host in brackets: [::1]:29500)");
  }
  if (host.empty()) return bad("has an empty host");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return bad("has a port that is not a number in 0-65535");
  }
  return host_port{std::string(host), static_cast<uint16_t>(port)};
}

// CHORUS_RENDEZVOUS, else MASTER_ADDR:MASTER_PORT+offset; nullopt when neither is set.
result<std::optional<host_port>> read_rendezvous(const env_lookup& get) {
  if (const char* text = lookup(get, "CHORUS_RENDEZVOUS")) {
    auto hp = parse_host_port("CHORUS_RENDEZVOUS", text);
    if (!hp) return hp.error();
    return std::optional<host_port>(std::move(*hp));
  }
  const char* addr = lookup(get, "MASTER_ADDR");
  const char* port_text = lookup(get, "MASTER_PORT");
  if (!addr && !port_text) return std::optional<host_port>();
  if (!addr)
    return config_error(std::string("MASTER_PORT=") + port_text + " is set but MASTER_ADDR is not");
  if (!port_text)
    return config_error(std::string("MASTER_ADDR=") + addr + " is set but MASTER_PORT is not");
  auto port = parse_count("MASTER_PORT", port_text);
  if (!port) return port.error();
  if (*port < 1 || *port + master_port_offset > 65535) {
    return config_error(std::string("MASTER_PORT=") + port_text + " must be in 1-" +
                        std::to_string(65535 - master_port_offset) +
                        " (Chorus serves on MASTER_PORT+" + std::to_string(master_port_offset) +
                        "); or set CHORUS_RENDEZVOUS=host:port");
  }
  std::string host(addr);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return std::optional<host_port>(
      host_port{host, static_cast<uint16_t>(*port + master_port_offset)});
}

// The secret's value is never echoed, not even in part.
result<std::string> read_secret(const env_lookup& get) {
  const char* text = lookup(get, "CHORUS_JOB_SECRET");
  if (!text) return std::string();
  std::string_view hex(text);
  if (hex.size() % 2 != 0) {
    return config_error("CHORUS_JOB_SECRET is not hex: it has an odd number of digits (" +
                        std::to_string(hex.size()) + "; value not shown)");
  }
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return config_error("CHORUS_JOB_SECRET is not hex: character " +
                          std::to_string(hi < 0 ? i : i + 1) + " is not 0-9a-f (value not shown)");
    }
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  return bytes;
}

result<std::optional<uint64_t>> read_job_id(const env_lookup& get) {
  const char* text = lookup(get, "CHORUS_JOB_ID");
  if (!text) return std::optional<uint64_t>();
  std::string_view hex(text);
  if (hex.size() > 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), id, 16);
  if (ec != std::errc() || end != hex.data() + hex.size() || hex.size() > 16 ||
      hex.front() == '-') {
    return config_error(std::string("CHORUS_JOB_ID='") + text +
                        "' is not a hex number of at most 16 digits");
  }
  return std::optional<uint64_t>(id);
}

// FNV-1a, 64 bit: every rank derives the same id from the same rendezvous address.
uint64_t hash_address(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

result<std::chrono::milliseconds> read_timeout(const env_lookup& get) {
  auto seconds = cfg::reader(get).decimal("CHORUS_RENDEZVOUS_TIMEOUT_SECONDS");
  if (!seconds) return seconds.error();
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(*seconds * 1000.0)));
}

const std::vector<family_vars>& launcher_families() {
  static const std::vector<family_vars> fams = {
      {"chorus", {"CHORUS_RANK"}, {"CHORUS_SIZE"}, {"CHORUS_LOCAL_RANK"}, {"CHORUS_LOCAL_SIZE"}},
      {"torchrun", {"RANK"}, {"WORLD_SIZE"}, {"LOCAL_RANK"}, {"LOCAL_WORLD_SIZE"}},
      {"openmpi",
       {"OMPI_COMM_WORLD_RANK"},
       {"OMPI_COMM_WORLD_SIZE"},
       {"OMPI_COMM_WORLD_LOCAL_RANK"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE"}},
      {"pmi",
       {"PMI_RANK"},
       {"PMI_SIZE"},
       {"PMI_LOCAL_RANK", "MPI_LOCALRANKID"},
       {"PMI_LOCAL_SIZE", "MPI_LOCALNRANKS"}},
  };
  return fams;
}

// Reads the launcher families in precedence order; Slurm only when none of the others is set.
result<std::vector<family>> read_families(const env_lookup& get) {
  std::vector<family> fams;
  bool any = false;
  for (const auto& vars : launcher_families()) {
    auto fam = read_family(get, vars);
    if (!fam) return fam.error();
    any = any || fam->any();
    fams.push_back(std::move(*fam));
  }
  if (any) return fams;
  if (!lookup(get, "SLURM_PROCID")) return fams;  // e.g. a plain salloc shell: not a job step
  // Slurm's local size is not a plain number; read_slurm_local_size parses it.
  auto slurm =
      read_family(get, {"slurm", {"SLURM_PROCID"}, {"SLURM_NTASKS"}, {"SLURM_LOCALID"}, {}});
  if (!slurm) return slurm.error();
  if (slurm->local_rank) slurm->local_rank->partner = "SLURM_TASKS_PER_NODE";
  if (auto st = read_slurm_local_size(get, slurm->local_size); !st) return st;
  return std::vector<family>{std::move(*slurm)};
}

status check_below(const field& low, const field& high) {
  if (low.value < high.value) return {};
  return config_error(low.show() + " is not below " + high.show() + " (ranks count from 0)");
}

}  // namespace

result<process_env> read_process_env() {
  return read_process_env(cfg::process_lookup());
}

result<process_env> read_group_env(const env_lookup& get) {
  process_env env;
  auto secret = read_secret(get);
  if (!secret) return secret.error();
  env.job_secret = std::move(*secret);
  auto id = read_job_id(get);
  if (!id) return id.error();
  if (*id) env.job_id = **id;
  auto timeout = read_timeout(get);
  if (!timeout) return timeout.error();
  env.rendezvous_timeout = *timeout;
  if (const char* master = lookup(get, "MASTER_ADDR")) {
    env.rendezvous_host = master;
  } else if (auto rdv = read_rendezvous(get); rdv && *rdv) {
    env.rendezvous_host = (*rdv)->host;
  } else if (auto slurm = read_slurm_rendezvous(get); slurm && *slurm) {
    env.rendezvous_host = (*slurm)->host;  // srun with init_method="tcp://...": the step's first node
  }
  return env;
}

result<process_env> read_process_env(const env_lookup& get) {
  process_env env;
  auto fams = read_families(get);
  if (!fams) return fams.error();

  // 1. Rank and size: both or neither.
  std::optional<field> rank, size, local_rank, local_size;
  std::string rank_family, size_family, unused;
  if (auto st = merge_field(*fams, &family::rank, rank, rank_family); !st) return st;
  if (auto st = merge_field(*fams, &family::size, size, size_family); !st) return st;
  if (auto st = merge_field(*fams, &family::local_rank, local_rank, unused); !st) return st;
  if (auto st = merge_field(*fams, &family::local_size, local_size, unused); !st) return st;
  if (rank && !size) return config_error(rank->show() + " is set but " + rank->partner + " is not");
  if (size && !rank) return config_error(size->show() + " is set but " + size->partner + " is not");
  if (rank) {
    if (size->value < 1) return config_error(size->show() + ": the job size must be at least 1");
    if (auto st = check_below(*rank, *size); !st) return st;
    env.rank = rank->value;
    env.size = size->value;
    env.source = rank_family;
  }

  // 2. Local rank and size: both, or neither (then one host is assumed).
  if (local_rank && !local_size) {
    return config_error(local_rank->show() + " is set but " + local_rank->partner + " is not");
  }
  if (local_size && !local_rank) {
    return config_error(local_size->show() + " is set but " + local_size->partner + " is not");
  }
  if (local_rank) {
    if (local_size->value < 1) {
      return config_error(local_size->show() + ": the local size must be at least 1");
    }
    if (auto st = check_below(*local_rank, *local_size); !st) return st;
    if (size && local_size->value > size->value) {
      return config_error(local_size->show() + " exceeds " + size->show());
    }
    if (!size && local_size->value > 1) {
      return config_error(local_size->show() +
                          " exceeds the job size 1 (no rank variables are set; set CHORUS_RANK "
                          "and CHORUS_SIZE)");
    }
    env.local_rank = local_rank->value;
    env.local_size = local_size->value;
  } else {
    env.local_rank = env.rank;
    env.local_size = env.size;
    env.local_assumed = env.size > 1;  // describe() shows it; callers log describe()
  }

  // 3. Rendezvous address: required for more than one rank.
  auto rdv = read_rendezvous(get);
  if (!rdv) return rdv.error();
  if (rdv->has_value()) {
    env.rendezvous_host = (*rdv)->host;
    env.rendezvous_port = (*rdv)->port;
    if (env.rendezvous_port == 0 && env.size > 1) {
      return config_error("CHORUS_RENDEZVOUS=" + format_host_port(env.rendezvous_host, 0) +
                          ": port 0 (pick any) only works for a single rank, but " + size->show());
    }
  } else if (env.size > 1 && env.source == "slurm") {
    // srun alone: rank 0 runs on the step's first node (slurm_step.hpp).
    auto slurm = read_slurm_rendezvous(get);
    if (!slurm) return slurm.error();
    if (!slurm->has_value())
      return config_error("this slurm launch (" + size->show() +
                          ") has no SLURM_STEP_NODELIST and SLURM_JOB_ID to meet at rank 0's node: set "
                          "CHORUS_RENDEZVOUS=host:port with rank 0's host");
    env.rendezvous_host = (*slurm)->host;
    env.rendezvous_port = (*slurm)->port;
  } else if (env.size > 1) {
    return config_error("this " + env.source + " launch (" + size->show() +
                        ") needs a rendezvous address: set CHORUS_RENDEZVOUS=host:port with rank "
                        "0's host, or MASTER_ADDR and MASTER_PORT");
  }

  if (cfg::reader(get).is_set("CHORUS_RENDEZVOUS_FD")) {
    auto fd = cfg::reader(get).whole("CHORUS_RENDEZVOUS_FD");
    if (!fd) return fd.error();
    env.rendezvous_fd = static_cast<int>(*fd);
  }

  // 4. Job identity and timeout.
  auto secret = read_secret(get);
  if (!secret) return secret.error();
  env.job_secret = std::move(*secret);
  auto job_id = read_job_id(get);
  if (!job_id) return job_id.error();
  env.job_id = job_id->has_value()
                   ? **job_id
                   : hash_address(format_host_port(env.rendezvous_host, env.rendezvous_port));
  auto timeout = read_timeout(get);
  if (!timeout) return timeout.error();
  env.rendezvous_timeout = *timeout;

  // 5. Elastic mode: the worker id chorusrun started this process with.
  if (cfg::reader(get).is_set("CHORUS_ELASTIC_WORKER")) {
    auto worker = cfg::reader(get).whole("CHORUS_ELASTIC_WORKER");
    if (!worker) return worker.error();
    env.elastic_worker = static_cast<int>(*worker);
    auto wait = cfg::reader(get).decimal("CHORUS_ELASTIC_TIMEOUT_SECONDS");
    if (!wait) return wait.error();
    env.elastic_timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(*wait * 1000.0)));
  }
  return env;
}

std::string format_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string describe(const process_env& env) {
  std::ostringstream os;
  os << "rank=" << env.rank << " size=" << env.size << " local_rank=" << env.local_rank
     << " local_size=" << env.local_size << (env.local_assumed ? " (assumed one host)" : "")
     << " rendezvous=" << format_host_port(env.rendezvous_host, env.rendezvous_port) << " job_id=0x"
     << std::hex << env.job_id << std::dec << " source=" << env.source
     << " secret=" << (env.job_secret.empty() ? "unset" : "set")
     << " rendezvous_timeout_ms=" << env.rendezvous_timeout.count();
  return os.str();
}

}  // namespace chorus
