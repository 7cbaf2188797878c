// Blocks of work shared out to a few threads for the one-off passes over a whole plan (checking
// its models as it loads, writing plan.yaml): the hot paths have their own pinned workers.
#pragma once

#include <cstddef>
#include <functional>

namespace nnfleet {

// Calls fn(thread, block) once for every block in [0, blocks), on up to `threads` threads (the
// caller's is thread 0), each taking the next block in order as it frees up. When a call
// throws, no further block is started, and once every thread has stopped the exception of the
// lowest block that threw is rethrown. A thread that cannot be started leaves its share to the
// others; `threads` below 1 counts as 1.
void for_each_block(size_t blocks, int threads,
                    const std::function<void(int thread, size_t block)>& fn);

}  // namespace nnfleet
