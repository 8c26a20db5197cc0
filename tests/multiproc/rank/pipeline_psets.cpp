// chorus-testrank pipeline-psets SEED: process sets through the C++ API. init() registers two
// overlapping sets, A = ranks 0..n-2 (id 1) and B = ranks 1..n-1 (id 2); every member submits, in
// a per-rank random order and all at once, allreduce (sum, average, a tensor large enough for
// several chunks), allgather (dim 0 differs by rank), broadcast (root: the set's last member),
// reducescatter and alltoall in each of its sets, plus global ops, using the same names in
// every set. Inputs are small integers (exact in every dtype), so each rank computes exactly what
// it must get. Then rank 0, outside B, submits an allreduce in B: errc::invalid_argument naming
// the tensor and rank 0. Prints "pipeline-psets: all exact" and, on rank 0, the error text.
// pipeline-psets-dynamic: CHORUS_DYNAMIC_PROCESS_SETS=1; add {0, n-1}, use it, remove it, add
// {1, n-1} (the freed id again), use it. Without the variable add_process_set must fail with
// Horovod's words. Prints "pipeline-psets-dynamic: ok".
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed, 4 an operation hung.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {
namespace {

using namespace std::chrono_literals;
constexpr auto op_deadline = 60s;

/// Rank r's value at element i of tensor `t` (small integers: exact sums in every dtype).
double value(int t, int r, std::size_t i) { return static_cast<double>((t * 7 + r * 3 + static_cast<int>(i % 11)) % 13); }

struct pending {
  std::string what;
  handle h;
  std::function<std::string()> verify;  // empty string: exact
};

/// Everything one rank submits in one set `id` of job ranks `members`; `t` tells values apart,
/// `round` ends every name (the same names in every set: each set has names of its own).
void submit_in_set(std::vector<pending>& out, int id, const std::vector<int>& members, int t, int rank, int round) {
  const int n = static_cast<int>(members.size());
  auto named = [&](const std::string& base) { return in_process_set(base + "." + std::to_string(round), id); };
  const int me = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const std::string tag = " in set " + std::to_string(id);
  // allreduce sum of f32: a small tensor and one of 3 M elements (several 4 MiB chunks).
  for (std::size_t elems : {std::size_t{5}, std::size_t{3} << 20}) {
    auto buf = std::make_shared<std::vector<float>>(elems);
    for (std::size_t i = 0; i < elems; ++i) (*buf)[i] = static_cast<float>(value(t, rank, i));
    auto name = elems == 5 ? "x" : "big";
    auto h = allreduce_async(named(name), tensor_view{buf->data(), dtype::f32, {int64_t(elems)}}, reduce_op::sum);
    out.push_back({std::string(name) + tag, h, [=] {
                     for (std::size_t i = 0; i < elems; ++i) {
                       double want = 0;
                       for (int m : members) want += value(t, m, i);
                       if ((*buf)[i] != static_cast<float>(want)) return "element " + std::to_string(i) + " is " + std::to_string((*buf)[i]) + ", expected " + std::to_string(want);
                     }
                     return std::string();
                   }});
  }
  // allreduce average of f64 (divides by the set's size).
  auto avg = std::make_shared<std::vector<double>>(4);
  for (std::size_t i = 0; i < 4; ++i) (*avg)[i] = value(t + 1, rank, i) * n;
  out.push_back({"avg" + tag, allreduce_async(named("avg"), tensor_view{avg->data(), dtype::f64, {4}}, reduce_op::average), [=] {
                   for (std::size_t i = 0; i < 4; ++i) {
                     double want = 0;
                     for (int m : members) want += value(t + 1, m, i);
                     if ((*avg)[i] != want) return "average element " + std::to_string(i) + " is " + std::to_string((*avg)[i]) + ", expected " + std::to_string(want);
                   }
                   return std::string();
                 }});
  // allgather: member k contributes k+1 rows of 2 i32, valued by its job rank.
  auto rows = std::make_shared<std::vector<int32_t>>(static_cast<std::size_t>(2 * (me + 1)), rank + 100 * t);
  out.push_back({"gather" + tag, allgather_async(named("gather"), tensor_view{rows->data(), dtype::i32, {me + 1, 2}}), {}});
  auto& g = out.back();
  g.verify = [h = g.h, members, t, rows] {  // rows: the input stays alive until the end
    std::vector<int32_t> want;
    for (std::size_t k = 0; k < members.size(); ++k) want.insert(want.end(), 2 * (k + 1), members[k] + 100 * t);
    const auto& got = h.gathered();
    if (got.size() != want.size() * 4 || std::memcmp(got.data(), want.data(), got.size()) != 0)
      return "gathered " + std::to_string(got.size()) + " bytes, expected the members' rows in member order";
    return std::string();
  };
  // broadcast from the set's last member (a job rank).
  const int root = members.back();
  auto b = std::make_shared<std::vector<int64_t>>(3, rank == root ? 4242 + id : -1);
  out.push_back({"bcast" + tag, broadcast_async(named("bcast"), tensor_view{b->data(), dtype::i64, {3}}, root), [=] {
                   for (auto v : *b)
                     if (v != 4242 + id) return "broadcast gave " + std::to_string(v);
                   return std::string();
                 }});
  // reducescatter of n+1 rows: this member's slice of the members' sum.
  const int64_t dim0 = n + 1;
  auto rs = std::make_shared<std::vector<float>>(static_cast<std::size_t>(dim0));
  for (int64_t i = 0; i < dim0; ++i) (*rs)[static_cast<std::size_t>(i)] = static_cast<float>(value(t + 2, rank, static_cast<std::size_t>(i)));
  out.push_back({"rs" + tag, reducescatter_async(named("rs"), tensor_view{rs->data(), dtype::f32, {dim0}}, reduce_op::sum), {}});
  auto& r = out.back();
  r.verify = [h = r.h, members, t, me, n, dim0, rs] {
    int64_t first = 0;
    for (int q = 0; q < me; ++q) first += reducescatter_rows(dim0, n, q);
    const int64_t rows_mine = reducescatter_rows(dim0, n, me);
    const auto& got = h.gathered();
    if (got.size() != static_cast<std::size_t>(rows_mine) * 4) return "slice of " + std::to_string(got.size()) + " bytes";
    for (int64_t i = 0; i < rows_mine; ++i) {
      double want = 0;
      for (int m : members) want += value(t + 2, m, static_cast<std::size_t>(first + i));
      float v;
      std::memcpy(&v, got.data() + 4 * i, 4);
      if (v != static_cast<float>(want)) return "slice row " + std::to_string(i) + " is " + std::to_string(v);
    }
    return std::string();
  };
  // alltoall: one row (its job rank) to every member.
  auto a2a = std::make_shared<std::vector<int32_t>>(static_cast<std::size_t>(n), rank);
  out.push_back({"a2a" + tag, alltoall_async(named("a2a"), tensor_view{a2a->data(), dtype::i32, {n}}, std::vector<int64_t>(static_cast<std::size_t>(n), 1)), {}});
  auto& a = out.back();
  a.verify = [h = a.h, members, a2a] {
    const auto& got = h.gathered();
    if (got.size() != members.size() * 4) return "alltoall received " + std::to_string(got.size()) + " bytes";
    for (std::size_t k = 0; k < members.size(); ++k) {
      int32_t v;
      std::memcpy(&v, got.data() + 4 * k, 4);
      if (v != members[k]) return "alltoall row " + std::to_string(k) + " is " + std::to_string(v);
    }
    return std::string();
  };
}

/// Waits for every op and checks it; 0, or the exit code.
int finish(std::vector<pending>& ops, int rank) {
  for (auto& p : ops) {
    auto st = p.h.wait(op_deadline);
    if (st.code() == errc::timeout && !p.h.poll()) {
      std::printf("rank %d: %s hung\n", rank, p.what.c_str());
      return 4;
    }
    if (!st.ok()) {
      std::printf("rank %d: %s failed: %s\n", rank, p.what.c_str(), st.to_string().c_str());
      return 3;
    }
    if (auto bad = p.verify ? p.verify() : std::string(); !bad.empty()) {
      std::printf("rank %d: %s wrong: %s\n", rank, p.what.c_str(), bad.c_str());
      return 1;
    }
  }
  return 0;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}

}  // namespace

int run_pipeline_psets(int argc, char** argv) {
  if (argc < 3) return 2;
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const char* env_size = std::getenv("CHORUS_SIZE");
  const int n = env_size ? std::atoi(env_size) : 0;
  if (n < 3) return 2;
  const auto a = range(0, n - 2), b = range(1, n - 1);
  if (auto st = init({a, b}); !st.ok()) {
    std::printf("init failed: %s\n", st.to_string().c_str());
    return 3;
  }
  const int rank = chorus::rank();
  std::vector<pending> ops;
  std::vector<std::function<void()>> submits;
  for (int round = 0; round < 3; ++round) {
    if (rank <= n - 2) submits.push_back([&, round] { submit_in_set(ops, 1, a, round, rank, round); });
    if (rank >= 1) submits.push_back([&, round] { submit_in_set(ops, 2, b, round + 10, rank, round); });
    submits.push_back([&, round] { submit_in_set(ops, 0, range(0, n - 1), round + 20, rank, round); });
  }
  // Everything in flight at once, submitted in a per-rank random order.
  std::mt19937_64 g(seed + static_cast<uint64_t>(rank));
  std::shuffle(submits.begin(), submits.end(), g);
  for (auto& s : submits) s();
  if (int rc = finish(ops, rank); rc != 0) return rc;
  if (auto st = barrier(1); rank <= n - 2 && !st.ok()) return 3;
  if (rank == 0) {  // outside B
    float x = 1;
    auto st = allreduce_async(in_process_set("outsider", 2), tensor_view{&x, dtype::f32, {1}}).wait(op_deadline);
    std::printf("outsider error: %s\n", st.to_string().c_str());
    if (st.code() != errc::invalid_argument) return 1;
  }
  if (auto st = barrier(0); !st.ok()) return 3;
  std::printf("pipeline-psets: all exact\n");
  std::fflush(stdout);
  shutdown();
  return 0;
}

int run_pipeline_psets_dynamic(int, char**) {
  if (auto st = init(); !st.ok()) return 3;
  const int n = size(), rank = chorus::rank();
  if (!std::getenv("CHORUS_DYNAMIC_PROCESS_SETS")) {
    auto id = add_process_set({0, n - 1});
    std::printf("without the variable: %s\n", id ? "added" : id.error().to_string().c_str());
    shutdown();
    return id ? 1 : 0;
  }
  auto use = [&](int id, const std::vector<int>& members) {
    std::vector<pending> ops;
    if (std::find(members.begin(), members.end(), rank) != members.end()) submit_in_set(ops, id, members, id, rank, 0);
    return finish(ops, rank);
  };
  auto first = add_process_set({n - 1, 0});
  if (!first) return std::printf("add failed: %s\n", first.error().to_string().c_str()), 3;
  if (int rc = use(*first, {0, n - 1}); rc) return rc;
  if (auto again = add_process_set({0, n - 1}); again || again.error().code() != errc::invalid_argument)
    return std::printf("a duplicate set was not refused\n"), 1;
  if (auto st = remove_process_set(*first); !st.ok()) return std::printf("remove: %s\n", st.to_string().c_str()), 3;
  auto second = add_process_set({1, n - 1});
  if (!second || *second != *first) return std::printf("the freed id was not used again\n"), 1;
  if (int rc = use(*second, {1, n - 1}); rc) return rc;
  if (auto st = barrier(0); !st.ok()) return 3;  // rank 0 must not leave while the others still reduce
  std::printf("pipeline-psets-dynamic: ok (ids %d, %d)\n", *first, *second);
  std::fflush(stdout);
  shutdown();
  return 0;
}

}  // namespace chorus::testrank
