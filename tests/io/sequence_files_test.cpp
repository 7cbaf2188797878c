// Real third-party Keras files with sequence layers (Conv1D, 1-D pooling, Embedding, Dense on
// rank 3, Reshape with -1), read from the shared folder (NNFLEET_KERAS_MODELS, else
// ../shared/keras-models next to the source tree), never copied into the repository: each loads,
// predicts within 1e-4 of its independent reference, and is written back as .keras and legacy
// .h5 with identical predictions and its regularizers kept.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "io/keras/hdf5.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

using test::fixture;  // a name outside synthetic/ is a file of the shared real set

struct SequenceCase {
  const char* file;
  const char* stem;
  Shape input, output;
};

class SequenceFileParity : public ::testing::TestWithParam<SequenceCase> {};

TEST_P(SequenceFileParity, PredictionsMatchReferenceWithin1e4) {
  const SequenceCase& c = GetParam();
  const LoadedModel lm = load_keras_model(fixture(c.file));
  ASSERT_TRUE(lm.has_weights);
  EXPECT_EQ(lm.model->input_shape(), c.input);
  EXPECT_EQ(lm.model->output_shape(), c.output);
  const Array x = load_npy(fixture(std::string("expected/") + c.stem + ".input.npy"));
  const Array y = load_npy(fixture(std::string("expected/") + c.stem + ".output.npy"));
  ASSERT_EQ(y.dtype(), DType::kF32);
  const std::vector<float> out = test::run_model(lm, x);
  ASSERT_EQ(out.size(), static_cast<size_t>(y.shape().size()));
  const double err = test::max_abs_diff(out, static_cast<const float*>(y.data()), out.size());
  std::printf("[ parity   ] %-36s max abs error %.3g\n", c.file, err);
  RecordProperty("max_abs_error", std::to_string(err));
  EXPECT_LT(err, 1e-4) << c.file;
}

TEST_P(SequenceFileParity, WrittenBackAsKerasAndH5PredictsIdentically) {
  const SequenceCase& c = GetParam();
  const LoadedModel lm = load_keras_model(fixture(c.file));
  const Array x = load_npy(fixture(std::string("expected/") + c.stem + ".input.npy"));
  const std::vector<float> want = test::run_model(lm, x);
  const std::string dir = test::scratch_dir(std::string("sequence_") + c.stem);
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  save_keras(dir + "/m.keras", *lm.model, lm.params.data(), info);
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data(), info);
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.params.size(), lm.params.size());
    EXPECT_EQ(back.params, lm.params);
    ASSERT_EQ(back.model->num_layers(), lm.model->num_layers());
    for (size_t i = 0; i < lm.model->num_layers(); ++i)
      EXPECT_EQ(back.model->layer(i).keras_config(), lm.model->layer(i).keras_config());
    EXPECT_EQ(test::run_model(back, x), want);  // bit-identical
  }
}

