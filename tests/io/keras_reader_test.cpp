// Loading real Keras files (the shared real set, ../shared/keras-models, see its MANIFEST.md) and
// checking their predictions against the reference outputs; refusing what nnfleet cannot run, by
// name.
#include "io/keras/keras_reader.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "io_test_util.h"

namespace nnfleet {
namespace {

using test::file_error_of;
using test::fixture;

struct ParityCase {
  const char* model;
  const char* weights;  // "" when the model file has them
  const char* stem;     // <stem>.input.npy and <stem>.output.npy
};

class KerasParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(KerasParity, PredictionsMatchReferenceWithin1e4) {
  const ParityCase& c = GetParam();
  SCOPED_TRACE(c.model);
  const LoadedModel lm =
      load_keras_model(fixture(c.model), *c.weights ? fixture(c.weights) : std::string());
  ASSERT_TRUE(lm.has_weights);
  const Array x = load_npy(fixture(std::string(c.stem) + ".input.npy"));
  const Array y = load_npy(fixture(std::string(c.stem) + ".output.npy"));
  ASSERT_EQ(y.dtype(), DType::kF32);
  const std::vector<float> out = test::run_model(lm, x);
  ASSERT_EQ(out.size(), static_cast<size_t>(y.shape().size()));
  const double err = test::max_abs_diff(out, static_cast<const float*>(y.data()), out.size());
  std::printf("[ parity   ] %-32s max abs error %.3g\n", c.model, err);
  RecordProperty("max_abs_error", std::to_string(err));
  EXPECT_LT(err, 1e-4) << c.model;
}

INSTANTIATE_TEST_SUITE_P(
    RealFiles, KerasParity,
    ::testing::Values(
        ParityCase{"fmnist_cnn_bn_k216.h5", "", "expected/fmnist_cnn_bn_k216"},
        ParityCase{"mnist_cnn_raw_k224.h5", "", "expected/mnist_cnn_raw_k224"},
        ParityCase{"mnist_mlp_functional_tf224.h5", "", "expected/mnist_mlp_functional_tf224"},
        ParityCase{"asl_cnn_functional_tf290.h5", "", "expected/asl_cnn_functional_tf290"},
        ParityCase{"fmnist_mlp_k390.h5", "", "expected/fmnist_mlp_k390"},
        ParityCase{"lenet5_k224.json", "lenet5_weights_k224.h5", "expected/lenet5_weights_k224"},
        ParityCase{"fmnist_cnn_k310.keras", "", "expected/fmnist_cnn_k310"},
        ParityCase{"fmnist_mlp_nested_tf214.keras", "", "expected/fmnist_mlp_nested_tf214"},
        ParityCase{"fmnist_mlp_k3_arch.json", "fmnist_mlp_k390.h5", "expected/fmnist_mlp_k390"},
        ParityCase{"mnist_denoise_upsampling_k202.json", "mnist_denoise_upsampling_weights_k202.h5",
                   "expected/mnist_denoise_upsampling_weights_k202"}),
    [](const ::testing::TestParamInfo<ParityCase>& info) {
      std::string s = info.param.model;
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

// Synthetic files from tools/make_keras_fixtures.py: every h5py string form, split name lists,
// a nested model in a legacy file, and a Keras 3 Functional with the Keras-only layer classes.
INSTANTIATE_TEST_SUITE_P(
    SyntheticFiles, KerasParity,
    ::testing::Values(ParityCase{"synthetic/mlp_vlen_utf8.h5", "", "synthetic/mlp"},
                      ParityCase{"synthetic/mlp_vlen_ascii.h5", "", "synthetic/mlp"},
                      ParityCase{"synthetic/mlp_fixed_ascii.h5", "", "synthetic/mlp"},
                      ParityCase{"synthetic/mlp_fixed_utf8.h5", "", "synthetic/mlp"},
                      ParityCase{"synthetic/mlp_split.h5", "", "synthetic/mlp"},
                      ParityCase{"synthetic/nested_legacy.h5", "", "synthetic/nested_legacy"},
                      ParityCase{"synthetic/nested_frozen_legacy.h5", "",
                                 "synthetic/nested_frozen_legacy"},
                      ParityCase{"synthetic/functional_k3.keras", "", "synthetic/functional_k3"},
                      ParityCase{"synthetic/functional_k3.json",
                                 "synthetic/functional_k3.weights.h5", "synthetic/functional_k3"},
                      ParityCase{"synthetic/functional_k3.json", "synthetic/functional_k3.keras",
                                 "synthetic/functional_k3"}),
    [](const ::testing::TestParamInfo<ParityCase>& info) {
      std::string s = std::string(info.param.model) + "_" + std::to_string(info.index);
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

TEST(RealFileImport, ReadsVersionBackendAndTrainingConfigOfLegacyH5) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_bn_k216.h5"));
  EXPECT_EQ(lm.format, "h5");
  EXPECT_EQ(lm.class_name, "Sequential");
  EXPECT_EQ(lm.keras_version, "2.1.6");
  EXPECT_EQ(lm.backend, "tensorflow");
  EXPECT_EQ(lm.training_config.value("loss", ""), "categorical_crossentropy");
  EXPECT_EQ(lm.optimizer_state_info.value("iterations", int64_t{0}), 4690);
  EXPECT_EQ(lm.model->input_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(lm.model->output_shape(), (Shape{10}));
  // Old Sequential form: a bare list of layers with batch_input_shape on the first one.
  EXPECT_EQ(lm.model->layer(0).name(), "conv2d_1");
}

TEST(RealFileImport, ReadsFunctionalModelClassNamedModel) {
  const LoadedModel lm = load_keras_model(fixture("mnist_mlp_functional_tf224.h5"));
  EXPECT_EQ(lm.class_name, "Functional");
  EXPECT_EQ(lm.model->name(), "3_layer_mlp");
  EXPECT_EQ(lm.model->input_name(), "digits");
  EXPECT_EQ(lm.keras_version, "2.2.4-tf");
  EXPECT_EQ(lm.model->num_layers(), 3u);
}

TEST(RealFileImport, ReadsKeras3ArchiveWithCompileConfigAndOptimizerState) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_k310.keras"));
  EXPECT_EQ(lm.format, "keras");
  EXPECT_EQ(lm.keras_version, "3.10.0");
  ASSERT_TRUE(lm.training_config.is_object());
  EXPECT_EQ(lm.training_config["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(lm.optimizer_state_info.value("variables", 0), 18);
  EXPECT_EQ(lm.optimizer_state_info.value("name", ""), "adam");
  EXPECT_EQ(lm.optimizer.kind, OptKind::kAdam);
  EXPECT_EQ(lm.optimizer_state.size(), 2 * lm.model->trainable_params());
  EXPECT_GT(lm.iterations, 0);
}

TEST(RealFileImport, FlattensNestedSequentialWrittenOnWindows) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_mlp_nested_tf214.keras"));
  ASSERT_EQ(lm.model->num_layers(), 4u);  // Flatten, Dense, Dense, Softmax
  EXPECT_EQ(lm.model->layer(0).class_name(), std::string("Flatten"));
  EXPECT_EQ(lm.model->layer(3).class_name(), std::string("Softmax"));
  EXPECT_EQ(lm.keras_version, "2.14.0");
}

TEST(RealFileImport, ArchitectureJsonAloneHasNoWeights) {
  const LoadedModel lm = load_keras_model(fixture("lenet5_k224.json"));
  EXPECT_EQ(lm.format, "json");
  EXPECT_FALSE(lm.has_weights);
  EXPECT_EQ(lm.keras_version, "2.2.4");
  EXPECT_EQ(lm.model->input_shape(), (Shape{32, 32, 1}));
}

TEST(RealFileImport, LoadsSaveWeightsFileOntoAModelBuiltElsewhere) {
  const LoadedModel arch = load_keras_model(fixture("lenet5_k224.json"));
  std::vector<float> params(arch.params.size(), 0.0f);
  load_weights_h5(fixture("lenet5_weights_k224.h5"), *arch.model, params.data());
  const Array x = load_npy(fixture("expected/lenet5_weights_k224.input.npy"));
  const Array y = load_npy(fixture("expected/lenet5_weights_k224.output.npy"));
  const auto out = test::run_model(arch.model, params.data(), x);
  EXPECT_LT(test::max_abs_diff(out, static_cast<const float*>(y.data()), out.size()), 1e-4);
}

TEST(RealFileImport, RefusesWeightsOnlyFileAsModelWithHint) {
  const std::string msg =
      file_error_of([] { load_keras_model(fixture("lenet5_weights_k224.h5")); });
  EXPECT_NE(msg.find("weights-only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--weights"), std::string::npos) << msg;
}

TEST(RealFileImport, RefusesWeightsOfAnotherArchitecture) {
  const std::string msg = file_error_of(
      [] { load_keras_model(fixture("lenet5_k224.json"), fixture("mnist_cnn_raw_k224.h5")); });
  EXPECT_NE(msg.find("the file has weights for 3 layers (conv2d_1, conv2d_2, dense_1)"),
            std::string::npos)
      << msg;
}

TEST(KerasImport, RefusesFilesThatAreNotKerasModels) {
  const std::string dir = test::scratch_dir("not_keras");
  test::write_text(dir + "/x.h5", "hello, I am not a model\n");
  std::string msg = file_error_of([&] { load_keras_model(dir + "/x.h5"); });
  EXPECT_NE(msg.find("not a Keras model file"), std::string::npos) << msg;
  msg = file_error_of([&] { load_keras_model(dir + "/missing.keras"); });
  EXPECT_NE(msg.find("missing.keras"), std::string::npos) << msg;
}

// Architecture JSONs written in the test: the smallest configs that show each refusal.
std::string write_json(const std::string& name, const Json& j) {
  const std::string path = test::scratch_dir("json_" + name) + "/" + name + ".json";
  test::write_text(path, j.dump());
  return path;
}

Json input_layer(const Json& shape) {
  return {{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", shape}, {"name", "in"}}}};
}

TEST(KerasImport, RejectsLambdaLayerByName) {
  const Json m = {{"class_name", "Sequential"},
                  {"config",
                   {{"name", "s"},
                    {"layers",
                     {input_layer({nullptr, 4}),
                      {{"class_name", "Lambda"},
                       {"config", {{"name", "my_lambda"}, {"function", "4wEAAAAAAAAA..."}}}}}}}}};
  const std::string msg = file_error_of([&] { load_keras_model(write_json("lambda", m)); });
  EXPECT_NE(msg.find("layer 'my_lambda' has class 'Lambda'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Dense"), std::string::npos) << msg;
  EXPECT_NE(msg.find("InputLayer, Sequential, Functional"), std::string::npos) << msg;
}

TEST(KerasImport, RejectsCustomRegisteredClassEvenWithABuiltinName) {
  const Json m = {{"module", "keras"},
                  {"class_name", "Sequential"},
                  {"config",
                   {{"name", "s"},
                    {"layers",
                     {input_layer({nullptr, 4}),
                      {{"module", "my_package.layers"},
                       {"class_name", "Dense"},
                       {"registered_name", "Custom>Dense"},
                       {"config", {{"name", "custom_dense"}, {"units", 2}}}}}}}}};
  const std::string msg = file_error_of([&] { load_keras_model(write_json("custom", m)); });
  EXPECT_NE(msg.find("layer 'custom_dense'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_package.layers"), std::string::npos) << msg;
}

TEST(KerasImport, RejectsUnsupportedOptionNamingLayerAndKey) {
  // Keras's regularizers and constraints are read; a constraint class Keras lacks is refused.
  const Json reg = {{"class_name", "MaxNormish"}, {"config", {{"max_value", 2.0}}}};
  const Json m = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "s"},
        {"layers",
         {input_layer({nullptr, 4}),
          {{"class_name", "Dense"},
           {"config", {{"name", "dense_7"}, {"units", 2}, {"kernel_constraint", reg}}}}}}}}};
  const std::string msg = file_error_of([&] { load_keras_model(write_json("option", m)); });
  EXPECT_NE(msg.find("layer 'dense_7' (Dense)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel_constraint"), std::string::npos) << msg;
}

// A layer called twice (here on its own output) is one layer whose second call shares its
// weights (issue 35; it used to be refused); a node index that is not one of its calls is
// refused naming the layer and the calls it has.
TEST(KerasImport, LoadsASharedLayerAndRefusesANodeItDoesNotHave) {
  const Json dense = {
      {"class_name", "Dense"},
      {"name", "shared"},
      {"config", {{"name", "shared"}, {"units", 4}}},
      {"inbound_nodes", {{{"in", 0, 0, Json::object()}}, {{"shared", 0, 0, Json::object()}}}}};
  const Json in = {{"class_name", "InputLayer"},
                   {"name", "in"},
                   {"config", {{"batch_input_shape", {nullptr, 4}}, {"name", "in"}}},
                   {"inbound_nodes", Json::array()}};
  Json m = {{"class_name", "Functional"},
            {"config",
             {{"name", "f"},
              {"layers", {in, dense}},
              {"input_layers", {{"in", 0, 0}}},
              {"output_layers", {{"shared", 1, 0}}}}}};
  const LoadedModel lm = load_keras_model(write_json("shared", m));
  ASSERT_EQ(lm.model->num_layers(), 2u);
  EXPECT_EQ(lm.model->shares(1), 0);
  EXPECT_EQ(lm.model->layer_inputs(1), std::vector<int>{1});
  EXPECT_EQ(lm.model->output_node(0), 2);
  EXPECT_EQ(lm.model->trainable_params(), 4u * 4 + 4);
  m["config"]["output_layers"][0][1] = 3;
  const std::string msg = file_error_of([&] { load_keras_model(write_json("shared_bad", m)); });
  EXPECT_NE(msg.find("uses node 3 of layer 'shared', which is called 2 times"), std::string::npos)
      << msg;
}

TEST(KerasImport, RejectsSubclassedModel) {
  const Json m = {{"class_name", "MyModel"}, {"config", {{"name", "x"}}}};
  const std::string msg = file_error_of([&] { load_keras_model(write_json("subclassed", m)); });
  EXPECT_NE(msg.find("class 'MyModel'"), std::string::npos) << msg;
}

// A free (None) input dimension takes the data's size; without data, or with data of another
// rank, the error names the file's shape and the data's.
TEST(KerasImport, FreeInputDimensionsTakeTheDataSize) {
  const Json m = {{"class_name", "Sequential"},
                  {"config",
                   {{"name", "s"},
                    {"layers",
                     {input_layer({nullptr, nullptr, nullptr, 3}),
                      {{"class_name", "GlobalAveragePooling2D"}, {"config", {{"name", "g"}}}}}}}}};
  const std::string path = write_json("free_dims", m);
  std::string msg = file_error_of([&] { load_keras_model(path); });
  EXPECT_NE(msg.find("[null,null,null,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free (None) dimension"), std::string::npos) << msg;
  const Shape images{5, 7, 3};
  const LoadedModel lm = load_keras_model(path, "", &images);
  EXPECT_EQ(lm.model->input_shape(), images);
  EXPECT_EQ(lm.model->output_shape(), Shape{3});
  const Shape flat{35, 3};
  msg = file_error_of([&] { load_keras_model(path, "", &flat); });
  EXPECT_NE(msg.find("got samples of shape [35,3]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace nnfleet
