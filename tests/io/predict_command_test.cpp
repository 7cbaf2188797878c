// `nnfleet predict` and `nnfleet inspect` through their CLI11 commands: predictions match the
// reference and are identical for any number of workers, losses follow Keras, every input format
// works, and mismatches are named.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "io/model_summary.h"
#include "io_test_util.h"
#include "platform/files.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using test::fixture;

int run_cli(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  cli::add_inspect_command(app, run);
  cli::add_export_command(app, run);
  std::vector<const char*> argv = {"nnfleet"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

std::vector<float> floats(const Array& a) {
  const auto* p = static_cast<const float*>(a.data());
  return std::vector<float>(p, p + a.shape().size());
}

// Labels = the reference model's own argmax, so the loss is -log(max p).
std::string write_labels(const std::string& dir, const Array& ref, int k) {
  Array labels = Array::zeros(DType::kI32, Shape{ref.rows()});
  auto* l = static_cast<int32_t*>(labels.mutable_data());
  const auto* p = static_cast<const float*>(ref.data());
  for (int64_t i = 0; i < ref.rows(); ++i)
    l[i] = static_cast<int32_t>(std::max_element(p + i * k, p + (i + 1) * k) - (p + i * k));
  save_npy(dir + "/labels.npy", labels);
  return dir + "/labels.npy";
}

TEST(RealFilePredict, MatchesReferenceAndIsIdenticalForAnyWorkerCount) {
  const std::string dir = test::scratch_dir("predict_workers");
  const std::string x = fixture("expected/fmnist_cnn_k310.input.npy");
  const Array ref = load_npy(fixture("expected/fmnist_cnn_k310.output.npy"));
  const std::string y = write_labels(dir, ref, 10);
  std::vector<std::vector<float>> preds, losses;
  for (const char* w : {"1", "2", "3"}) {
    const std::string out = dir + "/pred" + w + ".npy", lout = dir + "/loss" + w + ".npy";
    ASSERT_EQ(run_cli({"predict", fixture("fmnist_cnn_k310.keras"), "--x", x, "--y", y, "--loss",
                       "sparse_categorical_crossentropy", "--batch", "5", "--workers", w, "--out",
                       out, "--loss-out", lout}),
              0);
    preds.push_back(floats(load_npy(out)));
    losses.push_back(floats(load_npy(lout)));
  }
  EXPECT_EQ(preds[0], preds[1]);
  EXPECT_EQ(preds[0], preds[2]);
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(losses[0], losses[2]);
  const auto want = floats(ref);
  ASSERT_EQ(preds[0].size(), want.size());
  EXPECT_LT(test::max_abs_diff(preds[0], want.data(), want.size()), 1e-4);
  for (size_t i = 0; i < losses[0].size(); ++i) {
    const float pmax = *std::max_element(want.begin() + i * 10, want.begin() + (i + 1) * 10);
    EXPECT_NEAR(losses[0][i], -std::log(std::max(pmax, 1e-7f)), 1e-4) << i;
  }
}

// Integer labels with categorical_crossentropy are refused, as training refuses them (and Keras):
// the same rule (target_shape_problem) names sparse_categorical_crossentropy as the fix. The
// file's own loss, sparse_categorical_crossentropy, takes them.
TEST(RealFilePredict, CategoricalCrossentropyRefusesIntegerLabelsAsTrainingDoes) {
  const std::string dir = test::scratch_dir("predict_onehot");
  const Array ref = load_npy(fixture("expected/fmnist_cnn_k310.output.npy"));
  const std::string y = write_labels(dir, ref, 10);
  try {
    run_cli({"predict", fixture("fmnist_cnn_k310.keras"), "--x",
             fixture("expected/fmnist_cnn_k310.input.npy"), "--y", y, "--loss",
             "categorical_crossentropy", "--out", dir + "/p.npy", "--loss-out", dir + "/cce.npy"});
    ADD_FAILURE() << "integer labels taken by categorical_crossentropy";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("for integer class labels use loss: "
                                         "sparse_categorical_crossentropy"),
              std::string::npos)
        << e.what();
  }
  ASSERT_EQ(run_cli({"predict", fixture("fmnist_cnn_k310.keras"), "--x",
                     fixture("expected/fmnist_cnn_k310.input.npy"), "--y", y, "--out",
                     dir + "/p.npy", "--loss-out", dir + "/scce.npy"}),
            0);
  EXPECT_EQ(load_npy(dir + "/scce.npy").rows(), ref.rows());
}

TEST(RealFilePredict, ReadsIdxWithScaleNpzKeyAndCsvWithLabel) {
  const std::string dir = test::scratch_dir("predict_formats");
  // IDX: the Fashion-MNIST images as uint8 (the reference input is them / 255).
  const Array x = load_npy(fixture("expected/fmnist_mlp_k390.input.npy"));
  std::string idx("\0\0\x08\x03", 4);
  for (uint32_t d : {16u, 28u, 28u})
    for (int s = 24; s >= 0; s -= 8) idx += static_cast<char>((d >> s) & 0xff);
  for (int64_t i = 0; i < x.shape().size(); ++i)
    idx += static_cast<char>(static_cast<uint8_t>(std::lround(x.at(i) * 255.0)));
  test::write_text(dir + "/images-idx3-ubyte", idx);
  ASSERT_EQ(
      run_cli({"predict", fixture("fmnist_mlp_k390.h5"), "--x", dir + "/images-idx3-ubyte",
               "--scale", "0.00392156862745098", "--workers", "2", "--out", dir + "/idx.npy"}),
      0);
  const auto want = floats(load_npy(fixture("expected/fmnist_mlp_k390.output.npy")));
  const auto got = floats(load_npy(dir + "/idx.npy"));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(test::max_abs_diff(got, want.data(), want.size()), 1e-4);

  // The same images as member "images" of an .npz archive, chosen with file.npz:images.
  write_zip(dir + "/data.npz",
            {{"labels.npy", test::read_text(fixture("synthetic/mlp.input.npy")), ""},
             {"images.npy", test::read_text(fixture("expected/fmnist_mlp_k390.input.npy")), ""}});
  ASSERT_EQ(run_cli({"predict", fixture("fmnist_mlp_k390.h5"), "--x", dir + "/data.npz:images",
                     "--out", dir + "/npz.npy"}),
            0);
  EXPECT_LT(test::max_abs_diff(floats(load_npy(dir + "/npz.npy")), want.data(), want.size()), 1e-4);

  // CSV with a label column, for the synthetic MLP (5 features).
  const Array mx = load_npy(fixture("synthetic/mlp.input.npy"));
  std::string csv = "a,b,label,c,d,e\n";
  for (int64_t r = 0; r < mx.rows(); ++r) {
    for (int c = 0; c < 5; ++c) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", mx.at(r * 5 + c));
      csv += buf;
      csv += c == 1 ? ",1," : c == 4 ? "\n" : ",";
    }
  }
  test::write_text(dir + "/mlp.csv", csv);
  ASSERT_EQ(run_cli({"predict", fixture("synthetic/mlp_fixed_ascii.h5"), "--x", dir + "/mlp.csv",
                     "--label", "label", "--out", dir + "/csv.npy"}),
            0);
  const auto mwant = floats(load_npy(fixture("synthetic/mlp.output.npy")));
  const auto mgot = floats(load_npy(dir + "/csv.npy"));
  ASSERT_EQ(mgot.size(), mwant.size());
  EXPECT_LT(test::max_abs_diff(mgot, mwant.data(), mwant.size()), 1e-5);
}

