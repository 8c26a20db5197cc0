// Which algorithm fusion plans for an allgather's rows (plan_batch, actors/fusion_actor.hpp):
// the hierarchical allgather for the job's own set across hosts under auto and on, the flat ring
// under off, without a hierarchy, for a process set and with compression; the counts chunk
// always the flat ring.
#include <gtest/gtest.h>

#include "actors/fusion_actor.hpp"

namespace chorus {
namespace {

op_ref gather(const std::string& name, int set, compression wire = compression::none) {
  op_ref o;
  o.spec.name = negotiated_name(name, set);
  o.spec.process_set = set;
  o.spec.kind = collective_kind::allgather;
  o.spec.type = dtype::f32;
  o.spec.shape = {0, 4};
  o.spec.wire = wire;
  o.first_dim = 3;
  return o;
}

fusion_state state(hier_mode mode, std::vector<std::string> identities) {
  fusion_state s;
  s.cfg.rank = 1;
  s.cfg.size = 4;
  s.cfg.chunk_bytes = 1024;
  s.cfg.in_place_bytes = 0;
  s.cfg.hierarchical = mode;
  s.cfg.hosts = std::make_shared<const host_groups>(group_by_host(identities));
  auto sets = std::make_shared<process_set_table>(4);
  EXPECT_EQ(*sets->add({3, 1}), 1);
  s.cfg.process_sets = sets;
  s.next_sequence = s.cfg.first_sequence;
  return s;
}

// The data chunk's algorithm of each bucket of [global, set 1, global fp16]; the name metrics
// and the trace give each bucket must say the same.
std::vector<chunk_algo> planned(fusion_state s) {
  batch_agreed b{1, {gather("g", 0), gather("s", 1), gather("c", 0, compression::fp16)}};
  std::vector<chunk_algo> out;
  for (auto& [job, works] : plan_batch(s, b)) {
    EXPECT_EQ(works.size(), 2u);
    EXPECT_EQ(works.front().algo, chunk_algo::allgather_counts);
    out.push_back(works.back().algo);
    EXPECT_EQ(algorithm_of(works), out.back() == chunk_algo::hier_allgather ? "hier_allgather" : "ring_allgather");
  }
  return out;
}

TEST(fusion_allgather, rows_go_hierarchical_across_hosts_for_the_job_set_only) {
  using a = chunk_algo;
  const std::vector<std::string> two_by_two{"x", "x", "y", "y"};
  for (auto mode : {hier_mode::automatic, hier_mode::on})
    EXPECT_EQ(planned(state(mode, two_by_two)),
              (std::vector<a>{a::hier_allgather, a::allgather_data, a::allgather_data}));
  EXPECT_EQ(planned(state(hier_mode::off, two_by_two)),
            (std::vector<a>{a::allgather_data, a::allgather_data, a::allgather_data}));
  EXPECT_EQ(planned(state(hier_mode::on, {"x", "y", "z", "w"})),
            (std::vector<a>{a::allgather_data, a::allgather_data, a::allgather_data}))
      << "one rank per host";
}

}  // namespace
}  // namespace chorus
