// Serialized TensorFlow operations in Keras files: tf.keras's TFOpLambda / SlicingOpLambda (nodes
// as one unwrapped entry and as a list of entries, constants as first arguments, tensors and
// constants as keyword arguments) and Keras 3's keras.ops calls, from small configs made by
// tools/make_tfop_cases.py (tests/io/fixtures/synthetic/tfop_*.json), predicted against numpy's
// values and written back as .h5 (tf.keras's form) and .keras (Keras 3 operations). The two real
// tf.keras transformers with TFOpLambda layers also need MultiHeadAttention and a channels_first
// GlobalAveragePooling1D (other parts of issue 35): until those exist they must be refused for
// those, not for an operation.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "io/keras/hdf5.h"
#include "io/keras/keras_tf_ops.h"
#include "io/keras/keras_writer.h"
#include "io/onnx/onnx_writer.h"
#include "io_test_util.h"
#include "layers/tf_op.h"

namespace nnfleet::test {
namespace {

// Runs a model of one or two inputs on a batch of 2: flat index i of input k is
// sin(0.37 i + 0.1) (k = 0) or cos(0.23 i) (k = 1).
std::vector<float> predict(const LoadedModel& lm) {
  const Model& m = *lm.model;
  Network net(lm.model, 2, lm.params.data());
  for (size_t k = 0; k < m.num_inputs(); ++k) {
    float* p = net.input(k);
    for (int64_t i = 0; i < 2 * m.input(k).shape.size(); ++i) {
      const double x = static_cast<double>(i);
      p[i] = static_cast<float>(k == 0 ? std::sin(0.37 * x + 0.1) : std::cos(0.23 * x));
    }
  }
  net.forward(2, false);
  return std::vector<float>(net.output(), net.output() + 2 * net.output_features());
}

struct Case {
  const char* stem;
  std::vector<float> want;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"tfop_unwrapped_k211",
       {0.0417983411f, 0.347242239f, 0.297781932f, 0.313177488f, 0.492952163f, 0.105316998f,
        0.11304682f, 0.288684019f}},
      {"tfop_wrapped_k214",
       {1.004971f, 1.09259919f, 1.0589981f, 1.05137836f, 1.05252865f, 1.02616681f, 1.03966244f,
        1.17233531f}},
      {"tfop_keras3_ops",
       {0.687202652f, 0.92824624f, 1.15259986f, 1.23195125f, 0.946350008f, 1.08935311f, 1.07893414f,
        0.885362746f}},
  };
  return c;
}

class TfOpFiles : public ::testing::TestWithParam<Case> {};

TEST_P(TfOpFiles, PredictsNumpysValuesAndRoundTripsBitIdentically) {
  const Case& c = GetParam();
  const LoadedModel lm = load_keras_model(fixture(std::string("synthetic/") + c.stem + ".json"));
  const std::vector<float> got = predict(lm);
  ASSERT_EQ(got.size(), c.want.size());
  const double err = max_abs_diff(got, c.want.data(), got.size());
  EXPECT_LE(err, 1e-5) << c.stem;
  std::printf("[ parity   ] %s max abs error %.3g\n", c.stem, err);
  const std::string dir = scratch_dir(std::string("tfop_") + c.stem);
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  for (const char* name : {"/m.h5", "/m.keras"}) {
    const LoadedModel back = load_keras_model(dir + name);
    EXPECT_EQ(predict(back), got) << c.stem << name;
    EXPECT_EQ(back.model->num_layers(), lm.model->num_layers()) << c.stem << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Synthetic, TfOpFiles, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.stem); });

