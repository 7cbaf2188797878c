// Hostile data for a fleet (issue 10): test and validation targets that do not suit the model or
// the training targets, non-finite values, a validation split that leaves nothing, and data paths
// that are not regular files. Every case must end in a clear error before anything is written.
#include "fleet/fleet_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "fleet/fleet.h"
#include "fleet_test_util.h"
#include "plan/plan.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::write_text;

// `n` rows of one-hot rows of k (float32) for the class labels in `labels` (int32 [n]).
Array one_hot(const Array& labels, int k) {
  const int64_t n = labels.rows();
  Array y = Array::zeros(DType::kF32, Shape{n, k});
  auto* v = static_cast<float*>(y.mutable_data());
  for (int64_t i = 0; i < n; ++i) v[i * k + static_cast<int>(labels.at(i))] = 1.0f;
  return y;
}

class HostileData : public testing_util::BlobsPlanTest {
 protected:
  // Runs `plan_text` (a whole plan) from dir and returns the error's message; fails the test when
  // it does not throw ErrorT or when an output folder appears.
  template <typename ErrorT>
  std::string error_of(const std::string& plan_text) {
    const std::string path = dir.path + "/hostile.yaml";
    write_text(path, plan_text);
    FleetOptions o;
    o.out_dir = dir.path + "/out";
    o.workers = 1;
    o.mode = Display::Mode::kQuiet;
    std::string what;
    try {
      run_fleet(load_plan(path), o, ModelIo{});
      ADD_FAILURE() << "expected an error";
    } catch (const ErrorT& e) {
      what = e.what();
    }
    EXPECT_FALSE(file_exists(o.out_dir)) << "nothing may be written";
    return what;
  }

  // A one-model plan on train_x/train_y (training) and test_x/`test_y` (test).
  static std::string plan(const std::string& loss, int units, const std::string& test_y,
                          const std::string& train_y = "train_y.npy", double split = 0.0) {
    return "data:\n  train: {x: train_x.npy, y: " + train_y +
           "}\n  test: {x: test_x.npy, y: " + test_y +
           "}\n  validation_split: " + std::to_string(split) +
           "\nmodels:\n"
           "  - name: m\n    loss: " +
           loss +
           "\n    layers:\n      - Flatten: {}\n"
           "      - Dense: {units: " +
           std::to_string(units) + "}\n";
  }

  // How messages name a source of two files in dir: "'<dir>/x' and '<dir>/y'".
  std::string files(const std::string& x, const std::string& y) const {
    return "'" + dir.path + "/" + x + "' and '" + dir.path + "/" + y + "'";
  }

  void write_one_hot(const std::string& stem) {
    save_npy(dir.path + "/" + stem + "_onehot.npy",
             one_hot(load_npy(dir.path + "/" + stem + "_y.npy"), 3));
  }
};

// Was a heap-buffer overflow in gather_rows (one-hot test targets for a one-output model).
TEST_F(HostileData, TestTargetsWiderThanTheOutputAreRefused) {
  write_one_hot("test");
  const std::string e = error_of<PlanError>(plan("mean_squared_error", 1, "test_onehot.npy"));
  EXPECT_THAT(e, HasSubstr("targets do not match the model output; expected y samples of 1 "
                           "values (output [1]), got [3] (test data " +
                           files("test_x.npy", "test_onehot.npy") + ")"));
  EXPECT_THAT(e, Not(HasSubstr("training data")));
}

// Was an abort after training (internal check in gather_labels): every model's work lost.
TEST_F(HostileData, OneHotTestLabelsWithSparseTrainingLabelsAreRefused) {
  write_one_hot("test");
  const std::string e =
      error_of<PlanError>(plan("sparse_categorical_crossentropy", 3, "test_onehot.npy"));
  EXPECT_THAT(e, HasSubstr("sparse_categorical_crossentropy needs one integer label per sample"));
  EXPECT_THAT(e, HasSubstr("(test data " + files("test_x.npy", "test_onehot.npy") + ")"));
}

// Was silently wrong test metrics (test_loss 2.57 instead of 1.457).
TEST_F(HostileData, SparseTestLabelsWithOneHotTrainingTargetsAreRefused) {
  write_one_hot("train");
  const std::string e =
      error_of<PlanError>(plan("categorical_crossentropy", 3, "test_y.npy", "train_onehot.npy"));
  EXPECT_THAT(e, HasSubstr("expected y samples of 3 values (output [3]), got []"));
  EXPECT_THAT(e, HasSubstr("(test data " + files("test_x.npy", "test_y.npy") + ")"));
}

TEST_F(HostileData, TestLabelsOutOfRangeAreRefusedNamingTheTestFile) {
  Array y = load_npy(dir.path + "/test_y.npy");
  static_cast<int32_t*>(y.mutable_data())[7] = 5;
  save_npy(dir.path + "/test_big.npy", y);
  const std::string e =
      error_of<PlanError>(plan("sparse_categorical_crossentropy", 3, "test_big.npy"));
  EXPECT_THAT(e, HasSubstr("labels out of range for sparse_categorical_crossentropy; expected "
                           "integers in 0..2 (the model outputs 3 classes), got labels 0..5 "
                           "(test data " +
                           files("test_x.npy", "test_big.npy") + ")"));
}

