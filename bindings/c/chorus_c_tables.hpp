// The C API's shared state (chorus_c.cpp, chorus_c_enqueue.cpp): the registered names, the table
// of handles, and fail(), which sets chorus_last_error's text. Internal to the C API.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings/cpp/op_state.hpp"

// chorus_last_error's storage lives in chorus_c.cpp; this sets it.
void chorus_c_set_last_error(std::string text);

namespace chorus::c_api {

using chorus::detail::op_state;

struct tables {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> ids;
  std::vector<std::string> names;
  std::vector<bool> transient;  ///< by id: registered with chorus_register_transient
  std::vector<int> sets;        ///< by id: the process set (chorus_register_in_process_set; 0: the job)
  std::vector<int32_t> priorities;  ///< by id: chorus_set_priority's (0 by default)
  std::unordered_map<int64_t, std::shared_ptr<op_state>> handles;
  int64_t next_handle = 0;
};

/// The process' tables.
tables& tab();

/// Sets chorus_last_error's text and returns `value`.
template <class T>
T fail(T value, std::string text) {
  chorus_c_set_last_error(std::move(text));
  return value;
}

}  // namespace chorus::c_api
