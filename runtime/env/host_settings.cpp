// CHORUS_HOST_ID / CHORUS_IFACE / CHORUS_HOST and the host identity.
#include "runtime/env/host_settings.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>

namespace chorus {

host_settings read_host_settings(const env_lookup& get) {
  const cfg::reader r(get);  // the one reader of the variable table (text: an empty value is unset)
  auto value = [&](const char* name) {
    auto v = r.text(name);
    return v ? *v : std::string();
  };
  return {value("CHORUS_HOST_ID"), value("CHORUS_IFACE"), value("CHORUS_HOST")};
}

host_settings read_host_settings() { return read_host_settings(cfg::process_lookup()); }

std::string host_identity(const host_settings& s) {
  if (!s.host_id.empty()) return "id:" + s.host_id;
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string shm = "none";
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0)
    shm = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  return boot + "/" + name + "/shm=" + shm;
}

std::string host_name_in(const std::string& identity) {
  if (identity.rfind("id:", 0) == 0) return identity.substr(3);
  const auto first = identity.find('/');
  const auto shm = identity.rfind("/shm=");
  if (first == std::string::npos || shm == std::string::npos || shm <= first) return {};
  return identity.substr(first + 1, shm - first - 1);
}

status require_secret_across_hosts(const process_env& env) {
  if (!env.job_secret.empty() || env.local_assumed || env.local_size >= env.size) return {};
  return status{errc::config,
                "rank " + std::to_string(env.rank) + ": the job spans hosts (local size " + std::to_string(env.local_size) +
                    " of " + std::to_string(env.size) +
                    " ranks) and CHORUS_JOB_SECRET is not set; export the same secret on every host, e.g. "
                    "CHORUS_JOB_SECRET=$(openssl rand -hex 32) (chorusrun sets one)"};
}

std::string job_secret_or_default(const process_env& env) {
  return env.job_secret.empty() ? std::string("chorus-default-secret-set-CHORUS_JOB_SECRET") : env.job_secret;
}

}  // namespace chorus
