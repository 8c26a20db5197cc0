// control_assembler (control_frames.hpp).
#include "runtime/transport/tcp/control_frames.hpp"

#include <cstring>

namespace chorus::tcp {

std::span<std::byte> control_assembler::space() {
  if (in_.size() - have_ < read_quantum) in_.resize(have_ + read_quantum);
  return {in_.data() + have_, in_.size() - have_};
}

status control_assembler::received(std::size_t n, const std::function<bool(const control_frame&)>& on) {
  if (broken_) return {errc::protocol, "sent more after a refused frame"};
  if (n > in_.size() - have_) return {errc::internal, "control_assembler: more bytes than the space given"};
  have_ += n;
  std::size_t at = 0;
  bool go = true;
  while (go && have_ - at >= wire::frame_header_size) {
    auto h = wire::decode(in_.data() + at, have_ - at, limits_);
    if (!h) {
      broken_ = true;
      return {errc::protocol, "sent a bad control frame: " + h.error().message()};
    }
    const bool control = h->kind == wire::frame_kind::control, bye = h->kind == wire::frame_kind::goodbye;
    const bool abort = h->kind == wire::frame_kind::abort, beat = h->kind == wire::frame_kind::heartbeat;
    if ((!control && !bye && !abort && !beat) || (beat && h->length != 0) || (bye && h->length != 0) ||
        (control && h->length < message_head) || goodbye_) {
      broken_ = true;
      return {errc::protocol, "sent a bad control frame: " + wire::describe(*h) +
                                  (goodbye_ ? " after its goodbye" : " (expected control, heartbeat or goodbye)")};
    }
    const std::size_t whole = wire::frame_header_size + h->length;  // length within the job's limit
    if (have_ - at < whole) {
      if (in_.size() < whole) {  // room for the rest of one large frame
        std::memmove(in_.data(), in_.data() + at, have_ - at);
        have_ -= at;
        at = 0;
        in_.resize(whole + read_quantum);
      }
      break;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(in_.data() + at + wire::frame_header_size);
    at += whole;
    control_frame f;
    if (beat) {
      f.what = control_frame::type::heartbeat;
    } else if (bye) {
      goodbye_ = true;
      f.what = control_frame::type::goodbye;
    } else if (abort) {
      f.what = control_frame::type::abort;
      f.data = {p, h->length};
    } else {
      uint32_t o = 0;
      for (int i = 0; i < 4; ++i) o |= static_cast<uint32_t>(p[1 + i]) << (8 * i);
      f.kind = p[0];
      f.origin = static_cast<int32_t>(o);
      f.data = {p + message_head, h->length - message_head};
    }
    go = on(f);
  }
  if (at > 0) {
    std::memmove(in_.data(), in_.data() + at, have_ - at);
    have_ -= at;
  }
  // A large message grew the buffer (up to the frame limit): give it back once it is empty.
  if (have_ == 0 && in_.size() > 4 * read_quantum) std::vector<std::byte>(read_quantum).swap(in_);
  return {};
}

}  // namespace chorus::tcp
