// The negotiator actor: events into the strategy, actions out as messages. Time comes from the
// actor clock, so the deterministic tests drive it with the test coordinator's clock.
#include "actors/negotiator_actor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "actors/join_filler.hpp"
#include "runtime/core/log.hpp"
#include "runtime/negotiation/message.hpp"

namespace chorus {

namespace {

using self_ptr = caf::stateful_actor<negotiator_state>*;

/// How long a clean leave may keep negotiation going at most (departures.hpp): the cycles the
/// leaver finished need only messages already sent by live peers.
constexpr std::chrono::seconds departure_grace{10};

negotiation::time_point now_of(self_ptr self) { return self->clock().now(); }

void finish_op(self_ptr self, const op_ref& op, status st) {
  self->send(self->state.wired.producer, op_finished{op.handle, std::move(st), {}, {}});
}

status shutdown_error(const tensor_spec& s) {
  return {errc::shutdown, describe(s) + ": shut down with '" + s.name + "' pending"};
}

status shutdown_join(int rank) {
  return {errc::shutdown, "join on rank " + std::to_string(rank) + ": shut down before every rank joined"};
}

/// Whether messages to rank `to` can be sent now (its handle is known, or the link carries them).
bool reachable(const negotiator_state& s, int to) {
  if (to < 0 || to >= s.cfg.size || to == s.cfg.rank) return false;
  if (s.cfg.send_control) return true;
  return to < static_cast<int>(s.peers.size()) && s.peers[static_cast<std::size_t>(to)];
}

void peer_lost(self_ptr self, int origin, const status& why);

void send_gossip(self_ptr self, const negotiation::outgoing_message& m) {
  auto& s = self->state;
  if (s.cfg.send_control) {
    auto bytes = negotiation::encode(m.message);
    if (s.cfg.max_control_bytes && bytes.size() > s.cfg.max_control_bytes) {
      // The peer would wait for this message forever: stop the job, as if this rank were lost,
      // so that every rank's pending ops end with the reason.
      std::string why = "rank " + std::to_string(s.cfg.rank) + "'s gossip to rank " + std::to_string(m.to) + " is " +
                        std::to_string(bytes.size()) + " bytes, over the control link's limit of " +
                        std::to_string(s.cfg.max_control_bytes) +
                        " (too many new tensor names in one cycle?); negotiation stopped";
      peer_lost(self, s.cfg.rank, {errc::protocol, why});
      return;
    }
    std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    observer_of(s.wired.observer).on_gossip_sent(m.to, data, now_of(self));
    s.cfg.send_control(m.to, control_kind::gossip, -1, data);  // false: the peer left; its loss reports itself
    ++s.stats.messages_sent;
    return;
  }
  if (m.to < 0 || m.to >= static_cast<int>(s.peers.size()) || !s.peers[static_cast<std::size_t>(m.to)]) {
    CHORUS_LOG(error, "negotiator", "no control connection to rank=" << m.to << "; message dropped");
    return;
  }
  auto bytes = negotiation::encode(m.message);
  gossip_bytes g;
  g.data.resize(bytes.size());
  std::memcpy(g.data.data(), bytes.data(), bytes.size());
  observer_of(s.wired.observer).on_gossip_sent(m.to, g.data, now_of(self));
  auto& peer = s.peers[static_cast<std::size_t>(m.to)];
  if (s.cfg.link_latency.count() > 0)
    self->delayed_send(peer, s.cfg.link_latency, std::move(g));
  else
    self->send(peer, std::move(g));
  ++s.stats.messages_sent;
}

/// Tells peer `to` that this rank lost rank `origin` (see peer_lost).
void send_gone(self_ptr self, int to, int origin, const std::string& why) {
  auto& s = self->state;
  if (s.cfg.send_control) {
    s.cfg.send_control(to, control_kind::gone, origin,
                       std::span(reinterpret_cast<const uint8_t*>(why.data()), why.size()));
    return;
  }
  self->send(s.peers[static_cast<std::size_t>(to)], gone_atom::value, origin, why);
}

/// Tells peer `to` that this rank leaves after finishing `cycles` cycles (departures.hpp).
void send_leaving(self_ptr self, int to, uint64_t cycles) {
  auto& s = self->state;
  if (s.cfg.send_control) {
    auto data = leaving_data(cycles);
    s.cfg.send_control(to, control_kind::leaving, -1, data);
    return;
  }
  self->send(s.peers[static_cast<std::size_t>(to)], leaving_atom::value, s.cfg.rank, cycles);
}

/// Ends every op in negotiation with `why` (prefixed by the op's description) and stops.
void fail_all(self_ptr self, const status& why, bool prefix_name) {
  auto& s = self->state;
  if (s.failed.ok()) {
    s.failed = why;
    observer_of(s.wired.observer).on_error(to_string(why.code()), why, now_of(self));
  }
  s.arrived.clear();
  for (auto& [name, op] : s.pending) {
    std::string text = why.message();
    if (prefix_name) text = describe(op.spec) + ": " + text;
    finish_op(self, op, {why.code(), std::move(text)});
  }
  s.pending.clear();
  if (s.joining) {
    s.joining = false;
    self->send(s.wired.producer, join_finished{{why.code(), "join on rank " + std::to_string(s.cfg.rank) + ": " +
                                                                 why.message()},
                                               -1});
  }
}

/// A peer was lost (`origin`, named in `why`): its control connection broke, or a peer that
/// lost it relayed the news. The first loss is the cause of everything that fails after it:
/// 1. it is relayed to every live peer (gone_atom, origin, why) before this rank can leave, so
///    that a peer that sees this rank's connection close next blames `origin`, not us;
/// 2. the data plane is broken with it (cfg.on_peer_lost), so our peers' data planes hear the
///    origin in an abort notice instead of a goodbye or a bare EOF;
/// 3. every op in negotiation ends with it. A later loss (a survivor that left because of the
///    first) ends what is left with the first cause.
void peer_lost(self_ptr self, int origin, const status& why) {
  auto& s = self->state;
  status cause = why;
  if (s.failed.ok()) {
    for (int r = 0; r < s.cfg.size; ++r)
      if (r != origin && reachable(s, r)) send_gone(self, r, origin, why.message());
    if (s.cfg.on_peer_lost) s.cfg.on_peer_lost(why);
  } else if (s.failed.code() == errc::connection_lost) {
    cause = s.failed;
  }
  if (!s.pending.empty() || s.failed.ok()) CHORUS_LOG(info, "negotiator", cause.message());
  fail_all(self, cause, true);
}

/// Keeps the enqueue → agreed latency of `op` (returned) among the samples.
std::chrono::microseconds record_latency(negotiator_state& s, const op_ref& op, negotiation::time_point now) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now - op.enqueued_at).count();
  auto v = static_cast<uint32_t>(std::clamp<int64_t>(us, 0, UINT32_MAX));
  if (s.samples_us.size() < s.cfg.max_samples) {
    s.samples_us.push_back(v);
  } else if (!s.samples_us.empty()) {
    s.samples_us[s.next_sample] = v;
    s.next_sample = (s.next_sample + 1) % s.samples_us.size();
  }
  return std::chrono::microseconds(v);
}

