// Every Prometheus metric Chorus exposes, in one place (docs/metrics.md). Names follow
// chorus_<subsystem>_<quantity>_<unit>; counters end in _total; times are in seconds, sizes
// in bytes. Every series carries `rank`; stream series also carry `stream` (0 .. streams-1).
// The Grafana dashboard (telemetry/grafana/chorus.json) queries these names, and a test checks
// that every name it uses is exposed.
#pragma once

namespace chorus::telemetry::metric_names {

// ---- data plane, per stream (labels rank, stream) ----
/// Counter: bytes this rank wrote on the stream's connections (all peers, frame headers included).
inline constexpr const char* stream_sent_bytes = "chorus_stream_sent_bytes_total";
/// Counter: bytes this rank read from the stream's connections.
inline constexpr const char* stream_received_bytes = "chorus_stream_received_bytes_total";
/// Counter: of the bytes sent, the payload bytes that went through a shared-memory ring to a
/// rank on the same host (the rest went through the kernel's TCP).
inline constexpr const char* stream_shm_sent_bytes = "chorus_stream_shm_sent_bytes_total";
/// Gauge: bytes per second over the most recent window of at least 1 s, as of the scrape
/// (label direction="sent"|"received").
inline constexpr const char* stream_throughput = "chorus_stream_throughput_bytes_per_second";

// ---- data plane, shared-memory mailboxes (labels rank, path) ----
/// Counter: payload bytes this rank posted to its peers through mailboxes, which no stream
/// counts (path="caller": blocking allreduces on the calling thread; "pipeline": the
/// pipeline's direct path, one host only).
inline constexpr const char* mailbox_sent_bytes = "chorus_mailbox_sent_bytes_total";

// ---- data plane, per stream and peer (labels rank, stream, peer): one connection each ----
/// Counter: bytes this rank wrote on the stream's connection to the peer (headers included).
inline constexpr const char* stream_peer_sent_bytes = "chorus_stream_peer_sent_bytes_total";
/// Counter: bytes this rank read from the stream's connection to the peer.
inline constexpr const char* stream_peer_received_bytes = "chorus_stream_peer_received_bytes_total";
/// Gauge: bytes per second on that connection over the latest window of at least 1 s (label
/// direction="sent"|"received"): the slowest connection is the smallest busy one.
inline constexpr const char* stream_peer_throughput = "chorus_stream_peer_throughput_bytes_per_second";
/// Gauge: 1 per connection, with labels local_port and remote_port (TCP; 0 when none), so that
/// a slow connection in the metrics can be found with ss(8) or tc(8).
inline constexpr const char* stream_peer_connection = "chorus_stream_peer_connection_info";

// ---- data plane, per stream (labels rank, stream), continued ----
/// Counter: chunks the stream's sender finished (successfully or not).
inline constexpr const char* stream_chunks = "chorus_stream_chunks_total";
/// Counter: chunks the stream's sender stole from another stream's deque.
inline constexpr const char* stream_steals = "chorus_stream_steals_total";

// ---- negotiation (label rank) ----
/// Histogram: seconds from an op's enqueue to the cycle that agreed it, per op.
inline constexpr const char* negotiation_latency = "chorus_negotiation_latency_seconds";
/// Histogram: seconds one negotiation cycle of this rank took.
inline constexpr const char* cycle_duration = "chorus_negotiation_cycle_duration_seconds";
/// Counter: gossip (control) messages this rank sent to peers.
inline constexpr const char* gossip_sent = "chorus_gossip_messages_sent_total";
/// Counter: gossip messages this rank received.
inline constexpr const char* gossip_received = "chorus_gossip_messages_received_total";
/// Gauge: tensors named in a stall warning and neither agreed nor ended since.
inline constexpr const char* stalled_tensors = "chorus_negotiation_stalled_tensors";
/// Counter: stall warnings (one per tensor and warning).
inline constexpr const char* stall_warnings = "chorus_negotiation_stall_warnings_total";

// ---- fusion (label rank) ----
/// Histogram: payload bytes per fusion bucket (an in-place tensor is a bucket of its own).
inline constexpr const char* bucket_bytes = "chorus_fusion_bucket_bytes";
/// Counter: fusion buckets by algorithm (label algorithm = "ring", "hier_sharded", ... for
/// allreduce buckets, "ring_allgather" or "hier_allgather" for allgather, else the collective's name).
inline constexpr const char* buckets = "chorus_fusion_buckets_total";

// ---- operations (labels rank, op = "allreduce", "broadcast", ...) ----
/// Counter: operations handed to the pipeline.
inline constexpr const char* ops_enqueued = "chorus_ops_enqueued_total";
/// Histogram: seconds from enqueue to the op's callback (ok or error).
inline constexpr const char* op_latency = "chorus_op_latency_seconds";
/// Counter: errors that ended ops, by kind (label kind = errc's name: "mismatch", ...).
inline constexpr const char* errors = "chorus_errors_total";
/// Counter: buckets in which the NaN/Inf check found non-finite input on some rank (label
/// mode = "error" or "skip"; counted on every rank, since every rank learns it).
inline constexpr const char* nonfinite = "chorus_nonfinite_total";
/// Counter: bytes of compressed chunks (label side = "input": the caller's f32/f64 bytes,
/// "wire": what went on the wire per ring pass, fp16/bf16).
inline constexpr const char* compressed_bytes = "chorus_compressed_bytes_total";
/// Gauge: 1 when allreduce, reducescatter and allgather among all ranks that ask for fp16/bf16
/// run uncompressed because every rank reaches every other through shared memory
/// (CHORUS_COMPRESSION_SHM=auto), else 0. Set once at init; the same on every rank.
inline constexpr const char* compression_off_on_shm = "chorus_compression_off_on_shm";

// ---- torch.distributed groups (bindings/ordered; labels rank, call = torch's name:
//      "all_reduce", "broadcast", "send", ...; "other" for a name not listed in c10d_calls) ----
/// Counter: calls of this rank's Chorus process groups that ended (label result = "ok", "error").
inline constexpr const char* c10d_calls_total = "chorus_c10d_calls_total";
/// Histogram: seconds from a call to its end.
inline constexpr const char* c10d_call_latency = "chorus_c10d_call_seconds";
/// Counter: bytes of the calls' tensors on this rank.
inline constexpr const char* c10d_bytes = "chorus_c10d_bytes_total";
/// The calls with series of their own.
inline constexpr const char* c10d_calls[] = {
    "all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather", "all_gather_into_tensor",
    "all_gather_coalesced", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all_single",
    "all_to_all", "barrier", "send", "recv", "other"};

// ---- tunables in force (label rank) ----
/// Gauge: the fusion threshold (bytes).
inline constexpr const char* tunable_fusion_threshold = "chorus_tunable_fusion_threshold_bytes";
/// Gauge: the chunk size (bytes).
inline constexpr const char* tunable_chunk_bytes = "chorus_tunable_chunk_bytes";
/// Gauge: the number of streams.
inline constexpr const char* tunable_streams = "chorus_tunable_streams";
/// Gauge: the cycle time, the least spacing of cycles unless a bucket's worth waits (seconds).
inline constexpr const char* tunable_cycle_time = "chorus_tunable_cycle_time_seconds";
/// Gauge: allreduce tensors at least this large are reduced in place, unfused (bytes; 0 = none).
inline constexpr const char* tunable_in_place = "chorus_tunable_in_place_bytes";

// ---- autotuner (label rank; CHORUS_AUTOTUNE=1) ----
/// Gauge: the job's score of the last agreed window (bytes per second, minimum over ranks).
inline constexpr const char* autotune_score = "chorus_autotune_score";
/// Counter: samples the autotuner took (a sample is the median of several windows).
inline constexpr const char* autotune_samples = "chorus_autotune_samples_total";
/// Counter: switches of the tunables the autotuner made.
inline constexpr const char* autotune_switches = "chorus_autotune_switches_total";

}  // namespace chorus::telemetry::metric_names
