// Which streams get a shared-memory ring (ring.hpp), agreed at init through the rendezvous.
// Every rank takes part in the same three rounds whatever it decides, so a rank with the lanes
// switched off (CHORUS_SHM_BYTES=0) or on another host only makes its peers use TCP:
//   1. "shm-host/<r>": the rank's link_entry ("on " or "off " (lanes switched off), then the
//      host's identity: env/host_settings.hpp, boot id, host name and the device of /dev/shm, or
//      CHORUS_HOST_ID); every rank builds the link table from them (transport/link_table.hpp);
//   2. "shm-ring/<r>": for each stream to each peer with our identity, the segment we created
//      for our frames to it (name and nonce), and two more, numbered as streams S and S + 1 (S:
//      the number of streams), for our mailboxes to it (mailbox.hpp, mailbox_use);
//   3. "shm-ok/<r>": the segments addressed to us that we could open and check (another IPC
//      namespace, for one, cannot). Every rank reads every rank's list, so all know alike
//      whether every pair of ranks has mailboxes both ways.
// A sender uses a ring only when its receiver said so in round 3. Failures to create or open
// a segment are logged and cost that lane only; only the rendezvous failing is an error.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <vector>

#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/link_table.hpp"
#include "runtime/transport/shm/mailbox.hpp"
#include "runtime/transport/shm/mailbox_use.hpp"
#include "runtime/transport/shm/ring.hpp"

namespace chorus::shm {

struct lane {
  std::unique_ptr<ring_writer> out;  ///< our frames to the peer; null: TCP only
  std::unique_ptr<ring_reader> in;   ///< the peer's frames to us; null: it sends on TCP only
};

/// One use's mailboxes to and from every peer.
struct mailbox_set {
  std::vector<std::unique_ptr<mailbox_writer>> out;  ///< [peer]: our posts to it; null: none
  std::vector<std::unique_ptr<mailbox_reader>> in;   ///< [peer]: its posts to us; null: none
  /// Every pair of ranks has this use's mailboxes both ways (size > 1); the same on every rank.
  bool everywhere = false;
};

struct lane_set {
  std::vector<std::vector<lane>> lanes;  ///< [peer][stream]; all null when size is 1
  link_table table;                      ///< round 1's plan, before a lane fell back to TCP
  std::vector<std::string> identities;   ///< every rank's host identity, by rank
  std::vector<link_entry> entries;       ///< every rank's round-1 entry, by rank (the same on every rank)
  std::array<mailbox_set, mailbox_uses> mail;            ///< [mailbox_use]
  mailbox_set& mailboxes(mailbox_use u) { return mail[static_cast<std::size_t>(u)]; }
};

/// `ring_bytes` 0 switches our side off. `limits` check the frames read from the peers' rings.
result<lane_set> open_lanes(const process_env& env, rendezvous& rdv, int streams, std::size_t ring_bytes,
                            std::chrono::milliseconds timeout, const wire::frame_limits& limits);

/// This host's identity for round 1 (chorus::host_identity of the process environment).
std::string host_identity();

}  // namespace chorus::shm