void schedule_timer(self_ptr self, negotiation::time_point at) {
  auto& s = self->state;
  if (s.timer_at && *s.timer_at <= at) return;  // an earlier tick will call on_timer anyway
  s.timer_at = at;
  auto delay = at - now_of(self);
  int64_t stamp = at.time_since_epoch().count();
  if (delay <= negotiation::duration::zero())
    self->send(self, tick_atom::value, stamp);
  else
    self->delayed_send(self, delay, tick_atom::value, stamp);
}

/// Sends what waited for a peer's handle; keeps what still waits.
void flush_unsent(self_ptr self) {
  auto& s = self->state;
  auto unsent = std::move(s.unsent);
  s.unsent.clear();
  for (auto& m : unsent) {
    if (reachable(s, m.to) || s.connected) send_gossip(self, m);
    else s.unsent.push_back(std::move(m));
  }
}

/// For a tensor of a process set that leaves this rank out: a stand-in (handle 0, no buffers)
/// that keeps this rank's plan in step with the members'; nothing otherwise.
std::optional<op_ref> bystander_for(const negotiator_state& s, const tensor_spec& spec, negotiation::time_point now) {
  if (spec.process_set == 0 || !s.cfg.options.process_sets) return std::nullopt;
  auto set = s.cfg.options.process_sets->find(spec.process_set);
  if (set && set->includes(s.cfg.rank)) return std::nullopt;
  op_ref o;
  o.spec = spec;
  o.enqueued_at = now;
  return o;
}

