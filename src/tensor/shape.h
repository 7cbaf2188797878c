// Shape: the dimensions of a float32 tensor, row-major, channels last (NHWC) as in Keras.
// Layer shapes are per sample (no batch axis); the batch size is given separately at run time.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"

namespace nnfleet {

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    NNFLEET_CHECK(dims.size() <= kMaxRank);
    for (int64_t d : dims) dims_[rank_++] = d;
  }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i < 0 ? rank_ + i : i]; }
  int64_t& operator[](int i) { return dims_[i < 0 ? rank_ + i : i]; }
  void push_back(int64_t d) {
    NNFLEET_CHECK(rank_ < kMaxRank);
    dims_[rank_++] = d;
  }
  // Number of elements (1 for rank 0).
  int64_t size() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  // This shape with a leading batch axis of `n`.
  Shape with_batch(int64_t n) const {
    Shape s;
    s.push_back(n);
    for (int i = 0; i < rank_; ++i) s.push_back(dims_[i]);
    return s;
  }
  // "[32,13,13,8]"; a negative dimension prints as "None".
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ",";
      s += dims_[i] < 0 ? std::string("None") : std::to_string(dims_[i]);
    }
    return s + "]";
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace nnfleet
