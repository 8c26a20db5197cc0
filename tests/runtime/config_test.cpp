// runtime/config: every variable of the table with a good value (and what it sets) and a bad
// value (an errc::config naming the variable, the value and what is allowed); aliases;
// defaults of the table against the typed structs' own defaults.
#include "runtime/config/config.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "runtime/collectives/communicator.hpp"
#include "runtime/config/variables.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/transport/mesh/mesh_connect.hpp"

namespace chorus {
namespace {

using env_map = std::map<std::string, std::string>;

env_lookup lookup_of(const env_map& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

result<config> read(const env_map& env) { return read_config(lookup_of(env)); }

template <class T>
std::string str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// One row per variable read by read_config: a good value, what it sets (as text), a bad value.
struct row {
  const char* name;
  const char* good;
  std::string expected;
  std::function<std::string(const config&)> field;
  const char* bad;
};

std::vector<row> config_rows() {
  using std::chrono::milliseconds;
  auto ms = [](milliseconds d) { return str(d.count()); };
  return {
      {"CHORUS_NUM_STREAMS", "4", "4", [](const config& c) { return str(c.transport.num_streams); }, "0"},
      {"CHORUS_SOCKET_BUFFER_BYTES", "65536", "65536",
       [](const config& c) { return str(c.transport.socket_buffer_bytes); }, "1GiB"},
      {"CHORUS_SHM_BYTES", "0", "0", [](const config& c) { return str(c.transport.shm_bytes); }, "-1"},
      {"CHORUS_SHM_SPIN_US", "0", "0", [](const config& c) { return str(c.transport.shm_spin.count()); }, "x"},
      {"CHORUS_HOST", "10.0.0.7", "10.0.0.7", [](const config& c) { return c.transport.host; }, nullptr},
      {"CHORUS_IFACE", "eth1", "eth1", [](const config& c) { return c.transport.iface; }, nullptr},
      {"CHORUS_HOST_ID", "rack3-node7", "rack3-node7", [](const config& c) { return c.transport.host_id; }, nullptr},
      {"CHORUS_CONNECT_TIMEOUT_SECONDS", "0.5", "500", [=](const config& c) { return ms(c.transport.connect_timeout); },
       "86401"},
      {"CHORUS_PEER_TIMEOUT_SECONDS", "5", "5000", [=](const config& c) { return ms(c.transport.peer_timeout); }, "0.5"},
      {"CHORUS_CHUNK_BYTES", "65536", "65536 given",
       [](const config& c) { return str(c.collectives.chunk_bytes) + (c.collectives.chunk_bytes_given ? " given" : ""); },
       "10"},
      {"CHORUS_SEGMENT_BYTES", "8192", "8192", [](const config& c) { return str(c.collectives.segment_bytes); },
       "67108865"},
      {"CHORUS_SMALL_ALLREDUCE_BYTES", "0", "0", [](const config& c) { return str(c.collectives.small_bytes); },
       "64k"},
      {"CHORUS_CALLER_ALLREDUCE_BYTES", "0", "0", [](const config& c) { return str(c.collectives.caller_bytes); },
       "2147483648"},
      {"CHORUS_REDUCE_KERNELS", "portable", "portable",
       [](const config& c) { return c.collectives.reduce_kernels; }, "bogus"},
      {"CHORUS_COMPRESSION", "bf16", "bf16",
       [](const config& c) { return std::string(name_of(c.collectives.wire)); }, "fp8"},
      {"CHORUS_COMPRESSION_SHM", "on", "on",
       [](const config& c) { return std::string(name_of(c.collectives.wire_on_shm)); }, "off"},
      {"CHORUS_NAN_CHECK", "skip", "skip", [](const config& c) { return std::string(name_of(c.collectives.check)); },
       "warn"},
      {"CHORUS_HIERARCHICAL", "1", "on", [](const config& c) { return c.collectives.hierarchical; }, "yes"},
      {"CHORUS_NEGOTIATION", "central", "central", [](const config& c) { return c.pipeline.negotiation; }, "ring"},
      {"CHORUS_CYCLE_TIME_MS", "0.25", "250", [](const config& c) { return str(c.pipeline.cycle_time.count()); },
       "-1"},
      {"CHORUS_EARLY_START", "1", "1", [](const config& c) { return str(c.pipeline.early_start); }, "yes"},
      {"CHORUS_HOLD_WHEN_AHEAD", "0", "0", [](const config& c) { return str(c.pipeline.hold_when_ahead); }, "2"},
      {"CHORUS_DYNAMIC_PROCESS_SETS", "1", "1", [](const config& c) { return str(c.pipeline.dynamic_process_sets); }, "2"},
      {"CHORUS_FUSION_THRESHOLD", "1048576", "1048576",
       [](const config& c) { return str(c.pipeline.fusion_threshold); }, "64MB"},
      {"CHORUS_IN_PLACE_BYTES", "0", "0", [](const config& c) { return str(c.pipeline.in_place_bytes); }, "1e6"},
      {"CHORUS_STALL_CHECK_TIME_SECONDS", "5", "5", [](const config& c) { return str(c.pipeline.stall_check.count()); },
       "1.5"},
      {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "30", "30",
       [](const config& c) { return str(c.pipeline.stall_shutdown.count()); }, "soon"},
      {"CHORUS_SCHEDULER_THREADS", "2", "2", [](const config& c) { return str(c.pipeline.scheduler_threads); }, "0"},
      {"CHORUS_SCHEDULER_BATCH", "0", "0", [](const config& c) { return str(c.pipeline.scheduler_batch); }, "yes"},
      {"CHORUS_PRIORITY", "0", "0", [](const config& c) { return str(c.pipeline.priority); }, "on"},
      {"CHORUS_START_WINDOW", "8", "8", [](const config& c) { return str(c.pipeline.start_window); }, "0"},
      {"CHORUS_CHUNKS_IN_FLIGHT", "4", "4", [](const config& c) { return str(c.pipeline.chunks_in_flight); }, "1025"},
      {"CHORUS_STREAM_PLACEMENT", "round_robin", "round_robin",
       [](const config& c) { return c.pipeline.stream_placement; }, "fastest"},
      {"CHORUS_METRICS_ADDR", "0.0.0.0", "0.0.0.0", [](const config& c) { return c.telemetry.metrics_address; },
       nullptr},
      {"CHORUS_METRICS_PORT", "0", "0", [](const config& c) { return str(c.telemetry.metrics_port); }, "70000"},
      {"CHORUS_TRACE", "/tmp/t", "/tmp/t", [](const config& c) { return c.telemetry.trace_dir; }, nullptr},
      {"CHORUS_GPU_OPERATIONS", "host", "host", [](const config& c) { return c.pipeline.gpu_operations; }, "mpi"},
      {"CHORUS_TRACE_MAX_MB", "0", "0", [](const config& c) { return str(c.telemetry.trace_max_mb); }, "lots"},
      {"CHORUS_AUTOTUNE", "1", "1", [](const config& c) { return str(c.autotune.enabled); }, "on"},
      {"CHORUS_MAX_STREAMS", "4", "4", [](const config& c) { return str(c.autotune.max_streams); }, "65"},
      {"CHORUS_AUTOTUNE_LOG", "/tmp/a.csv", "/tmp/a.csv", [](const config& c) { return c.autotune.log_path; }, nullptr},
      {"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "5", "5", [](const config& c) { return str(c.autotune.warmup_samples); }, "0"},
      {"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "20", "20", [](const config& c) { return str(c.autotune.steps_per_sample); },
       "0"},
      {"CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", "5", "5",
       [](const config& c) { return str(c.autotune.windows_per_sample); }, "101"},
      {"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "40", "40", [](const config& c) { return str(c.autotune.max_samples); },
       "1001"},
      {"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8", "0.8", [](const config& c) { return str(c.autotune.noise); },
       "-1"},
      {"CHORUS_AUTOTUNE_SEED", "42", "42", [](const config& c) { return str(c.autotune.seed); }, "-3"},
      {"CHORUS_AUTOTUNE_RETUNE_DROP", "0.3", "0.3", [](const config& c) { return str(c.autotune.retune_drop); }, "1"},
      {"CHORUS_LOG_LEVEL", "debug", str(static_cast<int>(log::level::debug)),
       [](const config& c) { return str(static_cast<int>(c.log_level)); }, "verbose"},
  };
}

TEST(Config, EveryConfigVariableHasARow) {
  std::set<std::string> rows;
  for (const auto& r : config_rows()) rows.insert(r.name);
  for (const auto& v : cfg::variables())
    if (v.read_by == cfg::owner::config) EXPECT_TRUE(rows.count(std::string(v.name))) << v.name << " has no test row";
  for (const auto& r : rows) EXPECT_NE(cfg::find(r), nullptr) << r << " is not in the table";
}

TEST(Config, GoodValuesSetTheirField) {
  for (const auto& r : config_rows()) {
    auto c = read({{r.name, r.good}});
    ASSERT_TRUE(c.ok()) << r.name << "=" << r.good << ": " << c.error().to_string();
    EXPECT_EQ(r.field(*c), r.expected) << r.name << "=" << r.good;
    auto d = read({});
    ASSERT_TRUE(d.ok());
    EXPECT_NE(r.field(*d), r.expected) << r.name << ": the good value is the default, so it proves nothing";
  }
}

TEST(Config, BadValuesNameVariableValueAndWhatIsAllowed) {
  for (const auto& r : config_rows()) {
    if (!r.bad) continue;  // free text: nothing is bad
    auto c = read({{r.name, r.bad}});
    ASSERT_FALSE(c.ok()) << r.name << "=" << r.bad << " was accepted";
    EXPECT_EQ(c.error().code(), errc::config);
    const std::string& m = c.error().message();
    EXPECT_NE(m.find(std::string(r.name) + "='" + r.bad + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(cfg::allowed(*cfg::find(r.name))), std::string::npos) << m;
  }
}

TEST(Config, ExamplesOfTheMessage) {
  auto c = read({{"CHORUS_REDUCE_KERNELS", "bogus"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "CHORUS_REDUCE_KERNELS='bogus' is not allowed: expected one of auto, portable (default auto)");
  c = read({{"CHORUS_NUM_STREAMS", "65"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "CHORUS_NUM_STREAMS='65' is not allowed: expected a whole number in [1, 64] (default 8)");
  c = read({{"CHORUS_CONNECT_TIMEOUT_SECONDS", "0"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "CHORUS_CONNECT_TIMEOUT_SECONDS='0' is not allowed: expected a number in [0.001, 86400] (default 60)");
}

TEST(Config, NoClampingAtTheEdges) {
  EXPECT_TRUE(read({{"CHORUS_NUM_STREAMS", "64"}}).ok());
  EXPECT_FALSE(read({{"CHORUS_NUM_STREAMS", "65"}}).ok());
  EXPECT_TRUE(read({{"CHORUS_NUM_STREAMS", "1"}}).ok());
  for (const char* v : {" 2", "2 ", "+2", "0x2", "2.0", "02a"})
    EXPECT_FALSE(read({{"CHORUS_NUM_STREAMS", v}}).ok()) << "'" << v << "'";
  for (const char* v : {"nan", "inf", "1e9", "-0.5", "1s"})
    EXPECT_FALSE(read({{"CHORUS_CONNECT_TIMEOUT_SECONDS", v}}).ok()) << "'" << v << "'";
  auto big = read({{"CHORUS_CONNECT_TIMEOUT_SECONDS", "86400"}});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->transport.connect_timeout, std::chrono::hours(24));
}

TEST(Config, EmptyMeansUnset) {
  auto c = read({{"CHORUS_NUM_STREAMS", ""}, {"CHORUS_NEGOTIATION", ""}});
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->transport.num_streams, 8);
  EXPECT_EQ(c->pipeline.negotiation, "gossip");
}

TEST(Config, HorovodAliases) {
  struct alias_row {
    const char* alias;
    const char* value;
    std::function<std::string(const config&)> field;
    std::string expected;
    const char* other = "7";  ///< a valid value, different from `value`, under the CHORUS_ name
    const char* bad = "x";    ///< a value the alias refuses (nullptr: text, anything goes)
  };
  std::vector<alias_row> rows{
      {"HOROVOD_CYCLE_TIME", "5", [](const config& c) { return str(c.pipeline.cycle_time.count()); }, "5000"},
      {"HOROVOD_DYNAMIC_PROCESS_SETS", "1", [](const config& c) { return str(c.pipeline.dynamic_process_sets); }, "1",
       "0"},
      {"HOROVOD_FUSION_THRESHOLD", "0", [](const config& c) { return str(c.pipeline.fusion_threshold); }, "0"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "10",
       [](const config& c) { return str(c.pipeline.stall_check.count()); }, "10"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "20",
       [](const config& c) { return str(c.pipeline.stall_shutdown.count()); }, "20"},
      {"HOROVOD_GPU_OPERATIONS", "host", [](const config& c) { return c.pipeline.gpu_operations; }, "host", "nccl"},
      {"HOROVOD_AUTOTUNE", "1", [](const config& c) { return str(c.autotune.enabled); }, "1", "0"},
      {"HOROVOD_AUTOTUNE_LOG", "/tmp/h.csv", [](const config& c) { return c.autotune.log_path; }, "/tmp/h.csv",
       "/tmp/c.csv", nullptr},
      {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "4", [](const config& c) { return str(c.autotune.warmup_samples); }, "4"},
      {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "12", [](const config& c) { return str(c.autotune.steps_per_sample); },
       "12"},
      {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "25", [](const config& c) { return str(c.autotune.max_samples); },
       "25"},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8", [](const config& c) { return str(c.autotune.noise); }, "0.8"},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1", [](const config& c) { return c.collectives.hierarchical; }, "on", "off"},
  };
  std::set<std::string> tested;
  for (const auto& r : rows) {
    tested.insert(r.alias);
    const cfg::variable* v = cfg::find(r.alias);
    ASSERT_NE(v, nullptr) << r.alias;
    auto c = read({{r.alias, r.value}});
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_EQ(r.field(*c), r.expected) << r.alias;
    // A bad alias value names the alias.
    if (r.bad) {
      auto bad = read({{r.alias, r.bad}});
      ASSERT_FALSE(bad.ok());
      EXPECT_NE(bad.error().message().find(std::string(r.alias) + "='" + r.bad + "'"), std::string::npos)
          << bad.error().message();
    }
    // The same value under both names is fine (compared as values: 5 and 5.0 agree where decimals are
    // allowed); different values name both.
    EXPECT_TRUE(read({{r.alias, r.value}, {std::string(v->name), r.value}}).ok());
    auto both = read({{r.alias, r.value}, {std::string(v->name), r.other}});
    ASSERT_FALSE(both.ok()) << r.alias;
    EXPECT_NE(both.error().message().find(std::string(v->name) + "='" + r.other + "'"), std::string::npos);
    EXPECT_NE(both.error().message().find(std::string(r.alias) + "='" + r.value + "'"), std::string::npos);
  }
  EXPECT_TRUE(read({{"HOROVOD_CYCLE_TIME", "5"}, {"CHORUS_CYCLE_TIME_MS", "5.0"}}).ok());
  // Synonyms agree: HOROVOD_HIERARCHICAL_ALLREDUCE=1 means on, =0 off; they contradict only
  // the other word.
  struct synonym_row {
    const char* chorus;
    const char* horovod;
    const char* expected;  ///< the field's value; nullptr: a contradiction naming both
  };
  const synonym_row synonyms[] = {
      {"on", "1", "on"},     {"off", "0", "off"},  {"1", "1", "on"},   {"0", "0", "off"},
      {"on", "0", nullptr},  {"off", "1", nullptr}, {"0", "1", nullptr}, {"auto", "1", nullptr},
  };
  for (const auto& s : synonyms) {
    auto c = read({{"CHORUS_HIERARCHICAL", s.chorus}, {"HOROVOD_HIERARCHICAL_ALLREDUCE", s.horovod}});
    const std::string both = std::string(s.chorus) + " / " + s.horovod;
    if (s.expected) {
      ASSERT_TRUE(c.ok()) << both << ": " << c.error().to_string();
      EXPECT_EQ(c->collectives.hierarchical, s.expected) << both;
    } else {
      ASSERT_FALSE(c.ok()) << both;
      EXPECT_NE(c.error().message().find(std::string("CHORUS_HIERARCHICAL='") + s.chorus + "' contradicts "
                                         "HOROVOD_HIERARCHICAL_ALLREDUCE='" + s.horovod + "'"),
                std::string::npos)
          << c.error().message();
    }
  }
  for (const auto& v : cfg::variables())  // the launcher's own are tested through process_env (below)
    if (!v.alias.empty() && v.read_by != cfg::owner::launcher)
      EXPECT_TRUE(tested.count(std::string(v.alias))) << v.alias << " has no test row";
}

TEST(Config, DefaultsOfTheTableAreTheStructsDefaults) {
  auto c = read({});
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const config plain;
  EXPECT_EQ(c->transport.num_streams, plain.transport.num_streams);
  EXPECT_EQ(c->transport.socket_buffer_bytes, plain.transport.socket_buffer_bytes);
  EXPECT_EQ(c->transport.shm_bytes, plain.transport.shm_bytes);
  EXPECT_EQ(c->transport.connect_timeout, plain.transport.connect_timeout);
  EXPECT_EQ(c->transport.peer_timeout, std::chrono::seconds(30));
  EXPECT_EQ(c->transport.peer_timeout, plain.transport.peer_timeout);
  EXPECT_EQ(c->transport.host, "");
  EXPECT_EQ(c->transport.iface, "");
  EXPECT_EQ(c->transport.host_id, "");
  EXPECT_EQ(c->collectives.chunk_bytes, plain.collectives.chunk_bytes);
  EXPECT_FALSE(c->collectives.chunk_bytes_given);  // so the communicator lowers it across hosts
  EXPECT_EQ(c->collectives.segment_bytes, plain.collectives.segment_bytes);
  EXPECT_EQ(c->collectives.small_bytes, plain.collectives.small_bytes);
  EXPECT_EQ(c->collectives.reduce_kernels, plain.collectives.reduce_kernels);
  EXPECT_EQ(c->pipeline.negotiation, plain.pipeline.negotiation);
  EXPECT_EQ(c->autotune.enabled, plain.autotune.enabled);
  EXPECT_EQ(c->autotune.log_path, plain.autotune.log_path);
  EXPECT_EQ(c->autotune.warmup_samples, plain.autotune.warmup_samples);
  EXPECT_EQ(c->autotune.steps_per_sample, plain.autotune.steps_per_sample);
  EXPECT_EQ(c->autotune.windows_per_sample, plain.autotune.windows_per_sample);
  EXPECT_EQ(c->autotune.max_samples, plain.autotune.max_samples);
  EXPECT_EQ(c->autotune.noise, plain.autotune.noise);
  EXPECT_EQ(c->autotune.seed, plain.autotune.seed);
  EXPECT_EQ(c->autotune.retune_drop, plain.autotune.retune_drop);
  EXPECT_EQ(c->pipeline.cycle_time, plain.pipeline.cycle_time);
  EXPECT_EQ(c->pipeline.early_start, plain.pipeline.early_start);
  EXPECT_EQ(c->pipeline.hold_when_ahead, plain.pipeline.hold_when_ahead);
  EXPECT_EQ(c->pipeline.fusion_threshold, plain.pipeline.fusion_threshold);
  EXPECT_EQ(c->pipeline.in_place_bytes, plain.pipeline.in_place_bytes);
  EXPECT_EQ(c->pipeline.stall_check, plain.pipeline.stall_check);
  EXPECT_EQ(c->pipeline.stall_shutdown, plain.pipeline.stall_shutdown);
  EXPECT_EQ(c->pipeline.scheduler_threads, plain.pipeline.scheduler_threads);
  EXPECT_EQ(c->pipeline.start_window, plain.pipeline.start_window);
  EXPECT_EQ(c->pipeline.chunks_in_flight, plain.pipeline.chunks_in_flight);
  EXPECT_EQ(c->telemetry.metrics_address, plain.telemetry.metrics_address);
  EXPECT_EQ(c->telemetry.metrics_port, plain.telemetry.metrics_port);
  EXPECT_EQ(c->telemetry.trace_dir, plain.telemetry.trace_dir);
  EXPECT_EQ(c->telemetry.trace_max_mb, plain.telemetry.trace_max_mb);
  EXPECT_EQ(c->log_level, plain.log_level);
  // The modules' own option structs start where the configuration does.
  auto tcp = mesh::mesh_options::from_config(c->transport);
  mesh::mesh_options tcp_plain;
  EXPECT_EQ(tcp.num_streams, tcp_plain.num_streams);
  EXPECT_EQ(tcp.socket_buffer_bytes, tcp_plain.socket_buffer_bytes);
  EXPECT_EQ(tcp.shm_bytes, tcp_plain.shm_bytes);
  EXPECT_EQ(tcp.connect_timeout, tcp_plain.connect_timeout);
  EXPECT_EQ(tcp.bind_host, tcp_plain.bind_host);
  auto coll = collective_options::from_config(c->collectives);
  collective_options coll_plain;
  EXPECT_EQ(coll.chunk_bytes, coll_plain.chunk_bytes);
  EXPECT_FALSE(coll.chunk_bytes_given);
  EXPECT_EQ(coll.segment_bytes, coll_plain.segment_bytes);
  EXPECT_EQ(coll.small_bytes, coll_plain.small_bytes);
}

TEST(Config, EveryTableEntryIsWellFormed) {
  std::set<std::string_view> names;
  for (const auto& v : cfg::variables()) {
    EXPECT_EQ(v.name.rfind("CHORUS_", 0), 0u) << v.name;
    EXPECT_TRUE(v.alias.empty() || v.alias.rfind("HOROVOD_", 0) == 0) << v.alias;
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_EQ(v.meaning.find('|'), std::string_view::npos) << v.name << ": '|' breaks the README table";
    if (v.type == cfg::kind::whole || v.type == cfg::kind::decimal) EXPECT_LE(v.min, v.max) << v.name;
    if (v.type == cfg::kind::choice) EXPECT_FALSE(v.choices.empty()) << v.name;
    if (v.fallback.empty()) continue;
    // Every default passes its own rule.
    env_map none;
    cfg::reader r(lookup_of(none));
    switch (v.type) {
      case cfg::kind::whole: EXPECT_TRUE(r.whole(v.name).ok()) << v.name; break;
      case cfg::kind::decimal: EXPECT_TRUE(r.decimal(v.name).ok()) << v.name; break;
      case cfg::kind::choice: EXPECT_TRUE(r.choice(v.name).ok()) << v.name; break;
      case cfg::kind::text: EXPECT_TRUE(r.text(v.name).ok()) << v.name; break;
    }
  }
}

TEST(Config, AskingForAVariableOutsideTheTableIsABug) {
  env_map none;
  cfg::reader r(lookup_of(none));
  auto v = r.whole("CHORUS_NO_SUCH_THING");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), errc::internal);
  auto k = r.choice("CHORUS_NUM_STREAMS");  // a whole number, asked as a choice
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code(), errc::internal);
}

// The launcher's variables are read by runtime/env with the same number rules and message.
TEST(Config, LauncherVariablesThroughProcessEnv) {
  struct launcher_row {
    env_map good;
    env_map bad;
    const char* named;  // the variable the bad value's error names
  };
  std::vector<launcher_row> rows{
      {{{"CHORUS_RANK", "1"}, {"CHORUS_SIZE", "2"}, {"CHORUS_RENDEZVOUS", "h:1"}},
       {{"CHORUS_RANK", "one"}, {"CHORUS_SIZE", "2"}, {"CHORUS_RENDEZVOUS", "h:1"}}, "CHORUS_RANK='one'"},
      {{{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "2"}, {"CHORUS_RENDEZVOUS", "h:1"}},
       {{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "2x"}, {"CHORUS_RENDEZVOUS", "h:1"}}, "CHORUS_SIZE='2x'"},
      {{{"CHORUS_LOCAL_RANK", "0"}, {"CHORUS_LOCAL_SIZE", "1"}},
       {{"CHORUS_LOCAL_RANK", "-1"}, {"CHORUS_LOCAL_SIZE", "1"}}, "CHORUS_LOCAL_RANK='-1'"},
      {{{"CHORUS_LOCAL_RANK", "0"}, {"CHORUS_LOCAL_SIZE", "1"}},
       {{"CHORUS_LOCAL_RANK", "0"}, {"CHORUS_LOCAL_SIZE", "z"}}, "CHORUS_LOCAL_SIZE='z'"},
      {{{"CHORUS_RENDEZVOUS", "h:5"}}, {{"CHORUS_RENDEZVOUS", "h"}}, "CHORUS_RENDEZVOUS='h'"},
      {{{"CHORUS_RENDEZVOUS_FD", "7"}}, {{"CHORUS_RENDEZVOUS_FD", "-3"}}, "CHORUS_RENDEZVOUS_FD='-3'"},
      {{{"CHORUS_JOB_SECRET", "00ff"}}, {{"CHORUS_JOB_SECRET", "0g"}}, "CHORUS_JOB_SECRET"},
      {{{"CHORUS_JOB_ID", "abc"}}, {{"CHORUS_JOB_ID", "xyz"}}, "CHORUS_JOB_ID='xyz'"},
      {{{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "2.5"}}, {{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "0"}},
       "CHORUS_RENDEZVOUS_TIMEOUT_SECONDS='0' is not allowed: expected a number in [0.001, 1000000000]"},
      {{{"CHORUS_ELASTIC_WORKER", "3"}}, {{"CHORUS_ELASTIC_WORKER", "w3"}}, "CHORUS_ELASTIC_WORKER='w3'"},
      {{{"CHORUS_ELASTIC_WORKER", "3"}, {"CHORUS_ELASTIC_TIMEOUT_SECONDS", "2.5"}},
       {{"CHORUS_ELASTIC_WORKER", "3"}, {"CHORUS_ELASTIC_TIMEOUT_SECONDS", "0"}},
       "CHORUS_ELASTIC_TIMEOUT_SECONDS='0'"},
      {{{"CHORUS_ELASTIC_WORKER", "3"}, {"HOROVOD_ELASTIC_TIMEOUT", "5"}},
       {{"CHORUS_ELASTIC_WORKER", "3"}, {"HOROVOD_ELASTIC_TIMEOUT", "soon"}}, "HOROVOD_ELASTIC_TIMEOUT='soon'"},
  };
  std::set<std::string> tested;
  for (const auto& r : rows) {
    for (const auto& [k, v] : r.good) tested.insert(k);
    auto good = read_process_env(lookup_of(r.good));
    EXPECT_TRUE(good.ok()) << good.error().to_string();
    auto bad = read_process_env(lookup_of(r.bad));
    ASSERT_FALSE(bad.ok()) << r.named;
    EXPECT_EQ(bad.error().code(), errc::config);
    EXPECT_NE(bad.error().message().find(r.named), std::string::npos) << bad.error().message();
  }
  for (const auto& v : cfg::variables())
    if (v.read_by == cfg::owner::launcher) {
      EXPECT_TRUE(tested.count(std::string(v.name))) << v.name << " untested";
      if (!v.alias.empty()) EXPECT_TRUE(tested.count(std::string(v.alias))) << v.alias << " untested";
    }
  // The alias gives the same value as the variable.
  auto via_alias = read_process_env(lookup_of({{"CHORUS_ELASTIC_WORKER", "3"}, {"HOROVOD_ELASTIC_TIMEOUT", "5"}}));
  ASSERT_TRUE(via_alias.ok()) << via_alias.error().to_string();
  EXPECT_EQ(via_alias->elastic_timeout, std::chrono::seconds(5));
}

}  // namespace
}  // namespace chorus

TEST(RetiredVariables, AreNamedWhenSetAndReadNoMore) {
  // CHORUS_CONTROL_PLANE with the value that once chose the CAF control plane: no error either.
  std::map<std::string, std::string> env{
      {"CHORUS_FRAME_STEALING", "1"}, {"CHORUS_CONTROL_PLANE", "caf"}, {"CHORUS_NUM_STREAMS", "4"}};
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto set = chorus::retired_set(get);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set[0], "CHORUS_FRAME_STEALING");
  EXPECT_EQ(set[1], "CHORUS_CONTROL_PLANE");
  auto c = chorus::read_config(get);  // still reads: the variables only warn
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->transport.num_streams, 4);
  EXPECT_EQ(chorus::cfg::find("CHORUS_FRAME_STEALING"), nullptr);
  EXPECT_EQ(chorus::cfg::find("CHORUS_CONTROL_PLANE"), nullptr);
  env["CHORUS_CONTROL_PLANE"] = "";  // set but empty counts as unset, as for every variable
  EXPECT_EQ(chorus::retired_set(get).size(), 1u);
  for (const auto& v : chorus::cfg::retired_variables()) EXPECT_FALSE(v.why.empty()) << v.name;
}
