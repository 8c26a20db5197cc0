// Several ranks of the mesh data plane in threads of one test process, on 127.0.0.1: each with
// its own rendezvous client (rank 0 serves the store) and mesh_transport, built in parallel as
// real ranks would, and closed together (the goodbye exchange needs every rank). Options per
// rank, so a test can give ranks different settings (e.g. rings on one side only).
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/mesh/mesh_transport.hpp"
#include "tests/support/rendezvous_env.hpp"

namespace chorus::testing {

struct mesh_ranks {
  std::vector<std::unique_ptr<rendezvous>> rdv;
  std::vector<std::unique_ptr<mesh::mesh_transport>> t;
  std::string error;  ///< why some rank did not connect ("" when all did)

  /// `options(r)`: rank r's mesh options (connect_timeout and streams included).
  mesh_ranks(int n, const std::string& secret, uint64_t job_id,
             const std::function<mesh::mesh_options(int)>& options)
      : rdv(static_cast<std::size_t>(n)), t(static_cast<std::size_t>(n)) {
    const uint16_t port = free_rendezvous_port();
    auto make = [&, port](int r) -> status {
      process_env env = rendezvous_env(r, n, port, std::chrono::seconds(10));
      env.job_secret = secret;
      env.job_id = job_id;
      auto rdv_r = rendezvous::open(env);
      if (!rdv_r) return rdv_r.error();
      rdv[static_cast<std::size_t>(r)] = std::move(*rdv_r);
      auto parts = mesh::connect_mesh(env, *rdv[static_cast<std::size_t>(r)], options(r));
      if (!parts) return parts.error();
      t[static_cast<std::size_t>(r)] = std::make_unique<mesh::mesh_transport>(*parts);
      return {};
    };
    std::vector<std::future<status>> others;
    for (int r = 1; r < n; ++r) others.push_back(std::async(std::launch::async, make, r));
    if (auto st = make(0); !st.ok()) error += "rank 0: " + st.to_string() + "; ";
    for (int r = 1; r < n; ++r)
      if (auto st = others[static_cast<std::size_t>(r - 1)].get(); !st.ok())
        error += "rank " + std::to_string(r) + ": " + st.to_string() + "; ";
  }

  bool ok() const { return error.empty(); }

  /// Closes every rank's transport at once, waiting up to `grace` for the goodbyes.
  void close(std::chrono::milliseconds grace = std::chrono::seconds(2)) {
    std::vector<std::future<void>> closing;
    for (std::size_t r = 1; r < t.size(); ++r)
      if (t[r]) closing.push_back(std::async(std::launch::async, [this, r, grace] { t[r]->close(grace); }));
    if (!t.empty() && t[0]) t[0]->close(grace);
    for (auto& f : closing) f.get();
  }
  ~mesh_ranks() { close(); }
};

}  // namespace chorus::testing
