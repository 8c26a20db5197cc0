// The data plane's run, abort and close, on the transport's I/O thread.
#include "runtime/collectives/data_plane.hpp"

#include <chrono>
#include <string>

#include "runtime/core/log.hpp"

namespace chorus {

data_plane::data_plane(std::unique_ptr<rendezvous> rdv, std::unique_ptr<transport> t, host_groups hosts)
    : rdv_(std::move(rdv)), t_(std::move(t)), hosts_(std::move(hosts)), engine_(std::make_unique<engine>(*t_)) {}

data_plane::~data_plane() { close(); }

void data_plane::start() { t_->start(engine_.get()); }

void data_plane::run_chunk(std::unique_ptr<chunk_op> op, callback done, std::function<void()> started) {
  auto shared = std::make_shared<std::unique_ptr<chunk_op>>(std::move(op));
  t_->post([this, shared, done = std::move(done), started = std::move(started)]() mutable {
    engine_->run(std::move(*shared), std::move(done));
    if (started) started();
  });
}

void data_plane::close() {
  if (closed_) return;
  closed_ = true;
  t_->post([this] {
    // Leaving because the job broke: tell the others why, so their errors name the cause.
    const status& broken = engine_->broken();
    if (!broken.ok() && broken.code() != errc::shutdown) t_->abort(broken);
    engine_->fail_all(status{errc::shutdown, "rank " + std::to_string(rank()) + " shut down"});
  });
  t_->close(std::chrono::seconds(5));
}

void data_plane::abort(const status& why) {
  if (closed_ || why.ok()) return;
  t_->post([this, why] {
    if (!engine_->broken().ok()) return;
    CHORUS_LOG(info, "collectives", "data plane aborted: " << why.message());
    t_->abort(why);
    engine_->fail_all(why);
  });
}

std::shared_ptr<stream_board> data_plane::speed_board() {
  return std::make_shared<stream_board>(num_streams(), stream_board::options{}, [this](int s) {
    const auto m = meter(s);
    return stream_board::reading{traffic(s).sent, m.bytes_acked, m.busy_us};
  });
}

}  // namespace chorus