// The .h5 writer puts the call back into the node as tf.keras writes it: one unwrapped entry for
// a single first argument, the constant form for a constant one, kwargs with tensor references.
TEST(TfOpFiles, H5WriterWritesTfKerasNodeForms) {
  const LoadedModel lm = load_keras_model(fixture("synthetic/tfop_unwrapped_k211.json"));
  const std::string path = scratch_dir("tfop_h5_nodes") + "/m.h5";
  save_keras_h5(path, *lm.model, lm.params.data());
  Json cfg;
  {
    auto lock = h5::hdf5_lock();
    cfg = Json::parse(h5::File::open(path).root().string_attr("model_config"));
  }
  std::map<std::string, Json> node;
  for (const Json& l : cfg["config"]["layers"])
    if (l.contains("inbound_nodes") && !l["inbound_nodes"].empty())
      node[l["name"].get<std::string>()] = l["inbound_nodes"][0];
  EXPECT_EQ(node["t1"], Json::parse(R"(["a",0,0,{"y":["b",0,0],"name":null}])"));
  EXPECT_EQ(node["t3"], Json::parse(R"(["_CONSTANT_VALUE",-1,1.0,{"y":["t2",0,0],"name":null}])"));
  EXPECT_EQ(node["t4"][1], Json::parse(R"(["a",0,0,{"axis":-1,"name":"concat"}])"));
  for (const Json& l : cfg["config"]["layers"])
    if (l["class_name"] == "TFOpLambda") {
      EXPECT_FALSE(l["config"].contains("call")) << l.dump();
    }
}

// The .keras writer writes Keras 3 operations (module keras.src.ops.*); a call Keras 3 has no
// operation for is refused by name.
TEST(TfOpFiles, KerasWriterWritesKeras3OperationsAndRefusesTransposedMatmul) {
  const LoadedModel lm = load_keras_model(fixture("synthetic/tfop_unwrapped_k211.json"));
  const Json cfg = keras_config_json(*lm.model);
  int ops = 0;
  for (const Json& l : cfg["config"]["layers"])
    if (l.value("module", std::string()).rfind("keras.src.ops.", 0) == 0) ++ops;
  EXPECT_EQ(ops, 12);
  const std::string dir = scratch_dir("tfop_refuse");
  const std::string path = dir + "/m.json";
  write_text(path, R"({"class_name":"Functional","config":{"name":"mm","layers":[
    {"class_name":"InputLayer","name":"a","inbound_nodes":[],
     "config":{"batch_input_shape":[null,2,3],"dtype":"float32","name":"a"}},
    {"class_name":"TFOpLambda","name":"mm","config":{"name":"mm","trainable":true,
     "dtype":"float32","function":"linalg.matmul"},
     "inbound_nodes":[["a",0,0,{"b":["a",0,0],"transpose_b":true,"name":null}]]}],
    "input_layers":[["a",0,0]],"output_layers":[["mm",0,0]]}})");
  const LoadedModel mm = load_keras_model(path);
  EXPECT_EQ(mm.model->output_shape(0), (Shape{2, 2}));
  std::string msg;
  try {
    save_keras(dir + "/mm.keras", *mm.model, mm.params.data());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("'mm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("transpose_a/transpose_b"), std::string::npos) << msg;
  save_keras_h5(dir + "/mm.h5", *mm.model, mm.params.data());  // tf.keras's form has it
  EXPECT_EQ(predict(load_keras_model(dir + "/mm.h5")), predict(mm));
}

std::string load_error(const std::string& path) {
  try {
    load_keras_model(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TfOpFiles, RefusesUnknownOperationsByName) {
  const std::string dir = scratch_dir("tfop_unknown");
  write_text(dir + "/tf.json", R"({"class_name":"Functional","config":{"name":"m","layers":[
    {"class_name":"InputLayer","name":"a","inbound_nodes":[],
     "config":{"batch_input_shape":[null,3],"dtype":"float32","name":"a"}},
    {"class_name":"TFOpLambda","name":"op","config":{"name":"op","trainable":true,
     "dtype":"float32","function":"math.cumsum"},
     "inbound_nodes":[["a",0,0,{"axis":1,"name":null}]]}],
    "input_layers":[["a",0,0]],"output_layers":[["op",0,0]]}})");
  const std::string tf = load_error(dir + "/tf.json");
  EXPECT_NE(tf.find("'math.cumsum'"), std::string::npos) << tf;
  EXPECT_NE(tf.find("math.reduce_mean"), std::string::npos) << tf;
  write_text(dir + "/k3.json", R"({"class_name":"Functional","config":{"name":"m","layers":[
    {"class_name":"InputLayer","name":"a","inbound_nodes":[],
     "config":{"batch_shape":[null,3],"dtype":"float32","name":"a"}},
    {"module":"keras.src.ops.numpy","class_name":"Cumsum","registered_name":"Cumsum","name":"op",
     "config":{"name":"op","axis":1},"inbound_nodes":[{"args":[{"class_name":"__keras_tensor__",
     "config":{"shape":[null,3],"dtype":"float32","keras_history":["a",0,0]}}],"kwargs":{}}]}],
    "input_layers":[["a",0,0]],"output_layers":[["op",0,0]]}})");
  const std::string k3 = load_error(dir + "/k3.json");
  EXPECT_NE(k3.find("'Cumsum'"), std::string::npos) << k3;
  EXPECT_NE(k3.find("Mean"), std::string::npos) << k3;
}

