// What a rank says about one collective operation when it first announces a tensor name:
// the collective, dtype, shape, reduce op, root, device class, process set and whether the
// name is transient (used once). Ranks must agree on all of it; first_difference() names the
// field that differs. Specs travel in gossip messages through the compact binary codec below.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/compression/options.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"
#include "runtime/negotiation/byte_io.hpp"

namespace chorus {

enum class collective_kind : uint8_t { allreduce = 0, broadcast = 1, allgather = 2, reducescatter = 3, alltoall = 4 };
inline constexpr int collective_kind_count = 5;


/// The most dimensions a spec decoded from a peer may have (each costs 8 bytes decoded for 1 on
/// the wire).
inline constexpr std::size_t max_spec_dims = 64;

/// "allreduce", "broadcast", ...
std::string_view name_of(collective_kind k);
/// "cpu", "cuda"
std::string_view name_of(device_kind d);

/// One operation on one named tensor, as one rank enqueued it.
struct tensor_spec {
  std::string name;                                 ///< one operation at a time per name and rank
  collective_kind kind = collective_kind::allreduce;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;                       ///< empty = scalar (one element)
  reduce_op op = reduce_op::sum;                    ///< meaningful for allreduce/reducescatter
  int root = -1;                                    ///< broadcast root rank, -1 otherwise
  device_kind device = device_kind::cpu;
  int process_set = 0;                              ///< 0 = all ranks of the job
  /// The caller uses this name once and never enqueues it again (a fresh name per call, as
  /// chorus.torch's "<collective>.noname.<handle>"): its id is retired on every rank at the
  /// end of the cycle that agrees it (registry.hpp), so one-shot names do not grow the
  /// registry and the bitmaps. Enqueued again anyway, the name simply registers anew.
  bool transient = false;
  /// allreduce, reducescatter, allgather of f32/f64: what goes on the wire (compression.hpp).
  compression wire = compression::none;
  /// allreduce, reducescatter, allgather of floats: the NaN/Inf check.
  nan_check check = nan_check::off;
  /// Compressed allreduce / reducescatter: each rank's input times this (in f32) before the sum.
  float prescale = 1.0f;
  /// Which waiting work goes first (larger first; chorus.torch: the tensor's place in the
  /// forward pass, so the first layers' gradients arrive first). Every rank must give a name
  /// the same priority: it orders chunks alike on every rank (actors/fusion_actor.hpp).
  int32_t priority = 0;

  bool operator==(const tensor_spec&) const = default;
  /// Product of the dimensions (1 for a scalar). Defined for specs that passed validate() or
  /// a decoder (shape_fits below); others may overflow.
  int64_t num_elements() const;
  /// num_elements() * bytes per element.
  int64_t byte_size() const;
};

/// Whether `shape` of `type` has no negative dimension and its element and byte counts fit in
/// int64 (zeros aside: every partial product of the non-zero dimensions fits, so the row size
/// of an allgather announced with dim 0 = 0 fits too). Specs from peers and trace files are
/// refused otherwise; num_elements() and byte_size() are then safe.
bool shape_fits(const std::vector<int64_t>& shape, dtype type);

/// A total order on specs (name first), so every rank sorts announcements alike.
bool spec_less(const tensor_spec& a, const tensor_spec& b);

/// The first field in which two specs differ, by these names, in this order: "collective",
/// "dtype", "shape", "op", "root", "device", "process set", "transient", "compression",
/// "nan check", "prescale", "priority". Names are not compared.
std::optional<std::string> first_difference(const tensor_spec& a, const tensor_spec& b);

/// The value of a field named as by first_difference(), printed for a human:
/// shape "[512,256]", dtype "f32", op "sum", root "0", collective "allreduce", device "cpu",
/// transient "true".
std::string field_value(const tensor_spec& s, std::string_view field);

/// "[512,256]"; "[]" for a scalar.
std::string format_shape(const std::vector<int64_t>& shape);

/// "allreduce('fc1.weight')": how errors name an operation; in a process set other than the
/// global one, "allreduce('fc1.weight') in process set 2".
std::string describe(const tensor_spec& s);

/// The name a tensor negotiates under: `name` itself in the global set, "<name> [process set
/// <id>]" in process set `id`, so that one name used in two sets is two tensors (each set
/// negotiates its own names, as Horovod's per-set tensor queues do).
std::string negotiated_name(const std::string& name, int process_set);
/// The caller's name inside a negotiated one (the name itself for the global set).
std::string caller_name(const tensor_spec& s);

/// Checks what a single rank can check at the API boundary: a name, no negative dimension, a
/// byte size that fits in int64, a root inside [0, world_size) for broadcast. errc::invalid_argument otherwise.
status validate(const tensor_spec& s, int world_size);

/// Compact binary form: u8 kind | u8 dtype | u8 op (bits 4-5: compression, bits 6-7: nan check) |
/// u8 device (bit 7: transient, bit 6: a prescale follows the dims, bit 5: a priority follows) |
/// svarint root | varint process_set | string name | varint ndim | svarint dims... [| varint
/// prescale's f32 bits] [| svarint priority]
/// (the transient flag rides in the device byte, the wire options in the op byte: a spec
/// without them encodes as before).
void write(byte_writer& w, const tensor_spec& s);
bool read(byte_reader& r, tensor_spec& s);
std::vector<std::byte> encode(const tensor_spec& s);
/// errc::protocol on truncated input, unknown enum values, a shape that fails shape_fits or
/// trailing bytes.
result<tensor_spec> decode_tensor_spec(std::span<const std::byte> in);

}  // namespace chorus
