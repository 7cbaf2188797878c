// Real third-party Keras files with TextVectorization and string inputs (the shared folder's
// next/ set, MANIFEST.md there; never copied into the repository): each predicts its expected/
// outputs within 1e-4 from the NumPy unicode inputs, through the engine, the public C++ API and
// `nnfleet predict`, and is written back as .keras (vocabulary in the assets) and legacy .h5
// (vocabulary in the config) and read again with bit-identical predictions.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "fleet/fit/string_front.h"
#include "io/keras/keras_writer.h"
#include "io/model_summary.h"
#include "io/onnx/onnx_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
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
  cli::add_train_command(app, run);
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

// Sentences about cats (label 1) and about dogs (label 0), with punctuation and capitals.
std::vector<std::string> pet_texts(int n, std::vector<int32_t>* labels) {
  const char* cats[] = {"The cat sat.", "A CAT, purring!", "cats and a cat", "my cat sleeps"};
  const char* dogs[] = {"The dog barked.", "A DOG, running!", "dogs and a dog", "my dog eats"};
  std::vector<std::string> t;
  for (int i = 0; i < n; ++i) {
    t.push_back(i % 2 ? cats[i % 4] : dogs[i % 4]);
    labels->push_back(i % 2);
  }
  return t;
}

Json train_and_read(const std::string& dir, const std::string& data_yaml, const char* layers) {
  write_text(dir + "/plan.yaml", "seed: 3\ndata:\n  train: " + data_yaml +
                                     "\nmodels:\n  - name: text\n    epochs: 30\n"
                                     "    batch_size: 8\n    loss: binary_crossentropy\n"
                                     "    metrics: [accuracy]\n"
                                     "    optimizer: {Adam: {learning_rate: 0.05}}\n"
                                     "    layers:\n" +
                                     std::string(layers));
  EXPECT_EQ(
      run_cli({"train", dir + "/plan.yaml", "--out", dir + "/run", "--workers", "1", "--quiet"}),
      0);
  return Json::parse(read_text(dir + "/run/results.json"))["models"][0];
}

// An adapted vectorizer (no vocabulary given) on a quoted CSV text column, then an Embedding:
// trains to separate the two topics, and the saved .keras predicts from strings again.
TEST(StringTraining, AdaptedTextVectorizationTrainsOnACsvTextColumn) {
  const std::string dir = scratch_dir("text_train_csv");
  std::vector<int32_t> labels;
  const auto texts = pet_texts(32, &labels);
  std::string csv = "text,y\n";
  for (size_t i = 0; i < texts.size(); ++i)
    csv += "\"" + texts[i] + "\"," + std::to_string(labels[i]) + "\n";
  write_text(dir + "/t.csv", csv);
  const Json m = train_and_read(dir, "{csv: " + dir + "/t.csv, label: y}",
                                "      - TextVectorization: {output_sequence_length: 6}\n"
                                "      - Embedding: {input_dim: 16, output_dim: 4}\n"
                                "      - GlobalAveragePooling1D: {}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  const LoadedModel lm = load_keras_model(dir + "/run/models/text.keras");
  ASSERT_TRUE(lm.model->input(0).is_string);
  const auto out = predict(lm, Array::strings(Shape{2}, {"the cat sat", "the dog barked"}));
  EXPECT_GT(out[0], 0.5f);
  EXPECT_LT(out[1], 0.5f);
  // Keras's adapt order: by count, ties by the term in reverse byte order.
  const Json vocab = lm.model->layer_keras_config(0)["vocabulary"];
  ASSERT_GE(vocab.size(), 4u);
  EXPECT_EQ(vocab[0], "");
  EXPECT_EQ(vocab[1], "[UNK]");
}

// A given vocabulary in multi_hot mode on a .npy of NumPy unicode strings.
TEST(StringTraining, MultiHotVocabularyTrainsOnAUnicodeNpy) {
  const std::string dir = scratch_dir("text_train_npy");
  std::vector<int32_t> labels;
  auto texts = pet_texts(32, &labels);
  save_npy(dir + "/x.npy", Array::strings(Shape{32}, texts));
  Array y = Array::zeros(DType::kI32, Shape{32});
  std::copy(labels.begin(), labels.end(), static_cast<int32_t*>(y.mutable_data()));
  save_npy(dir + "/y.npy", y);
  ASSERT_EQ(load_npy(dir + "/x.npy").strings()[1], texts[1]);
  const Json m = train_and_read(dir, "{x: " + dir + "/x.npy, y: " + dir + "/y.npy}",
                                "      - TextVectorization: {output_mode: multi_hot, "
                                "vocabulary: [cat, dog, the, a]}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  EXPECT_GT(m["metrics"].value("accuracy", 0.0), 0.9) << m.dump();
}

TEST(StringInputs, OnnxExportRefusesTextVectorizationByName) {
  const LoadedModel lm = load_keras_model(next_dir() + "/toxic_textvectorization_k312.keras");
  try {
    check_onnx_export(*lm.model);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("text_vectorization"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("reads strings"), std::string::npos) << e.what();
  }
}

TEST(StringInputs, InspectShowsAStringInput) {
  const std::string s =
      model_summary(load_keras_model(next_dir() + "/toxic_textvectorization_k312.keras"), "t");
  EXPECT_NE(s.find("(InputLayer, dtype string)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 250)"), std::string::npos) << s;
}

TEST(StringInputs, NumbersForAStringInputAreRefusedByName) {
  const LoadedModel lm = load_keras_model(next_dir() + "/bugreport_textvectorizer_k392.keras");
  try {
    bind_input(*lm.model, 0, Array::zeros(DType::kF32, Shape{2, 1}), "'x.npy'");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("takes strings"), std::string::npos) << e.what();
  }
}

TEST(StringInputs, TextVectorizationStandardizesAndSplitsAsKeras) {
  const auto tv = make_layer(
      "TextVectorization",
      Json{{"output_sequence_length", 6}, {"vocabulary", Json::array({"hello", "world", "it's"})}},
      ConfigMode::kPlan, "tv");
  const auto& sl = dynamic_cast<const StringLayer&>(*tv);
  const std::string text[] = {"  Hello,\tWORLD!!  its\nÉtÉ hello"};
  float ids[6];
  sl.encode(text, 1, 1, ids);
  // "hello world its Été hello": its (no quote after stripping) and the non-ASCII capital are
  // unknown (1); padding 0.
  const std::vector<float> want = {2, 3, 1, 1, 2, 0};
  EXPECT_EQ(std::vector<float>(ids, ids + 6), want);
}

}  // namespace
}  // namespace nnfleet::test
