// The first node of a Slurm host list, the step's derived port and this node's task count
// (slurm_step.hpp).
#include "runtime/env/slurm_step.hpp"

#include <cctype>
#include <limits>

namespace chorus {
namespace {

status bad_list(const char* variable, std::string_view list, const std::string& why) {
  return {errc::config, std::string(variable) + "='" + std::string(list) + "' is not a Slurm host list: " + why};
}

const char* set(const env_lookup& get, const char* var) {
  const char* v = get(var);
  return v && *v ? v : nullptr;
}

}  // namespace

result<std::string> first_host(std::string_view list, const char* variable) {
  // The first entry ends at a comma outside brackets.
  std::size_t end = 0;
  int depth = 0;
  for (; end < list.size(); ++end) {
    const char c = list[end];
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return bad_list(variable, list, "a ']' without its '['");
    if (c == ',' && depth == 0) break;
  }
  if (depth != 0) return bad_list(variable, list, "a '[' without its ']'");
  const std::string_view entry = list.substr(0, end);
  const auto open = entry.find('[');
  if (open == std::string_view::npos) {
    if (entry.empty()) return bad_list(variable, list, "its first entry is empty");
    return std::string(entry);
  }
  // prefix[ranges]suffix: the first number of the first range, its zero padding kept.
  const auto close = entry.find(']', open);
  if (entry.find('[', open + 1) < close) return bad_list(variable, list, "nested brackets");
  const std::string_view ranges = entry.substr(open + 1, close - open - 1);
  std::size_t digits = 0;
  while (digits < ranges.size() && std::isdigit(static_cast<unsigned char>(ranges[digits]))) ++digits;
  if (digits == 0) return bad_list(variable, list, "a range that does not start with a number");
  if (digits < ranges.size() && ranges[digits] != '-' && ranges[digits] != ',')
    return bad_list(variable, list, "a range with '" + std::string(1, ranges[digits]) + "' in it");
  const std::string_view suffix = entry.substr(close + 1);
  if (suffix.find('[') != std::string_view::npos)
    return bad_list(variable, list, "two bracketed ranges in one name (not supported)");
  if (open == 0 && suffix.empty()) return bad_list(variable, list, "a range without a name");
  return std::string(entry.substr(0, open)) + std::string(ranges.substr(0, digits)) + std::string(suffix);
}

result<int> tasks_on_node(std::string_view list, int node) {
  auto bad = [&](const std::string& why) -> status {
    return {errc::config, "SLURM_TASKS_PER_NODE='" + std::string(list) + "' " + why};
  };
  auto number = [](std::string_view& rest, uint64_t& out) {
    std::size_t n = 0;
    out = 0;
    while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n])) && out < (uint64_t{1} << 40))
      out = out * 10 + static_cast<uint64_t>(rest[n++] - '0');
    rest.remove_prefix(n);
    return n > 0;
  };
  std::string_view rest = list;
  uint64_t left = static_cast<uint64_t>(node < 0 ? 0 : node);
  for (;;) {
    uint64_t count = 0, repeat = 1;
    if (!number(rest, count)) return bad("does not start an entry with a number of tasks");
    if (rest.substr(0, 2) == "(x") {
      rest.remove_prefix(2);
      if (!number(rest, repeat) || rest.empty() || rest.front() != ')' || repeat == 0)
        return bad("has a repeat that is not (x<count>)");
      rest.remove_prefix(1);
    }
    if (count == 0 || count > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      return bad("has a task count of " + std::to_string(count));
    if (left < repeat) return static_cast<int>(count);
    left -= repeat;
    if (rest.empty()) return bad("has no entry for node " + std::to_string(node) + " (SLURM_NODEID)");
    if (rest.front() != ',') return bad("has '" + std::string(1, rest.front()) + "' where a comma belongs");
    rest.remove_prefix(1);
  }
}

result<std::optional<slurm_address>> read_slurm_rendezvous(const env_lookup& get) {
  const char* variable = nullptr;
  const char* list = nullptr;
  for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
    if ((list = set(get, v))) {
      variable = v;
      break;
    }
  const char* job = set(get, "SLURM_JOB_ID");
  if (!list || !job) return std::optional<slurm_address>();
  auto host = first_host(list, variable);
  if (!host) return host.error();
  auto job_id = cfg::parse_whole("SLURM_JOB_ID", job, 0, std::numeric_limits<uint32_t>::max());
  if (!job_id) return job_id.error();
  uint64_t step = 0;
  // Slurm numbers its special steps (batch, extern, interactive) near 2^32: any value will do.
  if (const char* s = set(get, "SLURM_STEP_ID")) {
    auto parsed = cfg::parse_whole("SLURM_STEP_ID", s, 0, std::numeric_limits<uint32_t>::max());
    if (!parsed) return parsed.error();
    step = *parsed;
  }
  const uint64_t mixed = *job_id * 131 + step;
  slurm_address out;
  out.host = std::move(*host);
  out.port = static_cast<uint16_t>(slurm_port_base + mixed % slurm_port_span);
  return std::optional<slurm_address>(std::move(out));
}

}  // namespace chorus
