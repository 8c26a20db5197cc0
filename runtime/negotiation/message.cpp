// Merge and codec of negotiation messages.
#include "runtime/negotiation/message.hpp"

#include <algorithm>
#include <tuple>

namespace chorus::negotiation {
namespace {

// Sorted union of two sorted vectors, combining equal elements with `join`.
template <class T, class Less, class Join>
void merge_sorted(std::vector<T>& into, const std::vector<T>& from, Less less, Join join) {
  if (from.empty()) return;
  std::vector<T> out;
  out.reserve(into.size() + from.size());
  auto a = into.begin();
  auto b = from.begin();
  while (a != into.end() || b != from.end()) {
    if (b == from.end() || (a != into.end() && less(*a, *b))) {
      out.push_back(std::move(*a++));
    } else if (a == into.end() || less(*b, *a)) {
      out.push_back(*b++);
    } else {
      join(*a, *b);
      out.push_back(std::move(*a++));
      ++b;
    }
  }
  into = std::move(out);
}

constexpr std::size_t max_name_bytes = 1u << 16;

}  // namespace

void merge(gossip_message& into, const gossip_message& from) {
  into.ready_and.and_with(from.ready_and);
  into.ready_or.or_with(from.ready_or);
  merge_sorted(
      into.announced, from.announced,
      [](const announcement& x, const announcement& y) { return spec_less(x.spec, y.spec); },
      [](announcement& x, const announcement& y) { x.ranks.or_with(y.ranks); });
  into.stall_query.or_with(from.stall_query);
  into.stall_abort.or_with(from.stall_abort);
  auto str_less = [](const std::string& x, const std::string& y) { return x < y; };
  auto no_join = [](std::string&, const std::string&) {};
  merge_sorted(into.stalled_names, from.stalled_names, str_less, no_join);
  merge_sorted(into.abort_names, from.abort_names, str_less, no_join);
  merge_sorted(
      into.reports, from.reports, [](const stall_report& x, const stall_report& y) { return x.id < y.id; },
      [](stall_report& x, const stall_report& y) { x.ranks.or_with(y.ranks); });
  into.score_min = std::min(into.score_min, from.score_min);
  into.shutdown = into.shutdown || from.shutdown;
  into.joined.or_with(from.joined);
  into.scored.or_with(from.scored);
  merge_sorted(
      into.digests, from.digests, [](const digest_group& x, const digest_group& y) { return x.digest < y.digest; },
      [](digest_group& x, const digest_group& y) { x.ranks.or_with(y.ranks); });
}

void clear_payload(gossip_message& m) {
  gossip_message empty;
  std::tie(empty.kind, empty.cycle, empty.round, empty.from, empty.open_next) =
      std::tie(m.kind, m.cycle, m.round, m.from, m.open_next);
  m = std::move(empty);
}

namespace {

// A count, then per entry what `key` writes and the entry's rank set.
template <class Entry, class Key>
void write_ranked(byte_writer& w, const std::vector<Entry>& entries, Key key) {
  w.varint(entries.size());
  for (const auto& e : entries) {
    key(e);
    write(w, e.ranks);
  }
}

}  // namespace

std::vector<std::byte> encode(const gossip_message& m) {
  std::vector<std::byte> out;
  byte_writer w(out);
  w.u8(static_cast<uint8_t>(m.kind));
  w.varint(m.cycle);
  w.varint(m.round);
  w.svarint(m.from);
  w.u8(m.open_next ? 1 : 0);
  write(w, m.ready_and);
  write(w, m.ready_or);
  write_ranked(w, m.announced, [&](const announcement& a) { write(w, a.spec); });
  write(w, m.stall_query);
  write(w, m.stall_abort);
  for (const auto* names : {&m.stalled_names, &m.abort_names}) {
    w.varint(names->size());
    for (const auto& n : *names) w.str(n);
  }
  write_ranked(w, m.reports, [&](const stall_report& r) { w.varint(r.id); });
  w.f64(m.score_min);
  w.u8(m.shutdown ? 1 : 0);
  write(w, m.joined);
  write(w, m.scored);
  write_ranked(w, m.digests, [&](const digest_group& d) { w.varint(d.digest); });
  return out;
}

result<gossip_message> decode_message(std::span<const std::byte> in) {
  byte_reader r(in);
  gossip_message m;
  uint8_t kind = 0;
  uint64_t round = 0;
  int64_t from = 0;
  r.u8(kind, "message kind");
  if (r.ok() && kind > static_cast<uint8_t>(message_kind::answer)) {
    r.fail("message kind", "unknown kind " + std::to_string(kind));
  }
  m.kind = static_cast<message_kind>(kind);
  r.varint(m.cycle, "cycle");
  r.varint(round, "round");
  r.svarint(from, "sender");
  uint8_t open_next = 0;
  r.u8(open_next, "open-next flag");
  m.open_next = open_next != 0;
  if (r.ok() && (round > UINT32_MAX || from < -1 || from > INT32_MAX)) r.fail("header", "round or sender out of range");
  m.round = static_cast<uint32_t>(round);
  m.from = static_cast<int>(from);
  read(r, m.ready_and);
  read(r, m.ready_or);
  std::size_t n = 0;
  // Lists grow as items are decoded (never resized to a count read from the wire), and every
  // item is charged to the reader's memory budget.
  if (r.count(n, "announcement count")) {
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
      announcement a;
      if (read(r, a.spec) && read(r, a.ranks) &&
          r.charge(sizeof a + a.spec.name.size() + a.spec.shape.size() * sizeof(int64_t) + a.ranks.size() / 8,
                   "announcement"))
        m.announced.push_back(std::move(a));
    }
  }
  read(r, m.stall_query);
  read(r, m.stall_abort);
  for (auto* names : {&m.stalled_names, &m.abort_names}) {
    if (!r.count(n, "stalled name count")) break;
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
      std::string name;
      if (r.str(name, "stalled name", max_name_bytes) && r.charge(sizeof name + name.size(), "stalled name"))
        names->push_back(std::move(name));
    }
  }
  if (r.count(n, "stall report count")) {
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
      stall_report rep;
      uint64_t id = 0;
      if (r.varint(id, "stall report id") && id > UINT32_MAX) r.fail("stall report id", "id out of range");
      rep.id = static_cast<uint32_t>(id);
      if (read(r, rep.ranks) && r.charge(sizeof rep + rep.ranks.size() / 8, "stall report"))
        m.reports.push_back(std::move(rep));
    }
  }
  uint8_t shutdown = 0;
  r.f64(m.score_min, "score");
  r.u8(shutdown, "shutdown flag");
  m.shutdown = shutdown != 0;
  read(r, m.joined);
  read(r, m.scored);
  if (r.count(n, "digest count")) {
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
      digest_group g;
      if (r.varint(g.digest, "digest") && read(r, g.ranks) && r.charge(sizeof g + g.ranks.size() / 8, "digest"))
        m.digests.push_back(std::move(g));
    }
  }
  if (r.ok() && r.remaining() != 0) r.fail("message", std::to_string(r.remaining()) + " trailing bytes");
  // merge() relies on the sorted orders; a peer that breaks them is a protocol error.
  auto by_spec = [](const announcement& x, const announcement& y) { return !spec_less(x.spec, y.spec); };
  auto by_id = [](const stall_report& x, const stall_report& y) { return x.id >= y.id; };
  auto by_name = [](const std::string& x, const std::string& y) { return x >= y; };
  auto by_digest = [](const digest_group& x, const digest_group& y) { return x.digest >= y.digest; };
  if (r.ok() && (std::adjacent_find(m.announced.begin(), m.announced.end(), by_spec) != m.announced.end() ||
                 std::adjacent_find(m.reports.begin(), m.reports.end(), by_id) != m.reports.end() ||
                 std::adjacent_find(m.stalled_names.begin(), m.stalled_names.end(), by_name) != m.stalled_names.end() ||
                 std::adjacent_find(m.abort_names.begin(), m.abort_names.end(), by_name) != m.abort_names.end() ||
                 std::adjacent_find(m.digests.begin(), m.digests.end(), by_digest) != m.digests.end())) {
    r.fail("message", "lists not sorted or not unique");
  }
  if (!r.ok()) return r.error();
  return m;
}

}  // namespace chorus::negotiation
