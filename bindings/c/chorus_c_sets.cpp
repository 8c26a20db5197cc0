// The C API's process sets (chorus.h): thin wrappers over the C++ API's (chorus.hpp), with
// errors as codes and chorus_last_error(). chorus_register_in_process_set lives beside the
// other registrations in chorus_c.cpp.
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/chorus.hpp"

namespace {

int code_of(const chorus::status& st) { return static_cast<int>(st.code()); }

}  // namespace

// chorus_last_error's storage lives in chorus_c.cpp; this sets it.
void chorus_c_set_last_error(std::string text);

int chorus_init_with_process_sets(const int* ranks, const int* sizes, int count) {
  if (count < 0 || (count > 0 && (!ranks || !sizes))) {
    chorus_c_set_last_error("chorus_init_with_process_sets: count " + std::to_string(count) +
                            " with NULL ranks or sizes; give count >= 0 sets");
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  std::vector<std::vector<int>> lists;
  const int* at = ranks;
  for (int i = 0; i < count; ++i) {
    if (sizes[i] < 0) {
      chorus_c_set_last_error("chorus_init_with_process_sets: set " + std::to_string(i) + " has negative size " +
                              std::to_string(sizes[i]));
      return CHORUS_ERR_INVALID_ARGUMENT;
    }
    lists.emplace_back(at, at + sizes[i]);
    at += sizes[i];
  }
  auto st = chorus::init(lists);
  if (!st.ok()) chorus_c_set_last_error(st.message());
  return code_of(st);
}

int chorus_add_process_set(const int* ranks, int nranks) {
  if (nranks < 0 || (nranks > 0 && !ranks)) {
    chorus_c_set_last_error("chorus_add_process_set: " + std::to_string(nranks) + " ranks at NULL");
    return -1;
  }
  auto id = chorus::add_process_set(std::vector<int>(ranks, ranks + nranks));
  if (!id) {
    chorus_c_set_last_error(id.error().message());
    return -1;
  }
  return *id;
}

int chorus_remove_process_set(int id) {
  auto st = chorus::remove_process_set(id);
  if (!st.ok()) chorus_c_set_last_error(st.message());
  return code_of(st);
}

int chorus_process_set_rank(int id) {
  auto r = chorus::process_set_rank(id);
  if (!r) chorus_c_set_last_error(r.error().message());
  return r ? *r : -1;
}

int chorus_process_set_size(int id) {
  auto r = chorus::process_set_size(id);
  if (!r) chorus_c_set_last_error(r.error().message());
  return r ? *r : -1;
}

int chorus_process_set_included(int id) {
  auto ranks = chorus::process_set_ranks(id);
  if (!ranks) {
    chorus_c_set_last_error(ranks.error().message());
    return -1;
  }
  for (int r : *ranks)
    if (r == chorus::rank()) return 1;
  return 0;
}

int chorus_process_set_ranks(int id, int* ranks, int capacity) {
  auto list = chorus::process_set_ranks(id);
  if (!list) {
    chorus_c_set_last_error(list.error().message());
    return -1;
  }
  for (int i = 0; i < capacity && ranks && i < static_cast<int>(list->size()); ++i) ranks[i] = (*list)[static_cast<std::size_t>(i)];
  return static_cast<int>(list->size());
}

int chorus_barrier(int process_set) {
  auto st = chorus::barrier(process_set);
  if (!st.ok()) chorus_c_set_last_error("chorus_barrier: " + st.message());
  return code_of(st);
}
