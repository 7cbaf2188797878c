// BatchNormalization over the last axis (channels_last), Keras semantics: momentum 0.99,
// epsilon 1e-3, center (beta) and scale (gamma). Training normalizes with the batch statistics
// (biased variance) and updates moving_mean/moving_variance as m = m*momentum + stat*(1-momentum);
// inference uses the moving statistics. Weights in Keras order: gamma, beta, moving_mean,
// moving_variance (the last two non-trainable).
#include <cmath>

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class BatchNormalization final : public Layer {
 public:
  BatchNormalization(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* ax = c.get_raw("axis");
    if (ax) {
      // -1, or the last axis given explicitly (3 for images, [3] in some Keras files).
      const Json& v = ax->is_array() && ax->size() == 1 ? (*ax)[0] : *ax;
      const std::optional<int64_t> i = config_int(v, -1000);
      if (!i) c.fail("axis", "the last axis (-1)");
      axis_ = static_cast<int>(*i);
    }
    momentum_ = c.get_float("momentum", 0.99);
    epsilon_ = c.get_float("epsilon", 1e-3);
    center_ = c.get_bool("center", true);
    scale_ = c.get_bool("scale", true);
    beta_init_ = parse_init_option(c, "beta_initializer", "zeros");
    gamma_init_ = parse_init_option(c, "gamma_initializer", "ones");
    mean_init_ = parse_init_option(c, "moving_mean_initializer", "zeros");
    var_init_ = parse_init_option(c, "moving_variance_initializer", "ones");
    if (epsilon_ <= 0) c.fail("epsilon", "a positive number");
  }
  const char* class_name() const override { return "BatchNormalization"; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1 || (axis_ != -1 && axis_ != in[0].rank()))
      throw ModelError("normalizes axis " + std::to_string(axis_) + " of input " +
                       keras_shape(in[0]) + "; expected the last axis (-1 or " +
                       std::to_string(in[0].rank()) + "), as nnfleet is channels_last");
    return in[0];
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    const Shape c{in[0][-1]};
    std::vector<ParamSpec> p;
    if (scale_) p.push_back({"gamma", c, gamma_init_, true});
    if (center_) p.push_back({"beta", c, beta_init_, true});
    p.push_back({"moving_mean", c, mean_init_, false});
    p.push_back({"moving_variance", c, var_init_, false});
    return p;
  }
  // x_hat [N*S,C] and inv_std [C].
  bool mixes_samples() const override { return true; }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return rows_floats(n, in[0]) + static_cast<size_t>(in[0][-1]);
  }
  // Per-channel means in double during the training forward pass.
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return 2 * static_cast<size_t>(in[0][-1]);
  }

  void forward(const LayerArgs& a) const override {
    const int64_t c = a.in_shapes[0][-1];
    const int64_t rows = static_cast<int64_t>(a.n) * (a.in_shapes[0].size() / c);
    const float* x = a.x[0];
    int p = 0;
    const float* gamma = scale_ ? a.params[p++] : nullptr;
    const float* beta = center_ ? a.params[p++] : nullptr;
    float* mmean = a.params[p++];
    float* mvar = a.params[p++];
    float* xhat = a.cache;
    float* inv_std = a.cache + rows * c;
    if (a.training) {
      // Batch statistics in double for accuracy; two passes (mean, then variance).
      double* sum = reinterpret_cast<double*>(a.scratch);  // scratch holds 2C floats = C doubles
      for (int64_t j = 0; j < c; ++j) sum[j] = 0.0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < c; ++j) sum[j] += x[r * c + j];
      for (int64_t j = 0; j < c; ++j) {
        const double mean = sum[j] / static_cast<double>(rows);
        double var = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
          const double d = x[r * c + j] - mean;
          var += d * d;
        }
        var /= static_cast<double>(rows);
        inv_std[j] = static_cast<float>(1.0 / std::sqrt(var + epsilon_));
        mmean[j] = static_cast<float>(mmean[j] * momentum_ + mean * (1.0 - momentum_));
        mvar[j] = static_cast<float>(mvar[j] * momentum_ + var * (1.0 - momentum_));
        sum[j] = mean;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < c; ++j) {
          const float h = static_cast<float>((x[r * c + j] - sum[j]) * inv_std[j]);
          xhat[r * c + j] = h;
          a.y[r * c + j] = (gamma ? gamma[j] : 1.0f) * h + (beta ? beta[j] : 0.0f);
        }
      return;
    }
    for (int64_t j = 0; j < c; ++j)
      inv_std[j] = 1.0f / std::sqrt(mvar[j] + static_cast<float>(epsilon_));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c; ++j) {
        const float h = (x[r * c + j] - mmean[j]) * inv_std[j];
        xhat[r * c + j] = h;
        a.y[r * c + j] = (gamma ? gamma[j] : 1.0f) * h + (beta ? beta[j] : 0.0f);
      }
  }

  void backward(const LayerArgs& a) const override {
    const int64_t c = a.in_shapes[0][-1];
    const int64_t rows = static_cast<int64_t>(a.n) * (a.in_shapes[0].size() / c);
    const float* xhat = a.cache;
    const float* inv_std = a.cache + rows * c;
    const float* gamma = scale_ ? a.params[0] : nullptr;
    float* dgamma = scale_ ? a.dparams[0] : nullptr;
    float* dbeta = center_ ? a.dparams[scale_ ? 1 : 0] : nullptr;
    // sum_dy[j] = sum over rows of dy; sum_dyx[j] = sum of dy * x_hat.
    for (int64_t j = 0; j < c; ++j) {
      double s = 0.0, sx = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        s += a.dy[r * c + j];
        sx += static_cast<double>(a.dy[r * c + j]) * xhat[r * c + j];
      }
      if (dgamma) dgamma[j] += static_cast<float>(sx);
      if (dbeta) dbeta[j] += static_cast<float>(s);
      if (!a.dx[0]) continue;
      const double g = gamma ? gamma[j] : 1.0;
      float* dx = a.dx[0];
      if (a.training) {
        // dx = g*inv_std/M * (M*dy - sum(dy) - x_hat*sum(dy*x_hat)).
        const double m = static_cast<double>(rows);
        const double k = g * inv_std[j] / m;
        for (int64_t r = 0; r < rows; ++r)
          dx[r * c + j] += static_cast<float>(k * (m * a.dy[r * c + j] - s - xhat[r * c + j] * sx));
      } else {
        const float k = static_cast<float>(g * inv_std[j]);
        for (int64_t r = 0; r < rows; ++r) dx[r * c + j] += k * a.dy[r * c + j];
      }
    }
  }

  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = -1;
    j["momentum"] = momentum_;
    j["epsilon"] = epsilon_;
    j["center"] = center_;
    j["scale"] = scale_;
    j["beta_initializer"] = initializer_to_keras(beta_init_);
    j["gamma_initializer"] = initializer_to_keras(gamma_init_);
    j["moving_mean_initializer"] = initializer_to_keras(mean_init_);
    j["moving_variance_initializer"] = initializer_to_keras(var_init_);
    j["beta_regularizer"] = nullptr;
    j["gamma_regularizer"] = nullptr;
    j["beta_constraint"] = nullptr;
    j["gamma_constraint"] = nullptr;
    j["synchronized"] = false;
    return j;
  }

 private:
  int axis_ = -1;
  double momentum_ = 0.99, epsilon_ = 1e-3;
  bool center_ = true, scale_ = true;
  Initializer beta_init_, gamma_init_, mean_init_, var_init_;
};

}  // namespace

std::unique_ptr<Layer> make_batch_normalization(LayerConfig& c, const std::string& name) {
  return std::make_unique<BatchNormalization>(c, name);
}
std::vector<LayerExample> batch_normalization_examples() {
  return {{{}, {Shape{3, 2, 3}}, true},
          {{{"center", false}}, {Shape{4}}, true},
          {{{"epsilon", 0.01}}, {Shape{2, 2, 2}}, false},
          // axis 1: the channels first (Theano-era and channels_first files).
          {{{"axis", Json{1}}}, {Shape{3, 2, 2}}, true}};
}

}  // namespace nnfleet
