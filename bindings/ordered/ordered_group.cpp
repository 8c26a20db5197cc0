// The ordered group: calls numbered in issue order and handed to the data plane; the first failure
// aborts everything (point-to-point transfers: ordered_group_p2p.cpp).
#include "bindings/ordered/ordered_group.hpp"

#include <cstring>

#include "bindings/ordered/group_telemetry.hpp"
#include "runtime/core/log.hpp"
#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/transport/mesh/mesh_connect.hpp"

namespace chorus::ordered {

std::size_t total_of(const std::vector<std::size_t>& counts) {
  std::size_t n = 0;
  for (auto c : counts) n += c;
  return n;
}

uint64_t spec_digest(std::initializer_list<uint64_t> parts, std::span<const int64_t> more) {
  uint64_t h = 0x243f6a8885a308d3ull;
  auto mix = [&](uint64_t p) {  // a word at a time (calls are on the hot path): multiply, fold
    h = (h ^ p) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  for (auto p : parts) mix(p);
  mix(more.size());
  for (auto p : more) mix(static_cast<uint64_t>(p));
  return h ? h : 1;
}

result<std::unique_ptr<ordered_group>> ordered_group::create(std::unique_ptr<rendezvous> rdv, const process_env& env,
                                                             const config& cfg, group_options opts) {
  auto mesh = mesh::mesh_options::from_config(cfg.transport);
  // A dead or frozen member is named within the group's timeout when that is the shorter.
  mesh.peer_timeout = std::min(mesh.peer_timeout, opts.timeout);
  auto copts = collective_options::from_config(cfg.collectives);
  copts.by_speed = cfg.pipeline.stream_placement == "speed";
  copts.chunks_in_flight = cfg.pipeline.chunks_in_flight;
  auto joined = communicator::connect(env, std::move(rdv), mesh, copts);
  if (!joined) return joined.error();
  return std::unique_ptr<ordered_group>(
      new ordered_group(std::move(joined->comm), std::move(joined->control), cfg, std::move(opts)));
}

ordered_group::ordered_group(std::unique_ptr<communicator> comm, std::shared_ptr<tcp::control_link> link,
                             const config& cfg, group_options opts)
    : comm_(std::move(comm)), opts_(std::move(opts)) {
  observer_ = acquire_telemetry(*comm_, cfg);
  wire_.wire = cfg.collectives.wire;
  check_mode_ = cfg.collectives.check;
  wire_.check = check_mode_ != nan_check::off;
  ends_ = std::make_unique<completions>(
      opts_.timeout, [this](uint64_t seq) { return name_of(seq); }, [this](const status& why) { abort(why); },
      opts_.stall_check, [this](uint64_t seq, const std::string& name, uint64_t spec) { check_stall(seq, name, spec); });
  link_ = std::move(link);
  if (link_) {
    link_->start({[this](int peer, uint8_t kind, int32_t, std::vector<uint8_t> data) {
                    on_control(peer, kind, std::move(data));
                  },
                  [this](int peer, const status& why, bool clean) { on_closed(peer, why, clean); }});
  }
  if (check_mode_ == nan_check::skip && rank() == 0)
    CHORUS_LOG(warn, "c10d", "CHORUS_NAN_CHECK=skip has no way to tell torch.distributed which step to skip: "
                             "its allreduces run unchecked; use 'error' to fail them instead");
}

ordered_group::~ordered_group() { close(); }

void ordered_group::close() {
  const status bye{errc::shutdown, "process group '" + opts_.name + "' was destroyed on rank " +
                                       std::to_string(rank())};
  {
    std::lock_guard lk(state_mu_);
    if (closed_) return;
    closed_ = true;
    if (broken_.ok()) broken_ = bye;  // later calls end at once with it
  }
  if (link_) link_->close();
  forget_telemetry_source(comm_.get());
  comm_->close();  // fails what the data plane holds (their ends queue on the completion thread)
  fail_p2p(bye);
  ends_->stop();
}

std::string ordered_group::name_of(const call_info& c, uint64_t seq) const {
  std::string out = "c10d." + c.kind + "#" + std::to_string(seq);
  if (!c.what.empty()) out += " (" + c.what + ")";
  out += " in process group '" + opts_.name + "' on rank " + std::to_string(rank()) + " of " + std::to_string(size());
  if (!opts_.global_ranks.empty()) {
    std::vector<uint32_t> g(opts_.global_ranks.begin(), opts_.global_ranks.end());
    out += " (global ranks " + format_rank_list(g) + "; ranks below are the group's)";
  }
  return out;
}

status ordered_group::named(const std::string& name, const status& st) const {
  if (st.ok() || st.message().rfind(name, 0) == 0) return st;  // ok, or already named (a timeout)
  if (st.code() == errc::protocol)  // what the data plane says when members' calls differ
    return status{st.code(), name + ": the members' calls differ (another collective, shape, dtype, reduce op or "
                                    "root on some rank; every member of a group must make the same calls in the same "
                                    "order): " + st.message()};
  return status{st.code(), name + ": " + st.message()};
}

bool ordered_group::refused(uint64_t seq, const call_name& name, done_fn& done) {
  auto st = failure();
  if (st.ok()) return false;
  const std::string why = st.code() == errc::shutdown ? st.message() : "the group failed before: " + st.message();
  status out{st.code(), name.str() + ": " + why};
  ended(name, out);
  ends_->end(seq, [done = std::move(done), out = std::move(out)] { done(out); });
  return true;
}

status ordered_group::failure() const {
  std::lock_guard lk(state_mu_);
  return broken_;
}

void ordered_group::abort(const status& why) {
  {
    std::lock_guard lk(state_mu_);
    if (!broken_.ok() || why.ok()) return;
    broken_ = why;
  }
  CHORUS_LOG(error, "c10d", "process group '" << opts_.name << "' aborted: " << why.message());
  comm_->abort(why);
  fail_p2p(why);
}

void ordered_group::ended(const call_name& name, const status& st) const {
  if (!observer_) return;
  const telemetry::call_event e{opts_.name, name.seq, name.kind, name.bytes, &st, name.started};
  observer_->on_call(e, std::chrono::steady_clock::now());
}

uint64_t ordered_group::begin(const call_info& c, std::size_t bytes, call_name& name) {
  const uint64_t seq = ++next_call_;
  name = call_name{this, seq, c.kind, bytes, std::chrono::steady_clock::now()};
  {
    std::lock_guard lk(recent_mu_);
    auto& slot = recent_[seq % recent_calls];
    slot.seq = seq;
    slot.call = c;
  }
  ends_->begin(seq, c.spec);
  return seq;
}

std::string ordered_group::name_of(uint64_t seq) const {
  call_info c;
  {
    std::lock_guard lk(recent_mu_);
    const auto& slot = recent_[seq % recent_calls];
    if (slot.seq == seq) c = slot.call;
  }
  if (c.kind.empty()) c.kind = "call";
  return name_of(c, seq);
}

template <class Lock>
uint64_t ordered_group::alone(const call_name& name, Lock& lk, done_fn& done) {
  const uint64_t seq = name.seq;
  lk.unlock();
  ends_->ended_here(seq);
  ended(name, status{});
  done(status{});
  return seq;
}

void ordered_group::check_stall(uint64_t seq, const std::string& name, uint64_t spec) {
  if (spec == 0 || !failure().ok()) return;  // point-to-point calls need no member at the same call
  // Every member stalled at call `seq` says which call it is there; a member that made another
  // call there waits on another path (the shared-memory mailboxes, or the I/O thread's frames)
  // and would never see this one: that is a mismatch, named here.
  auto& store = comm_->plane().store();
  const std::string key = "stall/" + std::to_string(seq) + "/";
  if (auto st = store.publish(key + std::to_string(rank()), std::to_string(spec) + " " + name); !st.ok()) {
    CHORUS_LOG(warn, "c10d", name << " is stalled, and publishing that failed: " << st.message());
    return;
  }
  std::vector<uint32_t> behind;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    auto theirs = store.get(key + std::to_string(r), std::chrono::milliseconds(20));
    if (!theirs) {
      behind.push_back(static_cast<uint32_t>(r));
      continue;
    }
    const auto space = theirs->find(' ');
    if (theirs->substr(0, space) == std::to_string(spec)) continue;
    abort(status{errc::mismatch, name + " waits for a call that rank " + std::to_string(r) +
                                     " made differently (another collective, shape, dtype, reduce op or root): " +
                                     (space == std::string::npos ? *theirs : theirs->substr(space + 1))});
    return;
  }
  if (!behind.empty())
    CHORUS_LOG(warn, "c10d", name << " has waited " << kv::format_duration(opts_.stall_check)
                                  << " or more for rank" << (behind.size() > 1 ? "s " : " ")
                                  << format_rank_list(behind) << ", which have not reached it");
}

communicator::callback ordered_group::finisher(uint64_t seq, call_name name, done_fn done, bool after_earlier) {
  return [this, seq, name = std::move(name), done = std::move(done), after_earlier](const status& st) mutable {
    status out = named(name, st);
    if (!st.ok() && st.code() == errc::protocol) abort(out);  // a mismatch: the group cannot go on
    ended(name, out);
    ends_->end(seq, [done = std::move(done), out = std::move(out)] { done(out); }, after_earlier);
  };
}

uint64_t ordered_group::allreduce(const call_info& c, void* data, std::size_t count, dtype t, reduce_op op,
                                  done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, count * size_of(t), name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) return alone(name, lk, done);
  const std::size_t bytes = count * size_of(t);
  const bool plain = wire_.wire == compression::none && !wire_.check;
  if (plain && bytes <= opts_.inline_bytes && comm_->runs_on_caller(bytes, t, op)) {
    auto st = named(name, comm_->allreduce(data, count, t, op, allreduce_algorithm::automatic, c.spec));
    lk.unlock();
    ends_->ended_here(seq);
    if (!st.ok() && st.code() == errc::protocol) abort(st);
    ended(name, st);
    done(st);
    return seq;
  }
  auto* lane = comm_->pipeline_lane();
  if (plain && lane && lane->takes(bytes, t, op)) {
    // The lane numbers its calls itself (the mailboxes check the number): the spec makes it
    // differ where members' calls do.
    const uint64_t call = ++next_lane_ + c.spec * 0x9e3779b97f4a7c15ull;
    lane->expect(call);
    lane->start(call, data, count, t, op, finisher(seq, std::move(name), std::move(done)));
    return seq;
  }
  const bool floats = t == dtype::f32 || t == dtype::f64 || t == dtype::f16 || t == dtype::bf16;
  const bool sums = op == reduce_op::sum || op == reduce_op::average;
  wire_options w;
  w.wire = (t == dtype::f32 || t == dtype::f64) && sums ? wire_.wire : compression::none;
  w.check = wire_.check && floats && sums;
  if (w.wire == compression::none && !w.check) {
    comm_->allreduce_async(data, count, t, op, finisher(seq, std::move(name), std::move(done)),
                           allreduce_algorithm::automatic, c.spec);
    return seq;
  }
  auto report = std::make_shared<nonfinite_report>();
  w.report = report;
  const bool fail_on_nan = check_mode_ == nan_check::error;
  comm_->allreduce_async(
      data, count, t, op, w,
      [this, seq, name, done = std::move(done), report, fail_on_nan](const status& st) mutable {
        status out = st;
        if (st.ok() && fail_on_nan && report->any()) {
          std::vector<uint32_t> ranks;
          for (int r : report->ranks()) ranks.push_back(static_cast<uint32_t>(r));
          out = status{errc::invalid_argument, "NaN or Inf in the input on rank" + std::string(ranks.size() > 1 ? "s " : " ") +
                                                   format_rank_list(ranks) + " (CHORUS_NAN_CHECK=error)"};
        }
        finisher(seq, name, std::move(done))(out);
      },
      c.spec);
  return seq;
}

