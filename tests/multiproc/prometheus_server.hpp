// Test helper: a real Prometheus server (Debian's /usr/bin/prometheus) on 127.0.0.1 with its own
// temporary data dir and a generated config that scrapes the given targets every 200 ms.
// Stopped (SIGTERM, then SIGKILL after 10 s, scaled) by its own pid when the object goes.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiproc/local_job.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/mini_json.hpp"

namespace chorus::testing {

inline constexpr const char* prometheus_binary = "/usr/bin/prometheus";

class prometheus_server {
 public:
  /// Starts scraping `targets` ("127.0.0.1:9400", ...) as job "chorus".
  explicit prometheus_server(const std::vector<std::string>& targets) {
    char tmpl[] = "/tmp/chorus-prometheus-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    port_ = free_port();
    {
      std::ofstream cfg(dir_ + "/prometheus.yml");
      cfg << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n"
          << "scrape_configs:\n  - job_name: chorus\n    static_configs:\n      - targets: [";
      for (std::size_t i = 0; i < targets.size(); ++i) cfg << (i ? ", " : "") << "'" << targets[i] << "'";
      cfg << "]\n";
    }
    std::vector<std::string> argv = {prometheus_binary,
                                     "--config.file=" + dir_ + "/prometheus.yml",
                                     "--storage.tsdb.path=" + dir_ + "/data",
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                     "--log.level=warn"};
    server_.emplace(argv, child_process::env_map{}, dir_ + "/prometheus.log", "", dir_);
  }

  ~prometheus_server() {
    if (server_) {
      server_->signal(SIGTERM);
      if (!server_->wait_until(deadline_in(std::chrono::seconds(10)))) server_->kill_now(false);
      server_.reset();
    }
    std::string cmd = "rm -rf '" + dir_ + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
  }

  int port() const { return port_; }
  std::string log() const { return read_file(dir_ + "/prometheus.log"); }

  /// Runs an instant query; the "result" array of a successful answer, nullopt otherwise.
  std::optional<json> query(const std::string& promql) const {
    auto r = http_get("127.0.0.1", port_, "/api/v1/query?query=" + url_encode(promql), std::chrono::seconds(5));
    if (!r || r->code != 200) return std::nullopt;
    try {
      json j = json::parse(r->body);
      if (!j["status"].is_string() || j["status"].str() != "success") return std::nullopt;
      return j["data"]["result"];
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  /// Polls query(promql) until `accept(result)` holds or `timeout` (scaled) passes; the last result.
  template <class Accept>
  std::optional<json> wait_for(const std::string& promql, Accept accept, std::chrono::milliseconds timeout) const {
    const auto end = deadline_in(timeout);
    std::optional<json> last;
    for (;;) {
      last = query(promql);
      if (last && accept(*last)) return last;
      if (std::chrono::steady_clock::now() >= end) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

 private:
  std::string dir_;
  int port_ = 0;
  std::optional<child_process> server_;
};

/// The value of one sample of an instant-query result ("value": [time, "text"]).
inline double sample_value(const json& sample) { return std::stod(sample["value"][1].str()); }

}  // namespace chorus::testing
