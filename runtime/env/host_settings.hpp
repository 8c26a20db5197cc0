// The variables that say which host a rank is on and where it listens: CHORUS_HOST_ID,
// CHORUS_IFACE and CHORUS_HOST, read here and nowhere else (so a configuration module can take
// them over in one place), and the host identity that decides which ranks share memory.
#pragma once

#include <string>

#include "runtime/env/process_env.hpp"

namespace chorus {

/// Plain value; copy freely.
struct host_settings {
  std::string host_id;    ///< CHORUS_HOST_ID: overrides the computed host identity; empty: computed
  std::string iface;      ///< CHORUS_IFACE: listen on this interface's address (like GLOO_SOCKET_IFNAME)
  std::string bind_host;  ///< CHORUS_HOST: listen on this address; wins over CHORUS_IFACE
};

/// Reads the three variables through `get` (empty counts as unset).
host_settings read_host_settings(const env_lookup& get);
/// The same from the process environment.
host_settings read_host_settings();

/// This host's identity: "id:<CHORUS_HOST_ID>" when set, else boot id, host name and the device
/// id of the /dev/shm filesystem. Ranks in containers or namespaces on one machine share the
/// boot id (and often the host name) but see separate /dev/shm, so only ranks whose identities
/// are equal may try a shared-memory ring.
std::string host_identity(const host_settings& s);

/// The host's name in a host_identity() text (CHORUS_HOST_ID's value for "id:..."), for
/// messages that name a peer's host; empty when the text has none.
std::string host_name_in(const std::string& identity);

/// A job whose ranks span hosts (local_size < size, from a launcher's variables) must have a
/// job secret: errc::config saying how to set one. One host, or one rank: ok.
status require_secret_across_hosts(const process_env& env);

/// The secret connections prove: CHORUS_JOB_SECRET, or (one host only, after the check above) a
/// well-known default that keeps nobody out; the data plane warns when it is used.
std::string job_secret_or_default(const process_env& env);

}  // namespace chorus
