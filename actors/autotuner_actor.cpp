// The autotuner actor: window scores out, agreed windows in, tunables switches out.
#include "actors/autotuner_actor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/core/log.hpp"

namespace chorus {
namespace {

using self_ptr = caf::stateful_actor<autotuner_state>*;

/// Submits the score of a window that ended, once the last one submitted is agreed.
void maybe_submit(self_ptr self) {
  auto& s = self->state;
  if (s.holding && !s.awaiting && s.submitted < s.pad_to) {  // a hold's padding (autotune_pad)
    self->send(s.wired.negotiator, window_scored{std::numeric_limits<double>::infinity(), s.tuner->digest()});
    s.awaiting = true;
    ++s.submitted;
    return;
  }
  if (s.held || s.holding || s.awaiting || !s.ready) return;
  self->send(s.wired.negotiator, window_scored{*s.ready, s.tuner->digest()});
  s.ready.reset();
  s.awaiting = true;
  ++s.submitted;
}

/// Starts measuring afresh at the next finished bucket (a hold, a resume).
void restart_window(self_ptr self) {
  self->state.meter->restart();
  self->state.ready.reset();
}

/// Ends a hold once every padding window is submitted and agreed: every rank has then submitted
/// and handled the same windows, so the tuners are alike.
void maybe_hold(self_ptr self) {
  auto& s = self->state;
  if (!s.pad_reply || s.awaiting || s.submitted < s.pad_to) return;
  s.held = true;
  s.holding = false;
  restart_window(self);
  s.pad_reply->deliver(autotune_windows{s.submitted});
  s.pad_reply.reset();
}

}  // namespace

int autotune_max_streams(const pipeline_options& o, int streams) {
  return o.autotune.max_streams > 0 ? o.autotune.max_streams : streams;
}

pipeline_options with_autotune_start(pipeline_options o, int streams) {
  if (!o.autotune.enabled) return o;
  tuning::knob_values v{o.start_streams > 0 ? o.start_streams : streams, o.chunk_bytes, o.fusion_threshold,
                        std::chrono::duration_cast<std::chrono::microseconds>(o.cycle_time), o.in_place_bytes};
  auto s = autotune_start(v, autotune_max_streams(o, streams));
  o.start_streams = s.streams < streams ? s.streams : 0;
  o.chunk_bytes = s.chunk_bytes;
  o.fusion_threshold = s.fusion_threshold;
  o.cycle_time = s.cycle_time;
  o.in_place_bytes = s.in_place_bytes;
  return o;
}

autotuner_config autotuner_config_of(const pipeline_options& o, int rank, int size, int streams) {
  autotuner_config c;
  c.rank = rank;
  c.size = size;
  c.max_streams = autotune_max_streams(o, streams);
  c.start = {o.start_streams > 0 ? o.start_streams : streams, o.chunk_bytes, o.fusion_threshold,
             std::chrono::duration_cast<std::chrono::microseconds>(o.cycle_time), o.in_place_bytes};
  c.steps_per_sample = o.autotune.steps_per_sample;
  c.log_path = o.autotune.log_path;
  c.held = o.autotune_held;
  auto& t = c.options;
  t.search.seed = o.autotune.seed;
  t.search.warmup_samples = o.autotune.warmup_samples;
  t.search.max_samples = o.autotune.max_samples;
  t.search.noise = o.autotune.noise;
  t.windows_per_sample = o.autotune.windows_per_sample;
  t.drop_threshold = o.autotune.retune_drop;
  return c;
}

tuning::knob_values autotune_start(const tuning::knob_values& configured, int max_streams) {
  auto space = tuning::knob_space(max_streams);
  if (!space) return configured;
  return tuning::from_point(*space, tuning::to_point(*space, configured));
}

tunables_switch switch_of(const tuning::knob_values& v, uint64_t cycle) {
  return tunables_switch{cycle, v.streams, v.chunk_bytes, v.fusion_threshold, v.in_place_bytes, v.cycle_time.count()};
}

telemetry::tunables telemetry_of(const tuning::knob_values& v) {
  return {v.fusion_threshold, v.chunk_bytes, v.streams, v.cycle_time, v.in_place_bytes};
}

caf::behavior autotuner_actor(self_ptr self, autotuner_config cfg) {
  auto& s = self->state;
  s.cfg = cfg;
  s.held = cfg.held;
  s.meter.emplace(cfg.steps_per_sample);
  auto space = tuning::knob_space(cfg.max_streams);
  if (!space) {
    CHORUS_LOG(error, "autotune", "no search space: " << space.error().message());
    return {};
  }
  s.space = *space;
  // The search starts at the configured tunables, on the grid (every rank snaps alike).
  auto start = tuning::to_point(s.space, cfg.start);
  s.tuner.emplace(s.space, cfg.options, start);
  s.in_force = tuning::from_point(s.space, start);
  if (cfg.rank == 0 && !cfg.log_path.empty()) {
    s.log = std::make_unique<std::ofstream>(cfg.log_path, std::ios::trunc);
    if (!*s.log) {
      CHORUS_LOG(warn, "autotune", "cannot write CHORUS_AUTOTUNE_LOG=" << cfg.log_path << "; no autotune log");
      s.log.reset();
    } else {
      *s.log << tuning::csv_header() << "\n" << std::flush;
    }
  }
  return {
      [=](const autotuner_wiring& w) {
        // The pipeline started with cfg.start on the grid already (autotune_start()).
        self->state.wired = w;
      },
      [=](const bucket_finished& b) {
        auto& st = self->state;
        if (st.held || st.holding) return;
        if (auto score = st.meter->add(b.cycle, b.bytes, b.at, b.tensors)) st.ready = score;
        maybe_submit(self);
      },
      [=](const window_agreed& w) {
        auto& st = self->state;
        st.awaiting = false;
        if (!std::isfinite(w.score)) {  // only padding windows (a hold): no sample on any rank
          self->send(st.wired.fusion, switch_of(st.in_force, w.cycle + 1));  // fusion waits for it
          maybe_submit(self);
          maybe_hold(self);
          return;
        }
        auto step = st.tuner->on_window(w.score);
        telemetry::autotune_event e;
        e.cycle = w.cycle;
        e.window = w.window;
        e.score = w.score;
        if (step.sample) {
          e.sample = true;
          e.sample_index = step.sample->index;
          e.sample_score = step.sample->score;
          if (st.log)
            *st.log << tuning::csv_row(*step.sample, tuning::from_point(st.space, step.sample->at), w.cycle) << "\n"
                    << std::flush;
        }
        if (step.switch_to) {
          st.in_force = tuning::from_point(st.space, *step.switch_to);
          e.switched = true;
          CHORUS_LOG(info, "autotune", "window=" << w.window << " cycle=" << w.cycle << " score=" << w.score
                                                 << (step.converged ? " converged" : "") << " switch from cycle "
                                                 << w.cycle + 1 << ": " << tuning::describe(st.in_force));
        }
        if (step.searching_again)
          CHORUS_LOG(info, "autotune", "window=" << w.window << " score=" << w.score << " dropped: searching again");
        e.in_force = telemetry_of(st.in_force);
        e.digest = st.tuner->digest();
        e.watching = st.tuner->phase() == tuning::tuner_phase::watching;
        auto sw = switch_of(st.in_force, w.cycle + 1);
        self->send(st.wired.fusion, sw);  // always: fusion holds the batches of cycle + 1 for it
        auto now = std::chrono::steady_clock::now();
        auto& obs = observer_of(st.wired.observer);
        obs.on_autotune(e, now);
        if (e.switched) {
          self->send(st.wired.negotiator, sw);
          for (const auto& sender : st.wired.senders) self->send(sender, sw);
          obs.on_tunables(e.in_force, now);
        }
        maybe_submit(self);
        maybe_hold(self);
      },
      [=](const autotune_pad& pad) -> caf::response_promise {  // step 2 of a hold
        auto& st = self->state;
        auto rp = self->make_response_promise();
        if (st.held) {
          rp.deliver(autotune_windows{st.submitted});
          return rp;
        }
        st.pad_to = std::max(pad.to, st.submitted);
        st.pad_reply = rp;
        maybe_submit(self);
        maybe_hold(self);
        return rp;
      },
      [=](const tunables_switch& sw) {  // pipeline::set_tunables, while held
        auto& st = self->state;
        st.in_force = {sw.streams, static_cast<std::size_t>(sw.chunk_bytes),
                       static_cast<std::size_t>(sw.fusion_threshold), std::chrono::microseconds(sw.cycle_time_us),
                       static_cast<std::size_t>(sw.in_place_bytes)};
      },
      [=](const autotune_hold& h) -> caf::response_promise {
        auto& st = self->state;
        auto rp = self->make_response_promise();
        if (h.held) {  // step 1: no more real windows; say how many were submitted
          st.holding = !st.held;
          st.pad_to = st.submitted;
          rp.deliver(autotune_windows{st.submitted});
          return rp;
        }
        rp.deliver(h);
        st.held = false;
        st.holding = false;
        restart_window(self);
        if (!h.restart) return rp;
        // The search starts over where the tunables are now, on the grid (every rank alike).
        auto at = tuning::to_point(st.space, st.in_force);
        st.tuner.emplace(st.space, st.cfg.options, at);
        auto snapped = tuning::from_point(st.space, at);
        if (!(snapped == st.in_force)) {
          st.in_force = snapped;
          auto sw = switch_of(st.in_force, 0);  // as set_tunables sends it: the pipeline is quiescent
          self->send(st.wired.fusion, tunables_pending{0});
          self->send(st.wired.fusion, sw);
          self->send(st.wired.negotiator, sw);
          for (const auto& sender : st.wired.senders) self->send(sender, sw);
        }
        CHORUS_LOG(info, "autotune", "search restarted from " << tuning::describe(st.in_force));
        return rp;
      },
  };
}

}  // namespace chorus
