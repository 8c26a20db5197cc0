// The ordered group's point-to-point transfers (ordered_group.hpp): the sender offers each one on
// the control link, the receiver matches it to a posted receive and says "ready" (or refuses
// it), then the bytes move straight into the receiver's buffer; an abort fails what is pending.
#include <cstring>

#include "bindings/ordered/ordered_group.hpp"
#include "runtime/collectives/p2p_op.hpp"

namespace chorus::ordered {

namespace {

// Control-link message kinds of the point-to-point protocol.
constexpr uint8_t msg_offer = 1;   // tag i32 | sequence u64 | bytes u64: "I have a transfer for you"
constexpr uint8_t msg_ready = 2;   // sequence u64: "my buffer for it is in place: send"
constexpr uint8_t msg_refuse = 3;  // sequence u64 | reason: "your transfer does not fit my receive"

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const auto at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <class T>
bool take(const std::vector<uint8_t>& in, std::size_t& at, T& v) {
  if (in.size() - at < sizeof v || at > in.size()) return false;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return true;
}

}  // namespace

uint64_t ordered_group::send(const call_info& c, const void* data, std::size_t bytes, int peer, int tag,
                             done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, bytes, name);
  lk.unlock();
  auto fail_now = [&](const status& why) {
    status st = named(name, why);
    ended(name, st);
    ends_->end(seq, [done = std::move(done), st = std::move(st)] { done(st); });
    return seq;
  };
  if (peer < 0 || peer >= size() || peer == rank())
    return fail_now(status{errc::invalid_argument, "destination rank " + std::to_string(peer) +
                                                       " is not another member of the group (size " +
                                                       std::to_string(size()) + ")"});
  if (auto st = failure(); !st.ok()) return fail_now(status{st.code(), "the group failed before: " + st.message()});
  std::vector<uint8_t> offer;
  uint64_t transfer = 0;
  {
    std::lock_guard p(p2p_mu_);
    transfer = p2p_sequence(rank(), next_transfer_++);
    sends_.emplace(transfer, pending_send{data, bytes, peer, seq, name, std::move(done)});
  }
  put<int32_t>(offer, tag);
  put<uint64_t>(offer, transfer);
  put<uint64_t>(offer, bytes);
  if (!link_ || !link_->send(peer, msg_offer, rank(), offer)) {
    pending_send s;
    {
      std::lock_guard p(p2p_mu_);
      auto it = sends_.find(transfer);
      if (it == sends_.end()) return seq;  // already failed by an abort
      s = std::move(it->second);
      sends_.erase(it);
    }
    status st = named(s.name, status{errc::connection_lost, "rank " + std::to_string(s.peer) + " is no longer connected"});
    ended(s.name, st);
    ends_->end(seq, [done = std::move(s.done), st = std::move(st)] { done(st); });
  }
  return seq;
}

uint64_t ordered_group::recv(const call_info& c, void* data, std::size_t bytes, int peer, int tag, recv_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, bytes, name);
  lk.unlock();
  if (peer < -1 || peer >= size() || peer == rank()) {
    status st = named(name, status{errc::invalid_argument, "source rank " + std::to_string(peer) +
                                                               " is not another member of the group (size " +
                                                               std::to_string(size()) + ")"});
    ended(name, st);
    ends_->end(seq, [done = std::move(done), st = std::move(st)] { done(st, -1); });
    return seq;
  }
  if (auto st = failure(); !st.ok()) {
    status out{st.code(), name.str() + ": the group failed before: " + st.message()};
    ended(name, out);
    ends_->end(seq, [done = std::move(done), out = std::move(out)] { done(out, -1); });
    return seq;
  }
  std::optional<p2p_match> m;
  pending_recv r{data, bytes, seq, name, std::move(done)};
  {
    std::lock_guard p(p2p_mu_);
    const uint64_t id = next_receive_++;
    m = matcher_.posted(p2p_receive{id, peer, tag});
    if (!m) recvs_.emplace(id, std::move(r));
  }
  if (m) start_receive(*m, std::move(r));
  return seq;
}

