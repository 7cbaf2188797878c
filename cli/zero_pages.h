// At start-up, gives back to the system the resident pages of zeros this process holds (they read
// the same when touched again). Clean pages of read-only mapped files (the libraries' start-up
// code, about 8 MB in W1) are left alone: the kernel reclaims those itself under pressure, so
// dropping them would lower the resident figure without freeing memory anyone could use.
#pragma once

#include <cstddef>

namespace nnfleet::cli {

// libxsmm allocates its code registry locked in memory (MAP_LOCKED) and zero-filled: 10.5 MB of
// pages resident for the life of the process though only a few (one per kernel it makes) are ever
// written (W1's peak was 165 MB). A page that holds only zeros reads the same once given back
// (MADV_DONTNEED on private anonymous memory refills it with zeros), so giving it back changes no
// number: but only while no other thread may write to it between the check and the madvise, so
// this does nothing (returns 0) when the process has more than one thread. Returns the bytes
// given back.
size_t release_zero_pages();

}  // namespace nnfleet::cli