/// Carries out what the strategy asked for, in the order strategy.hpp prescribes.
void apply(self_ptr self, negotiation::actions a) {
  auto& s = self->state;
  auto now = now_of(self);
  for (auto& m : a.send) {
    if (!s.failed.ok()) return;  // a gossip too large to send stopped negotiation
    if (!reachable(s, m.to) && (s.peers.empty() || !s.connected))  // peers_connected is still on its way
      s.unsent.push_back(std::move(m));
    else
      send_gossip(self, m);
  }
  if (!s.failed.ok()) return;
  auto& obs = observer_of(s.wired.observer);
  for (auto& e : a.errors) {
    status err{e.code, e.message};
    obs.on_error(to_string(err.code()), err, now);
    if (auto it = s.pending.find(e.name); it != s.pending.end()) {
      finish_op(self, it->second, std::move(err));
      s.pending.erase(it);
    }
  }
  // Cycles first: a batch is agreed at the end of its cycle.
  for (auto& c : a.cycles)
    obs.on_cycle({c.cycle, c.messages_sent, c.messages_received, c.started, c.finished});
  // Autotune: a window agreed at the end of cycle c tells fusion, before any batch of a later
  // cycle, to wait for the tunables of c + 1, and the autotuner to compute them.
  std::size_t next_window = 0;
  auto windows_before = [&](uint64_t cycle) {
    for (; next_window < a.windows.size() && a.windows[next_window].cycle < cycle; ++next_window) {
      const auto& w = a.windows[next_window];
      if (!s.wired.autotuner) continue;
      self->send(s.wired.fusion, tunables_pending{w.cycle + 1});
      self->send(s.wired.autotuner, window_agreed{w.cycle, w.window, w.score});
    }
  };
  for (auto& b : a.batches) {
    windows_before(b.cycle);
    batch_agreed out{b.cycle, {}};
    out.ops.reserve(b.ids.size());
    std::vector<std::string> names;
    std::vector<std::chrono::microseconds> latencies;
    names.reserve(b.ids.size());
    latencies.reserve(b.ids.size());
    for (auto id : b.ids) {
      const auto& name = s.strategy->registry().spec(id).name;
      auto it = s.pending.find(name);
      if (it == s.pending.end()) {
        if (auto stand_in = bystander_for(s, s.strategy->registry().spec(id), now)) {
          out.ops.push_back(std::move(*stand_in));  // another set's tensor: fusion plans it, nothing runs
          continue;
        }
        if (s.joining) {  // joined: take part with neutral data
          out.ops.push_back(make_join_filler(s.strategy->registry().spec(id), s.cfg.rank, s.cfg.size, now));
          continue;
        }
        CHORUS_LOG(error, "negotiator", "cycle=" << b.cycle << " agreed id=" << id << " name='" << name
                                                 << "' that is not pending here");
        continue;
      }
      latencies.push_back(record_latency(s, it->second, now));
      names.push_back(name);
      out.ops.push_back(std::move(it->second));
      s.pending.erase(it);
    }
    s.stats.agreed_ops += out.ops.size();
    if (!names.empty()) obs.on_agreed(b.cycle, names, latencies, now);
    if (!out.ops.empty()) self->send(s.wired.fusion, std::move(out));
  }
  windows_before(UINT64_MAX);
  for (auto& w : a.warnings) {
    CHORUS_LOG(warn, "negotiator", w.message);
    obs.on_stall(w.name, w.missing_ranks, now);
  }
  for (auto& r : a.rejected) {
    if (auto it = s.pending.find(r.name); it != s.pending.end()) {
      finish_op(self, it->second, r.error);
      s.pending.erase(it);
    }
  }
  s.stats.cycles += a.cycles.size();
  if (a.join_done && s.joining) {  // after the batches: the last one may still need this rank's fillers
    s.joining = false;
    self->send(s.wired.producer, join_finished{{}, a.join_done->last_rank});
  }
  if (a.fatal) {
    CHORUS_LOG(error, "negotiator", "negotiation stopped: " << a.fatal->message());
    fail_all(self, *a.fatal, false);
  }
  // A peer that left cleanly took part in the cycles up to the one it finished: once those are
  // done here, nothing else can be agreed.
  if (s.failed.ok())
    if (auto why = s.departed.due(s.strategy->cycles_done())) {
      if (!s.pending.empty()) CHORUS_LOG(info, "negotiator", why->message());
      fail_all(self, *why, true);
      return;
    }
  if (a.wake_at) schedule_timer(self, *a.wake_at);
}

