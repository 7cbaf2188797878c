// Large buffers mapped straight from the kernel, on transparent huge pages where it has them.
//
// Why: every first touch of a 4 KiB page is a page fault, and under this workplace's VMs a fault
// costs about 25 us. Reading Fashion-MNIST's 26 MB of training images into fresh memory took
// 77-98 ms on 4 KiB pages and 6-8 ms with MADV_HUGEPAGE; inflating its 47 MB took 245-297 ms
// against 76-85 (Zen 5, libdeflate, /tmp/gzb probe of session 25). m7's 43 MB arena spent 0.15 s
// of W1's launch in the memset that faulted it in.
//
// The memory comes zero-filled from the kernel (no memset needed). Only the buffer's whole 2 MiB
// blocks are advised (madvise MADV_HUGEPAGE; the mapping starts on a 2 MiB boundary), so the
// resident memory stays what is touched rounded to 2 MiB at most per block, and the tail past the
// last whole block stays on 4 KiB pages: nothing is resident that a small-page buffer would not
// hold, save the untouched rest of a touched block.
#pragma once

#include <cstddef>

namespace nnfleet {

// `bytes` of zero-filled memory starting on a 2 MiB boundary; throws std::bad_alloc when the
// system refuses it. Free with huge_free(p, bytes).
void* huge_alloc(size_t bytes);
void huge_free(void* p, size_t bytes) noexcept;
// Buffers from this size up are worth their own mapping (below it, malloc's arenas serve them
// without a system call; a 2 MiB block is the smallest a huge page can back).
inline constexpr size_t kHugeBufferMinBytes = size_t{2} << 20;

}  // namespace nnfleet
