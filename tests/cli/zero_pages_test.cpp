// release_zero_pages: the resident pages holding only zeros go back to the system, every other
// page (and every number) stays.
#include "zero_pages.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
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
  if (!single_threaded()) GTEST_SKIP() << "release_zero_pages does nothing with other threads";
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

// smaps' Rss of the mapping that starts at `p`, in kB (-1: none).
long rss_kb_of_mapping(const void* p) {
  std::ifstream f("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", reinterpret_cast<unsigned long>(p));
  bool in = false;
  for (std::string line; std::getline(f, line);) {
    if (line.find('-') != std::string::npos && line.find(':') > line.find(' ')) in = false;
    if (line.rfind(start, 0) == 0) in = true;
    if (in && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST(ZeroPages, UnmapsReadOnlyFilePagesWhichComeBackUnchanged) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t n = 16 * page;
  const std::string path = ::testing::TempDir() + "/clean_file_pages.bin";
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 7 + 1);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(n));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* m = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  const auto* p = static_cast<const char*>(m);
  long sum = 0;
  for (size_t i = 0; i < n; i += page) sum += p[i];  // all 16 pages mapped in
  EXPECT_NE(sum, 0);
  EXPECT_EQ(rss_kb_of_mapping(m), static_cast<long>(n / 1024));
  EXPECT_GE(release_clean_file_pages(), n);
  EXPECT_EQ(rss_kb_of_mapping(m), 0);
  EXPECT_EQ(std::string(p, n), bytes);  // read again from the file
  ::munmap(m, n);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nnfleet::cli
