// huge_alloc: zero-filled, 2 MiB-aligned memory of any size, usable to its last byte; and the
// whole-file reads that use it for large files (FileBytes), small and large alike.
#include "platform/huge_buffer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "platform/files.h"

namespace nnfleet {
namespace {

TEST(HugeBuffer, IsZeroFilledAlignedAndWritableToItsLastByte) {
  for (const size_t bytes : {size_t{1}, size_t{4096}, kHugeBufferMinBytes - 1, kHugeBufferMinBytes,
                             (size_t{5} << 20) + 3}) {
    auto* p = static_cast<unsigned char*>(huge_alloc(bytes));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (uintptr_t{2} << 20), 0u) << bytes;
    EXPECT_TRUE(std::all_of(p, p + bytes, [](unsigned char c) { return c == 0; })) << bytes;
    p[0] = 1;
    p[bytes - 1] = 2;
    EXPECT_EQ(p[bytes - 1], 2) << bytes;
    huge_free(p, bytes);
  }
  huge_free(nullptr, 10);  // as free(nullptr): nothing
}

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("nnfleet_huge_buffer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(HugeBuffer, WholeFileReadsGiveTheFilesBytesBelowAndAboveTheHugeSize) {
  for (const size_t bytes : {size_t{0}, size_t{10}, kHugeBufferMinBytes + 5}) {
    std::string content(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) content[i] = static_cast<char>((i * 131 + 7) % 251);
    const std::string path = scratch("file" + std::to_string(bytes));
    std::ofstream(path, std::ios::binary) << content;
    FileBytes got;
    std::string why;
    ASSERT_TRUE(read_regular_file(path, got, why)) << why;
    EXPECT_EQ(got.size, bytes);
    EXPECT_TRUE(got.view() == content) << bytes;
  }
  FileBytes none;
  std::string why;
  EXPECT_FALSE(read_regular_file(scratch("missing"), none, why));
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace nnfleet
