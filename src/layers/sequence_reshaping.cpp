// UpSampling1D, Cropping1D, ZeroPadding1D, RepeatVector and Permute: Keras layers that move
// values of sequences without arithmetic (backward adds dy back to where each value came from).
//   UpSampling1D(size)        [T,C] -> [T*size,C], each step repeated size times
//   Cropping1D(cropping)      [T,C] -> [T-a-b,C]  (cropping: int or [a, b]; default 1)
//   ZeroPadding1D(padding)    [T,C] -> [T+a+b,C]  (padding: int or [a, b]; default 1)
//   RepeatVector(n)           [F]   -> [n,F]
//   Permute(dims)             axes reordered; dims is a 1-based permutation of the sample axes
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// An int or a list of two non-negative ints (Cropping1D, ZeroPadding1D).
std::pair<int64_t, int64_t> parse_pair(LayerConfig& c, const char* key) {
  const std::vector<int64_t> v = c.get_ints(key, 2, std::vector<int64_t>{1, 1}, 0);
  return {v[0], v[1]};
}

void check_size(const Shape& in, const Shape& out) {
  if (!size_at_most(out, limits::kMaxSampleFloats))
    throw ModelError("output " + keras_shape(out) + " of input " + keras_shape(in) +
                     " is too large; expected at most " + std::to_string(limits::kMaxSampleFloats) +
                     " values per sample");
}

class UpSampling1D final : public Layer {
 public:
  UpSampling1D(LayerConfig& c, const std::string& name) : Layer(name) {
    size_ = c.get_int("size", 2);
  }
  const char* class_name() const override { return "UpSampling1D"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 2, "UpSampling1D takes sequences [batch,steps,channels]");
    if (in[0][0] > limits::kMaxSampleFloats / size_)
      throw ModelError("size " + std::to_string(size_) + " makes input " + keras_shape(in[0]) +
                       " too long; expected at most " + std::to_string(limits::kMaxSampleFloats) +
                       " steps");
    const Shape out{in[0][0] * size_, in[0][1]};
    check_size(in[0], out);
    return out;
  }
  void forward(const LayerArgs& a) const override {
    const size_t steps = rows_floats(a.n, Shape{a.in_shapes[0][0]});
    const size_t c = static_cast<size_t>(a.in_shapes[0][1]), s = static_cast<size_t>(size_);
    for (size_t t = 0; t < steps; ++t)
      for (size_t r = 0; r < s; ++r)
        std::memcpy(a.y + (t * s + r) * c, a.x[0] + t * c, c * sizeof(float));
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const size_t steps = rows_floats(a.n, Shape{a.in_shapes[0][0]});
    const size_t c = static_cast<size_t>(a.in_shapes[0][1]), s = static_cast<size_t>(size_);
    for (size_t t = 0; t < steps; ++t)
      for (size_t r = 0; r < s; ++r)
        for (size_t j = 0; j < c; ++j) a.dx[0][t * c + j] += a.dy[(t * s + r) * c + j];
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["size"] = size_;
    return j;
  }

 private:
  int64_t size_ = 2;
};

// Cropping1D and ZeroPadding1D: output step t is input step t + shift when inside the input.
class Shift1D final : public Layer {
 public:
  Shift1D(LayerConfig& c, const std::string& name, bool crop) : Layer(name), crop_(crop) {
    std::tie(before_, after_) = parse_pair(c, crop ? "cropping" : "padding");
  }
  const char* class_name() const override { return crop_ ? "Cropping1D" : "ZeroPadding1D"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 2,
                 crop_ ? "Cropping1D takes sequences [batch,steps,channels]"
                       : "ZeroPadding1D takes sequences [batch,steps,channels]");
    if (crop_ && before_ + after_ >= in[0][0])
      throw ModelError("cropping [" + std::to_string(before_) + ", " + std::to_string(after_) +
                       "] removes every step of input " + keras_shape(in[0]) +
                       "; expected fewer than " + std::to_string(in[0][0]) + " in total");
    if (!crop_ && before_ + after_ > limits::kMaxSampleFloats)
      throw ModelError("padding is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " steps");
    const int64_t t = crop_ ? in[0][0] - before_ - after_ : in[0][0] + before_ + after_;
    const Shape out{t, in[0][1]};
    check_size(in[0], out);
    return out;
  }
  void forward(const LayerArgs& a) const override { walk(a, false); }
  void backward(const LayerArgs& a) const override {
    if (a.dx[0]) walk(a, true);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j[crop_ ? "cropping" : "padding"] = {before_, after_};
    return j;
  }

