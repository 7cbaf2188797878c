// Offsets for buffers with known lifetimes, so buffers that are never live at the same time share
// memory: a training Network's activation gradients (each live from the backward of its first
// consumer to the end of its own node's backward) take the space of the largest set live at once
// instead of the sum of all of them.
#pragma once

#include <cstddef>
#include <vector>

namespace nnfleet {

// A buffer of `floats` floats live over the closed step interval [first, last].
struct BufferLife {
  size_t floats = 0;
  int first = 0, last = 0;
};

// Places every buffer at an offset (a multiple of `align` floats) such that two buffers whose
// intervals share a step never overlap in memory; returns the offsets and sets *total to the
// floats the region needs. Greedy by size, largest first, each at the lowest offset free over
// its interval (TFLite's "greedy by size" arena planner): deterministic for the same input.
std::vector<size_t> place_buffers(const std::vector<BufferLife>& buffers, size_t align,
                                  size_t* total);

}  // namespace nnfleet
