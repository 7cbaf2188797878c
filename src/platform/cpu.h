// CPU topology and thread affinity: the only place nnfleet talks to the OS scheduler.
#pragma once

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

}  // namespace nnfleet
