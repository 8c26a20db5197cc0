// The trace reader: header, checksummed blocks, records; damage ends the records.
#include "telemetry/trace/reader.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "runtime/negotiation/byte_io.hpp"

namespace chorus::telemetry::trace {

namespace {

std::string at_offset(const std::string& path, uint64_t offset, const std::string& what) {
  return "trace " + path + ": " + what + " at byte offset " + std::to_string(offset);
}

/// Decodes the records of one checksummed block body.
class block_parser {
 public:
  block_parser(trace_file& f, std::unordered_map<uint64_t, std::string>& strings, uint64_t& seen,
               uint64_t copy_budget)
      : f_(f), strings_(strings), seen_(seen), copy_budget_(copy_budget) {}

  /// False (and f.damage set) at the first record that does not parse.
  bool parse(std::span<const std::byte> body, uint64_t body_offset) {
    std::size_t at = 0;
    while (at < body.size()) {
      uint64_t offset = body_offset + at;
      if (f_.ended || f_.limited) return damaged(offset, "corrupted: a record after the trace's last record");
      byte_reader lr(body.subspan(at));
      uint64_t len = 0;
      if (!lr.varint(len, "record length") || len == 0 || len > lr.remaining())
        return damaged(offset, "corrupted record: bad length");
      auto rec = body.subspan(at + lr.position(), static_cast<std::size_t>(len));
      byte_reader r(rec);
      std::string why;
      if (!record(r, offset, why)) return damaged(offset, "corrupted " + why);
      if (r.remaining() != 0) return damaged(offset, "corrupted record: " + std::to_string(r.remaining()) + " bytes left over");
      at += lr.position() + static_cast<std::size_t>(len);
    }
    return true;
  }

 private:
  bool damaged(uint64_t offset, const std::string& what) {
    f_.damage = status{errc::protocol, at_offset(f_.path, offset, what)};
    return false;
  }

  bool name(byte_reader& r, std::string& out, std::string& why) {
    uint64_t id = 0;
    if (!r.varint(id, "string id")) return false;
    auto it = strings_.find(id);
    if (it == strings_.end()) {
      why = "record: string id " + std::to_string(id) + " used before it was defined";
      return false;
    }
    // Each reference copies the string: a few bytes of file could otherwise ask for a 64 KiB
    // copy each, without end.
    if (it->second.size() > copy_budget_ - copied_) {
      why = "record: the strings its records reference add up to more than " + std::to_string(copy_budget_) +
            " bytes (the reader's bound for this file: " + std::to_string(decoded_string_floor >> 20) + " MiB + " +
            std::to_string(decoded_string_per_file_byte) + " per byte of file)";
      return false;
    }
    copied_ += it->second.size();
    out = it->second;
    return true;
  }

  bool spec(byte_reader& r, tensor_spec& s, std::string& why) {
    uint8_t kind = 0, type = 0, op = 0, device = 0;
    int64_t root = 0;
    uint64_t set = 0;
    std::size_t ndim = 0;
    if (!r.u8(kind, "collective") || !r.u8(type, "dtype") || !r.u8(op, "op") || !r.u8(device, "device") ||
        !r.svarint(root, "root") || !r.varint(set, "process set") || !name(r, s.name, why) || !r.count(ndim, "ndim"))
      return false;
    const bool prioritized = (device & spec_priority_bit) != 0;
    device = static_cast<uint8_t>(device & ~spec_priority_bit);
    if (kind >= collective_kind_count || device >= device_kind_count) {
      why = "record: spec with collective " + std::to_string(kind) + " device " + std::to_string(device);
      return false;
    }
    // Replay plans fusion from these specs: an unknown dtype (element size 0) or op is damage.
    if (type >= dtype_count || size_of(static_cast<dtype>(type)) == 0 || op >= reduce_op_count) {
      why = "record: spec of '" + s.name + "' with dtype " + std::to_string(type) + " op " + std::to_string(op) +
            " (expected dtype 0.." + std::to_string(dtype_count - 1) + ", op 0.." + std::to_string(reduce_op_count - 1) +
            ")";
      return false;
    }
    s.kind = static_cast<collective_kind>(kind);
    s.type = static_cast<dtype>(type);
    s.op = static_cast<reduce_op>(op);
    s.device = static_cast<device_kind>(device);
    s.root = static_cast<int>(root);
    s.process_set = static_cast<int>(set);
    s.shape.resize(ndim);
    for (auto& d : s.shape) {
      if (!r.svarint(d, "dim")) return false;
      if (d < 0) {
        why = "record: spec of '" + s.name + "' with dimension " + std::to_string(d);
        return false;
      }
    }
    // Replay sizes buffers from the shape: a product past int64 is damage, not a size.
    if (!shape_fits(s.shape, s.type)) {
      why = "record: spec of '" + s.name + "' with shape " + format_shape(s.shape) + ", more than 2^63 bytes";
      return false;
    }
    s.priority = 0;
    if (prioritized) {
      int64_t priority = 0;
      if (!r.svarint(priority, "priority")) return false;
      if (priority < INT32_MIN || priority > INT32_MAX) {
        why = "record: spec of '" + s.name + "' with priority " + std::to_string(priority);
        return false;
      }
      s.priority = static_cast<int32_t>(priority);
    }
    return true;
  }

