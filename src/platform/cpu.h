// CPU topology and thread affinity: the only place nnfleet talks to the OS scheduler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnfleet {

// The CPU ids this process may run on (sched_getaffinity), in ascending order.
std::vector<int> allowed_cpus();
// Pins the calling thread to one CPU; returns false if the OS refused.
bool pin_this_thread(int cpu);
// "AMD EPYC" from /proc/cpuinfo, or "unknown".
std::string cpu_model_name();
// Peak resident set size of this process in bytes (getrusage).
size_t peak_rss_bytes();
// Current resident set size in bytes (/proc/self/statm).
size_t current_rss_bytes();
// Seconds since this process was started (from /proc, 10 ms resolution).
double process_age_seconds();
// Total physical memory in bytes.
size_t physical_memory_bytes();
// Memory this process may still take, in bytes, asked afresh each call: the kernel's estimate of
// what new allocations can get without swapping (MemAvailable), or less under a cgroup v2 memory
// limit (its limit less what the group uses, reclaimable page cache not counted). What is already
// allocated (loaded data) is not in it. Falls back to physical_memory_bytes().
//
// Fault injection for tests: set_available_memory(n), or the environment variable
// NNFLEET_FAULT_AVAILABLE_MEMORY=n read at the first call, makes it report n bytes (-1: the
// system's own answer), so memory checks can be tested without allocating gigabytes.
size_t available_memory_bytes();
void set_available_memory(int64_t bytes);

}  // namespace nnfleet
