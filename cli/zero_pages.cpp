// See zero_pages.h.
#include "zero_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace nnfleet::cli {
namespace {

int thread_count() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;  // unknown: treated as many
}

bool all_zero(const unsigned char* p, size_t n) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t any = 0;
  for (size_t i = 0; i < n / 8; ++i) any |= w[i];
  return any == 0;
}

// The zero pages among the resident ones of [a, b), given back in runs; their bytes.
size_t release_range(uintptr_t a, uintptr_t b, size_t page) {
  const size_t pages = (b - a) / page;
  std::vector<unsigned char> resident(pages);
  if (::mincore(reinterpret_cast<void*>(a), b - a, resident.data()) != 0) return 0;
  size_t given = 0, run = 0;
  auto flush = [&](size_t end) {
    if (run == 0) return;
    void* first = reinterpret_cast<void*>(a + (end - run) * page);
    // libxsmm maps its registry MAP_LOCKED (all of it resident from the start): a locked page
    // cannot be given back (EINVAL), so its zero pages are unlocked first; reading one again
    // maps the shared zero page, writing one takes a page as for any other memory.
    ::munlock(first, run * page);
    if (::madvise(first, run * page, MADV_DONTNEED) == 0) given += run * page;
    run = 0;
  };
  for (size_t i = 0; i < pages; ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(a + i * page);
    if ((resident[i] & 1) && all_zero(p, page)) {
      ++run;
    } else {
      flush(i);
    }
  }
  flush(pages);
  return given;
}

}  // namespace

size_t release_zero_pages() {
  if (thread_count() != 1) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Read whole before any madvise: the list must not change under the reader.
  std::ifstream f("/proc/self/maps");
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  size_t given = 0;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode >> path;
    // Private anonymous read-write memory only: not a file's, not the stack (this frame's).
    if (perms != "rw-p" || inode != "0" || (!path.empty() && path != "[heap]")) continue;
    const size_t dash = range.find('-');
    const uintptr_t a = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t b = std::stoull(range.substr(dash + 1), nullptr, 16);
    given += release_range(a, b, page);
  }
  return given;
}

}  // namespace nnfleet::cli
