// Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) with the real encoders:
// valid frames, handshake messages, gossip messages, specs, store requests and replies, a trace
// file from the real recorder, and chunk-op scripts. Run by `./chorus.sh fuzz --seeds`; the
// output is checked in, so fuzzing and the fuzz_smoke test need no generator run.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/negotiation/message.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "runtime/transport/shm/ring.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/handshake.hpp"
#include "telemetry/trace/recorder.hpp"

namespace fs = std::filesystem;
using namespace chorus;

namespace {

fs::path root;

void write(const std::string& target, const std::string& name, const void* data, std::size_t size) {
  fs::create_directories(root / target);
  std::ofstream out(root / target / name, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}
void write(const std::string& target, const std::string& name, const std::vector<std::byte>& b) {
  write(target, name, b.data(), b.size());
}
void write(const std::string& target, const std::string& name, const std::string& s) {
  write(target, name, s.data(), s.size());
}

void frames() {
  int i = 0;
  for (auto kind : {wire::frame_kind::data, wire::frame_kind::goodbye, wire::frame_kind::control,
                    wire::frame_kind::shm_wake, wire::frame_kind::hello}) {
    wire::frame_header h;
    h.kind = kind;
    h.job_id = 0x1234;
    h.sequence = 17 + i;
    h.step = (0xbeefu << 16) | 1;
    h.length = 512u << 10;
    h.offset = uint64_t{512} << (10 * i);
    std::byte b[wire::frame_header_size];
    wire::encode(h, b);
    write("frame", "seed" + std::to_string(i++), b, sizeof b);
  }
}

void handshakes() {
  wire::hello_msg hello{3, 1, wire::random_nonce()};
  wire::challenge_msg challenge{0, wire::random_nonce(), {}};
  challenge.server_mac = wire::server_mac("secret", wire::transcript{0x1234, 3, 0, 1, hello.client_nonce,
                                                                      challenge.server_nonce});
  wire::proof_msg proof{wire::client_mac("secret", wire::transcript{})};
  int which = 0;
  for (auto payload : {wire::encode(hello), wire::encode(challenge), wire::encode(proof)}) {
    payload.insert(payload.begin(), std::byte(which));
    write("handshake", "seed" + std::to_string(which++), payload);
  }
}

tensor_spec spec(const std::string& name, collective_kind k, std::vector<int64_t> shape) {
  tensor_spec s;
  s.name = name;
  s.kind = k;
  s.shape = std::move(shape);
  if (k == collective_kind::broadcast) s.root = 1;
  return s;
}

void messages_and_specs() {
  std::vector<tensor_spec> specs{spec("fc1.weight", collective_kind::allreduce, {512, 256}),
                                 spec("emb", collective_kind::broadcast, {1000, 64}),
                                 spec("tokens", collective_kind::alltoall, {128}),
                                 spec("scalar", collective_kind::allgather, {})};
  specs[0].type = dtype::f16;
  specs[2].transient = true;
  for (std::size_t i = 0; i < specs.size(); ++i) write("tensor_spec", "seed" + std::to_string(i), encode(specs[i]));

  negotiation::gossip_message empty;
  write("message", "seed0", negotiation::encode(empty));
  negotiation::gossip_message m;
  m.cycle = 42;
  m.round = 2;
  m.from = 1;
  m.ready_and.resize(70);
  m.ready_and.set(3);
  m.ready_or = m.ready_and;
  m.ready_or.set(69);
  for (auto s : {specs[1], specs[0]}) {  // sorted by spec_less: name first
    negotiation::announcement a{s, {}};
    a.ranks.resize(4);
    a.ranks.set(1);
    m.announced.push_back(a);
  }
  m.stall_query.resize(8);
  m.stall_query.set(2);
  m.stalled_names = {"emb"};
  m.reports.push_back({2, m.stall_query});
  m.score_min = 1.5;
  m.joined.resize(4);
  m.joined.set(0);
  m.scored.resize(4);
  m.scored.set(1);
  m.scored.set(3);
  m.digests.push_back({0x1111, m.scored});
  write("message", "seed1", negotiation::encode(m));
  m.kind = negotiation::message_kind::answer;
  m.open_next = true;
  m.shutdown = true;
  m.abort_names = {"fc1.weight"};
  write("message", "seed2", negotiation::encode(m));
}

void store() {
  auto body = [](const std::string& frame) { return frame.substr(kv::header_bytes); };
  kv::request set{kv::op::set, "rank/0/addr", "127.0.0.1:4242", 0, 0};
  kv::request get{kv::op::get, "rank/1/addr", "", 0, 5000};
  kv::request gather{kv::op::gather, "hosts/", "", 4, 60000};
  kv::reply ok{kv::reply_code::ok, "", {"a", "bb", ""}, {}};
  kv::reply timeout{kv::reply_code::timeout, "", {}, {1, 3}};
  kv::reply bad{kv::reply_code::bad_request, "reply too large", {}, {}};
  int i = 0;
  for (auto& r : {set, get, gather}) write("kv", "seed" + std::to_string(i++), std::string(1, '\0') + body(kv::encode_frame(r)));
  for (auto& r : {ok, timeout, bad}) write("kv", "seed" + std::to_string(i++), std::string(1, '\1') + body(kv::encode_frame(r)));
}

// A small trace from the real recorder, with one record of most kinds.
void trace(const fs::path& scratch) {
  fs::remove_all(scratch);
  telemetry::trace::recorder_options o;
  o.dir = scratch.string();
  o.rank = 0;
  o.size = 2;
  {
    auto rec = telemetry::trace::recorder::open(o);
    if (!rec) {
      std::cerr << "make_seeds: " << rec.error().message() << "\n";
      std::exit(1);
    }
    auto& r = **rec;
    auto now = telemetry::clock::now();
    auto s = spec("fc1.weight", collective_kind::allreduce, {512, 256});
    r.on_tunables(telemetry::tunables{}, now);
    r.on_enqueue(1, s, now);
    r.on_ready(1, s, 7, now);
    std::vector<uint8_t> g{0, 7, 1, 2, 0};
    r.on_gossip_sent(1, g, now);
    r.on_gossip_received(g, now);
    std::vector<std::string> names{"fc1.weight"};
    std::vector<std::chrono::microseconds> lat{std::chrono::microseconds(120)};
    r.on_agreed(7, names, lat, now);
    r.on_chunk_start(0, 3, 4096, now);
    r.on_chunk_end(0, 3, 4096, status{}, now, now);
    r.on_steal(1, 0, 4, now);
    std::vector<int> missing{1};
    r.on_stall("fc1.weight", missing, now);
    r.on_error("connection_lost", status{errc::connection_lost, "rank 1 left"}, now);
    r.on_callback(1, s, status{}, now, now);
  }
  std::ifstream in(scratch / "rank-0.trace", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write("trace", "seed0", bytes);
  write("trace", "seed1", bytes.substr(0, bytes.size() / 2));  // a truncated one
  fs::remove_all(scratch);
}

// Scripts for chunk_fuzz.cpp: op choice, then actions (start, release, frames).
void chunk_scripts() {
  for (uint8_t which = 0; which < 4; ++which) {
    std::vector<uint8_t> s{which, 0, 0};  // start sequences 0 and 1
    // An honest-looking frame for sequence 0 from peer 2 (the ring's left neighbour), step 0.
    s.insert(s.end(), {0x02, 0, 0, 0, 0, 0, 0, 0, 1});
    s.push_back(1);  // release
    // A frame with a 64-bit offset near 2^64 from peer 1.
    s.insert(s.end(), {0xa2, 1, 1, 0, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 1, 0, 0});
    write("chunk", "seed" + std::to_string(which), s.data(), s.size());
  }
}

}  // namespace

// A real writer's steps on a 512-byte ring, as ring_fuzz reads them: `advance u16 | n u16 |
// n bytes` per publish, frames of 0 to 300 payload bytes, so the ring wraps and pads.
void ring_steps() {
  auto seg = shm::segment::create("/chorus-seeds-ring-" + std::to_string(::getpid()), 512, 1);
  if (!seg) {
    std::cerr << "make_seeds: " << seg.error().message() << "\n";
    return;
  }
  shm::segment* raw = seg->get();
  shm::ring_writer writer(std::move(*seg));
  const std::size_t cap = raw->capacity();
  std::vector<std::byte> steps;
  uint64_t published = 0;
  const uint32_t lengths[] = {0, 17, 300, 5, 120, 64, 200, 1, 250, 33, 90, 180};
  std::vector<std::byte> payload(300);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  for (std::size_t k = 0; k < sizeof lengths / sizeof lengths[0]; ++k) {
    wire::frame_header h;
    h.kind = wire::frame_kind::data;
    h.job_id = 0x1234;
    h.sequence = 100 + k;
    h.length = lengths[k];
    if (!writer.put(h, payload.data())) break;
    writer.publish();
    const uint64_t now = raw->published().load();
    const auto advance = static_cast<uint16_t>(now - published);
    steps.push_back(static_cast<std::byte>(advance & 0xff));
    steps.push_back(static_cast<std::byte>(advance >> 8));
    steps.push_back(static_cast<std::byte>(advance & 0xff));
    steps.push_back(static_cast<std::byte>(advance >> 8));
    for (uint64_t b = published; b < now; ++b) steps.push_back(raw->data()[b % cap]);
    published = now;
    raw->released().store(published);  // the reader took everything
    write("ring", "seed" + std::to_string(k), steps);
  }
}

// What a peer's control connection carries: gossip-sized messages, heartbeats, a large
// message, then a goodbye, as control_fuzz reads them (its first byte cuts the stream).
void control_stream() {
  std::vector<std::byte> out{std::byte{7}};
  auto frame = [&](wire::frame_kind kind, const std::vector<uint8_t>& payload) {
    wire::frame_header h;
    h.kind = kind;
    h.job_id = 0x1234;
    h.length = static_cast<uint32_t>(payload.size());
    std::byte b[wire::frame_header_size];
    wire::encode(h, b);
    out.insert(out.end(), b, b + sizeof b);
    for (auto v : payload) out.push_back(static_cast<std::byte>(v));
  };
  frame(wire::frame_kind::control, {1, 3, 0, 0, 0, 'g', 'o', 's', 's', 'i', 'p'});
  frame(wire::frame_kind::heartbeat, {});
  std::vector<uint8_t> big(70000, 0x5a);
  big[0] = 1;
  frame(wire::frame_kind::control, big);
  write("control", "seed0", out);
  frame(wire::frame_kind::goodbye, {});
  write("control", "seed1", out);
  std::vector<std::byte> abort{std::byte{3}};
  out.swap(abort);
  std::string reason = "protocol: rank 1 sent a bad frame";
  frame(wire::frame_kind::abort, std::vector<uint8_t>(reason.begin(), reason.end()));
  write("control", "seed2", out);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds <corpus dir>\n";
    return 2;
  }
  root = argv[1];
  frames();
  handshakes();
  messages_and_specs();
  store();
  trace(fs::temp_directory_path() / ("chorus-make-seeds-" + std::to_string(::getpid())));
  chunk_scripts();
  ring_steps();
  control_stream();
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