// ONNX export of the operations (checked structurally here; serve_test runs exported files
// through ONNX Runtime).
TEST(TfOpFiles, ExportsToOnnx) {
  for (const Case& c : cases()) {
    const LoadedModel lm = load_keras_model(fixture(std::string("synthetic/") + c.stem + ".json"));
    const std::string dir = scratch_dir(std::string("tfop_onnx_") + c.stem);
    EXPECT_NO_THROW(save_onnx(dir + "/m.onnx", *lm.model, lm.params.data())) << c.stem;
  }
}

// The real tf.keras transformers (MultiHeadAttention, TFOpLambda add / reduce_mean, and in geolife
// GlobalAveragePooling1D channels_first): every TFOpLambda of the file reads as a supported
// operation, the model predicts its expected outputs within 1e-4, and it is written back as .h5
// (tf.keras's TFOpLambda nodes) and .keras (Keras 3 operations) and read again with identical
// predictions.
TEST(RealFileNextTfOp, TransformersWithTfOpLambdaMatchAndRoundTrip) {
  for (const char* stem :
       {"sensor_transformer_reducemean_tf214", "geolife_transformer_tfoplambda_tf211"}) {
    const std::string dir = real_models_dir() + "/next";
    const std::string path = dir + "/" + stem + ".h5";
    Json cfg;
    {
      auto lock = h5::hdf5_lock();
      cfg = Json::parse(h5::File::open(path).root().string_attr("model_config"));
    }
    int ops = 0;
    for (const Json& l : cfg["config"]["layers"]) {
      if (!is_tf_op_entry(l)) continue;
      const TfOpCall c = read_tf_op_call(l, l["name"].get<std::string>());
      const TfOp op = parse_tf_op(c.config["function"], c.config["call"]);
      EXPECT_TRUE(op.kind == TfOpKind::kBinary || op.kind == TfOpKind::kReduce) << l.dump();
      ++ops;
    }
    EXPECT_GE(ops, 2) << stem;
    const LoadedModel lm = load_keras_model(path);
    const Array x = load_npy(dir + "/expected/" + stem + ".input.npy");
    const Array want = load_npy(dir + "/expected/" + stem + ".output.npy");
    const auto got = run_model(lm, x);
    ASSERT_EQ(got.size(), static_cast<size_t>(want.shape().size())) << stem;
    const double err = max_abs_diff(got, static_cast<const float*>(want.data()), got.size());
    EXPECT_LE(err, 1e-4) << stem;
    std::printf("[ parity   ] %s max abs error %.3g\n", stem, err);
    const std::string out = scratch_dir(std::string("tfop_real_") + stem);
    save_keras_h5(out + "/m.h5", *lm.model, lm.params.data());
    save_keras(out + "/m.keras", *lm.model, lm.params.data());
    for (const char* name : {"/m.h5", "/m.keras"}) {
      const LoadedModel back = load_keras_model(out + name);
      EXPECT_EQ(run_model(back, x), got) << stem << name;
      EXPECT_EQ(back.params, lm.params) << stem << name;
    }
  }
}

}  // namespace
}  // namespace nnfleet::test