 private:
  // Forward copies (zeros outside the input); backward adds dy back onto dx.
  void walk(const LayerArgs& a, bool back) const {
    const int64_t t_in = a.in_shapes[0][0], c = a.in_shapes[0][1], t_out = a.out_shape[0];
    const int64_t shift = crop_ ? before_ : -before_;
    for (int64_t i = 0; i < a.n; ++i)
      for (int64_t t = 0; t < t_out; ++t) {
        const int64_t src = t + shift;
        const bool inside = src >= 0 && src < t_in;
        if (back) {
          if (!inside) continue;
          float* dx = a.dx[0] + (i * t_in + src) * c;
          const float* dy = a.dy + (i * t_out + t) * c;
          for (int64_t j = 0; j < c; ++j) dx[j] += dy[j];
        } else {
          float* y = a.y + (i * t_out + t) * c;
          if (inside)
            std::memcpy(y, a.x[0] + (i * t_in + src) * c, static_cast<size_t>(c) * sizeof(float));
          else
            std::memset(y, 0, static_cast<size_t>(c) * sizeof(float));
        }
      }
  }
  bool crop_;
  int64_t before_ = 1, after_ = 1;
};

class RepeatVector final : public Layer {
 public:
  RepeatVector(LayerConfig& c, const std::string& name) : Layer(name) { n_ = c.get_int("n"); }
  const char* class_name() const override { return "RepeatVector"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 1, "RepeatVector takes vectors [batch,features]");
    const Shape out{n_, in[0][0]};
    check_size(in[0], out);
    return out;
  }
  void forward(const LayerArgs& a) const override {
    const size_t f = static_cast<size_t>(a.in_shapes[0][0]), r = static_cast<size_t>(n_);
    for (size_t i = 0; i < static_cast<size_t>(a.n); ++i)
      for (size_t k = 0; k < r; ++k)
        std::memcpy(a.y + (i * r + k) * f, a.x[0] + i * f, f * sizeof(float));
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const size_t f = static_cast<size_t>(a.in_shapes[0][0]), r = static_cast<size_t>(n_);
    for (size_t i = 0; i < static_cast<size_t>(a.n); ++i)
      for (size_t k = 0; k < r; ++k)
        for (size_t j = 0; j < f; ++j) a.dx[0][i * f + j] += a.dy[(i * r + k) * f + j];
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["n"] = n_;
    return j;
  }

 private:
  int64_t n_ = 1;
};

