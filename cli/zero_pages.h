// At start-up, gives back to the system the resident pages this process will likely not use again
// and can get back unchanged: zero pages of its private memory, pages of read-only mapped files.
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

// Unmaps the pages of the files mapped read-only (code, constants) that this process has not
// copied (smaps' Anonymous: 0): the libraries' start-up code (MPI, TLS, protobuf, oneDNN's CPU
// probe) stays resident otherwise, never run again. Such a page is the file's, so one used again
// comes back from the page cache (a minor fault), unchanged. A mapping that holds a copied page
// (relocations made read-only after loading) is left whole. Returns the bytes unmapped.
size_t release_clean_file_pages();

}  // namespace nnfleet::cli
