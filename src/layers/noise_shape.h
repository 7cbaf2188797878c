// Keras's noise_shape (Dropout, AlphaDropout): the shape of the random draw, broadcast over the
// input, so one draw is shared along the axes where it is 1 (noise_shape=(None, 1, C) drops the
// same features at every time step). Entries count the batch axis; None takes the input's size.
#pragma once

#include <cstddef>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

struct NoiseShape {
  bool given = false;         // a noise_shape other than null
  bool share_batch = false;   // its batch entry is 1: one draw for every row of a call
  std::vector<int64_t> dims;  // per-sample entries: -1 for None, else the value
};

// Reads "noise_shape" (null, or a list of null or positive integers); refuses anything else.
NoiseShape parse_noise_shape(LayerConfig& c);
// null, or the list as read (with the batch entry).
Json noise_shape_to_keras(const NoiseShape& s);
// Throws ModelError unless `s` fits the per-sample input shape: the same rank (counting the
// batch axis), each entry None, 1, or the input's size.
void check_noise_shape(const NoiseShape& s, const Shape& in, const char* cls);
// Independent draws one call of n rows makes.
size_t noise_draws(const NoiseShape& s, const Shape& in, int n);
// out[i] = draws[the draw value i shares], for the n rows of input shape `in`: out [n, in].
void broadcast_noise(const NoiseShape& s, const Shape& in, int n, const float* draws, float* out);

}  // namespace nnfleet
