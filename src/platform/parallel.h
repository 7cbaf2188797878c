// Threads: pinned workers for the hot paths (the fleet's, a cluster rank's, predict's chunks),
// and blocks of work shared out to a few unpinned threads for the one-off passes over a whole plan
// (checking its models as it loads, writing plan.yaml).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace nnfleet {

// Calls fn(thread, block) once for every block in [0, blocks), on up to `threads` threads (the
// caller's is thread 0), each taking the next block in order as it frees up. When a call
// throws, no further block is started, and once every thread has stopped the exception of the
// lowest block that threw is rethrown. A thread that cannot be started leaves its share to the
// others; `threads` below 1 counts as 1.
void for_each_block(size_t blocks, int threads,
                    const std::function<void(int thread, size_t block)>& fn);

// Runs work(w) for every worker w in [0, cores.size()), each on a thread of its own started in
// order of w, which first pins itself to cores[w] (-1: left unpinned; a pin the OS refuses leaves
// it unpinned too). Meanwhile `meanwhile` runs on the calling thread; returns once it has and
// every worker has returned. `work` must not throw (a worker's failure is a value it leaves
// behind): an exception escaping a thread ends the process.
void run_pinned_workers(const std::vector<int>& cores, const std::function<void(int w)>& work,
                        const std::function<void()>& meanwhile);
// The same with worker 0 run on the calling thread (pinned to cores[0] like the others) once the
// other workers' threads are started, instead of a `meanwhile`.
void run_pinned_workers_here(const std::vector<int>& cores, const std::function<void(int w)>& work);

}  // namespace nnfleet
