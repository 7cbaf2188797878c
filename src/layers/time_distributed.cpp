// TimeDistributed(layer): applies the wrapped layer to every step of the first sample axis, Keras
// semantics. Input [N,T,...]; the wrapped layer sees [N*T,...] and its output [N*T,...] is read
// back as [N,T,...] (row-major order makes the steps contiguous rows, so this is only a change
// of batch size). The weights are the wrapped layer's, held under the TimeDistributed layer as
// Keras stores them. Any registry kind can be wrapped (Dense, Conv1D, Conv2D, Flatten, Dropout,
// ...); its Keras config sits under "layer" as {"class_name", "config"}.
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class TimeDistributed final : public Layer {
 public:
  TimeDistributed(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* l = c.get_raw("layer");
    if (!l || !l->is_object() || !l->contains("class_name") || !(*l)["class_name"].is_string())
      c.fail("layer", "the wrapped layer as {\"class_name\": ..., \"config\": {...}}");
    const std::string cls = (*l)["class_name"].get<std::string>();
    if (cls == "TimeDistributed") c.fail("layer", "a layer other than TimeDistributed");
    try {
      inner_ = make_layer(cls, l->value("config", Json::object()), c.mode(), name + "_layer");
    } catch (const ConfigError& e) {
      throw ConfigError("layer", "in the wrapped " + cls + ": " + e.what());
    }
    if (inner_->arity() != 1 || inner_->input_id_limit() > 0)
      c.fail("layer", "a single-input layer that is not an Embedding");
  }
  const char* class_name() const override { return "TimeDistributed"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }  // the time axis stays

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 2)
      throw ModelError("expects an input of rank at least 3 [batch,steps,...], got " +
                       keras_shape(in[0]));
    Shape out{in[0][0]};
    for (int64_t d : inner_->output_shape({step(in[0])})) out.push_back(d);
    if (out.rank() > Shape::kMaxRank || !size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output of the wrapped layer over " + keras_shape(in[0]) + " is too large");
    return out;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return inner_->param_specs({step(in[0])});
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return inner_->cache_floats({step(in[0])}, rows(in[0], n));
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return inner_->scratch_floats({step(in[0])}, rows(in[0], n));
  }
  void forward(const LayerArgs& a) const override {
    const Shape s = step(a.in_shapes[0]);
    inner_->forward(inner_args(a, s));
  }
  void backward(const LayerArgs& a) const override {
    const Shape s = step(a.in_shapes[0]);
    inner_->backward(inner_args(a, s));
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    Json inner = inner_->keras_config();
    j["layer"] = {{"module", "keras.layers"},
                  {"class_name", inner_->class_name()},
                  {"config", inner},
                  {"registered_name", nullptr}};
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return static_cast<double>(in[0][0]) * inner_->forward_flops({step(in[0])});
  }
  bool mixes_samples() const override { return inner_->mixes_samples(); }
  const Layer& inner() const { return *inner_; }

 private:
  static Shape step(const Shape& in) {
    Shape s;
    for (int i = 1; i < in.rank(); ++i) s.push_back(in[i]);
    return s;
  }
  static int rows(const Shape& in, int n) { return static_cast<int>(n * in[0]); }
  // The same views, seen as N*T rows of one step each.
  static LayerArgs inner_args(const LayerArgs& a, const Shape& s) {
    LayerArgs b = a;
    b.n = rows(a.in_shapes[0], a.n);
    b.in_shapes = &s;
    b.out_shape = step(a.out_shape);
    return b;
  }
  std::unique_ptr<Layer> inner_;
};

}  // namespace

std::unique_ptr<Layer> make_time_distributed(LayerConfig& c, const std::string& name) {
  return std::make_unique<TimeDistributed>(c, name);
}

std::vector<LayerExample> time_distributed_examples() {
  auto wrap = [](const char* cls, Json cfg) {
    return Json{{"layer", {{"class_name", cls}, {"config", std::move(cfg)}}}};
  };
  return {{wrap("Dense", {{"units", 3}, {"activation", "softmax"}}), {Shape{4, 2}}},
          {wrap("Conv1D", {{"filters", 2}, {"kernel_size", 2}, {"activation", "tanh"}}),
           {Shape{3, 4, 2}}},
          {wrap("Conv2D", {{"filters", 2}, {"kernel_size", 2}}), {Shape{2, 3, 3, 1}}},
          {wrap("Flatten", Json::object()), {Shape{3, 2, 2}}},
          {wrap("Dropout", {{"rate", 0.5}}), {Shape{3, 2}}, true}};
}

}  // namespace nnfleet
