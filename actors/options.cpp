// pipeline_options::from_config: the pipeline's part of the typed configuration (read once by
// runtime/config from the CHORUS_* variables and their HOROVOD_* aliases), and the part every
// rank must be given alike.
#include "actors/options.hpp"

namespace chorus {

pipeline_options pipeline_options::from_config(const config& c) {
  pipeline_options o;
  const pipeline_config& p = c.pipeline;
  o.negotiation = p.negotiation;
  o.gpu_operations = p.gpu_operations;
  o.peer_timeout = c.transport.peer_timeout;
  o.cycle_time = p.cycle_time;
  o.early_start = p.early_start;
  o.hold_when_ahead = p.hold_when_ahead;
  o.fusion_threshold = p.fusion_threshold;
  o.in_place_bytes = p.in_place_bytes;
  o.stall_check = p.stall_check;
  o.stall_shutdown = p.stall_shutdown;
  o.scheduler_threads = p.scheduler_threads;
  o.scheduler_batch = p.scheduler_batch;
  o.start_window = p.start_window;
  o.priority = p.priority;
  o.chunks_in_flight = p.chunks_in_flight;
  o.stream_placement = p.stream_placement;
  o.chunk_bytes = c.collectives.chunk_bytes;
  o.chunk_bytes_given = c.collectives.chunk_bytes_given;
  parse_hier_mode(c.collectives.hierarchical, o.hierarchical);  // the reader allowed only known words
  o.connect_timeout = c.transport.connect_timeout;
  o.autotune = c.autotune;
  return o;
}

setting_list pipeline_settings(const pipeline_options& o) {
  // The autotuner first: when it runs, its start (snapped to its axes) replaces the sizes below,
  // so ranks that differ in it alone differ there too, and the error must name the cause.
  return {{"CHORUS_AUTOTUNE", o.autotune.enabled ? "1" : "0"},
          {"CHORUS_NEGOTIATION", o.negotiation},
          {"CHORUS_FUSION_THRESHOLD", std::to_string(o.fusion_threshold)},
          {"CHORUS_CHUNK_BYTES", std::to_string(o.chunk_bytes)},
          {"CHORUS_IN_PLACE_BYTES", std::to_string(o.in_place_bytes)},
          {"CHORUS_PRIORITY", o.priority ? "1" : "0"}};
}

}  // namespace chorus
