// chorus-testrank pipeline-c-api: reducescatter, alltoall and join through the C API (chorus.h
// only), checked exactly on every rank. Rank r's data is a formula of (r, position), so every
// rank knows what it must receive: reducescatter sum (handle) and min (caller buffer, callback)
// of 2N+1 rows; alltoall with uneven splits (rank r sends (r+q) % 3 rows to rank q, empty
// blocks included; handle and callback); ranks run r+1 allreduce steps and join (even ranks
// wait on the handle, odd ones take the callback): every rank must get last rank N-1; then a
// reducescatter and an alltoall whose shapes differ on the last rank: every rank must get
// CHORUS_ERR_MISMATCH with a text naming the tensor (printed as "mismatch error: ..."); 30
// allreduces under transient names, one per step; a name transient on all ranks but the last:
// a mismatch again.
// Prints "pipeline-c-api: all exact, last rank L".
// Exit codes: 0 pass, 1 wrong result, 3 an operation failed, 4 an operation hung.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"

namespace chorus::testrank {
namespace {

constexpr int64_t wait_ms = 60000;

int wrong = 0;
int self = -1;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("pipeline-c-api WRONG rank %d: %s\n", self, what.c_str());
  ++wrong;
}

/// Prints why the program stops, shuts down and returns the exit code.
int stop(const std::string& what, const std::string& text, int code = 3) {
  std::printf("testrank error: %s: %s\n", what.c_str(), text.c_str());
  std::fflush(stdout);
  chorus_shutdown();
  return code;
}

/// A rejected enqueue (h < 0) stops the program.
int rejected(const char* what) { return stop(what, chorus_last_error()); }

/// Stops the program when `h` failed or hung; 0 when it ended well.
int ended(int64_t h, const char* what) {
  int st = chorus_wait(h, wait_ms);
  if (st == CHORUS_OK) return 0;
  if (st == CHORUS_ERR_TIMEOUT) return stop(what, chorus_last_error(), 4);
  return stop(what, std::string(chorus_status_name(st)) + " " + chorus_error_string(h));
}

/// What a callback saw, read inside it (the handle is released there).
struct seen {
  std::mutex mu;
  std::atomic<int> calls{0};
  int status = -1;
  std::string error;
  std::vector<std::byte> rows;
  std::vector<int64_t> shape, splits;
  int last_rank = -2;
};

void on_done(int64_t h, int status, const char* error, void* user) {
  auto* s = static_cast<seen*>(user);
  {
    std::lock_guard lk(s->mu);
    s->status = status;
    s->error = error ? error : "";
    if (const auto* p = static_cast<const std::byte*>(chorus_gathered_data(h)))
      s->rows.assign(p, p + chorus_gathered_bytes(h));
    int64_t dims[8];
    if (int n = chorus_gathered_shape(h, dims, 8); n >= 0) s->shape.assign(dims, dims + n);
    std::vector<int64_t> splits(64);
    if (int n = chorus_received_splits(h, splits.data(), 64); n >= 0)
      s->splits.assign(splits.begin(), splits.begin() + n);
    s->last_rank = chorus_last_rank(h);
  }
  chorus_release(h);
  ++s->calls;
}

/// Waits for the callback; 0 when it ran once.
int called(seen& s, const char* what) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (s.calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (s.calls == 1) return 0;
  return stop(what, "callback ran " + std::to_string(s.calls.load()) + " times", 4);
}

template <class T>
std::vector<T> as(const void* p, int64_t bytes) {
  if (!p || bytes <= 0) return {};
  const T* t = static_cast<const T*>(p);
  return std::vector<T>(t, t + bytes / static_cast<int64_t>(sizeof(T)));
}

template <class T>
std::vector<T> as(const std::vector<std::byte>& b) {
  return as<T>(b.data(), static_cast<int64_t>(b.size()));
}

std::vector<int64_t> shape_of(int64_t h) {
  int64_t dims[8];
  int n = chorus_gathered_shape(h, dims, 8);
  return n < 0 ? std::vector<int64_t>{} : std::vector<int64_t>(dims, dims + n);
}

/// First row of rank `r`'s reducescatter slice of `dim0` rows in a job of `size`.
int64_t first_row(int64_t dim0, int size, int r) {
  int64_t row = 0;
  for (int q = 0; q < r; ++q) row += chorus_reducescatter_rows(dim0, size, q);
  return row;
}

int check_reducescatter(int rank, int size) {
  const int64_t rows = 2 * size + 1, cols = 3;
  const int64_t mine = chorus_reducescatter_rows(rows, size, rank), first = first_row(rows, size, rank);
  // Sum, result owned by the handle: element e of rank r is (r+1)(e+1).
  std::vector<float> in(static_cast<std::size_t>(rows * cols));
  for (std::size_t e = 0; e < in.size(); ++e) in[e] = static_cast<float>((rank + 1) * (e + 1));
  int64_t shape[] = {rows, cols};
  int64_t h = chorus_enqueue_reducescatter(chorus_register("c.rs.sum"), in.data(), shape, 2, CHORUS_FLOAT32,
                                           CHORUS_OP_SUM, nullptr, nullptr);
  if (h < 0) return rejected("c.rs.sum");
  if (int rc = ended(h, "c.rs.sum")) return rc;
  std::vector<float> want;
  for (int64_t e = first * cols; e < (first + mine) * cols; ++e)
    want.push_back(static_cast<float>((e + 1) * size * (size + 1) / 2));
  expect(as<float>(chorus_gathered_data(h), chorus_gathered_bytes(h)) == want, "reducescatter sum rows");
  expect(shape_of(h) == std::vector<int64_t>{mine, cols}, "reducescatter sum shape");
  chorus_release(h);

  // Min into a caller buffer, callback: row i of rank r is 10(i+1) - r, so the min is 10(i+1) - (size-1).
  std::vector<int32_t> in2(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) in2[static_cast<std::size_t>(i)] = static_cast<int32_t>(10 * (i + 1) - rank);
  std::vector<int32_t> out(static_cast<std::size_t>(mine), -7);
  seen s;
  int64_t shape2[] = {rows};
  h = chorus_enqueue_reducescatter_into(chorus_register("c.rs.min"), in2.data(), shape2, 1, CHORUS_INT32,
                                        CHORUS_OP_MIN, out.data(), mine, on_done, &s);
  if (h < 0) return rejected("c.rs.min");
  if (int rc = called(s, "c.rs.min")) return rc;
  if (s.status != CHORUS_OK) return stop("c.rs.min", s.error);
  std::vector<int32_t> want2;
  for (int64_t i = first; i < first + mine; ++i) want2.push_back(static_cast<int32_t>(10 * (i + 1) - (size - 1)));
  expect(out == want2, "reducescatter min into the caller buffer");
  expect(s.shape == std::vector<int64_t>{mine}, "reducescatter min shape in the callback");
  expect(s.rows.empty(), "reducescatter into a caller buffer has no handle rows");
  return 0;
}

/// Rows rank `from` sends to rank `to`: uneven, some empty.
int64_t block(int from, int to) { return (from + to) % 3; }
/// Element c of row k that rank `from` sends to rank `to`.
int64_t value(int from, int to, int64_t k, int c) { return from * 10000 + to * 100 + k * 10 + c; }

int check_alltoall(int rank, int size) {
  std::vector<int64_t> splits, in;
  for (int q = 0; q < size; ++q) {
    splits.push_back(block(rank, q));
    for (int64_t k = 0; k < block(rank, q); ++k)
      for (int c = 0; c < 2; ++c) in.push_back(value(rank, q, k, c));
  }
  std::vector<int64_t> want, want_splits;
  for (int r = 0; r < size; ++r) {
    want_splits.push_back(block(r, rank));
    for (int64_t k = 0; k < block(r, rank); ++k)
      for (int c = 0; c < 2; ++c) want.push_back(value(r, rank, k, c));
  }
  const int64_t received = static_cast<int64_t>(want.size() / 2);
  int64_t shape[] = {static_cast<int64_t>(in.size() / 2), 2};
  int64_t h = chorus_enqueue_alltoall(chorus_register("c.a2a"), in.data(), shape, 2, CHORUS_INT64, splits.data(),
                                      size, nullptr, nullptr);
  if (h < 0) return rejected("c.a2a");
  if (int rc = ended(h, "c.a2a")) return rc;
  expect(as<int64_t>(chorus_gathered_data(h), chorus_gathered_bytes(h)) == want, "alltoall rows");
  expect(shape_of(h) == std::vector<int64_t>{received, 2}, "alltoall shape");
  std::vector<int64_t> got_splits(static_cast<std::size_t>(size), -1);
  expect(chorus_received_splits(h, got_splits.data(), size) == size && got_splits == want_splits,
         "alltoall received splits");
  chorus_release(h);

  seen s;  // the same exchange, callback form
  h = chorus_enqueue_alltoall(chorus_register("c.a2a.cb"), in.data(), shape, 2, CHORUS_INT64, splits.data(), size,
                              on_done, &s);
  if (h < 0) return rejected("c.a2a.cb");
  if (int rc = called(s, "c.a2a.cb")) return rc;
  if (s.status != CHORUS_OK) return stop("c.a2a.cb", s.error);
  expect(as<int64_t>(s.rows) == want, "alltoall rows in the callback");
  expect(s.splits == want_splits, "alltoall received splits in the callback");
  expect(s.shape == std::vector<int64_t>{received, 2}, "alltoall shape in the callback");
  return 0;
}

/// Rank r runs r+1 allreduce steps, then joins; returns the last rank join reported (or < -1: exit code).
int check_join(int rank, int size, int& last) {
  const int64_t id = chorus_register("c.join.step");
  for (int k = 0; k <= rank; ++k) {
    float v[4];
    for (float& x : v) x = static_cast<float>(rank + 1);
    int64_t shape[] = {4};
    int64_t h = chorus_enqueue_allreduce(id, v, shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
    if (h < 0) return rejected("c.join.step");
    if (int rc = ended(h, "c.join.step")) return rc;
    chorus_release(h);
    float want = 0;
    for (int q = k; q < size; ++q) want += static_cast<float>(q + 1);  // joined ranks add 0
    expect(v[0] == want && v[3] == want, "allreduce step " + std::to_string(k) + " before join");
  }
  if (rank % 2 == 0) {
    int64_t h = chorus_enqueue_join(nullptr, nullptr);
    if (h < 0) return rejected("join");
    if (int rc = ended(h, "join")) return rc;
    last = chorus_last_rank(h);
    chorus_release(h);
  } else {
    seen s;
    int64_t h = chorus_enqueue_join(on_done, &s);
    if (h < 0) return rejected("join");
    if (int rc = called(s, "join")) return rc;
    if (s.status != CHORUS_OK) return stop("join", s.error);
    last = s.last_rank;
  }
  expect(last == size - 1, "join returned last rank " + std::to_string(last));
  return 0;
}

/// Shapes that differ on the last rank: every rank must get CHORUS_ERR_MISMATCH naming the tensor.
int check_mismatch(int rank, int size) {
  const bool odd_one = rank == size - 1;
  std::vector<float> in(8 * 3, 1.0f);
  int64_t shape[] = {odd_one ? 8 : 6, 3};
  int64_t h = chorus_enqueue_reducescatter(chorus_register("c.rs.mismatch"), in.data(), shape, 2, CHORUS_FLOAT32,
                                           CHORUS_OP_SUM, nullptr, nullptr);
  if (h < 0) return rejected("c.rs.mismatch");
  int st = chorus_wait(h, wait_ms);
  std::printf("mismatch error: %s: %s\n", chorus_status_name(st), chorus_error_string(h));
  expect(st == CHORUS_ERR_MISMATCH && std::string(chorus_error_string(h)).find("reducescatter('c.rs.mismatch')") !=
                                          std::string::npos,
         "reducescatter shape mismatch");
  chorus_release(h);

  // Alltoall: dim 0 and splits may differ, dim 1 must not. The callback gets the text.
  seen s;
  int64_t a_shape[] = {size, odd_one ? 3 : 2};
  std::vector<int64_t> ones(static_cast<std::size_t>(size), 1);
  h = chorus_enqueue_alltoall(chorus_register("c.a2a.mismatch"), in.data(), a_shape, 2, CHORUS_FLOAT32, ones.data(),
                              size, on_done, &s);
  if (h < 0) return rejected("c.a2a.mismatch");
  if (int rc = called(s, "c.a2a.mismatch")) return rc;
  std::printf("mismatch error: %s: %s\n", chorus_status_name(s.status), s.error.c_str());
  expect(s.status == CHORUS_ERR_MISMATCH && s.error.find("alltoall('c.a2a.mismatch')") != std::string::npos &&
             s.rows.empty() && s.splits.empty(),
         "alltoall shape mismatch in the callback");

  // Transient names (chorus_register_transient): a fresh name per step, exact every time;
  // then one name registered transient on all ranks but the last: a mismatch on every rank.
  for (int step = 0; step < 30; ++step) {
    int64_t v = rank + step;
    h = chorus_enqueue_allreduce(chorus_register_transient(("c.once." + std::to_string(step)).c_str()), &v, nullptr, 0,
                                 CHORUS_INT64, CHORUS_OP_SUM, nullptr, nullptr);
    if (h < 0) return rejected("c.once");
    if (int rc = ended(h, "c.once")) return rc;
    chorus_release(h);
    expect(v == int64_t{size} * (size - 1) / 2 + int64_t{size} * step, "transient allreduce " + std::to_string(step));
  }
  int64_t flag_id = odd_one ? chorus_register("c.flag.mismatch") : chorus_register_transient("c.flag.mismatch");
  float x = 1;
  h = chorus_enqueue_allreduce(flag_id, &x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
  if (h < 0) return rejected("c.flag.mismatch");
  st = chorus_wait(h, wait_ms);
  std::printf("mismatch error: %s: %s\n", chorus_status_name(st), chorus_error_string(h));
  expect(st == CHORUS_ERR_MISMATCH, "transient flag mismatch");
  chorus_release(h);

  // A priority given alike on every rank runs; one the last rank gives otherwise is a mismatch
  // (it orders chunks on every rank, so ranks must agree on it).
  int64_t same = chorus_register("c.priority.same");
  chorus_set_priority(same, 5);
  x = 1;
  h = chorus_enqueue_allreduce(same, &x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
  if (h < 0) return rejected("c.priority.same");
  if (int rc = ended(h, "c.priority.same")) return rc;
  chorus_release(h);
  expect(x == static_cast<float>(size), "allreduce with a priority");
  int64_t differs = chorus_register("c.priority.mismatch");
  chorus_set_priority(differs, odd_one ? 2 : 1);
  h = chorus_enqueue_allreduce(differs, &x, nullptr, 0, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
  if (h < 0) return rejected("c.priority.mismatch");
  st = chorus_wait(h, wait_ms);
  std::printf("mismatch error: %s: %s\n", chorus_status_name(st), chorus_error_string(h));
  expect(st == CHORUS_ERR_MISMATCH, "priority mismatch");
  chorus_release(h);
  return 0;
}

/// Three allreduces of different dtypes and shapes in one chorus_enqueue_allreduce_batch call.
int check_batch(int rank, int size) {
  const int64_t ids[3] = {chorus_register("c.batch.w"), chorus_register("c.batch.b"), chorus_register("c.batch.n")};
  std::vector<float> w(6, static_cast<float>(rank + 1));
  std::vector<double> b(3, 2.0 * rank);
  int32_t n = rank;
  void* data[3] = {w.data(), b.data(), &n};
  const int64_t w_shape[] = {2, 3}, b_shape[] = {3};
  const int64_t* shapes[3] = {w_shape, b_shape, nullptr};
  const int ndims[3] = {2, 1, 0};
  const chorus_dtype dtypes[3] = {CHORUS_FLOAT32, CHORUS_FLOAT64, CHORUS_INT32};
  int64_t handles[3];
  int given = chorus_enqueue_allreduce_batch(3, ids, data, shapes, ndims, dtypes, CHORUS_OP_SUM, handles, nullptr,
                                             nullptr);
  if (given != 3) return rejected("c.batch");
  for (int64_t h : handles) {
    if (int rc = ended(h, "c.batch")) return rc;
    chorus_release(h);
  }
  const int ranks_sum = size * (size - 1) / 2;
  expect(w[0] == static_cast<float>(ranks_sum + size) && w[5] == w[0], "batch: float32 [2, 3]");
  expect(b[0] == 2.0 * ranks_sum && b[2] == b[0], "batch: float64 [3]");
  expect(n == ranks_sum, "batch: int32 scalar");
  return 0;
}

}  // namespace

int run_pipeline_c_api(int, char**) {
  if (chorus_init() != CHORUS_OK) return stop("init", chorus_last_error());
  const int rank = chorus_rank(), size = chorus_size();
  self = rank;
  std::printf("pipeline-c-api rank=%d size=%d\n", rank, size);
  int last = -1;
  if (int rc = check_batch(rank, size)) return rc;
  if (int rc = check_reducescatter(rank, size)) return rc;
  if (int rc = check_alltoall(rank, size)) return rc;
  if (int rc = check_join(rank, size, last)) return rc;
  if (int rc = check_mismatch(rank, size)) return rc;
  // The job goes on: every rank again.
  double one = 1;
  int64_t h = chorus_enqueue_allreduce(chorus_register("c.after"), &one, nullptr, 0, CHORUS_FLOAT64, CHORUS_OP_SUM,
                                       nullptr, nullptr);
  if (h < 0) return rejected("c.after");
  if (int rc = ended(h, "c.after")) return rc;
  chorus_release(h);
  expect(one == size, "allreduce after the join and the mismatches");
  std::fflush(stdout);
  chorus_shutdown();
  if (wrong) return 1;
  std::printf("pipeline-c-api: all exact, last rank %d, on rank %d\n", last, rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace chorus::testrank
