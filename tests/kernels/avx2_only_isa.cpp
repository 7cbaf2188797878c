// kernels_test_avx2 only: holds libxsmm's and oneDNN's JITs to AVX2 before any test runs, so the
// binary tests the AVX2-only machines' path wherever it runs (by hand too). ctest's ENVIRONMENT
// (LIBXSMM_TARGET=hsw;ONEDNN_MAX_CPU_ISA=AVX2) did this before, but gtest_discover_tests passed
// only the first variable of the list on, and oneDNN's AVX-512 kernels ran here unnoticed until
// Isa.KernelsRunTheInstructionSetTheirBuildTargets checked oneDNN as well.
#include <gtest/gtest.h>

#include "kernels/isa_hold.h"

namespace nnfleet {
namespace {

class HoldToAvx2 : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_TRUE(hold_jit_kernels_to_avx2()) << "libxsmm and oneDNN could not be held to AVX2";
  }
};

const ::testing::Environment* const kHold =
    ::testing::AddGlobalTestEnvironment(new HoldToAvx2);  // gtest owns it

}  // namespace
}  // namespace nnfleet
