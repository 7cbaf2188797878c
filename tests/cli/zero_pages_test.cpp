// release_zero_pages: the resident pages holding only zeros go back to the system, every other
// page (and every number) stays.
#include "zero_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace nnfleet::cli {
namespace {

bool single_threaded() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8)) == 1;
  return false;
}

TEST(ZeroPages, GivesBackOnlyPagesOfZeros) {
  // ctest runs each test in its own process, which starts no thread of its own.
  ASSERT_TRUE(single_threaded()) << "release_zero_pages does nothing with other threads";
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 16;
  void* m =
      ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* p = static_cast<unsigned char*>(m);
  std::memset(p, 0, pages * page);  // all resident, as a zero-filled registry is
  p[3 * page + 17] = 5;             // page 3 holds a number
  p[9 * page + page - 1] = 7;       // page 9 one at its last byte
  EXPECT_GE(release_zero_pages(), (pages - 2) * page);
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(::mincore(p, pages * page, resident.data()), 0);
  for (size_t i = 0; i < pages; ++i)
    EXPECT_EQ(resident[i] & 1, i == 3 || i == 9 ? 1 : 0) << "page " << i;
  EXPECT_EQ(p[3 * page + 17], 5);
  EXPECT_EQ(p[9 * page + page - 1], 7);
  for (size_t i = 0; i < pages * page; ++i) {
    if (i != 3 * page + 17 && i != 9 * page + page - 1) {
      ASSERT_EQ(p[i], 0) << i;
    }
  }
  ::munmap(m, pages * page);
}

}  // namespace
}  // namespace nnfleet::cli
