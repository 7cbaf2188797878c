// See huge_buffer.h.
#include "platform/huge_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

namespace nnfleet {
namespace {

constexpr uintptr_t kHuge = uintptr_t{2} << 20;

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

size_t mapped_bytes(size_t bytes) {
  const size_t page = page_bytes();
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* huge_alloc(size_t bytes) {
  const size_t len = mapped_bytes(bytes ? bytes : 1);
  // Map 2 MiB more than asked, keep the part that starts on a 2 MiB boundary.
  void* raw =
      ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHuge - 1) & ~(kHuge - 1);
  if (start > base) ::munmap(raw, start - base);
  const uintptr_t end = base + len + kHuge;
  if (end > start + len) ::munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  // Only whole blocks: a huge page over the tail would hold up to 2 MiB the buffer never uses.
  const size_t whole = len & ~(kHuge - 1);
  if (whole > 0) ::madvise(reinterpret_cast<void*>(start), whole, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void huge_free(void* p, size_t bytes) noexcept {
  if (p) ::munmap(p, mapped_bytes(bytes ? bytes : 1));
}

}  // namespace nnfleet