TEST(RealFilePredict, ArchitectureJsonTakesWeightsFile) {
  const std::string dir = test::scratch_dir("predict_json");
  ASSERT_EQ(run_cli({"predict", fixture("lenet5_k224.json"), "--weights",
                     fixture("lenet5_weights_k224.h5"), "--x",
                     fixture("expected/lenet5_weights_k224.input.npy"), "--out", dir + "/p.npy"}),
            0);
  const auto want = floats(load_npy(fixture("expected/lenet5_weights_k224.output.npy")));
  const auto got = floats(load_npy(dir + "/p.npy"));
  EXPECT_LT(test::max_abs_diff(got, want.data(), want.size()), 1e-4);
  try {
    run_cli({"predict", fixture("lenet5_k224.json"), "--x",
             fixture("expected/lenet5_weights_k224.input.npy"), "--out", dir + "/p.npy"});
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--weights"), std::string::npos) << e.what();
  }
}

TEST(RealFilePredict, ShapeMismatchNamesBothShapes) {
  const std::string dir = test::scratch_dir("predict_mismatch");
  try {
    run_cli({"predict", fixture("synthetic/mlp_vlen_utf8.h5"), "--x",
             fixture("expected/fmnist_mlp_k390.input.npy"), "--out", dir + "/p.npy"});
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[28,28]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  }
  EXPECT_FALSE(file_exists(dir + "/p.npy"));
}

