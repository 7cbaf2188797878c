// Real third-party Keras files with TextVectorization and string inputs (the shared folder's
// next/ set, MANIFEST.md there; never copied into the repository): each predicts its expected/
// outputs within 1e-4 from the NumPy unicode inputs, through the engine, the public C++ API and
// `nnfleet predict`, and is written back as .keras (vocabulary in the assets) and legacy .h5
// (vocabulary in the config) and read again with bit-identical predictions.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "io/keras/keras_writer.h"
#include "io/string_front.h"
#include "io_test_util.h"
#include "nnfleet/data.h"
#include "nnfleet/model.h"
#include "platform/zip_archive.h"

namespace nnfleet::test {
namespace {

std::string next_dir() { return real_models_dir() + "/next"; }

int run_cli(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  cli::add_inspect_command(app, run);
  std::vector<const char*> argv = {"nnfleet"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

std::vector<float> predict(const LoadedModel& lm, const Array& text) {
  return run_model(lm, bind_input(*lm.model, 0, text, "the texts"));
}

double error_against(const std::vector<float>& got, const std::string& stem) {
  const Array want = load_npy(next_dir() + "/expected/" + stem + ".output.npy");
  EXPECT_EQ(got.size(), static_cast<size_t>(want.shape().size())) << stem;
  return max_abs_diff(got, static_cast<const float*>(want.data()),
                      std::min(got.size(), static_cast<size_t>(want.shape().size())));
}

void expect_file(const std::string& stem) {
  const std::string file = next_dir() + "/" + stem + ".keras";
  const std::string input = next_dir() + "/expected/" + stem + ".input.npy";
  const Array text = load_npy(input);
  ASSERT_EQ(text.dtype(), DType::kStr);
  // The engine.
  const LoadedModel lm = load_keras_model(file);
  ASSERT_TRUE(lm.model->input(0).is_string);
  const std::vector<float> got = predict(lm, text);
  const double err = error_against(got, stem);
  EXPECT_LE(err, 1e-4) << stem;
  std::printf("[ parity   ] %s max abs error %.3g\n", stem.c_str(), err);
  // The public API, from the array nnfleet reads.
  const api::Array x = api::read_array(input);
  EXPECT_EQ(x.view().type, api::ElementType::kString);
  const api::Model m = api::Model::load(file);
  std::vector<float> out(got.size());
  m.predict({x.view()}, {std::span<float>(out)});
  EXPECT_EQ(out, got) << stem;
  // nnfleet predict.
  const std::string dir = scratch_dir("text_" + stem);
  ASSERT_EQ(run_cli({"predict", file, "--x", input, "--out", dir + "/p.npy"}), 0);
  const Array cli = load_npy(dir + "/p.npy");
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(cli.data()),
                               static_cast<const float*>(cli.data()) + cli.shape().size()),
            got);
  // Written back: .keras with the vocabulary in its assets, .h5 with it in the config.
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  const ZipReader z(dir + "/m.keras");
  EXPECT_TRUE(z.has("assets/layers/text_vectorization/vocabulary.txt"));
  EXPECT_EQ(read_text(dir + "/m.h5").find("\"vocabulary\": null"), std::string::npos);
  for (const char* name : {"/m.keras", "/m.h5"}) {
    const LoadedModel back = load_keras_model(dir + name);
    EXPECT_EQ(predict(back, text), got) << stem << name;
    EXPECT_EQ(back.params, lm.params) << stem << name;
    EXPECT_EQ(back.model->layer_keras_config(0), lm.model->layer_keras_config(0)) << name;
  }
}

TEST(RealFileText, BugReportVectorizerKeras392MakesKerasIds) {
  expect_file("bugreport_textvectorizer_k392");
}

TEST(RealFileText, ToxicityTextVectorizationKeras312MatchesReference) {
  expect_file("toxic_textvectorization_k312");
}

}  // namespace
}  // namespace nnfleet::test