  static bool result_of(byte_reader& r, status& st) {
    uint8_t code = 0;
    if (!r.u8(code, "status")) return false;
    if (code == 0) {
      st = status{};
      return true;
    }
    std::string message;
    if (!r.str(message, "status message")) return false;
    st = status{static_cast<errc>(code), std::move(message)};
    return true;
  }

  static bool bytes(byte_reader& r, std::vector<uint8_t>& out) {
    std::size_t n = 0;
    if (!r.count(n, "payload length")) return false;
    out.resize(n);
    for (auto& b : out)
      if (!r.u8(b, "payload")) return false;
    return true;
  }

  static bool small_int(byte_reader& r, int& v, const char* what) {
    int64_t x = 0;
    if (!r.svarint(x, what)) return false;
    v = static_cast<int>(x);
    return true;
  }

  bool record(byte_reader& r, uint64_t offset, std::string& why) {
    uint8_t k = 0;
    trace_record x;
    x.offset = offset;
    if (!r.u8(k, "kind") || !r.svarint(x.t_ns, "time")) return fail(r, why);
    x.kind = static_cast<record_kind>(k);
    bool ok = true;
    switch (x.kind) {
      case record_kind::string: {
        uint64_t id = 0;
        std::string text;
        ok = r.varint(id, "string id") && r.str(text, "string");
        if (ok) strings_[id] = std::move(text);
        if (!ok) return fail(r, why);
        ++seen_;
        return true;
      }
      case record_kind::tunables: {
        uint64_t ft = 0, cb = 0, ct = 0, ip = 0;
        ok = r.varint(ft, "fusion threshold") && r.varint(cb, "chunk bytes") &&
             small_int(r, x.tuning.streams, "streams") && r.varint(ct, "cycle time") && r.varint(ip, "in-place bytes");
        x.tuning.fusion_threshold = ft;
        x.tuning.chunk_bytes = cb;
        x.tuning.cycle_time = std::chrono::microseconds(ct);
        x.tuning.in_place_bytes = ip;
        break;
      }
      case record_kind::enqueue: ok = r.varint(x.handle, "handle") && spec(r, x.spec, why); break;
      case record_kind::callback:
        ok = r.varint(x.handle, "handle") && spec(r, x.spec, why) && result_of(r, x.result) &&
             r.svarint(x.started_ns, "enqueued");
        break;
      case record_kind::ready: ok = r.varint(x.handle, "handle") && spec(r, x.spec, why) && r.varint(x.cycle, "cycle"); break;
      case record_kind::gossip_sent: ok = small_int(r, x.peer, "to") && bytes(r, x.payload); break;
      case record_kind::gossip_received: ok = bytes(r, x.payload); break;
      case record_kind::cycle:
        ok = r.varint(x.cycle, "cycle") && r.varint(x.count, "sent") && r.varint(x.count2, "received") &&
             r.svarint(x.started_ns, "started");
        break;
      case record_kind::agreed: {
        std::size_t n = 0;
        ok = r.varint(x.cycle, "cycle") && r.count(n, "names");
        for (std::size_t i = 0; ok && i < n; ++i) {
          std::string s;
          uint64_t us = 0;
          ok = name(r, s, why) && r.varint(us, "latency");
          x.names.push_back(std::move(s));
          x.values.push_back(static_cast<int64_t>(us));
        }
        break;
      }
      case record_kind::stall: {
        std::string s;
        std::size_t n = 0;
        ok = name(r, s, why) && r.count(n, "ranks");
        x.names.push_back(std::move(s));
        for (std::size_t i = 0; ok && i < n; ++i) {
          int64_t v = 0;
          ok = r.svarint(v, "rank");
          x.values.push_back(v);
        }
        break;
      }
      case record_kind::bucket: {
        uint8_t in_place = 0;
        std::size_t n = 0;
        ok = r.varint(x.bucket, "bucket") && r.varint(x.cycle, "cycle") && r.varint(x.sequence, "first sequence") &&
             r.varint(x.count, "chunks") && r.varint(x.bytes, "bytes") && r.u8(in_place, "in place") &&
             name(r, x.text, why) && r.count(n, "tensors");
        x.in_place = in_place != 0;
        for (std::size_t i = 0; ok && i < n; ++i) {
          std::string s;
          ok = name(r, s, why);
          x.names.push_back(std::move(s));
        }
        if (ok && r.remaining() > 0) ok = name(r, x.algorithm, why);  // absent in older traces
        break;
      }
      case record_kind::chunk_start:
        ok = small_int(r, x.peer, "stream") && r.varint(x.sequence, "sequence") && r.varint(x.bytes, "bytes");
        break;
      case record_kind::chunk_end:
        ok = small_int(r, x.peer, "stream") && r.varint(x.sequence, "sequence") && r.varint(x.bytes, "bytes") &&
             result_of(r, x.result) && r.svarint(x.started_ns, "started");
        break;
      case record_kind::compressed:
        ok = small_int(r, x.peer, "stream") && r.varint(x.bytes, "raw bytes") && r.varint(x.count, "wire bytes");
        break;
      case record_kind::direct_path: ok = r.varint(x.bytes, "direct path bytes"); break;
      case record_kind::call:
        ok = name(r, x.group, why) && r.varint(x.sequence, "call number") && name(r, x.text, why) &&
             r.varint(x.bytes, "call bytes") && result_of(r, x.result) && r.svarint(x.started_ns, "started");
        break;
      case record_kind::steal:
        ok = small_int(r, x.peer, "thief") && small_int(r, x.victim, "victim") && r.varint(x.sequence, "sequence");
        break;
      case record_kind::error: ok = name(r, x.text, why) && result_of(r, x.result); break;
      case record_kind::lost:
        ok = r.varint(x.count, "lost");
        f_.lost += x.count;
        break;
      case record_kind::autotune: {
        auto& a = x.autotune;
        uint8_t flags = 0;
        uint64_t ft = 0, cb = 0, ct = 0, ip = 0;
        ok = r.varint(a.cycle, "cycle") && r.varint(a.window, "window") && r.f64(a.score, "score") &&
             r.u8(flags, "flags") && r.varint(a.sample_index, "sample") && r.f64(a.sample_score, "sample score") &&
             r.varint(ft, "fusion threshold") && r.varint(cb, "chunk bytes") &&
             small_int(r, x.tuning.streams, "streams") && r.varint(ct, "cycle time") &&
             r.varint(ip, "in-place bytes") && r.varint(a.digest, "digest");
        a.sample = flags & 1;
        a.switched = flags & 2;
        x.tuning.fusion_threshold = ft;
        x.tuning.chunk_bytes = cb;
        x.tuning.cycle_time = std::chrono::microseconds(ct);
        x.tuning.in_place_bytes = ip;
        a.in_force = x.tuning;
        x.cycle = a.cycle;
        break;
      }
      case record_kind::limit:
        ok = r.varint(x.count, "max bytes");
        f_.limited = ok;
        break;
      case record_kind::end:
        ok = r.varint(x.count, "records");
        if (ok && x.count != seen_) {
          why = "end record: it counts " + std::to_string(x.count) + " records before it, the file holds " +
                std::to_string(seen_);
          return false;
        }
        f_.ended = ok;
        break;
      default:
        why = "record: unknown kind " + std::to_string(k);
        return false;
    }
    if (!ok) return fail(r, why);
    ++seen_;
    f_.records.push_back(std::move(x));
    return true;
  }

