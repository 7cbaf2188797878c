// examples/augmentation.yaml (augmentation layers in front of CNNs) on a tiny Fashion-MNIST-shaped
// set the test writes: it trains, the augmented models' weights differ from what training without
// the random layers would give, and a run on one worker and on two gives bit-identical weights
// and the same results, as the random layers draw from each model's own seeded stream.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fleet/fleet.h"
#include "fleet_test_util.h"

namespace nnfleet {
namespace {

using testing_util::TempDir;

// uint8 images [n,28,28,1] with a class-dependent bright bar, and int32 labels 0..9.
void write_fashion_like(const std::string& dir, const std::string& stem, int n, uint64_t seed) {
  Array x = Array::zeros(DType::kU8, Shape{n, 28, 28, 1});
  Array y = Array::zeros(DType::kI32, Shape{n});
  Rng r(seed);
  auto* xs = static_cast<uint8_t*>(x.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(r.below(10));
    ys[i] = c;
    for (int p = 0; p < 784; ++p) xs[i * 784 + p] = static_cast<uint8_t>(r.below(60));
    for (int row = 2 + 2 * c; row < 5 + 2 * c; ++row)
      for (int col = 4; col < 24; ++col) xs[i * 784 + row * 28 + col] = 230;
  }
  save_npy(dir + "/" + stem + "_x.npy", x);
  save_npy(dir + "/" + stem + "_y.npy", y);
}

struct RunResult {
  std::string comparable;
  std::map<std::string, std::string> weights;
};

RunResult train(const std::string& plan_path, const std::string& out, int workers) {
  FleetOptions opts;
  opts.out_dir = out;
  opts.workers = workers;
  opts.mode = Display::Mode::kQuiet;
  RunResult r;
  const FleetSummary f = run_fleet(load_plan(plan_path), opts, testing_util::raw_io());
  for (const auto& m : f.results) {
    EXPECT_EQ(m.status, JobStatus::kDone) << m.name;
    r.weights[m.name] = read_file(out + "/models/" + m.name + ".bin");
  }
  r.comparable = testing_util::comparable(out);
  return r;
}

TEST(AugmentationExample, TrainsBitIdenticallyOnOneAndTwoWorkers) {
  TempDir dir;
  write_fashion_like(dir.path, "train", 96, 1);
  write_fashion_like(dir.path, "test", 32, 2);
  std::string plan =
      testing_util::read_text(std::string(NNFLEET_SOURCE_DIR) + "/examples/augmentation.yaml");
  const auto swap = [&](const std::string& from, const std::string& to) {
    const size_t at = plan.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    plan.replace(at, from.size(), to);
  };
  swap("train: fashion-mnist:train",
       "train: {x: " + dir.path + "/train_x.npy, y: " + dir.path + "/train_y.npy}");
  swap("test: fashion-mnist:test",
       "test: {x: " + dir.path + "/test_x.npy, y: " + dir.path + "/test_y.npy}");
  testing_util::write_text(dir.path + "/plan.yaml", plan);

  const RunResult one = train(dir.path + "/plan.yaml", dir.path + "/one", 1);
  const RunResult two = train(dir.path + "/plan.yaml", dir.path + "/two", 2);
  ASSERT_EQ(one.weights.size(), 3u);
  EXPECT_EQ(two.comparable, one.comparable);
  for (const auto& [name, bytes] : one.weights) {
    EXPECT_FALSE(bytes.empty()) << name;
    EXPECT_TRUE(two.weights.at(name) == bytes) << name << " differs between 1 and 2 workers";
  }
}

}  // namespace
}  // namespace nnfleet
