// Weight initializers with Keras 3 semantics (names, defaults and fan computation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "tensor/rng.h"
#include "tensor/shape.h"

namespace nnfleet {

enum class InitKind {
  kZeros,
  kOnes,
  kConstant,  // a = value
  kGlorotUniform,
  kGlorotNormal,
  kHeUniform,
  kHeNormal,
  kLecunUniform,
  kLecunNormal,
  kRandomNormal,     // a = mean (0.0), b = stddev (0.05)
  kRandomUniform,    // a = minval (-0.05), b = maxval (0.05)
  kTruncatedNormal,  // a = mean (0.0), b = stddev (0.05)
  kOrthogonal,       // a = gain (1.0)
  kVarianceScaling,  // a = scale (1.0), fan and distribution below
};

enum class InitFan { kIn, kOut, kAvg };
enum class InitDistribution { kTruncatedNormal, kUntruncatedNormal, kUniform };

struct Initializer {
  InitKind kind = InitKind::kZeros;
  double a = 0.0, b = 0.0;
  // LSTM unit_forget_bias: the second quarter of the vector (the forget gate's bias) is then
  // filled with ones, the rest with `kind` (Keras's LSTMCell bias initializer).
  bool unit_forget_bias = false;
  // VarianceScaling only (Keras 2 files serialize glorot_uniform and friends this way).
  InitFan fan = InitFan::kIn;
  InitDistribution distribution = InitDistribution::kTruncatedNormal;
};

// Parses "glorot_uniform", {"class_name": "GlorotUniform", "config": {...}} (Keras), or
// {"RandomNormal": {"stddev": 0.1}} (plan form). Throws ConfigError.
Initializer parse_initializer(const Json& j, const std::string& key);
// Keras's snake_case name of the kind ("glorot_uniform") and its Keras class ("GlorotUniform").
std::string initializer_name(InitKind k);
std::string initializer_class(InitKind k);
Json initializer_to_keras(const Initializer& init);
const std::vector<std::string>& initializer_names();

// Fills out[shape.size()] using Keras's fans: rank 2 [in,out]; conv [kh,kw,in,out] with the
// receptive field multiplied in; rank 1 fan_in = fan_out = shape[0].
void initialize(const Initializer& init, const Shape& shape, Rng& rng, float* out);

struct Fans {
  double in = 1, out = 1;
};
// Keras's compute_fans of a weight shape: rank 0 -> 1, 1; rank 1 -> shape[0] for both; rank 2
// [in,out]; rank >= 3 [...,in,out] with the product of the leading dims (the receptive field)
// multiplied into both.
Fans initializer_fans(const Shape& shape);

}  // namespace nnfleet
