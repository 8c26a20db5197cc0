// chorus-testrank pipeline-scatter SEED: reducescatter and alltoall through the C++ API on every
// rank, checked exactly. Every rank regenerates every rank's inputs from SEED, so each can
// compute what it must receive: reducescatter for every dtype and reduce op, with dim 0 below,
// at and above the job size (uneven splits, empty slices) and one tensor large enough to be
// cut into several chunks, in all three API forms (handle, caller buffer, callback); alltoall
// with per-rank splits drawn from SEED (empty blocks included), then a reducescatter whose
// shape differs on the last rank (every rank must get errc::mismatch naming it).
// Ops are enqueued in a per-rank random order. Prints "pipeline-scatter: all exact".
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed, 4 an operation hung.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "tests/support/reduce_reference.hpp"

namespace chorus::testrank {
namespace {

using namespace std::chrono_literals;
using chorus::testing::all_dtypes;
using chorus::testing::all_ops;
using chorus::testing::fill_input;
using chorus::testing::reference;

constexpr auto op_deadline = 60s;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

/// Rank r's input of tensor `index`: the same bytes on every rank that regenerates it.
std::vector<std::byte> input_of(uint64_t seed, int index, int r, dtype t, reduce_op op, std::size_t elems) {
  std::mt19937_64 g(seed * 1000003 + static_cast<uint64_t>(index) * 131 + static_cast<uint64_t>(r));
  std::vector<std::byte> out(elems * size_of(t));
  fill_input(t, op, out.data(), elems, g);
  return out;
}

enum class form { handle_result, caller_buffer, callback };

/// One submitted op and how to check it once it ended.
struct check {
  std::string name;
  handle h;                                 // the handle form (else a callback records below)
  std::shared_ptr<std::atomic<int>> calls;  // callback form: times `done` ran
  std::shared_ptr<status> cb_status;
  std::shared_ptr<std::vector<std::byte>> cb_bytes;
  std::shared_ptr<std::vector<int64_t>> cb_shape;
  std::function<void()> submit;
  std::function<bool(std::string&)> verify;  // after the end: true when exact
};

std::string first_bad_byte(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " bytes, expected " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return "byte " + std::to_string(i) + " differs";
  return "";
}

void add_reducescatter(std::vector<check>& out, uint64_t seed, int index, dtype t, reduce_op op,
                       std::vector<int64_t> shape, form f, int rank, int size) {
  const auto elems = static_cast<std::size_t>(product(shape));
  const std::size_t e = size_of(t);
  auto mine = std::make_shared<std::vector<std::byte>>(input_of(seed, index, rank, t, op, elems));
  std::vector<std::vector<std::byte>> all;
  std::vector<const std::byte*> in;
  for (int r = 0; r < size; ++r) all.push_back(input_of(seed, index, r, t, op, elems));
  for (auto& a : all) in.push_back(a.data());
  std::vector<std::byte> reduced(elems * e);
  reference(t, op, in, reduced.data(), elems);
  const std::size_t row = elems && shape[0] ? elems / static_cast<std::size_t>(shape[0]) * e : 0;
  int64_t begin = 0;
  for (int r = 0; r < rank; ++r) begin += reducescatter_rows(shape[0], size, r);
  auto slice_shape = shape;
  slice_shape[0] = reducescatter_rows(shape[0], size, rank);
  auto want = std::make_shared<std::vector<std::byte>>(
      reduced.begin() + static_cast<std::ptrdiff_t>(begin * row),
      reduced.begin() + static_cast<std::ptrdiff_t>((begin + slice_shape[0]) * row));
  auto out_buf = std::make_shared<std::vector<std::byte>>(want->size(), std::byte{0xEE});

  check c;
  c.name = "rs." + std::to_string(index) + "." + std::string(name_of(t)) + "." + std::string(name_of(op));
  tensor_view v{mine->data(), t, shape};
  if (f == form::callback) {
    c.calls = std::make_shared<std::atomic<int>>(0);
    c.cb_status = std::make_shared<status>();
    c.cb_bytes = std::make_shared<std::vector<std::byte>>();
    c.cb_shape = std::make_shared<std::vector<int64_t>>();
  }
  auto* cp = &out.emplace_back(std::move(c));
  cp->submit = [cp, v, op, f, out_buf, slice_shape, mine] {
    if (f == form::handle_result) {
      cp->h = reducescatter_async(cp->name, v, op);
    } else if (f == form::caller_buffer) {
      cp->h = reducescatter_async(cp->name, v, tensor_view{out_buf->data(), v.type, slice_shape}, op);
    } else {
      auto calls = cp->calls;
      auto st = cp->cb_status;
      auto bytes = cp->cb_bytes;
      auto sh = cp->cb_shape;
      reducescatter_async(cp->name, v, op,
                          [calls, st, bytes, sh](const status& s, const std::vector<std::byte>& g,
                                                 const std::vector<int64_t>& shp) {
                            *st = s;
                            *bytes = g;
                            *sh = shp;
                            calls->fetch_add(1);
                          });
    }
  };
  cp->verify = [cp, f, want, out_buf, slice_shape, mine, input_copy = *mine](std::string& why) {
    if (*mine != input_copy) return why = "the input was modified", false;
    std::vector<std::byte> got;
    std::vector<int64_t> got_shape;
    if (f == form::callback) {
      got = *cp->cb_bytes;
      got_shape = *cp->cb_shape;
    } else {
      got = f == form::caller_buffer ? *out_buf : cp->h.gathered();
      got_shape = cp->h.shape();
      if (f == form::caller_buffer && !cp->h.gathered().empty()) return why = "gathered() not empty", false;
    }
    if (got_shape != slice_shape)
      return why = "shape " + format_shape(got_shape) + ", expected " + format_shape(slice_shape), false;
    why = first_bad_byte(got, *want);
    return why.empty();
  };
}

void add_alltoall(std::vector<check>& out, uint64_t seed, int index, dtype t, int64_t cols, int rank, int size) {
  std::mt19937_64 g(seed * 7919 + static_cast<uint64_t>(index));
  std::vector<std::vector<int64_t>> splits(size, std::vector<int64_t>(size));
  for (auto& s : splits)
    for (auto& x : s) x = static_cast<int64_t>(g() % 4);  // 0..3 rows, empty blocks included
  auto rows_of = [&](int r) {
    int64_t n = 0;
    for (auto x : splits[r]) n += x;
    return n;
  };
  const std::size_t row = static_cast<std::size_t>(cols) * size_of(t);
  std::vector<std::vector<std::byte>> in;
  for (int r = 0; r < size; ++r)
    in.push_back(input_of(seed, index, r, t, reduce_op::sum, static_cast<std::size_t>(rows_of(r) * cols)));
  auto want = std::make_shared<std::vector<std::byte>>();
  auto want_splits = std::make_shared<std::vector<int64_t>>();
  for (int s = 0; s < size; ++s) {
    int64_t before = 0;
    for (int j = 0; j < rank; ++j) before += splits[s][j];
    auto from = in[s].begin() + static_cast<std::ptrdiff_t>(before * static_cast<int64_t>(row));
    want->insert(want->end(), from, from + static_cast<std::ptrdiff_t>(splits[s][rank] * static_cast<int64_t>(row)));
    want_splits->push_back(splits[s][rank]);
  }
  int64_t received = 0;
  for (auto x : *want_splits) received += x;
  auto mine = std::make_shared<std::vector<std::byte>>(in[rank]);
  check c;
  c.name = "a2a." + std::to_string(index) + "." + std::string(name_of(t));
  auto* cp = &out.emplace_back(std::move(c));
  tensor_view v{mine->data(), t, {rows_of(rank), cols}};
  auto my_splits = splits[rank];
  cp->submit = [cp, v, my_splits, mine] { cp->h = alltoall_async(cp->name, v, my_splits); };
  std::vector<int64_t> want_shape{received, cols};
  cp->verify = [cp, want, want_splits, want_shape, mine](std::string& why) {
    if (cp->h.received_splits() != *want_splits) return why = "received_splits differ", false;
    if (cp->h.shape() != want_shape)
      return why = "shape " + format_shape(cp->h.shape()) + ", expected " + format_shape(want_shape), false;
    why = first_bad_byte(cp->h.gathered(), *want);
    return why.empty();
  };
}

int fail_with(const std::string& name, const status& st, int code) {
  std::printf("testrank error: %s: %s\n", name.c_str(), st.to_string().c_str());
  std::fflush(stdout);
  shutdown();
  return code;
}

}  // namespace

int run_pipeline_scatter(int argc, char** argv) {
  if (argc < 3) return 2;
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  if (auto st = init(); !st.ok()) return fail_with("init", st, 3);
  const int rank = chorus::rank(), size = chorus::size();
  std::printf("pipeline-scatter rank=%d size=%d seed=%llu\n", rank, size, static_cast<unsigned long long>(seed));

  std::vector<check> checks;
  checks.reserve(256);
  int index = 0;
  const int64_t dims0[] = {1, size - 1 > 0 ? size - 1 : 1, size + 1, 7};
  for (dtype t : all_dtypes)
    for (reduce_op op : all_ops) {
      int64_t d0 = dims0[index % 4];
      add_reducescatter(checks, seed, index, t, op, {d0, 3}, static_cast<form>(index % 3), rank, size);
      ++index;
    }
  // Large enough for several chunks (CHORUS_CHUNK_BYTES 4 MiB by default: windows of 4 MiB / size).
  add_reducescatter(checks, seed, index++, dtype::f32, reduce_op::sum, {int64_t{3} * 1024 * 1024 + 5, 1},
                    form::caller_buffer, rank, size);
  add_reducescatter(checks, seed, index++, dtype::f64, reduce_op::average, {0, 4}, form::handle_result, rank, size);
  for (dtype t : all_dtypes) {
    add_alltoall(checks, seed, index, t, 1 + index % 3, rank, size);
    ++index;
  }
  add_alltoall(checks, seed, index++, dtype::f32, 100000, rank, size);  // ~1.2 MB per rank pair block

  std::vector<check*> order;
  for (auto& c : checks) order.push_back(&c);
  std::mt19937_64 shuffle(seed + 17 * static_cast<uint64_t>(rank));
  std::shuffle(order.begin(), order.end(), shuffle);
  for (auto* c : order) c->submit();

  int wrong = 0;
  for (auto& c : checks) {
    status st;
    if (c.calls) {
      auto until = std::chrono::steady_clock::now() + op_deadline;
      while (c.calls->load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      if (c.calls->load() != 1)
        return fail_with(c.name, {errc::timeout, "callback ran " + std::to_string(c.calls->load()) + " times"}, 4);
      st = *c.cb_status;
    } else {
      st = c.h.wait(op_deadline);
      if (st.code() == errc::timeout) return fail_with(c.name, st, 4);
    }
    if (!st.ok()) return fail_with(c.name, st, 3);
    std::string why;
    if (!c.verify(why)) {
      std::printf("pipeline-scatter WRONG %s: %s\n", c.name.c_str(), why.c_str());
      ++wrong;
    }
  }

  // A shape mismatch names the tensor, the field and the ranks, on every rank.
  std::vector<float> bad(8 * 3, 1.0f);
  int64_t rows = rank == size - 1 ? 8 : 6;
  auto h = reducescatter_async("rs.mismatch", {bad.data(), dtype::f32, {rows, 3}}, reduce_op::sum);
  auto st = h.wait(op_deadline);
  std::printf("mismatch error: %s\n", st.to_string().c_str());
  if (st.code() != errc::mismatch || st.message().find("reducescatter('rs.mismatch')") == std::string::npos ||
      st.message().find("shape") == std::string::npos) {
    std::printf("pipeline-scatter WRONG: expected a shape mismatch naming reducescatter('rs.mismatch')\n");
    ++wrong;
  }
  // The job goes on after the mismatch.
  std::vector<float> after(static_cast<std::size_t>(reducescatter_rows(size, size, rank)), 0.0f);
  std::vector<float> ones(static_cast<std::size_t>(size), 1.0f);
  auto h2 = reducescatter_async("rs.after", {ones.data(), dtype::f32, {size}}, {after.data(), dtype::f32, {1}},
                                reduce_op::sum);
  if (auto s2 = h2.wait(op_deadline); !s2.ok()) return fail_with("rs.after", s2, s2.code() == errc::timeout ? 4 : 3);
  if (after.size() != 1 || after[0] != static_cast<float>(size)) {
    std::printf("pipeline-scatter WRONG rs.after\n");
    ++wrong;
  }
  std::fflush(stdout);
  shutdown();
  if (wrong) return 1;
  std::printf("pipeline-scatter: all exact (%zu ops) on rank %d\n", checks.size(), rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace chorus::testrank
