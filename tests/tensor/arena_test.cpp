// Arena: regions reserved, then one zero-filled allocation, small (malloc'd) or large (mapped
// on huge pages), and discard() giving whole pages back while the rest keeps its numbers.
#include "tensor/arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace nnfleet {
namespace {

TEST(Arena, SmallAndLargeArenasAreZeroFilledAlignedAndKeepWhatIsWritten) {
  // 1 KiB, 1.5 MiB (page-aligned, malloc'd) and 40 MiB (mapped), each in two regions.
  for (const size_t floats : {size_t{256}, size_t{393216}, size_t{10} << 20}) {
    Arena a;
    const size_t first = a.reserve(floats / 2), second = a.reserve(floats - floats / 2);
    a.allocate();
    ASSERT_TRUE(a.allocated());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.at(0)) % 64, 0u) << floats;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.at(second)) % 64, 0u) << floats;
    const float* p = a.at(first);
    EXPECT_TRUE(std::all_of(p, p + a.size_floats(), [](float v) { return v == 0.0f; })) << floats;
    a.at(second)[0] = 1.5f;
    a.at(0)[a.size_floats() - 1] = 2.5f;
    EXPECT_EQ(a.at(second)[0], 1.5f);
    EXPECT_EQ(a.at(0)[a.size_floats() - 1], 2.5f);
  }
}

TEST(Arena, DiscardZeroesWholePagesInsideTheRangeAndKeepsTheNumbersBesideIt) {
  Arena a;
  a.reserve(size_t{4} << 20);  // 16 MiB: a mapped arena, on huge pages where the system has them
  a.allocate();
  std::fill(a.at(0), a.at(0) + a.size_floats(), 3.0f);
  const size_t from = 1000, n = size_t{2} << 20;  // not on a page boundary at either end
  a.discard(from, n);
  EXPECT_EQ(a.at(0)[from - 1], 3.0f);      // before the range
  EXPECT_EQ(a.at(0)[from], 3.0f);          // in the range's first, partial page: kept
  EXPECT_EQ(a.at(0)[from + n], 3.0f);      // after the range
  EXPECT_EQ(a.at(0)[from + n / 2], 0.0f);  // a whole page inside: given back, reads as zero
}

}  // namespace
}  // namespace nnfleet
