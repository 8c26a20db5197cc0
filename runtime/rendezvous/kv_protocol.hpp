// The rendezvous store's wire format, all of it. Rank 0's kv_server and every rank's kv_client
// exchange length-prefixed binary frames over one TCP connection, one request at a time:
//   frame   = u32 body_length (big-endian) | body            body_length in [1, max_frame_bytes]
//   str     = u32 length | bytes
//   request = u8 op | u32 wait_ms | str key | (op set: str value) | (op gather: u32 count)
//   reply   = u8 code | str message | u32 n | n × str values | u32 m | m × u32 missing
// 1. SET key value      stores (or replaces) the value; replies ok.
// 2. GET key            replies ok with the value once the key exists, or timeout after wait_ms.
// 3. GATHER prefix n    waits until "<prefix>0" .. "<prefix>{n-1}" all exist; replies ok with the n
//                       values by index, or timeout after wait_ms with the missing indices.
// A frame that does not decode is a protocol error: the server closes that connection.
// A request that decodes but cannot be served (a reply too large) gets bad_request with a message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::kv {

inline constexpr uint32_t max_frame_bytes = 64u << 20;  ///< either direction
inline constexpr uint32_t max_key_bytes = 4096;         ///< keys and gather prefixes
inline constexpr uint32_t max_value_bytes = 1u << 20;   ///< one published value
inline constexpr uint32_t max_gather_count = 1u << 20;  ///< ranks in one gather

/// What a request asks for.
enum class op : uint8_t { set = 1, get = 2, gather = 3 };

/// How the server answered.
enum class reply_code : uint8_t {
  ok = 0,           ///< done; values hold what get/gather asked for
  timeout = 1,      ///< wait_ms passed; for gather, `missing` lists the indices never published
  bad_request = 2,  ///< well-formed but not servable; `message` says why
};

/// One client request.
struct request {
  op kind = op::get;
  std::string key;       ///< set/get: the key; gather: the prefix
  std::string value;     ///< set only
  uint32_t count = 0;    ///< gather only: how many indexed keys
  uint32_t wait_ms = 0;  ///< get/gather: how long the server waits for keys that are missing
};

/// The server's answer to one request.
struct reply {
  reply_code code = reply_code::ok;
  std::string message;              ///< bad_request: why
  std::vector<std::string> values;  ///< get: one value; gather: `count` values by index
  std::vector<uint32_t> missing;    ///< gather timeout: indices never published, ascending
};

/// Bytes of the length prefix in front of every body.
inline constexpr size_t header_bytes = 4;

/// The whole frame, length prefix included.
std::string encode_frame(const request& r);
std::string encode_frame(const reply& r);

/// Body length from a frame header; 0 or above max_frame_bytes means the peer is broken.
uint32_t decode_length(const unsigned char (&header)[header_bytes]);

/// Decodes a body (without its length prefix). errc::protocol names what is wrong.
result<request> decode_request(std::string_view body);
result<reply> decode_reply(std::string_view body);

/// "<prefix><index>": the key a gather waits for.
std::string indexed_key(const std::string& prefix, uint32_t index);

/// If `key` is "<prefix><decimal index>" with the index written without leading zeros, the index.
bool parse_indexed_key(std::string_view key, std::string_view prefix, uint32_t& index);

}  // namespace chorus::kv