/// Hands the strategy every op that arrived since the last hand-over, in arrival order, in
/// one call: a cycle that starts now takes them all.
void hand_over(self_ptr self) {
  auto& s = self->state;
  if (s.arrived.empty()) return;
  auto names = std::move(s.arrived);
  s.arrived.clear();
  if (!s.failed.ok() || !s.strategy) return;  // fail_all or stop_atom ended them
  auto now = now_of(self);
  auto cycle = s.strategy->contribution_cycle();
  std::vector<tensor_spec> specs;
  specs.reserve(names.size());
  for (const auto& name : names) {
    auto it = s.pending.find(name);
    if (it == s.pending.end()) continue;
    observer_of(s.wired.observer).on_ready(it->second.handle, it->second.spec, cycle, now);
    specs.push_back(it->second.spec);
  }
  apply(self, s.strategy->local_ready_all(std::move(specs), now));
}

}  // namespace

negotiation_stats summarize(const negotiator_state& s) {
  negotiation_stats out = s.stats;
  out.samples = s.samples_us.size();
  if (s.samples_us.empty()) return out;
  auto v = s.samples_us;
  auto at = [&](double q) {
    auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]);
  };
  out.p50_us = at(0.50);
  out.p99_us = at(0.99);
  return out;
}

caf::behavior negotiator_actor(self_ptr self, negotiator_config cfg) {
  auto& s = self->state;
  s.cfg = cfg;
  auto made = negotiation::make_strategy(cfg.strategy, cfg.rank, cfg.size, cfg.options);
  if (!made) {
    CHORUS_LOG(error, "negotiator", made.error().message());
    s.failed = made.error();
  } else {
    s.strategy = std::move(*made);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (std::size_t r = 0; r < st.peers.size(); ++r) {
      if (st.peers[r] && st.peers[r].address() == dm.source) {
        st.peers[r] = caf::actor{};
        std::string why = "rank " + std::to_string(r) + " left the job (its control connection closed: " +
                          self->system().render(dm.reason) + ")";
        // A peer that shut down cleanly may have sent the last gossip of a cycle just before
        // leaving, and the down message can overtake it: give the mailbox a moment first.
        if (dm.reason == caf::exit_reason::user_shutdown) {
          self->delayed_send(self, std::chrono::milliseconds(500), left_atom::value, static_cast<int>(r), std::move(why));
          continue;
        }
        peer_lost(self, static_cast<int>(r), {errc::connection_lost, why});
      }
    }
  });
  return {
      [=](const negotiator_wiring& w) { self->state.wired = w; },
      [=](const peers_connected& p) {
        auto& st = self->state;
        if (st.peers.size() < p.peers.size()) st.peers.resize(p.peers.size());
        for (std::size_t r = 0; r < p.peers.size(); ++r)
          if (p.peers[r] && !st.peers[r]) {
            st.peers[r] = p.peers[r];
            if (static_cast<int>(r) != st.cfg.rank) self->monitor(st.peers[r]);
          }
        st.connected = true;
        for (std::size_t r = 0; r < st.peers.size(); ++r)
          if (!st.peers[r]) st.connected = false;
        flush_unsent(self);
      },
      [=](tensor_ready& t) {
        auto& st = self->state;
        if (st.stopped) {
          finish_op(self, t.op, shutdown_error(t.op.spec));
          return;
        }
        if (!st.failed.ok() || !st.strategy) {
          finish_op(self, t.op, {st.failed.code(), describe(t.op.spec) + ": " + st.failed.message()});
          return;
        }
        if (st.pending.count(t.op.spec.name)) {
          finish_op(self, t.op, {errc::invalid_argument, describe(t.op.spec) + ": already being negotiated"});
          return;
        }
        auto name = t.op.spec.name;
        st.pending.emplace(name, std::move(t.op));
        st.arrived.push_back(std::move(name));
        if (st.arrived.size() == 1) self->send(self, hand_atom::value);
      },
      [=](hand_atom) { hand_over(self); },
      [=](const gossip_bytes& g) {
        auto& st = self->state;
        ++st.stats.messages_received;
        observer_of(st.wired.observer).on_gossip_received(g.data, now_of(self));
        if (!st.failed.ok() || !st.strategy) return;
        auto m = negotiation::decode_message(std::as_bytes(std::span(g.data)));
        if (!m) {
          fail_all(self, {errc::protocol, "bad control message: " + m.error().message()}, true);
          return;
        }
        hand_over(self);  // what arrived before this message joins the cycle it may start
        apply(self, st.strategy->on_message(*m, now_of(self)));
      },
      [=](gone_atom, const std::string& why) {
        // Whatever is still pending now needed the peer that left; nothing new can be agreed.
        status st_why{errc::connection_lost, why};
        if (!self->state.pending.empty()) CHORUS_LOG(info, "negotiator", why);
        fail_all(self, st_why, true);
      },
      [=](leaving_atom, int peer, uint64_t cycles) {
        if (peer >= 0 && peer < self->state.cfg.size) self->state.departed.announced(peer, cycles);
      },
      [=](left_atom, int peer, std::string& why) {
        // A peer said goodbye. If it finished a cycle this rank is still in, it sent all it owed
        // for it: negotiation goes on until that cycle is done here (apply ends it then). The
        // peers' messages of those cycles are on their way; should they not come within
        // departure_grace, what is pending ends all the same.
        auto& st = self->state;
        status st_why{errc::connection_lost, why};
        if (st.failed.ok() && st.strategy && st.departed.left(peer, st_why, st.strategy->cycles_done())) {
          self->delayed_send(self, departure_grace, gone_atom::value, std::move(why));
          return;
        }
        if (!st.pending.empty()) CHORUS_LOG(info, "negotiator", why);
        fail_all(self, st_why, true);
      },
      [=](gone_atom, int origin, const std::string& why) {
        // A peer lost rank `origin` (peer_lost above): the same cause ends ours.
        if (origin < 0 || origin >= self->state.cfg.size) origin = -1;
        peer_lost(self, origin, {errc::connection_lost, why});
      },
      [=](tick_atom, int64_t stamp) {
        auto& st = self->state;
        if (st.timer_at && st.timer_at->time_since_epoch().count() == stamp) st.timer_at.reset();
        if (!st.failed.ok() || !st.strategy) return;
        hand_over(self);
        apply(self, st.strategy->on_timer(now_of(self)));
      },
      [=](join_atom) {
        auto& st = self->state;
        if (st.stopped || !st.failed.ok() || !st.strategy) {
          status why = st.stopped ? status{errc::shutdown, "shut down"} : st.failed;
          self->send(st.wired.producer, join_finished{{why.code(), "join on rank " + std::to_string(st.cfg.rank) +
                                                                       ": " + why.message()},
                                                      -1});
          return;
        }
        st.joining = true;
        hand_over(self);
        apply(self, st.strategy->request_join(now_of(self)));
      },
      [=](stop_atom) {
        auto& st = self->state;
        // Before the goodbye: the cycles this rank finished are the ones its peers may still
        // finish without it (departures.hpp).
        if (!st.stopped && st.failed.ok() && st.strategy)
          for (int r = 0; r < st.cfg.size; ++r)
            if (reachable(st, r)) send_leaving(self, r, st.strategy->cycles_done());
        st.stopped = true;
        if (st.joining) {
          st.joining = false;
          self->send(st.wired.producer, join_finished{shutdown_join(st.cfg.rank), -1});
        }
        for (auto& [name, op] : st.pending) finish_op(self, op, shutdown_error(op.spec));
        st.pending.clear();
        st.arrived.clear();
        if (st.failed.ok()) st.failed = {errc::shutdown, "rank " + std::to_string(st.cfg.rank) + " shut down"};
      },
      [=](const window_scored& w) {
        auto& st = self->state;
        if (!st.failed.ok() || !st.strategy) return;
        hand_over(self);
        apply(self, st.strategy->submit_score(w.score, w.digest, now_of(self)));
      },
      [=](const tunables_switch& sw) {
        if (self->state.strategy)
          self->state.strategy->set_timing(std::chrono::microseconds(sw.cycle_time_us),
                                           static_cast<int64_t>(sw.fusion_threshold));
      },
      [=](stats_atom) { return summarize(self->state); },
  };
}

}  // namespace chorus
