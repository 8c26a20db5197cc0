// Where chorusrun's ranks run: host lists (`-H a:2,b:2`, horovodrun's hostfile "a slots=2") and
// the placement of ranks on them, with the local and cross numbering horovodrun gives. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// One host and how many ranks it takes.
struct host_slots {
  std::string host;  // name or address as given; an IPv6 address without brackets
  int slots = 1;
};

/// Where one rank runs and its numbering (horovodrun's meaning): local rank/size among the
/// ranks on its host; cross rank = index of its host among the hosts that have a rank with the
/// same local rank, cross size = how many such hosts.
struct placement {
  int rank = 0;
  int host_index = 0;
  std::string host;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

/// Parses "host1:2,host2:2" (slots default to 1: "host1,host2"); IPv6 as "[::1]:2".
result<std::vector<host_slots>> parse_host_list(std::string_view text);

/// Parses a horovodrun hostfile: one "host slots=N" per line ("host" alone: 1 slot), '#'
/// comments and blank lines ignored. `origin` names the file in errors.
result<std::vector<host_slots>> parse_hostfile(std::string_view text, std::string_view origin);

/// Places `num_ranks` ranks in host order, filling each host's slots before the next. Fails
/// when the hosts have fewer slots in all than ranks, or a host appears twice.
result<std::vector<placement>> place_ranks(const std::vector<host_slots>& hosts, int num_ranks);

/// True for names that mean this machine without a launcher: localhost, 127.0.0.1, ::1.
bool is_loopback_name(std::string_view host);

}  // namespace chorus::chorusrun
