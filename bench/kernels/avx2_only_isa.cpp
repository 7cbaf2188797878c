// kernels_bench_avx2 only: holds libxsmm's and oneDNN's JITs to AVX2 before Google Benchmark's
// main runs, so that with the kernels built for x86-64-v3 (nnfleet_kernels_avx2) the binary
// measures the AVX2-only machines' path on any machine, an AVX-512 one included (an AVX2-only
// regression must not hide on the machines that have AVX-512).
#include <cstdio>
#include <cstdlib>

#include "kernels/isa_hold.h"

namespace {

const bool kHeld = [] {
  if (!nnfleet::hold_jit_kernels_to_avx2()) {
    std::fprintf(stderr, "kernels_bench_avx2: libxsmm and oneDNN could not be held to AVX2\n");
    std::exit(2);
  }
  return true;
}();

}  // namespace
