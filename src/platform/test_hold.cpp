// Test holds (test_hold.h): the environment variable is read once; a hold polls for its .go file,
// which costs nothing outside tests (no point is listed there).
#include "platform/test_hold.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

namespace nnfleet::test_hold {
namespace {

struct Holds {
  std::map<std::string, int, std::less<>> nth;      // point -> the arrival that holds
  std::map<std::string, int, std::less<>> arrived;  // point -> arrivals so far
  std::string folder;
  bool any = false;
};

std::mutex g_mu;

Holds parse(const std::string& s) {
  Holds h;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return h;
  h.folder = s.substr(colon + 1);
  for (size_t a = 0; a < colon;) {
    size_t b = s.find(',', a);
    if (b == std::string::npos || b > colon) b = colon;
    std::string item = s.substr(a, b - a);
    int n = 1;
    if (const size_t hash = item.find('#'); hash != std::string::npos) {
      n = std::max(1, std::atoi(item.c_str() + hash + 1));
      item.resize(hash);
    }
    if (!item.empty()) h.nth[item] = n;
    a = b + 1;
  }
  h.any = !h.nth.empty();
  return h;
}

Holds& holds() {  // under g_mu
  static Holds h = [] {
    const char* v = std::getenv("NNFLEET_TEST_HOLD");
    return v ? parse(v) : Holds{};
  }();
  return h;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

bool listed(std::string_view point) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Holds& h = holds();
  return h.any && h.nth.count(point) > 0;
}

void set_for_tests(const std::string& spec) {
  std::lock_guard<std::mutex> lock(g_mu);
  holds() = parse(spec);
}

void reach(std::string_view point, const std::string& detail, const std::atomic<bool>* stop) {
  std::string base;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Holds& h = holds();
    if (!h.any) return;
    const auto it = h.nth.find(point);
    if (it == h.nth.end()) return;
    int& arrived = h.arrived[std::string(point)];
    if (++arrived < it->second) return;
    first = arrived == it->second;
    base = h.folder + "/" + std::string(point);
  }
  const std::string held = base + "." + std::to_string(::getpid()) + ".held";
  if (first) {
    // Written whole under a temporary name, then renamed: a test never reads half a detail.
    std::ofstream f(held + ".tmp");
    f << detail;
    if (!f.good()) return;
    f.close();
    if (std::rename((held + ".tmp").c_str(), held.c_str()) != 0) return;
  }
  while (!exists(base + ".go") && !(stop && stop->load(std::memory_order_relaxed)))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

}  // namespace nnfleet::test_hold
