// Greedy-by-size placement of buffers with lifetimes (see buffer_plan.h).
#include "model/buffer_plan.h"

#include <algorithm>
#include <numeric>

namespace nnfleet {

std::vector<size_t> place_buffers(const std::vector<BufferLife>& buffers, size_t align,
                                  size_t* total) {
  const auto rounded = [align](size_t n) { return (n + align - 1) / align * align; };
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Largest first (ties: earliest start, then input order) so the big blocks pack first and the
  // small ones fill the gaps they leave.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].floats != buffers[b].floats) return buffers[a].floats > buffers[b].floats;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> offset(buffers.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of placed buffers live alongside
  *total = 0;
  for (size_t b : order) {
    const BufferLife& me = buffers[b];
    const size_t need = rounded(me.floats);
    busy.clear();
    for (size_t q : placed)
      if (buffers[q].first <= me.last && me.first <= buffers[q].last)
        busy.emplace_back(offset[q], offset[q] + rounded(buffers[q].floats));
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= at + need) break;  // the gap before this block fits
      at = std::max(at, hi);
    }
    offset[b] = at;
    *total = std::max(*total, at + need);
    if (need > 0) placed.push_back(b);
  }
  return offset;
}

}  // namespace nnfleet
