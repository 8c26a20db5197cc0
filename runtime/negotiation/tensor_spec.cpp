// Tensor specs: comparison, printing for error messages, boundary checks and the codec.
#include "runtime/negotiation/tensor_spec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>
#include <tuple>

#include "runtime/negotiation/value_codec.hpp"

namespace chorus {
namespace {
// The device byte's top bit carries tensor_spec::transient.
constexpr uint8_t transient_bit = 0x80;
// The device byte's bit 6 says a prescale other than 1 follows the dims.
constexpr uint8_t prescale_bit = 0x40;
// The device byte's bit 5 says a priority other than 0 follows (after the prescale, if any).
constexpr uint8_t priority_bit = 0x20;
}  // namespace

std::string_view name_of(collective_kind k) {
  static constexpr std::string_view names[] = {"allreduce", "broadcast", "allgather", "reducescatter", "alltoall"};
  auto i = static_cast<int>(k);
  return i < collective_kind_count ? names[i] : "?";
}

std::string_view name_of(device_kind d) {
  static constexpr std::string_view names[] = {"cpu", "cuda"};
  auto i = static_cast<int>(d);
  return i < device_kind_count ? names[i] : "?";
}

int64_t tensor_spec::num_elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

int64_t tensor_spec::byte_size() const { return num_elements() * static_cast<int64_t>(size_of(type)); }

bool shape_fits(const std::vector<int64_t>& shape, dtype type) {
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(size_of(type)));
  for (auto d : shape) {
    if (d < 0) return false;
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) return false;
  }
  return true;
}

bool spec_less(const tensor_spec& a, const tensor_spec& b) {
  return std::tie(a.name, a.kind, a.type, a.shape, a.op, a.root, a.device, a.process_set, a.transient, a.wire, a.check, a.prescale, a.priority) <
         std::tie(b.name, b.kind, b.type, b.shape, b.op, b.root, b.device, b.process_set, b.transient, b.wire, b.check, b.prescale, b.priority);
}

std::optional<std::string> first_difference(const tensor_spec& a, const tensor_spec& b) {
  if (a.kind != b.kind) return "collective";
  if (a.type != b.type) return "dtype";
  if (a.shape != b.shape) return "shape";
  if (a.op != b.op) return "op";
  if (a.root != b.root) return "root";
  if (a.device != b.device) return "device";
  if (a.process_set != b.process_set) return "process set";
  if (a.transient != b.transient) return "transient";
  if (a.wire != b.wire) return "compression";
  if (a.check != b.check) return "nan check";
  if (std::bit_cast<uint32_t>(a.prescale) != std::bit_cast<uint32_t>(b.prescale)) return "prescale";
  if (a.priority != b.priority) return "priority";
  return std::nullopt;
}

std::string field_value(const tensor_spec& s, std::string_view field) {
  if (field == "collective") return std::string(name_of(s.kind));
  if (field == "dtype") return std::string(name_of(s.type));
  if (field == "shape") return format_shape(s.shape);
  if (field == "op") return std::string(name_of(s.op));
  if (field == "root") return std::to_string(s.root);
  if (field == "device") return std::string(name_of(s.device));
  if (field == "process set") return std::to_string(s.process_set);
  if (field == "transient") return s.transient ? "true" : "false";
  if (field == "compression") return std::string(name_of(s.wire));
  if (field == "nan check") return std::string(name_of(s.check));
  if (field == "prescale") return std::to_string(s.prescale);
  if (field == "priority") return std::to_string(s.priority);
  return "?";
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {
std::string set_suffix(int process_set) { return " [process set " + std::to_string(process_set) + "]"; }
}  // namespace

std::string negotiated_name(const std::string& name, int process_set) {
  return process_set == 0 ? name : name + set_suffix(process_set);
}

std::string caller_name(const tensor_spec& s) {
  if (s.process_set == 0) return s.name;
  auto suffix = set_suffix(s.process_set);
  if (s.name.size() >= suffix.size() && s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return s.name.substr(0, s.name.size() - suffix.size());
  return s.name;
}

std::string describe(const tensor_spec& s) {
  std::string out = std::string(name_of(s.kind)) + "('" + caller_name(s) + "')";
  return s.process_set == 0 ? out : out + " in process set " + std::to_string(s.process_set);
}

status validate(const tensor_spec& s, int world_size) {
  if (s.name.empty()) return {errc::invalid_argument, std::string(name_of(s.kind)) + ": empty tensor name"};
  for (auto d : s.shape) {
    if (d < 0) {
      return {errc::invalid_argument, describe(s) + ": negative dimension in shape " + format_shape(s.shape)};
    }
  }
  if (!shape_fits(s.shape, s.type)) {
    return {errc::invalid_argument, describe(s) + ": shape " + format_shape(s.shape) + " of " +
                                        std::string(name_of(s.type)) + " holds more than 2^63 bytes"};
  }
  if (s.kind == collective_kind::broadcast && (s.root < 0 || s.root >= world_size)) {
    return {errc::invalid_argument, describe(s) + ": root " + std::to_string(s.root) +
                                        " outside the job's ranks 0-" + std::to_string(world_size - 1)};
  }
  if (s.process_set < 0) {
    return {errc::invalid_argument, describe(s) + ": negative process set " + std::to_string(s.process_set)};
  }
  return {};
}

void write(byte_writer& w, const tensor_spec& s) {
  w.u8(static_cast<uint8_t>(s.kind));
  w.u8(static_cast<uint8_t>(s.type));
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(s.op) | static_cast<uint8_t>(s.wire) << 4 |
                           static_cast<uint8_t>(s.check) << 6));
  const bool scaled = std::bit_cast<uint32_t>(s.prescale) != std::bit_cast<uint32_t>(1.0f);
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(s.device) | (s.transient ? transient_bit : 0) |
                            (scaled ? prescale_bit : 0) | (s.priority != 0 ? priority_bit : 0)));
  w.svarint(s.root);
  w.varint(static_cast<uint64_t>(s.process_set));
  w.str(s.name);
  w.varint(s.shape.size());
  for (auto d : s.shape) w.svarint(d);
  if (scaled) w.varint(std::bit_cast<uint32_t>(s.prescale));
  if (s.priority != 0) w.svarint(s.priority);
}