INSTANTIATE_TEST_SUITE_P(
    RealFiles, SequenceFileParity,
    ::testing::Values(SequenceCase{"co_sensor_conv1d_gap_k360.h5", "co_sensor_conv1d_gap_k360",
                                   Shape{60, 4}, Shape{1}},
                      SequenceCase{"imdb_embed_flatten_k224.h5", "imdb_embed_flatten_k224",
                                   Shape{100}, Shape{1}},
                      SequenceCase{"iri_tcn_conv1d_causal_l1_k392.h5",
                                   "iri_tcn_conv1d_causal_l1_k392", Shape{8, 12}, Shape{1}}),
    [](const ::testing::TestParamInfo<SequenceCase>& info) {
      std::string s = info.param.stem;
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

TEST(RealFileSequence, CausalTcnKeepsItsL1RegularizersAndTrainsWithThem) {
  const LoadedModel lm = load_keras_model(fixture("iri_tcn_conv1d_causal_l1_k392.h5"));
  const Json reg = lm.model->layer_keras_config(0)["kernel_regularizer"];
  EXPECT_EQ(reg.value("class_name", ""), "L1");
  EXPECT_NEAR(reg["config"]["l1"].get<double>(), 1e-5, 1e-12);
  EXPECT_EQ(lm.model->layer(0).keras_config()["padding"], "causal");
  EXPECT_EQ(lm.model->training_refusal(), "");
  ASSERT_FALSE(lm.model->training(0).regularizers.empty());
  EXPECT_NEAR(lm.model->training(0).regularizers[0].second.l1, 1e-5, 1e-12);
}

TEST(RealFileSequence, EmbeddingModelReadsIdsAndNamesTheRowOfABadOne) {
  const LoadedModel lm = load_keras_model(fixture("imdb_embed_flatten_k224.h5"));
  EXPECT_EQ(lm.model->id_input().limit, 10000);
  EXPECT_EQ(lm.model->layer(0).keras_config()["input_length"], 100);
  const std::string dir = test::scratch_dir("sequence_bad_id");
  // int64 ids, as Keras's pad_sequences gives them; row 2 holds 10000, one past the table.
  Array ids = Array::zeros(DType::kI64, Shape{3, 100});
  auto* v = static_cast<int64_t*>(ids.mutable_data());
  for (int64_t i = 0; i < 300; ++i) v[i] = (i * 37) % 10000;
  v[2 * 100 + 17] = 10000;
  save_npy(dir + "/ids.npy", ids);
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  const std::string model = fixture("imdb_embed_flatten_k224.h5"), x = dir + "/ids.npy",
                    out = dir + "/pred.npy";
  std::vector<const char*> argv = {"nnfleet", "predict", model.c_str(), "--x",
                                   x.c_str(), "--out",   out.c_str()};
  app.parse(static_cast<int>(argv.size()), argv.data());
  try {
    run();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("row 2 of '" + x +
                                         "' holds 10000, not an id the "
                                         "Embedding 'embedding_1' has; expected integers in "
                                         "[0, 10000)"),
              std::string::npos)
        << e.what();
  }
  // Valid int64 ids predict the same as the same ids given as floats.
  v[2 * 100 + 17] = 9999;
  Array as_float = Array::zeros(DType::kF32, Shape{3, 100});
  for (int64_t i = 0; i < 300; ++i) static_cast<float*>(as_float.mutable_data())[i] = float(v[i]);
  EXPECT_EQ(test::run_model(lm, ids), test::run_model(lm, as_float));
}

TEST(RealFileSequence, ConvPoolReshapePartOfTheConv1dLstmModelBuilds) {
  // The file's LSTMs come with the recurrent layers (issue 11); the layers before them must build
  // from the file's own configs: Conv1D 10 -> 8, MaxPooling1D -> 4, Conv1D -> 3, MaxPooling1D
  // over an odd length -> 1 (floor), Flatten -> 32, Reshape((-1, 16)) -> (2, 16).
  Json cfg;
  {
    auto lock = h5::hdf5_lock();
    const h5::File f = h5::File::open(fixture("synth_conv1d_maxpool_lstm_tf2131.h5"));
    cfg = Json::parse(f.root().string_attr("model_config"));
  }
  std::vector<std::unique_ptr<Layer>> layers;
  for (const Json& l : cfg["config"]["layers"]) {
    const std::string cls = l["class_name"].get<std::string>();
    if (cls == "InputLayer") continue;
    if (cls == "LSTM") break;
    layers.push_back(make_layer(cls, l["config"], ConfigMode::kKeras, "layer"));
  }
  ASSERT_EQ(layers.size(), 6u);
  const auto m = Model::sequential("prefix", Shape{10, 1}, std::move(layers));
  EXPECT_EQ(m->planned(1).out_shape, (Shape{4, 32}));
  EXPECT_EQ(m->planned(3).out_shape, (Shape{1, 32}));
  EXPECT_EQ(m->output_shape(), (Shape{2, 16}));
}

}  // namespace
}  // namespace nnfleet