uint64_t ordered_group::broadcast(const call_info& c, void* data, std::size_t count, dtype t, int root, done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, count * size_of(t), name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) return alone(name, lk, done);
  comm_->broadcast_async(data, count, t, root, finisher(seq, std::move(name), std::move(done)), c.spec);
  return seq;
}

uint64_t ordered_group::allgather(const call_info& c, const void* in, void* out, std::vector<std::size_t> counts,
                                  dtype t, done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, (counts.empty() ? 0 : counts[static_cast<std::size_t>(rank())]) * size_of(t), name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) {
    if (counts[0] && in != out) std::memmove(out, in, counts[0] * size_of(t));
    return alone(name, lk, done);
  }
  comm_->allgather_async(in, out, std::move(counts), t, finisher(seq, std::move(name), std::move(done)),
                         allreduce_algorithm::automatic, c.spec);
  return seq;
}

uint64_t ordered_group::reducescatter(const call_info& c, void* data, std::vector<std::size_t> counts, dtype t,
                                      reduce_op op, done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, total_of(counts) * size_of(t), name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) return alone(name, lk, done);  // the one slice is the reduction (an average of one)
  comm_->reducescatter_async(data, std::move(counts), t, op, finisher(seq, std::move(name), std::move(done)), c.spec);
  return seq;
}

uint64_t ordered_group::alltoall(const call_info& c, const void* in, std::vector<std::size_t> send_counts, void* out,
                                 std::vector<std::size_t> recv_counts, dtype t, done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, total_of(send_counts) * size_of(t), name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) {
    if (send_counts[0] && in != out) std::memmove(out, in, send_counts[0] * size_of(t));
    return alone(name, lk, done);
  }
  comm_->alltoall_async(in, std::move(send_counts), out, std::move(recv_counts), t,
                        finisher(seq, std::move(name), std::move(done)), c.spec);
  return seq;
}

uint64_t ordered_group::barrier(const call_info& c, done_fn done) {
  std::unique_lock lk(mu_);
  call_name name;
  const uint64_t seq = begin(c, 0, name);
  if (refused(seq, name, done)) return seq;
  if (size() == 1) return alone(name, lk, done);
  auto token = std::make_shared<uint8_t>(0);
  comm_->allreduce_async(token.get(), 1, dtype::u8, reduce_op::max,
                         [keep = token, fin = finisher(seq, std::move(name), std::move(done), true)](
                             const status& st) { fin(st); },
                         allreduce_algorithm::recursive_doubling, c.spec);
  return seq;
}

}  // namespace chorus::ordered