// `--scale 1e39` (beyond float32: every output NaN, exit 0) and a scale that makes an input
// overflow are refused, naming --scale and what is expected; nothing is written.
TEST(PredictScale, RefusesAScaleThatIsNotAFiniteFloatOrOverflowsAnInput) {
  const std::string dir = test::scratch_dir("predict_scale");
  const std::vector<std::string> base = {"predict", fixture("synthetic/mlp_vlen_utf8.h5"),
                                         "--x",     fixture("synthetic/mlp.input.npy"),
                                         "--out",   dir + "/p.npy",
                                         "--scale"};
  for (const char* scale : {"1e39", "-1e300", "inf"}) {
    std::vector<std::string> args = base;
    args.push_back(scale);
    try {
      run_cli(args);
      ADD_FAILURE() << "predicted at --scale " << scale;
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("failed to predict with '"), std::string::npos) << m;
      EXPECT_NE(m.find("expected a finite number within float32's range"), std::string::npos) << m;
    }
  }
  // The file's largest value (about 1.97) times 3e38 is beyond float32 (3.4e38).
  std::vector<std::string> args = base;
  args.push_back("3e38");
  try {
    run_cli(args);
    ADD_FAILURE() << "predicted an overflowing input";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mlp.input.npy' holds "), std::string::npos) << m;
    EXPECT_NE(m.find("at --scale 3e+38; expected every scaled input within float32's range"),
              std::string::npos)
        << m;
  }
  EXPECT_FALSE(file_exists(dir + "/p.npy"));
  args.back() = "1e30";
  EXPECT_EQ(run_cli(args), 0);
  EXPECT_TRUE(file_exists(dir + "/p.npy"));
}

// `export --input-shape` sized only the dimensions a file leaves free and silently ignored a
// size contradicting one the file fixes.
TEST(Export, RefusesAnInputShapeThatContradictsTheFile) {
  const std::string dir = test::scratch_dir("export_input_shape");
  const std::string model = fixture("synthetic/mlp_vlen_utf8.h5");  // takes [5]
  try {
    run_cli({"export", model, "--to", dir + "/m.onnx", "--input-shape", "7"});
    FAIL() << "exported with a contradicting --input-shape";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--input-shape 7 contradicts the file's input"), std::string::npos) << m;
    EXPECT_NE(m.find("expected a sample shape of [5]"), std::string::npos) << m;
    EXPECT_NE(m.find("got [7]"), std::string::npos) << m;
  }
  EXPECT_FALSE(file_exists(dir + "/m.onnx"));
  EXPECT_THROW(run_cli({"export", model, "--to", dir + "/m.onnx", "--input-shape", "5",
                        "--input-shape", "5"}),
               Error);  // two shapes for one input
  EXPECT_EQ(run_cli({"export", model, "--to", dir + "/m.onnx", "--input-shape", "5"}), 0);
  EXPECT_TRUE(file_exists(dir + "/m.onnx"));
}