class Permute final : public Layer {
 public:
  Permute(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* d = c.get_raw("dims");
    const char* what = "a permutation of 1..rank (the sample axes, 1-based)";
    if (!d || !d->is_array() || d->empty() || d->size() > static_cast<size_t>(Shape::kMaxRank))
      c.fail("dims", what);
    std::vector<bool> seen(d->size(), false);
    for (const Json& e : *d) {
      const std::optional<int64_t> i = config_int(e, 1);
      if (!i || *i > static_cast<int64_t>(d->size()) || seen[static_cast<size_t>(*i - 1)])
        c.fail("dims", what);
      seen[static_cast<size_t>(*i - 1)] = true;
      dims_.push_back(static_cast<int>(*i - 1));
    }
  }
  const char* class_name() const override { return "Permute"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != static_cast<int>(dims_.size()))
      throw ModelError("dims has " + std::to_string(dims_.size()) + " axes; expected one per " +
                       "sample axis of input " + keras_shape(in[0]));
    Shape out = in[0];
    for (size_t k = 0; k < dims_.size(); ++k) out[static_cast<int>(k)] = in[0][dims_[k]];
    return out;
  }
  void forward(const LayerArgs& a) const override { walk(a, false); }
  void backward(const LayerArgs& a) const override {
    if (a.dx[0]) walk(a, true);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["dims"] = Json::array();
    for (int d : dims_) j["dims"].push_back(d + 1);
    return j;
  }

 private:
  // Walks the output in row-major order with an odometer over its axes, keeping the matching
  // input offset (the input strides permuted) in step: no division per element.
  void walk(const LayerArgs& a, bool back) const {
    const Shape& in = a.in_shapes[0];
    const int r = in.rank();
    int64_t in_stride[Shape::kMaxRank], stride[Shape::kMaxRank], size[Shape::kMaxRank],
        idx[Shape::kMaxRank];
    int64_t s = 1;
    for (int k = r - 1; k >= 0; --k) {
      in_stride[k] = s;
      s *= in[k];
    }
    for (int k = 0; k < r; ++k) {
      stride[k] = in_stride[dims_[static_cast<size_t>(k)]];
      size[k] = in[dims_[static_cast<size_t>(k)]];
    }
    const int64_t per = in.size();
    for (int64_t i = 0; i < a.n; ++i) {
      const float* x = back ? nullptr : a.x[0] + i * per;
      float* dx = back ? a.dx[0] + i * per : nullptr;
      const float* dy = back ? a.dy + i * per : nullptr;
      float* y = back ? nullptr : a.y + i * per;
      for (int k = 0; k < r; ++k) idx[k] = 0;
      int64_t src = 0;
      for (int64_t o = 0; o < per; ++o) {
        if (back)
          dx[src] += dy[o];
        else
          y[o] = x[src];
        for (int k = r - 1; k >= 0; --k) {
          src += stride[k];
          if (++idx[k] < size[k]) break;
          src -= stride[k] * size[k];
          idx[k] = 0;
        }
      }
    }
  }
  std::vector<int> dims_;
};

}  // namespace

std::unique_ptr<Layer> make_up_sampling1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<UpSampling1D>(c, name);
}
std::unique_ptr<Layer> make_cropping1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<Shift1D>(c, name, true);
}
std::unique_ptr<Layer> make_zero_padding1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<Shift1D>(c, name, false);
}
std::unique_ptr<Layer> make_repeat_vector(LayerConfig& c, const std::string& name) {
  return std::make_unique<RepeatVector>(c, name);
}
std::unique_ptr<Layer> make_permute(LayerConfig& c, const std::string& name) {
  return std::make_unique<Permute>(c, name);
}
std::vector<LayerExample> up_sampling1d_examples() {
  return {{{}, {Shape{3, 2}}},
          {{{"size", 3}}, {Shape{1, 2}}},
          {{{"data_format", "channels_first"}}, {Shape{2, 3}}}};
}
std::vector<LayerExample> cropping1d_examples() {
  return {{{}, {Shape{4, 2}}},
          {{{"cropping", Json{0, 2}}}, {Shape{5, 1}}},
          {{{"cropping", Json{1, 0}}, {"data_format", "channels_first"}}, {Shape{2, 3}}}};
}
std::vector<LayerExample> zero_padding1d_examples() {
  return {{{}, {Shape{3, 2}}},
          {{{"padding", Json{2, 0}}}, {Shape{1, 3}}},
          {{{"padding", 1}, {"data_format", "channels_first"}}, {Shape{2, 3}}}};
}
std::vector<LayerExample> repeat_vector_examples() {
  return {{{{"n", 3}}, {Shape{4}}}, {{{"n", 1}}, {Shape{2}}}};
}
std::vector<LayerExample> permute_examples() {
  return {{{{"dims", Json{2, 1}}}, {Shape{3, 4}}}, {{{"dims", Json{3, 1, 2}}}, {Shape{2, 3, 2}}}};
}

}  // namespace nnfleet
