// Holding the JIT libraries to AVX2, so that the kernels built for AVX2 + FMA
// (nnfleet_kernels_avx2) run the AVX2-only machines' path on any machine, an AVX-512 one
// included: kernels_test_avx2 and kernels_bench_avx2 call it before any kernel runs.
#pragma once

namespace nnfleet {

// Sets libxsmm's JIT target and oneDNN's maximum ISA to AVX2. Returns false when either did not
// take: oneDNN refuses once it has queried the CPU or made a primitive, so call it first.
bool hold_jit_kernels_to_avx2();

}  // namespace nnfleet