// The label error of predict did not name the labels file.
TEST(RealFilePredict, LabelOutOfRangeNamesTheLabelsFile) {
  const std::string dir = test::scratch_dir("predict_label_range");
  const int64_t n = load_npy(fixture("expected/fmnist_cnn_k310.input.npy")).rows();
  Array labels = Array::zeros(DType::kI32, Shape{n});
  static_cast<int32_t*>(labels.mutable_data())[3] = 10;
  save_npy(dir + "/bad_labels.npy", labels);
  try {
    run_cli({"predict", fixture("fmnist_cnn_k310.keras"), "--x",
             fixture("expected/fmnist_cnn_k310.input.npy"), "--y", dir + "/bad_labels.npy", "--out",
             dir + "/p.npy"});
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'" + dir + "/bad_labels.npy' has the label 10 at sample 3"),
              std::string::npos)
        << msg;
  }
  EXPECT_FALSE(file_exists(dir + "/p.npy"));
}

// A FIFO as the model or the inputs blocked predict in open() forever. It must fail at once; the
// call runs on a detached thread so a regression fails the test instead of hanging it.
TEST(RealFilePredict, FifoAsModelOrInputIsRefusedWithoutBlocking) {
  const std::string dir = test::scratch_dir("predict_fifo");
  const std::string fifo = dir + "/pipe.keras";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string input = fixture("expected/fmnist_cnn_k310.input.npy");
  const std::string out = dir + "/p.npy";
  for (const auto& args : {std::vector<std::string>{"predict", fifo, "--x", input, "--out", out},
                           std::vector<std::string>{"predict", fixture("fmnist_cnn_k310.keras"),
                                                    "--x", fifo, "--out", out}}) {
    auto state = std::make_shared<std::atomic<int>>(0);  // 1: the expected error, 2: other
    auto message = std::make_shared<std::string>();
    std::thread([args, state, message, dir] {
      try {
        run_cli(args);
        *state = 2;
      } catch (const Error& e) {
        *message = e.what();
        *state = 1;
      }
    }).detach();
    // A refusal takes microseconds; the bound only turns a regression (blocked on the FIFO)
    // into a failure instead of a hung suite, and no loaded machine comes near it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (*state == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(state->load(), 1) << args[1] << " " << args[3] << ": no error within 2 minutes";
    EXPECT_NE(message->find("pipe.keras': is a FIFO (named pipe); expected a regular file"),
              std::string::npos)
        << *message;
  }
}

TEST(RealFileInspect, SummaryListsLayersTotalsVersionAndTrainingConfig) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_k310.keras"));
  const std::string s = model_summary(lm, "fmnist_cnn_k310.keras");
  for (const char* want :
       {"Model: \"sequential\" (Sequential)", "conv2d (Conv2D)", "(None, 26, 26, 32)", "320",
        "dense_1 (Dense)", "(None, 10)", "Total params: 121,930", "Non-trainable params: 0",
        "Keras version: 3.10.0", "loss sparse_categorical_crossentropy",
        "optimizer Adam (learning_rate 0.001)", "metrics [\"accuracy\"]",
        "Optimizer state: 18 variables of 'adam'"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  const LoadedModel bn = load_keras_model(fixture("asl_cnn_functional_tf290.h5"));
  const std::string t = model_summary(bn, "asl.h5");
  for (const char* want : {"Connected to", "re_lu (ReLU)", "Non-trainable params: 6",
                           "backend tensorflow", "Keras version: 2.9.0"})
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
  EXPECT_EQ(run_cli({"inspect", fixture("fmnist_mlp_nested_tf214.keras")}), 0);
}

}  // namespace
}  // namespace nnfleet
