// CPU topology, affinity and memory figures (Linux).
#include "platform/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

namespace nnfleet {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  if (cpus.empty()) {
    unsigned n = std::thread::hardware_concurrency();
    for (unsigned i = 0; i < (n ? n : 1); ++i) cpus.push_back(static_cast<int>(i));
  }
  return cpus;
}

bool pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(' ', p + 1));
    }
  }
  return "unknown";
}

size_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

size_t current_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

double process_age_seconds() {
  // Field 22 of /proc/self/stat is the start time in clock ticks after boot; the command name
  // (field 2) may hold spaces, so count fields after its closing parenthesis.
  std::ifstream stat("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return 0.0;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  double uptime = 0.0;
  std::ifstream("/proc/uptime") >> uptime;
  return uptime - std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

size_t physical_memory_bytes() {
  // Asked once: each call is a sysinfo(2), and every model's preparation asks.
  static const size_t bytes =
      static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

namespace {

std::atomic<int64_t> g_available{-1};  // set_available_memory(); -1: ask the system
std::once_flag g_available_from_env;

void read_available_from_env() {
  std::call_once(g_available_from_env, [] {
    const char* v = std::getenv("NNFLEET_FAULT_AVAILABLE_MEMORY");
    if (v && *v) g_available = std::strtoll(v, nullptr, 10);
  });
}

// The first number after `key` in a "key value" file (/proc/meminfo, memory.stat); -1 if absent.
int64_t keyed_value(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

// A cgroup v2 file holding one number ("max" and missing files give -1).
int64_t cgroup_value(const char* path) {
  std::ifstream in(path);
  int64_t v = -1;
  return in >> v ? v : -1;
}

}  // namespace

size_t available_memory_bytes() {
  read_available_from_env();
  if (const int64_t fake = g_available.load(); fake >= 0) return static_cast<size_t>(fake);
  const int64_t kib = keyed_value("/proc/meminfo", "MemAvailable:");
  size_t bytes = kib >= 0 ? static_cast<size_t>(kib) * 1024 : physical_memory_bytes();
  const int64_t limit = cgroup_value("/sys/fs/cgroup/memory.max");
  const int64_t used = cgroup_value("/sys/fs/cgroup/memory.current");
  if (limit >= 0 && used >= 0) {
    // Page cache the group could drop is not in use: docker stats counts the same way.
    const int64_t cache =
        std::max<int64_t>(0, keyed_value("/sys/fs/cgroup/memory.stat", "inactive_file"));
    const int64_t in_use = std::max<int64_t>(0, used - cache);
    bytes = std::min(bytes, static_cast<size_t>(std::max<int64_t>(0, limit - in_use)));
  }
  return bytes;
}

void set_available_memory(int64_t bytes) {
  read_available_from_env();  // so that a later first call does not overwrite this
  g_available = bytes < 0 ? -1 : bytes;
}

}  // namespace nnfleet