  static bool fail(const byte_reader& r, std::string& why) {
    if (why.empty()) why = "record: " + r.error().message();
    return false;
  }

  trace_file& f_;
  std::unordered_map<uint64_t, std::string>& strings_;
  uint64_t& seen_;
  const uint64_t copy_budget_;
  uint64_t copied_ = 0;
};

}  // namespace

result<trace_file> read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return status{errc::invalid_argument, "trace " + path + ": cannot open the file"};
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_trace(path, std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size()));
}

result<trace_file> parse_trace(const std::string& path, std::span<const std::byte> data) {
  trace_file f;
  f.path = path;
  if (data.size() < 12)
    return status{errc::protocol, at_offset(path, data.size(), "truncated: the header needs " +
                                                                  std::to_string(header_bytes) + " bytes")};
  if (std::memcmp(data.data(), file_magic.data(), file_magic.size()) != 0)
    return status{errc::protocol, at_offset(path, 0, "not a Chorus trace (bad magic)")};
  f.header.version = get_u16(data.data() + 8);
  uint16_t hb = get_u16(data.data() + 10);
  if (f.header.version != format_version || hb < header_bytes)
    return status{errc::protocol, at_offset(path, 8, "unsupported trace version " + std::to_string(f.header.version) +
                                                         " (this reader reads version " +
                                                         std::to_string(format_version) + ")")};
  if (data.size() < hb)
    return status{errc::protocol, at_offset(path, data.size(), "truncated: the header needs " + std::to_string(hb) + " bytes")};
  f.header.rank = static_cast<int>(get_u32(data.data() + 12));
  f.header.size = static_cast<int>(get_u32(data.data() + 16));
  f.header.steady_ns = static_cast<int64_t>(get_u64(data.data() + 20));
  f.header.wall_ns = static_cast<int64_t>(get_u64(data.data() + 28));

  std::unordered_map<uint64_t, std::string> strings;
  uint64_t seen = 0;
  block_parser parser(f, strings, seen, decoded_string_floor + decoded_string_per_file_byte * data.size());
  std::size_t at = hb;
  while (at < data.size()) {
    if (data.size() - at < block_header_bytes) {
      f.damage = status{errc::protocol, at_offset(path, at, "truncated: a block header needs " +
                                                                std::to_string(block_header_bytes) + " bytes, " +
                                                                std::to_string(data.size() - at) + " left")};
      break;
    }
    uint32_t len = get_u32(data.data() + at), crc = get_u32(data.data() + at + 4);
    if (len == 0 || len > max_block_bytes) {
      f.damage = status{errc::protocol, at_offset(path, at, "corrupted block: length " + std::to_string(len))};
      break;
    }
    if (data.size() - at - block_header_bytes < len) {
      f.damage = status{errc::protocol, at_offset(path, at, "truncated: a block of " + std::to_string(len) +
                                                                " bytes, " +
                                                                std::to_string(data.size() - at - block_header_bytes) +
                                                                " left")};
      break;
    }
    auto body = data.subspan(at + block_header_bytes, len);
    if (crc32(body) != crc) {
      f.damage = status{errc::protocol, at_offset(path, at, "corrupted block: checksum mismatch")};
      break;
    }
    if (!parser.parse(body, at + block_header_bytes)) break;
    at += block_header_bytes + len;
  }
  return f;
}

result<trace_file> read_trace_strict(const std::string& path) {
  auto f = read_trace(path);
  if (!f) return f;
  if (!f->damage.ok()) return f->damage;
  return f;
}

result<std::vector<trace_file>> read_trace_dir(const std::string& dir, const std::string& prefix) {
  auto rank_path = [&](int r) { return (std::filesystem::path(dir) / (prefix + std::to_string(r) + ".trace")).string(); };
  auto first = read_trace_strict(rank_path(0));
  if (!first) return first.error();
  int size = first->header.size;
  if (size < 1) return status{errc::protocol, "trace " + rank_path(0) + ": size " + std::to_string(size)};
  std::vector<trace_file> out;
  out.push_back(std::move(*first));
  for (int r = 1; r < size; ++r) {
    auto f = read_trace_strict(rank_path(r));
    if (!f) return f.error();
    if (f->header.size != size || f->header.rank != r)
      return status{errc::protocol, "trace " + f->path + ": rank " + std::to_string(f->header.rank) + " of " +
                                        std::to_string(f->header.size) + ", expected rank " + std::to_string(r) +
                                        " of " + std::to_string(size)};
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace chorus::telemetry::trace
