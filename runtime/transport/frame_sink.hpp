// What a transport delivers to: the collective engine implements this. Every call happens on
// the transport's I/O thread, so the engine needs no locks.
#pragma once

#include <cstddef>

#include "runtime/core/status.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus {

class frame_sink {
 public:
  virtual ~frame_sink() = default;
  /// Where the payload of data frame `h` from `peer` should land (at least h.length bytes), or
  /// nullptr to have it read into the connection's scratch space, valid until delivered() returns.
  virtual std::byte* destination(int peer, const wire::frame_header& h) = 0;
  /// The payload of `h` is at `data`.
  virtual void delivered(int peer, const wire::frame_header& h, std::byte* data) = 0;
  /// The transport no longer references the payload of `h` (written, failed or cancelled).
  virtual void sent(int peer, const wire::frame_header& h) = 0;
  /// The connection to `peer` broke or the peer shut down; `why` names the rank.
  virtual void peer_failed(int peer, const status& why) = 0;
};

}  // namespace chorus
