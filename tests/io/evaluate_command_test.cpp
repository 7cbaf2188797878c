// `nnfleet evaluate` through its CLI11 command: on shared Keras models it gives the accuracy that
// MANIFEST.md records for them, its numbers do not depend on --workers, --metrics overrides the
// file's metrics, and --loss-out writes predict's per-sample losses; on a model nnfleet trained
// with the epoch-level metrics it reports what training computed; targets that are not finite
// are refused by file and row.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <map>

#include "../fleet/fleet_test_util.h"
#include "commands.h"
#include "io_test_util.h"
#include "nnfleet/run.h"

namespace nnfleet {
namespace {

// Runs `nnfleet evaluate ...` in-process and returns what it printed on stdout.
std::string evaluate(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_evaluate_command(app, run);
  std::vector<const char*> argv = {"nnfleet", "evaluate"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  testing::internal::CaptureStdout();
  int code = -1;
  try {
    code = run();
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  return out;
}

Json evaluate_json(std::vector<std::string> args) {
  args.push_back("--json");
  return Json::parse(evaluate(args));
}

TEST(RealFileEvaluate, MnistCnnGivesTheManifestAccuracyOnReducedMnist) {
  // MANIFEST.md: mnist_cnn_raw_k224.h5 on data/reduced_mnist_test1000.npz, raw pixels: 0.983.
  const std::string data = test::fixture("data/reduced_mnist_test1000.npz");
  const std::vector<std::string> args = {test::fixture("mnist_cnn_raw_k224.h5"), "--x",
                                         data + ":images", "--y", data + ":labels"};
  std::vector<std::string> one = args, two = args;
  one.insert(one.end(), {"--workers", "1", "--batch", "64"});
  two.insert(two.end(), {"--workers", "2", "--batch", "64"});
  const Json a = evaluate_json(one), b = evaluate_json(two);
  EXPECT_EQ(a.dump(), b.dump());  // bit-identical for any --workers
  ASSERT_TRUE(a.contains("accuracy")) << a.dump();
  EXPECT_DOUBLE_EQ(a["accuracy"].get<double>(), 0.983);
  EXPECT_EQ(a["samples"].get<int>(), 1000);
  EXPECT_GT(a["loss"].get<double>(), 0.0);
  EXPECT_LT(a["loss"].get<double>(), 0.2);
  // The line form says the same.
  const std::string line = evaluate(one);
  EXPECT_NE(line.find("1000 samples - loss: "), std::string::npos) << line;
  EXPECT_NE(line.find(" - accuracy: 0.9830"), std::string::npos) << line;
}

TEST(RealFileEvaluate, FashionMlpGivesTheManifestAccuracyOnFashionMnistTest) {
  // MANIFEST.md: fmnist_mlp_k390.h5 on Fashion-MNIST t10k / 255: 0.8827 (the repository's own
  // test_acc.txt). Its training_config: sparse_categorical_crossentropy, metrics ["accuracy"].
  const std::string fm = "/usr/share/datasets/fashion-mnist/";
  const Json j =
      evaluate_json({test::fixture("fmnist_mlp_k390.h5"), "--x", fm + "t10k-images-idx3-ubyte.gz",
                     "--y", fm + "t10k-labels-idx1-ubyte.gz", "--scale", "0.00392156862745098"});
  ASSERT_TRUE(j.contains("accuracy")) << j.dump();
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.8827);
  EXPECT_EQ(j["samples"].get<int>(), 10000);
}

TEST(RealFileEvaluate, MetricsFlagOverridesTheFileAndLossOutMatchesTheLoss) {
  const std::string dir = test::scratch_dir("evaluate_metrics");
  const std::string data = test::fixture("data/reduced_mnist_test1000.npz");
  const Json j = evaluate_json({test::fixture("mnist_cnn_raw_k224.h5"), "--x", data + ":images",
                                "--y", data + ":labels", "--metrics",
                                "sparse_categorical_accuracy,sparse_top_k_categorical_accuracy",
                                "--loss-out", dir + "/loss.npy"});
  EXPECT_FALSE(j.contains("accuracy")) << j.dump();
  EXPECT_DOUBLE_EQ(j["sparse_categorical_accuracy"].get<double>(), 0.983);
  EXPECT_GE(j["sparse_top_k_categorical_accuracy"].get<double>(), 0.983);
  const Array l = load_npy(dir + "/loss.npy");
  ASSERT_EQ(l.rows(), 1000);
  double sum = 0.0;
  for (int64_t i = 0; i < l.rows(); ++i) sum += l.at(i);
  EXPECT_NEAR(sum / 1000.0, j["loss"].get<double>(), 1e-12);
}

TEST(RealFileEvaluate, SeveralOutputsReportWeightedLossAndPerOutputLosses) {
  // housing_widedeep_functional_tf240.h5: loss [mse, mse], loss_weights [0.9, 0.1].
  const std::string dir = test::scratch_dir("evaluate_multi");
  const std::string e = test::fixture("expected/housing_widedeep_functional_tf240");
  const Json j = evaluate_json({test::fixture("housing_widedeep_functional_tf240.h5"), "--x",
                                e + ".input0.npy", "--x", e + ".input1.npy", "--y",
                                e + ".output.npy", "--y", e + ".output.out1.npy"});
  ASSERT_TRUE(j.contains("main_output_loss")) << j.dump();
  ASSERT_TRUE(j.contains("aux_output_loss")) << j.dump();
  // The targets are the reference's own outputs: each loss is about 0.
  EXPECT_LT(j["main_output_loss"].get<double>(), 1e-8);
  EXPECT_NEAR(j["loss"].get<double>(),
              0.9 * j["main_output_loss"].get<double>() + 0.1 * j["aux_output_loss"].get<double>(),
              1e-15);
}

TEST(RealFileEvaluate, RefusesAnUnknownMetricByName) {
  const std::string data = test::fixture("data/reduced_mnist_test1000.npz");
  try {
    evaluate({test::fixture("mnist_cnn_raw_k224.h5"), "--x", data + ":images", "--y",
              data + ":labels", "--metrics", "f1_score"});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("failed to evaluate"), std::string::npos) << m;
    EXPECT_NE(m.find("f1_score"), std::string::npos) << m;
  }
}

// A binary classifier nnfleet trained (its .keras file names the metrics AUC, Precision, Recall,
// RootMeanSquaredError and R2Score), on the blobs data with binary targets as test data too;
// returns the run's results (with the test figures) and writes x.npy and yb.npy into `dir`.
api::RunResult train_binary(const std::string& dir) {
  testing_util::write_blobs(dir, "blobs", 120, 5);
  const Array labels = load_npy(dir + "/blobs_y.npy");
  Array yb = Array::zeros(DType::kF32, Shape{labels.rows(), 1});
  for (int64_t i = 0; i < labels.rows(); ++i)
    static_cast<float*>(yb.mutable_data())[i] = labels.at(i) == 0 ? 1.0f : 0.0f;
  save_npy(dir + "/yb.npy", yb);
  test::write_text(dir + "/plan.yaml", R"(seed: 3
data:
  train: {x: blobs_x.npy, y: yb.npy}
  test: {x: blobs_x.npy, y: yb.npy}
defaults:
  epochs: 2
  batch_size: 16
  loss: binary_crossentropy
  metrics: [auc, precision, recall, root_mean_squared_error, r2_score]
  optimizer: {Adam: {learning_rate: 0.01}}
models:
  - name: bin
    layers: [Flatten: {}, Dense: {units: 4, activation: relu}, Dense: {units: 1, activation: sigmoid}]
)");
  api::RunOptions o;
  o.out = dir + "/run";
  o.load_models = false;
  return api::train(api::PlanInput::file(dir + "/plan.yaml"), {}, o);
}

// `evaluate` aborted (a failed internal check) on these metrics, named by the model's own file.
TEST(Evaluate, ComputesTheEpochMetricsOfAModelNnfleetTrainedAsTrainingDid) {
  const std::string dir = test::scratch_dir("evaluate_epoch_metrics");
  const api::RunResult r = train_binary(dir);
  ASSERT_EQ(r.models.at(0).status, api::Status::kDone) << r.models[0].message;
  const Json j = evaluate_json({dir + "/run/models/bin.keras", "--x", dir + "/blobs_x.npy", "--y",
                                dir + "/yb.npy", "--workers", "2", "--batch", "7"});
  std::map<std::string, double> trained(r.models[0].metrics.begin(), r.models[0].metrics.end());
  for (const char* key :
       {"loss", "auc", "precision", "recall", "root_mean_squared_error", "r2_score"}) {
    ASSERT_TRUE(j.contains(key)) << key << " in " << j.dump();
    EXPECT_NEAR(j[key].get<double>(), trained.at(std::string("test_") + key), 1e-6) << key;
  }
}

// Targets with a NaN gave "loss: nan" and exit 0.
TEST(Evaluate, RefusesTargetsThatAreNotFiniteNamingFileAndRow) {
  const std::string dir = test::scratch_dir("evaluate_nan_targets");
  train_binary(dir);
  Array y = load_npy(dir + "/yb.npy");
  static_cast<float*>(y.mutable_data())[17] = std::numeric_limits<float>::infinity();
  save_npy(dir + "/bad.npy", y);
  try {
    evaluate({dir + "/run/models/bin.keras", "--x", dir + "/blobs_x.npy", "--y", dir + "/bad.npy"});
    FAIL() << "evaluated an infinite target";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("failed to compute binary_crossentropy: '" + dir +
                     "/bad.npy' has the target inf at sample 17, value 0; expected finite "
                     "numbers"),
              std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace nnfleet