void ordered_group::start_receive(const p2p_match& m, pending_recv r) {
  const int source = m.offer.source;
  if (m.offer.bytes != r.bytes) {
    const std::string why = "rank " + std::to_string(source) + " sent " + std::to_string(m.offer.bytes) +
                            " bytes with tag " + std::to_string(m.offer.tag) + " but rank " + std::to_string(rank()) +
                            "'s receive takes " + std::to_string(r.bytes) + " (send and recv need tensors of one size)";
    std::vector<uint8_t> msg;
    put<uint64_t>(msg, m.offer.sequence);
    msg.insert(msg.end(), why.begin(), why.end());
    if (link_) link_->send(source, msg_refuse, rank(), msg);
    const uint64_t call = r.call;
    status st = named(r.name, status{errc::mismatch, why});
    ended(r.name, st);
    ends_->end(call, [done = std::move(r.done), st = std::move(st), source] { done(st, source); });
    return;
  }
  const uint64_t transfer = m.offer.sequence;
  const int stream = static_cast<int>(transfer % static_cast<uint64_t>(comm_->num_streams()));
  auto op = std::make_unique<p2p_recv_op>(transfer, stream, source, r.data, r.bytes, comm_->options().segment_bytes);
  const uint64_t call = r.call;
  auto done = std::move(r.done);
  comm_->plane().run_chunk(
      std::move(op),
      [this, call, name = r.name, done = std::move(done), source](const status& st) mutable {
        status out = named(name, st);
        if (!st.ok() && st.code() == errc::protocol) abort(out);
        ended(name, out);
        ends_->end(call, [done = std::move(done), out = std::move(out), source] { done(out, source); });
      },
      [link = link_, source, transfer, me = rank()] {
        std::vector<uint8_t> msg;
        put<uint64_t>(msg, transfer);
        if (link) link->send(source, msg_ready, me, msg);
      });
}

void ordered_group::on_control(int peer, uint8_t kind, std::vector<uint8_t> data) {
  std::size_t at = 0;
  auto hostile = [&](const std::string& what) {
    abort(status{errc::protocol, "rank " + std::to_string(peer) + " sent a point-to-point message that is not "
                                 "valid (" + what + ") in process group '" + opts_.name + "'"});
  };
  if (kind == msg_offer) {
    p2p_offer o;
    o.source = peer;
    int32_t tag = 0;
    if (!take(data, at, tag) || !take(data, at, o.sequence) || !take(data, at, o.bytes) || at != data.size())
      return hostile("offer of " + std::to_string(data.size()) + " bytes");
    if (!is_p2p_sequence(o.sequence) || p2p_sender(o.sequence) != peer)
      return hostile("offer of a transfer it does not own");
    o.tag = tag;
    std::optional<p2p_match> m;
    pending_recv r{};
    {
      std::lock_guard p(p2p_mu_);
      m = matcher_.offered(o);
      if (m) {
        auto it = recvs_.find(m->receive.id);
        if (it == recvs_.end()) return;  // failed meanwhile
        r = std::move(it->second);
        recvs_.erase(it);
      }
    }
    if (m) start_receive(*m, std::move(r));
    return;
  }
  uint64_t transfer = 0;
  if (!take(data, at, transfer)) return hostile("message kind " + std::to_string(kind) + " too short");
  pending_send s;
  {
    std::lock_guard p(p2p_mu_);
    auto it = sends_.find(transfer);
    if (it == sends_.end() || it->second.peer != peer)
      return hostile("a reply to transfer " + std::to_string(transfer) + ", which it was not offered");
    s = std::move(it->second);
    sends_.erase(it);
  }
  if (kind == msg_ready) {
    const int stream = static_cast<int>(transfer % static_cast<uint64_t>(comm_->num_streams()));
    comm_->plane().run_chunk(std::make_unique<p2p_send_op>(transfer, stream, peer, s.data, s.bytes,
                                                   comm_->options().segment_bytes),
                     finisher(s.call, s.name, std::move(s.done)));
  } else if (kind == msg_refuse) {
    std::string why(data.begin() + static_cast<std::ptrdiff_t>(at), data.end());
    const uint64_t call = s.call;
    status st = named(s.name, status{errc::mismatch, why});
    ended(s.name, st);
    ends_->end(call, [done = std::move(s.done), st = std::move(st)] { done(st); });
  } else {
    hostile("unknown kind " + std::to_string(kind));
  }
}

void ordered_group::on_closed(int peer, const status& why, bool clean) {
  if (!clean) {
    abort(why);
    return;
  }
  fail_p2p(status{errc::connection_lost, "rank " + std::to_string(peer) + " left process group '" + opts_.name +
                                       "' (destroyed it, or shut down)"},
           peer);
}

void ordered_group::fail_p2p(const status& why, int only_peer) {
  std::vector<pending_send> sends;
  std::vector<pending_recv> recvs;
  {
    std::lock_guard p(p2p_mu_);
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (only_peer < 0 || it->second.peer == only_peer) {
        sends.push_back(std::move(it->second));
        it = sends_.erase(it);
      } else {
        ++it;
      }
    }
    if (only_peer < 0) {
      matcher_.take_receives();
      for (auto& [id, r] : recvs_) recvs.push_back(std::move(r));
      recvs_.clear();
    }
  }
  for (auto& s : sends) {
    const uint64_t call = s.call;
    status st = named(s.name, why);
    ended(s.name, st);
    ends_->end(call, [done = std::move(s.done), st = std::move(st)] { done(st); });
  }
  for (auto& r : recvs) {
    const uint64_t call = r.call;
    status st = named(r.name, why);
    ended(r.name, st);
    ends_->end(call, [done = std::move(r.done), st = std::move(st)] { done(st, -1); });
  }
}

}  // namespace chorus::ordered
