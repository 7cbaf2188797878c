// Arena: a single aligned allocation per model.
#include "tensor/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "core/check.h"
#include "platform/huge_buffer.h"

namespace nnfleet {
namespace {
size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::atomic<int64_t> g_limit{-1};  // set_arena_limit(); -1: none
std::once_flag g_limit_from_env;

void read_limit_from_env() {
  std::call_once(g_limit_from_env, [] {
    const char* v = std::getenv("NNFLEET_FAULT_ARENA_BYTES");
    if (v && *v) g_limit = std::strtoll(v, nullptr, 10);
  });
}
}  // namespace

void set_arena_limit(int64_t bytes) {
  read_limit_from_env();  // so that a later first allocation does not overwrite this
  g_limit = bytes < 0 ? -1 : bytes;
}

size_t Arena::reserve(size_t floats) {
  NNFLEET_CHECK(!allocated());
  size_t offset = size_;
  size_ += (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  return offset;
}

void Arena::allocate() {
  NNFLEET_CHECK(!allocated());
  size_t bytes = std::max<size_t>(size_, kAlignFloats) * sizeof(float);
  bytes = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple
  read_limit_from_env();
  const int64_t limit = g_limit.load();
  if (limit >= 0 && bytes > static_cast<uint64_t>(limit)) throw std::bad_alloc();
  if (bytes >= kHugeBufferMinBytes) {
    // Zero-filled by the kernel, on huge pages: m7's arena of W1 (about 43 MB) spent 0.15 s of the
    // launch in a memset that faulted it in 4 KiB at a time.
    data_ = std::unique_ptr<float, Free>(static_cast<float*>(huge_alloc(bytes)), Free{bytes});
    return;
  }
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  data_.reset(static_cast<float*>(p));
}

void Arena::discard(size_t offset, size_t floats) {
  // Only an arena with its own mapping gives pages back: a smaller one's are the heap's, which the
  // next model's allocations would fault in again one by one, for less than 2 MiB a model (W3's
  // run made 706 madvise calls with them, 163 without).
  if (!data_ || offset >= size_ || data_.get_deleter().mapped == 0) return;
  floats = std::min(floats, size_ - offset);
  const uintptr_t page = page_bytes();
  const auto begin = reinterpret_cast<uintptr_t>(data_.get() + offset);
  const uintptr_t end = begin + floats * sizeof(float);
  // Only pages wholly inside the range: the numbers beside it (and the allocator's) stay.
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void Arena::Free::operator()(float* p) const {
  if (mapped)
    huge_free(p, mapped);
  else
    std::free(p);
}

}  // namespace nnfleet