bool read(byte_reader& r, tensor_spec& s) {
  uint8_t kind = 0, type = 0, op = 0, device = 0;
  if (!r.u8(kind, "spec collective") || !r.u8(type, "spec dtype") || !r.u8(op, "spec op") ||
      !r.u8(device, "spec device"))
    return false;
  if (kind >= collective_kind_count) return r.fail("spec collective", "unknown collective " + std::to_string(kind));
  if (type >= dtype_count) return r.fail("spec dtype", "unknown dtype " + std::to_string(type));
  const uint8_t wire = (op >> 4) & 3, check = op >> 6;
  op &= 0x0f;
  if (op >= reduce_op_count) return r.fail("spec op", "unknown reduce op " + std::to_string(op));
  if (wire >= compression_count) return r.fail("spec op", "unknown compression " + std::to_string(wire));
  if (check >= nan_check_count) return r.fail("spec op", "unknown nan check " + std::to_string(check));
  s.wire = static_cast<compression>(wire);
  s.check = static_cast<nan_check>(check);
  bool transient = (device & transient_bit) != 0;
  const bool scaled = (device & prescale_bit) != 0;
  const bool prioritized = (device & priority_bit) != 0;
  device = static_cast<uint8_t>(device & ~(transient_bit | prescale_bit | priority_bit));
  if (device >= device_kind_count) return r.fail("spec device", "unknown device " + std::to_string(device));
  s.kind = static_cast<collective_kind>(kind);
  s.type = static_cast<dtype>(type);
  s.op = static_cast<reduce_op>(op);
  s.device = static_cast<device_kind>(device);
  s.transient = transient;
  int64_t root = 0;
  uint64_t pset = 0;
  if (!r.svarint(root, "spec root") || !r.varint(pset, "spec process set")) return false;
  if (root < -1 || root > INT32_MAX) return r.fail("spec root", "root " + std::to_string(root) + " out of range");
  if (pset > INT32_MAX) return r.fail("spec process set", "process set " + std::to_string(pset) + " out of range");
  s.root = static_cast<int>(root);
  s.process_set = static_cast<int>(pset);
  std::size_t ndim = 0;
  if (!r.str(s.name, "spec name") || !r.count(ndim, "spec rank")) return false;
  if (ndim > max_spec_dims) return r.fail("spec rank", std::to_string(ndim) + " dimensions, more than " +
                                                        std::to_string(max_spec_dims));
  s.shape.resize(ndim);
  for (auto& d : s.shape)
    if (!r.svarint(d, "spec shape")) return false;
  // A peer's shape becomes allocations and sizes (the join filler, fusion): no negative
  // dimension, no product past int64.
  if (!shape_fits(s.shape, s.type))
    return r.fail("spec shape", "shape " + format_shape(s.shape) + " of '" + s.name +
                                    "' has a negative dimension or more than 2^63 bytes");
  s.prescale = 1.0f;
  if (scaled) {
    uint64_t bits = 0;
    if (!r.varint(bits, "spec prescale")) return false;
    if (bits > UINT32_MAX) return r.fail("spec prescale", "not the bits of an f32");
    s.prescale = std::bit_cast<float>(static_cast<uint32_t>(bits));
    // A prescale multiplies inputs: NaN or Inf could only poison the sum (the API refuses them
    // alike), and NaN would not even equal itself when the specs are compared.
    if (!std::isfinite(s.prescale))
      return r.fail("spec prescale", "prescale " + std::to_string(s.prescale) + " of '" + s.name + "' is not finite");
  }
  s.priority = 0;
  if (prioritized) {
    int64_t priority = 0;
    if (!r.svarint(priority, "spec priority")) return false;
    if (priority < INT32_MIN || priority > INT32_MAX)
      return r.fail("spec priority", "priority " + std::to_string(priority) + " of '" + s.name + "' out of range");
    s.priority = static_cast<int32_t>(priority);
  }
  return true;
}

std::vector<std::byte> encode(const tensor_spec& s) { return encode_value(s); }

result<tensor_spec> decode_tensor_spec(std::span<const std::byte> in) { return decode_value<tensor_spec>(in, "tensor spec"); }

}  // namespace chorus
