// Embedding: y[..., :] = E[id] for every integer id of the input, Keras semantics. Input [N,...]
// of ids (any rank), table `embeddings` [input_dim, output_dim], output [N,..., output_dim].
// Ids travel in the model's float input like every other value; float32 holds every integer
// below 2^24 exactly, which bounds input_dim. They are checked to be integers in
// [0, input_dim) when the data is loaded (Model::id_input(), first_bad_id() in src/data), and
// again per batch by the training loop (an array changed while a run reads it ends that model as
// failed); here an id outside the table (which only such a change can bring) reads a zero row and
// gets no gradient, so the table is never read or written out of bounds. Backward scatter-adds dy
// rows into the table's gradient; ids get no gradient (Keras's neither). With mask_zero, id 0 is
// padding: the layer makes the mask [N,T] (1 = real step) that the layers after it read (recurrent
// layers skip masked steps).
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// The largest integer float32 represents exactly, with all integers below it.
constexpr int64_t kMaxExactFloatInt = int64_t{1} << 24;

class Embedding final : public Layer {
 public:
  Embedding(LayerConfig& c, const std::string& name) : Layer(name) {
    input_dim_ = c.get_int("input_dim");
    if (input_dim_ > kMaxExactFloatInt)
      c.fail("input_dim", "at most " + std::to_string(kMaxExactFloatInt) +
                              " (ids travel as float32, exact up to 2^24)");
    output_dim_ = c.get_int("output_dim");
    init_ = parse_init_option(c, "embeddings_initializer", "uniform");
    mask_zero_ = c.get_bool("mask_zero", false);
    if (c.has("input_length"))
      input_length_ = c.get_int("input_length");
    else
      c.ignore("input_length");
  }
  const char* class_name() const override { return "Embedding"; }
  int64_t input_id_limit() const override { return input_dim_; }
  MaskUse mask_use() const override { return mask_zero_ ? MaskUse::kProduce : MaskUse::kDrop; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (input_length_ > 0 && in[0][in[0].rank() - 1] != input_length_)
      throw ModelError("input_length is " + std::to_string(input_length_) + "; expected it to " +
                       "match the input " + keras_shape(in[0]) + "'s last axis");
    if (in[0].rank() >= Shape::kMaxRank)
      throw ModelError("expects an input of rank at most " + std::to_string(Shape::kMaxRank) +
                       ", got " + keras_shape(in[0]));
    if (mask_zero_ && in[0].rank() != 1)
      throw ModelError(
          "mask_zero makes a mask over the time axis; expected an input of ids "
          "[batch,time], got " +
          keras_shape(in[0]));
    Shape out = in[0];
    out.push_back(output_dim_);
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>&) const override {
    return {{"embeddings", Shape{input_dim_, output_dim_}, init_, true}};
  }
  void forward(const LayerArgs& a) const override {
    const size_t ids = rows_floats(a.n, a.in_shapes[0]), d = static_cast<size_t>(output_dim_);
    const float* table = a.params[0];
    for (size_t i = 0; i < ids; ++i) {
      const float v = a.x[0][i];
      const int64_t id =
          v >= 0 && v < static_cast<float>(input_dim_) ? static_cast<int64_t>(v) : -1;
      if (id >= 0)
        std::memcpy(a.y + i * d, table + static_cast<size_t>(id) * d, d * sizeof(float));
      else
        std::memset(a.y + i * d, 0, d * sizeof(float));
      if (a.mask_out) a.mask_out[i] = id != 0 ? 1.0f : 0.0f;
    }
  }
  void backward(const LayerArgs& a) const override {
    const size_t ids = rows_floats(a.n, a.in_shapes[0]), d = static_cast<size_t>(output_dim_);
    float* dtable = a.dparams[0];
    for (size_t i = 0; i < ids; ++i) {
      const float v = a.x[0][i];
      if (!(v >= 0 && v < static_cast<float>(input_dim_))) continue;  // read as a zero row
      float* __restrict dst = dtable + static_cast<size_t>(v) * d;
      const float* __restrict src = a.dy + i * d;
      for (size_t j = 0; j < d; ++j) dst[j] += src[j];
    }
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["input_dim"] = input_dim_;
    j["output_dim"] = output_dim_;
    j["embeddings_initializer"] = initializer_to_keras(init_);
    j["embeddings_regularizer"] = nullptr;
    j["activity_regularizer"] = nullptr;
    j["embeddings_constraint"] = nullptr;
    j["mask_zero"] = mask_zero_;
    if (input_length_ > 0) j["input_length"] = input_length_;
    return j;
  }

 private:
  int64_t input_dim_ = 0, output_dim_ = 0, input_length_ = 0;
  bool mask_zero_ = false;
  Initializer init_;
};

}  // namespace

std::unique_ptr<Layer> make_embedding(LayerConfig& c, const std::string& name) {
  return std::make_unique<Embedding>(c, name);
}

std::vector<LayerExample> embedding_examples() {
  LayerExample a{{{"input_dim", 5}, {"output_dim", 3}}, {Shape{4}}};
  a.id_limit = 5;  // ids repeat within the batch: their gradients must add up
  LayerExample b{{{"input_dim", 7}, {"output_dim", 2}, {"input_length", 3}}, {Shape{2, 3}}};
  b.id_limit = 7;
  LayerExample c{{{"input_dim", 6}, {"output_dim", 2}, {"mask_zero", true}}, {Shape{5}}};
  c.id_limit = 6;
  return {a, b, c};
}

}  // namespace nnfleet
