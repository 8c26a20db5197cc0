// The control link's frame assembly (transport/tcp/control_frames.hpp) without sockets: frames
// cut at every byte boundary come out whole and in order; a message larger than a read grows
// the buffer and gives it back; a goodbye ends the stream (a frame after it is refused); a data
// frame, a heartbeat with a payload or a short control frame is refused saying what it was.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/transport/tcp/control_frames.hpp"

namespace chorus::tcp {
namespace {

wire::frame_limits limits() {
  wire::frame_limits l;
  l.job_id = 0x77;
  l.max_payload = 1 << 20;
  return l;
}

void frame(std::vector<std::byte>& out, wire::frame_kind kind, const std::vector<uint8_t>& payload) {
  wire::frame_header h;
  h.kind = kind;
  h.job_id = 0x77;
  h.length = static_cast<uint32_t>(payload.size());
  std::byte b[wire::frame_header_size];
  wire::encode(h, b);
  out.insert(out.end(), b, b + sizeof b);
  for (auto v : payload) out.push_back(static_cast<std::byte>(v));
}

std::vector<uint8_t> message(uint8_t kind, int32_t origin, const std::string& text) {
  std::vector<uint8_t> p{kind};
  for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(static_cast<uint32_t>(origin) >> (8 * i)));
  p.insert(p.end(), text.begin(), text.end());
  return p;
}

// Feeds `bytes` in pieces of `piece`; returns what came out, one string per frame.
std::vector<std::string> feed(control_assembler& a, const std::vector<std::byte>& bytes, std::size_t piece, status* st) {
  std::vector<std::string> got;
  for (std::size_t at = 0; at < bytes.size();) {
    auto room = a.space();
    std::size_t n = std::min({piece, bytes.size() - at, room.size()});
    std::memcpy(room.data(), bytes.data() + at, n);
    at += n;
    *st = a.received(n, [&](const control_frame& f) {
      std::string s = f.what == control_frame::type::message     ? "msg " + std::to_string(f.kind) + " " + std::to_string(f.origin) + " "
                      : f.what == control_frame::type::heartbeat ? "beat"
                      : f.what == control_frame::type::goodbye   ? "bye"
                                                                  : "abort ";
      s.append(f.data.begin(), f.data.end());
      if (f.what == control_frame::type::message && f.data.size() > 20) s = "msg big " + std::to_string(f.data.size());
      got.push_back(s);
      return true;
    });
    if (!st->ok()) break;
  }
  return got;
}

TEST(control_frames, frames_cut_anywhere_come_out_whole_and_in_order) {
  std::vector<std::byte> bytes;
  frame(bytes, wire::frame_kind::control, message(1, 3, "gossip"));
  frame(bytes, wire::frame_kind::heartbeat, {});
  frame(bytes, wire::frame_kind::control, message(2, -1, "gone"));
  frame(bytes, wire::frame_kind::goodbye, {});
  const std::vector<std::string> want = {"msg 1 3 gossip", "beat", "msg 2 -1 gone", "bye"};
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{40}, std::size_t{41}, bytes.size()}) {
    control_assembler a(limits());
    status st;
    EXPECT_EQ(feed(a, bytes, piece, &st), want) << "pieces of " << piece;
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(a.goodbye_received());
    EXPECT_EQ(a.pending(), 0u);
  }
}

TEST(control_frames, a_message_larger_than_a_read_grows_the_buffer_and_gives_it_back) {
  std::vector<std::byte> bytes;
  frame(bytes, wire::frame_kind::control, message(1, 0, std::string(300000, 'x')));
  frame(bytes, wire::frame_kind::control, message(1, 0, "small"));
  control_assembler a(limits());
  status st;
  auto got = feed(a, bytes, 100000, &st);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(got, (std::vector<std::string>{"msg big 300000", "msg 1 0 small"}));
  EXPECT_EQ(a.capacity(), control_assembler::read_quantum);
}

TEST(control_frames, what_no_control_connection_carries_is_refused_saying_what) {
  struct bad_case {
    const char* name;
    std::vector<std::byte> bytes;
    const char* says;
  };
  std::vector<bad_case> cases;
  {
    bad_case c{"a data frame", {}, "expected control, heartbeat or goodbye"};
    frame(c.bytes, wire::frame_kind::data, {1, 2, 3});
    cases.push_back(c);
  }
  {
    bad_case c{"a heartbeat with a payload", {}, "expected control, heartbeat or goodbye"};
    frame(c.bytes, wire::frame_kind::heartbeat, {9});
    cases.push_back(c);
  }
  {
    bad_case c{"a control frame shorter than its head", {}, "expected control, heartbeat or goodbye"};
    frame(c.bytes, wire::frame_kind::control, {1, 2});
    cases.push_back(c);
  }
  {
    bad_case c{"a frame after the goodbye", {}, "after its goodbye"};
    frame(c.bytes, wire::frame_kind::goodbye, {});
    frame(c.bytes, wire::frame_kind::heartbeat, {});
    cases.push_back(c);
  }
  {
    bad_case c{"garbage", std::vector<std::byte>(64, std::byte{0xAB}), "bad control frame"};
    cases.push_back(c);
  }
  for (auto& c : cases) {
    control_assembler a(limits());
    status st;
    feed(a, c.bytes, 1000, &st);
    EXPECT_EQ(st.code(), errc::protocol) << c.name;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.name << ": " << st.message();
    EXPECT_EQ(a.received(0, [](const control_frame&) { return true; }).code(), errc::protocol)
        << c.name << ": nothing is read after a refusal";
  }
}

TEST(control_frames, the_handler_can_stop_reading) {
  std::vector<std::byte> bytes;
  frame(bytes, wire::frame_kind::abort, {'n', 'o'});
  frame(bytes, wire::frame_kind::heartbeat, {});
  control_assembler a(limits());
  auto room = a.space();
  std::memcpy(room.data(), bytes.data(), bytes.size());
  int calls = 0;
  auto st = a.received(bytes.size(), [&](const control_frame& f) {
    ++calls;
    EXPECT_EQ(f.what, control_frame::type::abort);
    EXPECT_EQ(std::string(f.data.begin(), f.data.end()), "no");
    return false;
  });
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(a.pending(), wire::frame_header_size);  // the heartbeat stays unread
}

}  // namespace
}  // namespace chorus::tcp
