// Arena: one 64-byte-aligned float allocation per model, carved into named regions at build time.
// Parameters, gradients, optimizer state, activations and caches all live in one arena, so a
// training step never touches the heap. Reserve everything first, then allocate() once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nnfleet {

class Arena {
 public:
  // Offsets are in floats and rounded up to 16 floats (64 bytes) so every region is aligned.
  static constexpr size_t kAlignFloats = 16;

  // Reserves `floats` floats; returns the region's offset. Only before allocate().
  size_t reserve(size_t floats);
  // Makes the single allocation, zero-filled. Called once. Throws std::bad_alloc when the system
  // refuses it (or a test's set_arena_limit() does); the caller names the model and the bytes.
  void allocate();
  bool allocated() const { return data_ != nullptr; }

  float* at(size_t offset) { return data_.get() + offset; }
  const float* at(size_t offset) const { return data_.get() + offset; }
  size_t size_floats() const { return size_; }
  size_t size_bytes() const { return allocated() ? size_ * sizeof(float) : 0; }
  // Gives the whole pages of floats [offset, offset + floats) back to the system (madvise
  // MADV_DONTNEED) and leaves the arena usable: those numbers are undefined afterwards (zero on
  // the pages given back). For numbers copied out for the last time. Only an arena of
  // kHugeBufferMinBytes or more (its own mapping) gives anything back; a smaller one keeps its
  // pages, which the heap would otherwise fault in again for the next model.
  void discard(size_t offset, size_t floats);
  // Bytes reserved so far (what allocate() will take).
  size_t planned_bytes() const { return size_ * sizeof(float); }

 private:
  struct Free {
    size_t mapped;  // huge_alloc's size; 0: from aligned_alloc (no default member initializer:
                    // GCC 12 then deems Free not default-constructible inside Arena)
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_{nullptr, Free{0}};
  size_t size_ = 0;
};

// Fault injection for tests: every arena larger than `bytes` fails to allocate, as when the
// system refuses the memory (-1: no limit). The environment variable NNFLEET_FAULT_ARENA_BYTES=n
// sets it at the first allocation. Lets tests reach an out-of-memory path without the gigabytes.
void set_arena_limit(int64_t bytes);

}  // namespace nnfleet
