// Read loop and batched write queue of one TCP stream (tcp_connection.hpp).
#include "runtime/transport/tcp/tcp_connection.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/core/log.hpp"

namespace chorus::tcp {
namespace {
// asio::transfer_all (the default of async_read and async_write) hands each system call at most
// 64 KiB (asio's default_max_transfer_size), so a 512 KiB frame took 8 or more sendmsg and recv
// calls. This condition lets every call take as much as the socket will: until an error, no cap.
struct whole_transfer {
  std::size_t operator()(const asio::error_code& ec, std::size_t) const {
    return ec ? 0 : std::numeric_limits<std::size_t>::max();
  }
};

// After a failed write, how long the read side has to report the peer's own last words first.
constexpr auto write_grace = std::chrono::milliseconds(250);

// The port of the socket's own (remote: peer's) address; 0 when the call fails.
int socket_port(int fd, bool remote) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  if ((remote ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return 0;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return 0;
}
}  // namespace

tcp_connection::tcp_connection(link_owner& owner, int fd, int peer, int stream, std::size_t scratch_bytes,
                               bool pretouch)
    : owner_(owner), socket_(owner.io()), peer_(peer), stream_(stream), scratch_bytes_(scratch_bytes) {
  socket_.assign(asio::ip::tcp::v4(), fd);
  ports_ = {socket_port(fd, false), socket_port(fd, true)};
  fd_ = fd;
  // Pre-touched, the first frames do not pay for fresh pages (the vector's zeros touch them).
  if (pretouch) scratch_.resize(scratch_bytes_);
  write_bufs_.reserve(2 * max_batch);
}

void tcp_connection::start_reading() { read_header(); }

void tcp_connection::grow_scratch(std::size_t length) {
  if (scratch_.size() < length) scratch_.resize(std::max(length, scratch_bytes_));
}

void tcp_connection::send(const wire::frame_header& h, const std::byte* payload) {
  outgoing o;
  o.header = h;
  o.payload = payload;
  wire::encode(o.header, o.head.data());
  queue_.push_back(o);
  if (!open_ || write_broken_) {
    release_queue();
    return;
  }
  // Inside on_written's callbacks the finished batch is still at the queue's front: that
  // handler starts the next write once it has popped it.
  if (in_flight_ == 0 && !completing_) start_write();
}

void tcp_connection::cancel(uint64_t sequence) {
  auto* sink = owner_.sink();
  for (std::size_t i = in_flight_; i < queue_.size();) {
    if (queue_[i].header.kind == wire::frame_kind::data && queue_[i].header.sequence == sequence) {
      auto h = queue_[i].header;
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      sink->sent(peer_, h);
    } else {
      ++i;
    }
  }
}

void tcp_connection::send_goodbye() {
  if (goodbye_sent_) return;
  goodbye_sent_ = true;
  wire::frame_header h;
  h.kind = wire::frame_kind::goodbye;
  h.job_id = owner_.limits().job_id;
  send(h, nullptr);
}

void tcp_connection::send_abort(const std::string& reason) {
  if (close_when_written_) return;
  close_when_written_ = true;
  abort_reason_ = reason;
  wire::frame_header h;
  h.kind = wire::frame_kind::abort;
  h.job_id = owner_.limits().job_id;
  h.length = static_cast<uint32_t>(abort_reason_.size());
  send(h, reinterpret_cast<const std::byte*>(abort_reason_.data()));
}

void tcp_connection::start_write() {
  write_bufs_.clear();
  in_flight_ = 0;
  while (in_flight_ < std::min(queue_.size(), max_batch)) {
    auto& o = queue_[in_flight_];
    // The write reads the headers from batch_heads_, not from the queue: cancel() erases frames
    // behind the batch, which may move the batch's queue entries.
    batch_heads_[in_flight_] = o.head;
    write_bufs_.push_back(asio::buffer(batch_heads_[in_flight_]));
    if (o.header.length) write_bufs_.push_back(asio::buffer(o.payload, o.header.length));
    ++in_flight_;
  }
  asio::async_write(socket_, write_bufs_, whole_transfer{},
                    [this](const asio::error_code& ec, std::size_t n) { on_written(ec, n); });
}

void tcp_connection::on_written(const asio::error_code& ec, std::size_t n) {
  count(bytes_sent_, n);
  auto* sink = owner_.sink();
  // in_flight_ counts the written frames still at the queue's front while each is popped, so
  // a cancel() or send() from a sent() callback sees the queue as it is.
  completing_ = true;  // a send() from sent() queues only (see send())
  while (in_flight_ > 0 && !queue_.empty()) {  // a callback that closes empties the queue
    auto h = queue_.front().header;
    queue_.pop_front();
    --in_flight_;
    if (h.kind == wire::frame_kind::data) sink->sent(peer_, h);
  }
  completing_ = false;
  in_flight_ = 0;
  if (ec) {
    fail("write", ec);
    return;
  }
  if (!queue_.empty()) start_write();
  else if (close_when_written_) {
    close();  // an abort notice went out: this connection no longer holds up the transport's close
    owner_.finish_close_if_done();
  } else if (goodbye_sent_) {
    owner_.finish_close_if_done();
  }
}

void tcp_connection::read_header() {
  asio::async_read(socket_, asio::buffer(read_head_),
                   [this](const asio::error_code& ec, std::size_t) { on_header(ec); });
}

void tcp_connection::on_header(const asio::error_code& ec) {
  if (ec) {
    fail("read", ec);
    return;
  }
  auto h = wire::decode(read_head_.data(), read_head_.size(), owner_.limits());
  if (!h) {
    bad_frame(h.error().message());
    return;
  }
  current_ = *h;
  count(bytes_received_, wire::frame_header_size);
  if (current_.kind == wire::frame_kind::goodbye) {
    // A shared-memory link's peer put its last frames into the ring before this goodbye
    // left: take them first, or the goodbye would end ops still waiting for them.
    if (drain_before_goodbye_) drain_before_goodbye_();
    goodbye_received_ = true;
    owner_.goodbye_from(peer_);
    if (open_) read_header();  // the peer closes next; EOF after goodbye is expected
    return;
  }
  if (current_.kind == wire::frame_kind::abort) {
    grow_scratch(current_.length);
    asio::async_read(socket_, asio::buffer(scratch_.data(), current_.length), whole_transfer{}, [this](const asio::error_code& e, std::size_t) {
      std::string text = e ? "(reason lost: " + e.message() + ")"
                           : std::string(reinterpret_cast<const char*>(scratch_.data()), current_.length);
      // The reason is a status ("connection_lost: rank 1 ..."): keep its code and its words,
      // which name the origin of the failure. The messenger (a survivor that stopped because
      // of it) goes to the log only: an error that named it would blame the wrong rank.
      status reason = status_from_string(text, errc::protocol);
      CHORUS_LOG(info, "tcp", "rank " << peer_ << " aborted the job: " << reason.message());
      owner_.link_failed(peer_, status{reason.code(), reason.message() + " (passed on by a peer)"});
    });
    return;
  }
  if (current_.kind == wire::frame_kind::shm_wake) {
    // The I/O loop reads the ring once this handler returns; nothing else to do.
    if (!drain_before_goodbye_ || current_.length != 0) {
      bad_frame(wire::describe(current_) + (drain_before_goodbye_ ? " is a doorbell with a payload"
                                                                   : " rings a shared-memory ring that was never set up"));
      return;
    }
    read_header();
    return;
  }
  if (current_.kind != wire::frame_kind::data) {
    owner_.link_failed(peer_,
                       status{errc::protocol, "rank " + std::to_string(peer_) +
                                                  " sent an unexpected frame: " + wire::describe(current_)},
                       true);
    return;
  }
  std::byte* where = current_.length ? owner_.sink()->destination(peer_, current_) : no_payload_;
  if (!where) {
    grow_scratch(current_.length);
    where = scratch_.data();
  }
  if (current_.length == 0) {
    on_payload({}, where);
    return;
  }
  asio::async_read(socket_, asio::buffer(where, current_.length), whole_transfer{},
                   [this, where](const asio::error_code& e, std::size_t) { on_payload(e, where); });
}

void tcp_connection::on_payload(const asio::error_code& ec, std::byte* where) {
  if (ec) {
    fail("read", ec);
    return;
  }
  count(bytes_received_, current_.length);
  owner_.sink()->delivered(peer_, current_, where);
  if (open_) read_header();
}

void tcp_connection::bad_frame(const std::string& what) {
  owner_.link_failed(peer_,
                     status{errc::protocol, "rank " + std::to_string(peer_) + " stream " + std::to_string(stream_) +
                                                " sent a bad frame: " + what},
                     true);
}

void tcp_connection::fail(const std::string& what, const asio::error_code& ec) {
  if (!open_) return;
  if (ec == asio::error::operation_aborted) return;
  std::string reason = (ec == asio::error::eof) ? "closed the connection" : what + " failed: " + ec.message();
  // A write that timed out (TCP_USER_TIMEOUT: the peer took no data) consumed the socket's
  // error, and the kernel closed the socket: the read side then sees only an end of stream,
  // as if the peer had closed. The timeout is the cause.
  if (what == "read" && ec == asio::error::eof && write_broken_ && write_timed_out_) reason = write_failure_;
  if (goodbye_received_) {  // the peer said goodbye: its closing is expected, whatever the error
    close();
    owner_.finish_close_if_done();
    return;
  }
  if (what == "write" && !write_broken_) {
    // A peer that leaves because the job broke writes an abort notice naming the cause, then
    // closes; our write can fail (EPIPE) before our read loop reaches that notice. Let the
    // read side report (the notice, a goodbye, or the peer's EOF); fall back to this failure.
    write_broken_ = true;
    write_failure_ = reason;
    write_timed_out_ = ec == asio::error::timed_out;
    release_queue();
    write_grace_timer_ = std::make_unique<asio::steady_timer>(socket_.get_executor(), write_grace);
    write_grace_timer_->async_wait([this](const asio::error_code& e) {
      if (e || !open_) return;
      owner_.link_failed(peer_, status{errc::connection_lost, "rank " + std::to_string(peer_) + " (stream " +
                                                                  std::to_string(stream_) + ") " + write_failure_});
    });
    return;
  }
  if (what == "write") return;  // already waiting for the read side
  owner_.link_failed(peer_, status{errc::connection_lost, "rank " + std::to_string(peer_) + " (stream " +
                                                              std::to_string(stream_) + ") " + reason});
}

void tcp_connection::release_queue() {
  auto* sink = owner_.sink();
  while (queue_.size() > in_flight_) {
    auto h = queue_.back().header;
    queue_.pop_back();
    if (h.kind == wire::frame_kind::data && sink) sink->sent(peer_, h);
  }
}

void tcp_connection::close() {
  if (!open_) return;
  open_ = false;
  asio::error_code ignored;
  if (write_grace_timer_) write_grace_timer_->cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);  // in-flight operations complete with operation_aborted
  release_queue();
}

}  // namespace chorus::tcp
