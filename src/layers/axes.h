// Keras axis options (LayerNormalization, UnitNormalization, Softmax, PReLU's shared_axes): an
// int or a list of ints counted over the full shape with the batch axis as 0, negative from the
// end. Layers keep the values as given and resolve them against the per-sample shape when the
// model is planned; the gather/scatter helpers then walk a per-sample tensor as rows of the
// chosen axes, for kernels written over contiguous rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

struct KerasAxes {
  std::vector<int64_t> values;  // as the config gives them
  bool is_list = false;         // written back as a list when it was read as one
};

// Reads `key` as an int or a non-empty list of ints (def when absent or null). Throws ConfigError.
KerasAxes parse_keras_axes(LayerConfig& c, const std::string& key, int64_t def);
Json keras_axes_json(const KerasAxes& a);

// Bit i set for each per-sample axis i (Keras axis i + 1) named by `a` over per-sample `s`.
// Throws ModelError (naming `what`, e.g. "normalizes") for the batch axis, an axis outside the
// shape or a repeated axis. resolve_axes_unchecked does no checks: for forward/backward, after
// output_shape() has checked them.
unsigned resolve_axes(const KerasAxes& a, const Shape& s, const char* what);
unsigned resolve_axes_unchecked(const KerasAxes& a, const Shape& s);

// Splits per-sample shape `s` into rows: the axes in `mask` (in order) make a row of `cols`
// values, the other axes (in order) index `rows` rows.
struct AxisSplit {
  int64_t rows = 1, cols = 1;
  bool trailing = false;  // the row axes are the last ones: the sample is already [rows, cols]
};
AxisSplit split_axes(const Shape& s, unsigned mask);

// For every flat offset o of a per-sample tensor of shape `s`, calls f(o, row * cols + col),
// where (row, col) is its place in the [rows, cols] view of split_axes(s, mask).
template <typename F>
void for_each_axis_offset(const Shape& s, unsigned mask, F f) {
  const int r = s.rank();
  int64_t idx[Shape::kMaxRank] = {};
  int64_t rstride[Shape::kMaxRank] = {}, cstride[Shape::kMaxRank] = {};
  int64_t rs = 1, cs = 1, cols = 1;
  for (int i = 0; i < r; ++i)
    if (mask >> i & 1u) cols *= s[i];
  for (int i = r - 1; i >= 0; --i) {
    if (mask >> i & 1u) {
      cstride[i] = cs;
      cs *= s[i];
    } else {
      rstride[i] = rs;
      rs *= s[i];
    }
  }
  const int64_t total = s.size();
  int64_t row = 0, col = 0;
  for (int64_t o = 0; o < total; ++o) {
    f(o, row * cols + col);
    for (int i = r - 1; i >= 0; --i) {  // odometer step, keeping row and col in step
      if (++idx[i] < s[i]) {
        row += rstride[i];
        col += cstride[i];
        break;
      }
      row -= rstride[i] * (s[i] - 1);
      col -= cstride[i] * (s[i] - 1);
      idx[i] = 0;
    }
  }
}

}  // namespace nnfleet
