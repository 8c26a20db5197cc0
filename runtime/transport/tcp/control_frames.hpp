// The control link's frame assembly (control_link.hpp), apart from its sockets so that it can
// be tested and fuzzed alone: bytes from one peer's control connection go in as they arrive, in
// pieces of any size; complete frames come out in order, each checked before it is believed.
// Allowed: control (payload = kind u8 | origin i32 LE | bytes), heartbeat (no payload), goodbye
// (nothing after it) and abort (the reason as text). Anything else ends the connection with a
// protocol error; the buffer never holds more than one frame at the job's limit plus a read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::tcp {

struct control_frame {
  enum class type { message, heartbeat, goodbye, abort };
  type what = type::message;
  uint8_t kind = 0;               ///< message: the control message's kind
  int32_t origin = 0;             ///< message: the rank it speaks for
  std::span<const uint8_t> data;  ///< message: its bytes; abort: the reason; valid during the call
};

class control_assembler {
 public:
  /// Bytes one receive asks room for.
  static constexpr std::size_t read_quantum = 64 * 1024;
  /// A control frame's payload head: kind u8 | origin i32.
  static constexpr std::size_t message_head = 5;

  explicit control_assembler(const wire::frame_limits& limits) : limits_(limits), in_(read_quantum) {}

  /// Where the next bytes go: at least read_quantum bytes of room.
  std::span<std::byte> space();
  /// `n` bytes were written into space(): calls `on` for every frame now complete, in order,
  /// until it returns false (stop reading). A frame that breaks the rules ends assembly with
  /// errc::protocol saying what was wrong ("" + describe); the caller names the peer.
  status received(std::size_t n, const std::function<bool(const control_frame&)>& on);
  /// A goodbye arrived (nothing may follow it).
  bool goodbye_received() const { return goodbye_; }
  /// Bytes buffered now (a partial frame), and the buffer's size.
  std::size_t pending() const { return have_; }
  std::size_t capacity() const { return in_.size(); }

 private:
  wire::frame_limits limits_;
  std::vector<std::byte> in_;
  std::size_t have_ = 0;
  bool goodbye_ = false;
  bool broken_ = false;
};

}  // namespace chorus::tcp
