// How fusion plans buckets of process sets (plan_batch, actors/fusion_actor.hpp): a member plans
// the bucket among the set's members (member-local rank and size, member list, a broadcast root
// as a member-local rank, the flat algorithms); a rank outside the set plans the same bucket as
// a bystander, with the same chunks and sequence numbers, so that every rank's numbering of the
// batch's later buckets stays the same.
#include <gtest/gtest.h>

#include "actors/fusion_actor.hpp"

namespace chorus {
namespace {

op_ref ref(const std::string& name, collective_kind kind, int64_t rows, int set, int root = -1) {
  op_ref o;
  o.spec.name = negotiated_name(name, set);
  o.spec.process_set = set;
  o.spec.kind = kind;
  o.spec.type = dtype::f32;
  o.spec.shape = {rows, 4};
  o.spec.root = root;
  if (kind == collective_kind::allgather) {
    o.first_dim = rows;
    o.spec.shape[0] = 0;
  }
  return o;
}

/// Rank `rank` of 4; set 1 = {1, 3}.
fusion_state state(int rank) {
  fusion_state s;
  s.cfg.rank = rank;
  s.cfg.size = 4;
  s.cfg.chunk_bytes = 1024;
  s.cfg.in_place_bytes = 0;
  auto sets = std::make_shared<process_set_table>(4);
  EXPECT_EQ(*sets->add({3, 1}), 1);
  s.cfg.process_sets = sets;
  s.next_sequence = s.cfg.first_sequence;
  return s;
}

batch_agreed batch() {
  // A set allreduce of 3 chunks, a set broadcast from job rank 3, a set allgather, then a global
  // allreduce whose sequence numbers must not depend on the rank.
  return batch_agreed{1, {ref("a", collective_kind::allreduce, 192, 1), ref("b", collective_kind::broadcast, 8, 1, 3),
                          ref("g", collective_kind::allgather, 2, 1), ref("z", collective_kind::allreduce, 8, 0)}};
}

TEST(fusion_process_sets, members_and_bystanders_plan_the_same_sequences) {
  std::vector<std::vector<uint64_t>> firsts;
  for (int rank = 0; rank < 4; ++rank) {
    auto s = state(rank);
    auto planned = plan_batch(s, batch());
    ASSERT_EQ(planned.size(), 4u);
    std::vector<uint64_t> first;
    for (auto& [job, works] : planned) first.push_back(job->first_sequence);
    firsts.push_back(first);
    const bool member = rank == 1 || rank == 3;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& job = *planned[i].first;
      EXPECT_EQ(job.bystander, !member) << "rank " << rank << " bucket " << i;
      EXPECT_EQ(job.group_size, 2);
      if (member) {
        ASSERT_TRUE(job.members);
        EXPECT_EQ(*job.members, (std::vector<int>{1, 3}));
        EXPECT_EQ(job.group_rank, rank == 1 ? 0 : 1);
      } else {
        EXPECT_FALSE(job.members);
      }
    }
    EXPECT_EQ(planned[0].second.size(), 3u) << "192 rows x 16 bytes in 1 KiB chunks";
    for (const auto& w : planned[0].second) EXPECT_NE(w.algo, chunk_algo::hier_sharded);
    if (member) EXPECT_EQ(planned[1].second.front().root, 1) << "job rank 3 is member 1";
    if (member) EXPECT_EQ(planned[2].first->first_dims.size(), 2u) << "the counts of the members only";
    const auto& global = *planned[3].first;
    EXPECT_FALSE(global.bystander);
    EXPECT_EQ(global.group_size, 4);
    EXPECT_EQ(global.group_rank, rank);
  }
  for (int rank = 1; rank < 4; ++rank) EXPECT_EQ(firsts[rank], firsts[0]) << "rank " << rank;
}

TEST(fusion_process_sets, a_set_unknown_here_fails_its_ops_instead_of_running) {
  auto s = state(1);
  auto planned = plan_batch(s, batch_agreed{1, {ref("x", collective_kind::allreduce, 8, 5)}});
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_TRUE(planned[0].first->bystander);
  EXPECT_EQ(planned[0].first->local_error.message(),
            "allreduce('x') in process set 5: process set 5 is not registered on rank 1 (removed while the operation "
            "was pending?)");
}

}  // namespace
}  // namespace chorus
