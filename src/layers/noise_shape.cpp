// Keras noise_shape: parsing, checking and broadcasting one draw over the axes where it is 1.
#include "layers/noise_shape.h"

#include <string>

#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// The draw's per-sample shape: 1 where the noise_shape says 1, else the input's size.
Shape draw_shape(const NoiseShape& s, const Shape& in) {
  Shape d;
  for (int i = 0; i < in.rank(); ++i) d.push_back(s.dims[static_cast<size_t>(i)] == 1 ? 1 : in[i]);
  return d;
}

}  // namespace

NoiseShape parse_noise_shape(LayerConfig& c) {
  NoiseShape s;
  const Json* v = c.get_raw("noise_shape");
  if (!v || v->is_null()) return s;
  const char* want =
      "null or a list of the input's rank (batch axis first) of null or positive "
      "integers";
  if (!v->is_array() || v->size() < 2 || v->size() > static_cast<size_t>(Shape::kMaxRank) + 1)
    c.fail("noise_shape", want);
  s.given = true;
  for (size_t i = 0; i < v->size(); ++i) {
    int64_t d = -1;
    if (!(*v)[i].is_null()) {
      const std::optional<int64_t> k = config_int((*v)[i], 1);
      if (!k) c.fail("noise_shape", want);
      d = *k;
    }
    if (i == 0)
      s.share_batch = d == 1;
    else
      s.dims.push_back(d);
  }
  return s;
}

Json noise_shape_to_keras(const NoiseShape& s) {
  if (!s.given) return nullptr;
  Json j = Json::array();
  j.push_back(s.share_batch ? Json(1) : Json(nullptr));
  for (int64_t d : s.dims) j.push_back(d < 0 ? Json(nullptr) : Json(d));
  return j;
}

void check_noise_shape(const NoiseShape& s, const Shape& in, const char* cls) {
  if (!s.given) return;
  const std::string got = noise_shape_to_keras(s).dump();
  if (s.dims.size() != static_cast<size_t>(in.rank()))
    throw ModelError(std::string(cls) + " noise_shape " + got + " has " +
                     std::to_string(s.dims.size() + 1) + " entries; expected " +
                     std::to_string(in.rank() + 1) + ", one per axis of its input " +
                     keras_shape(in));
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t d = s.dims[static_cast<size_t>(i)];
    if (d != -1 && d != 1 && d != in[i])
      throw ModelError(std::string(cls) + " noise_shape " + got + " does not fit its input " +
                       keras_shape(in) + " at axis " + std::to_string(i + 1) +
                       "; expected None, 1 or " + std::to_string(in[i]));
  }
}

size_t noise_draws(const NoiseShape& s, const Shape& in, int n) {
  const size_t per = static_cast<size_t>(s.given ? draw_shape(s, in).size() : in.size());
  return (s.given && s.share_batch ? 1 : static_cast<size_t>(n)) * per;
}

void broadcast_noise(const NoiseShape& s, const Shape& in, int n, const float* draws, float* out) {
  const Shape d = draw_shape(s, in);
  const int r = in.rank();
  // Strides of the draw tensor per input axis: 0 along a shared axis.
  int64_t stride[Shape::kMaxRank] = {}, idx[Shape::kMaxRank] = {};
  int64_t st = 1;
  for (int i = r - 1; i >= 0; --i) {
    stride[i] = d[i] == 1 ? 0 : st;
    st *= d[i];
  }
  const int64_t per = in.size(), row_stride = s.share_batch ? 0 : d.size();
  for (int b = 0; b < n; ++b) {
    const float* src = draws + b * row_stride;
    float* dst = out + static_cast<int64_t>(b) * per;
    for (int i = 0; i < r; ++i) idx[i] = 0;
    int64_t off = 0;
    for (int64_t k = 0; k < per; ++k) {
      dst[k] = src[off];
      // Odometer over the input's axes, last fastest.
      for (int i = r - 1; i >= 0; --i) {
        off += stride[i];
        if (++idx[i] < in[i]) break;
        off -= stride[i] * in[i];
        idx[i] = 0;
      }
    }
  }
}

}  // namespace nnfleet
