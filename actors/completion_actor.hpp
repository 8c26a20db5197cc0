// The completion actor: one per rank. Receives bucket_planned from fusion and chunk_done from
// the senders; sends ops_finished (a bucket's ops at once) to the producer (which calls each
// op's done) and chunk_ended to fusion (each chunk's end, for its start window). Each ended chunk of a fused bucket is unpacked into
// the ops' outputs at once (overlapping the bucket's other chunks); when the last chunk ends
// every op of the bucket ends exactly once: ok, or the bucket's first error naming the tensor
// and this rank (after an error the outputs hold undefined data). Averaging needs nothing
// here: the chunk ops divide by the number of ranks, element by element, so a fused bucket is
// divided once.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/protocol.hpp"

namespace chorus {

struct completion_config {
  int rank = 0;
  int size = 1;
};

struct completion_state {
  struct entry {
    std::shared_ptr<bucket_job> job;
    uint32_t left = 0;  ///< chunks not ended yet
    status error;       ///< the first chunk error
  };
  completion_config cfg;
  completion_wiring wired;
  std::unordered_map<uint64_t, entry> buckets;
  std::set<uint64_t> unfinished;  ///< planned chunk sequences not ended yet
  uint64_t ops_ok = 0;
  uint64_t ops_failed = 0;
  uint64_t buckets_done = 0;
  uint64_t nonfinite_found = 0;  ///< buckets whose NaN/Inf check found a non-finite input
  static inline const char* name = "chorus.completion";
};

caf::behavior completion_actor(caf::stateful_actor<completion_state>* self, completion_config cfg);

}  // namespace chorus
