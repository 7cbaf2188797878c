// Arena: a single aligned allocation per model.
#include "tensor/arena.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "nnfleet/error.h"

namespace nnfleet {

size_t Arena::reserve(size_t floats) {
  NNFLEET_CHECK(!allocated());
  size_t offset = size_;
  size_ += (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  return offset;
}

void Arena::allocate() {
  NNFLEET_CHECK(!allocated());
  size_t bytes = std::max<size_t>(size_, kAlignFloats) * sizeof(float);
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  data_.reset(static_cast<float*>(p));
}

void Arena::Free::operator()(float* p) const { std::free(p); }

}  // namespace nnfleet
