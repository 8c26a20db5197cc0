// chorus-bench-mpi: the allreduce protocol of `chorus-bench allreduce` (allreduce_protocol.hpp)
// over MPI_Allreduce, so Open MPI's shared memory is measured the same way as Chorus. Started
// by mpirun, not chorusrun; bench/mpi/compare.sh runs it and Chorus back to back.
//   mpirun -np 2 chorus-bench-mpi [--sizes 4K,64K,1M,16M,64M]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <sys/mman.h>

#include "bench/allreduce_protocol.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  try {
    auto sizes = chorus::bench::parse_sizes("4K,64K,1M,16M,64M");
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--sizes" && i + 1 < argc) sizes = chorus::bench::parse_sizes(argv[++i]);
      else throw std::runtime_error("usage: mpirun -np N chorus-bench-mpi [--sizes 4K,1M,64M]");
    }
    std::size_t max_bytes = 4096;
    for (auto b : sizes) max_bytes = std::max(max_bytes, b);
    // One buffer, touched before any timing, as chorus-bench does.
    void* mem = ::mmap(nullptr, max_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw std::runtime_error("cannot map the buffer");
    std::memset(mem, 0, max_bytes);
    chorus::bench::allreduce_impl impl;
    impl.name = "mpi";
    impl.rank = rank;
    impl.size = size;
    impl.allreduce_sum = [](float* d, std::size_t n) {
      MPI_Allreduce(MPI_IN_PLACE, d, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    impl.allreduce_max = [](double* d, std::size_t n) {
      MPI_Allreduce(MPI_IN_PLACE, d, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    };
    impl.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
    for (auto bytes : sizes) {
      auto r = chorus::bench::measure(impl, static_cast<float*>(mem), bytes);
      if (rank == 0) std::printf("%s\n", chorus::bench::result_line(impl, r).c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bench-mpi rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