// NaN labels were called "fractional"; NaN inputs showed only as a diverged model.
TEST_F(HostileData, NonFiniteLabelsAndInputsAreNamedWithTheirRow) {
  Array y = Array::zeros(DType::kF32, Shape{300});
  static_cast<float*>(y.mutable_data())[12] = NAN;
  save_npy(dir.path + "/test_nan.npy", y);
  EXPECT_THAT(error_of<DataError>(plan("sparse_categorical_crossentropy", 3, "test_nan.npy")),
              HasSubstr("failed to load data " + files("test_x.npy", "test_nan.npy") +
                        ": y holds a non-finite value (NaN) at row 12, element 0; expected "
                        "finite numbers"));
  Array x = load_npy(dir.path + "/train_x.npy");
  static_cast<float*>(x.mutable_data())[64 * 40 + 5] = -INFINITY;
  save_npy(dir.path + "/train_x.npy", x);
  EXPECT_THAT(error_of<DataError>(plan("sparse_categorical_crossentropy", 3, "test_y.npy")),
              HasSubstr("failed to load data " + files("train_x.npy", "train_y.npy") +
                        ": x holds a non-finite value (-inf) at row 40, element 5"));
}

// The validation_split error named neither the plan file nor its line.
TEST_F(HostileData, EmptyValidationSplitNamesThePlanLine) {
  const std::string e = error_of<DataError>(
      plan("sparse_categorical_crossentropy", 3, "test_y.npy", "train_y.npy", 0.9999));
  EXPECT_THAT(e, HasSubstr("hostile.yaml:4: data.validation_split: failed to split data " +
                           files("train_x.npy", "train_y.npy") +
                           ": validation_split 0.9999 of 1200 samples leaves an empty part"));
}

// Keras's validation_data (`data.validation`): its rows follow train's, every model validates on
// exactly them (n_val), and sample weights of a part without any are 1.
TEST_F(HostileData, AValidationSourceIsAppendedAfterTheTrainingRows) {
  save_npy(dir.path + "/w.npy", Array::zeros(DType::kF32, Shape{300}));
  write_text(dir.path + "/v.yaml",
             "data:\n  train: {x: train_x.npy, y: train_y.npy}\n  take: 1000\n"
             "  validation: {x: test_x.npy, y: test_y.npy, sample_weight: w.npy}\n"
             "models:\n  - name: m\n    layers: [Flatten]\n");
  const FleetData d = load_fleet_data(load_plan(dir.path + "/v.yaml").data);
  EXPECT_EQ(d.n_train, 1000);
  EXPECT_EQ(d.n_val, 300);
  ASSERT_EQ(d.train.x.rows(), 1300);
  const Array tx = load_npy(dir.path + "/train_x.npy"), vx = load_npy(dir.path + "/test_x.npy");
  const int64_t row = tx.row_size();
  EXPECT_EQ(d.train.x.at(999 * row + 5), tx.at(999 * row + 5));
  EXPECT_EQ(d.train.x.at(1000 * row + 5), vx.at(5));
  EXPECT_EQ(d.train.y.at(1299), load_npy(dir.path + "/test_y.npy").at(299));
  ASSERT_EQ(d.train_weights.size(), 1300u);
  EXPECT_EQ(d.train_weights[999], 1.0f);
  EXPECT_EQ(d.train_weights[1000], 0.0f);
}

TEST_F(HostileData, AValidationSourceOfAnotherSampleShapeIsRefusedNamingIt) {
  save_npy(dir.path + "/flat.npy", Array::zeros(DType::kF32, Shape{300, 5}));
  write_text(dir.path + "/v.yaml",
             "data:\n  train: {x: train_x.npy, y: train_y.npy}\n"
             "  validation: {x: flat.npy, y: test_y.npy}\n"
             "models:\n  - name: m\n    layers: [Flatten]\n");
  try {
    (void)load_fleet_data(load_plan(dir.path + "/v.yaml").data);
    ADD_FAILURE() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr(files("flat.npy", "test_y.npy") +
                                    " (validation): samples of shape [5]; expected the train "
                                    "sample shape"));
  }
}

// Reading a FIFO blocked in open() forever (and SIGTERM could not end it). Each read must fail
// at once; the reader runs on a detached thread so that a regression fails instead of hanging.
TEST_F(HostileData, FifoAsADataOrPlanPathIsRefusedWithoutBlocking) {
  const std::string fifo = dir.path + "/fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto fails_fast = [&](const std::function<void()>& read, const std::string& what) {
    auto done = std::make_shared<std::atomic<int>>(0);  // 1 threw the expected error, 2 other
    auto message = std::make_shared<std::string>();
    std::thread([read, done, message] {
      try {
        read();
        *done = 2;
      } catch (const Error& e) {
        *message = e.what();
        *done = 1;
      }
    }).detach();
    // A refusal takes microseconds; the bound only turns a regression (blocked on the FIFO)
    // into a failure instead of a hung suite, and no loaded machine comes near it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (*done == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(done->load(), 1) << what << ": did not fail within 2 minutes (blocked on the FIFO?)";
    EXPECT_THAT(*message, HasSubstr("fifo.npy")) << what;
    EXPECT_THAT(*message, HasSubstr("is a FIFO (named pipe); expected a regular file")) << what;
  };
  fails_fast([&] { load_npy(fifo); }, "npy");
  fails_fast([&] { load_npz(fifo, "x"); }, "npz");
  fails_fast([&] { load_idx(fifo); }, "idx");
  fails_fast([&] { load_csv(fifo, "label"); }, "csv");
  fails_fast([&] { load_plan(fifo); }, "plan");
  fails_fast([&] { read_file(fifo); }, "read_file");
}

}  // namespace
}  // namespace nnfleet
