// The fleet's input limits (issue 31, items 2-4): batch sizes capped by the data, parameters of a
// plan's model bounded as a Keras file's are, the memory check against the memory available to
// the models that run together, an allocation the system refuses ending one model as failed, and
// worker counts capped at the cores. Memory is faked (set_available_memory, set_arena_limit):
// nothing here allocates more than a few megabytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>

#include "core/limits.h"
#include "fleet/fit/job.h"
#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "platform/cpu.h"
#include "platform/files.h"
#include "tensor/arena.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TempDir;

// The blobs data (train 200 rows, of which 40 validate; test 50) and a plan of `models`.
class InputLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    testing_util::write_blobs(dir.path, "train", 200, 1);
    testing_util::write_blobs(dir.path, "test", 50, 2);
  }
  void TearDown() override {
    set_available_memory(-1);
    set_arena_limit(-1);
  }
  std::string plan_of(const std::string& name, const std::string& models) {
    const std::string path = dir.path + "/" + name + ".yaml";
    testing_util::write_text(path, R"(seed: 3
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
defaults:
  epochs: 2
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
models:
)" + models);
    return path;
  }
  // One dense model named `name` with `units` hidden units, trained at `batch`.
  static std::string dense(const std::string& name, int64_t batch, int units = 8) {
    return "  - name: " + name + "\n    batch_size: " + std::to_string(batch) +
           "\n    layers:\n      - Flatten: {}\n      - Dense: {units: " + std::to_string(units) +
           ", activation: relu}\n      - Dense: {units: 3, activation: softmax}\n";
  }
  FleetSummary run(const std::string& plan, const std::string& out, int workers) {
    FleetOptions o;
    o.out_dir = dir.path + "/" + out;
    o.workers = workers;
    o.mode = Display::Mode::kQuiet;
    return run_fleet(load_plan(plan), o, testing_util::raw_io());
  }
  // The memory prepare_jobs() estimates for the first model of `plan` on its data.
  size_t estimate(const std::string& plan) {
    const Plan p = load_plan(plan);
    const FleetData data = load_fleet_data(p.sources[0]);
    const ModelSpec& s = p.models[0];
    auto model = build_model(s, data.input_shape);
    const int rows = batch_rows(s, data);
    return Network::estimate_bytes(model, rows, train_spec_of(s, *model),
                                   batch_pieces(s, *model, rows));
  }
  TempDir dir;
};

// A batch_size near 2^31 overflowed int in Network::plan (SIGSEGV at 2^31 - 1, length_error at
// 1.5e9) and sized memory by the batch: now a batch holds at most the data's rows, so the run is
// the one at batch_size 160 (the training rows), bit for bit, in what 160 rows cost.
TEST_F(InputLimits, BatchSizeNear2To31TrainsAsOneBatchOfTheData) {
  const std::string reference = plan_of("ref", dense("m", 160));
  const FleetSummary want = run(reference, "ref", 1);
  ASSERT_EQ(want.results.at(0).status, JobStatus::kDone) << want.results[0].message;
  // 64 MiB: what 2^31 rows of this model would need is about 2 TiB.
  set_available_memory(int64_t{64} << 20);
  for (int64_t batch : {int64_t{INT_MAX}, int64_t{1'500'000'000}, int64_t{1'100'000'000}}) {
    const std::string name = "b" + std::to_string(batch);
    const FleetSummary got = run(plan_of(name, dense("m", batch)), name, 1);
    const ModelResult& r = got.results.at(0);
    ASSERT_EQ(r.status, JobStatus::kDone) << batch << ": " << r.message;
    EXPECT_EQ(r.metrics, want.results[0].metrics) << batch;  // bit for bit
    EXPECT_EQ(testing_util::comparable(dir.path + "/" + name),
              testing_util::comparable(dir.path + "/ref"));
  }
}

// The rows of a batch: batch_size, at most the largest of the training, validation and test rows.
TEST_F(InputLimits, BatchRowsAreCappedByTheLargestDataSplit) {
  const FleetData data = load_fleet_data(load_plan(plan_of("p", dense("m", 1))).sources[0]);
  ModelSpec s;
  for (auto [batch, rows] : {std::pair{1, 1}, {32, 32}, {160, 160}, {161, 160}, {INT_MAX, 160}}) {
    s.batch_size = batch;
    EXPECT_EQ(batch_rows(s, data), rows) << batch;
  }
  FleetData more_test = load_fleet_data(load_plan(plan_of("p", dense("m", 1))).sources[0]);
  more_test.test->x = Array::zeros(DType::kF32, Shape{500, 8, 8, 1});
  s.batch_size = INT_MAX;
  EXPECT_EQ(batch_rows(s, more_test), 500);  // test batches are taken at the same size
}

// 2^28 parameters bound a model from a Keras file; a plan's own model had no bound, and one of
// 1e9 parameters passed validation. Refused before anything is allocated (the model is only a
// description until then).
TEST_F(InputLimits, PlanModelOverTheParameterLimitIsRefused) {
  // 64 inputs x 5,000,000 units: 325,000,000 parameters in the first Dense alone.
  const std::string plan = plan_of("big", dense("small", 32) + dense("huge", 32, 5'000'000));
  try {
    run(plan, "out", 1);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model 'huge'"));
    EXPECT_THAT(e.what(),
                HasSubstr("parameters; expected at most " + std::to_string(limits::kMaxParams)));
    EXPECT_THAT(e.what(), Not(HasSubstr("model 'small'")));
  }
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

// The memory check held each model alone to the machine's total memory; now the models that run
// together (the `workers` largest) are held to the memory available.
TEST_F(InputLimits, MemoryCheckCountsTheModelsThatRunTogether) {
  ASSERT_GE(allowed_cpus().size(), 2u) << "this test runs two workers";
  const std::string plan = plan_of("two", dense("a", 32, 2048) + dense("b", 32, 2048));
  const size_t one = estimate(plan);
  ASSERT_GT(one, size_t{1} << 20);
  set_available_memory(static_cast<int64_t>(one * 3 / 2));
  try {
    run(plan, "two-workers", 2);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the 2 largest models running at once need an estimated"));
    EXPECT_THAT(e.what(), HasSubstr("the memory available"));
    EXPECT_THAT(e.what(), HasSubstr("use fewer workers"));
  }
  EXPECT_FALSE(file_exists(dir.path + "/two-workers"));
  const FleetSummary s = run(plan, "one-worker", 1);  // one at a time fits
  for (const ModelResult& r : s.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.message;
  // One model alone above what is available: named, with its batch rows.
  set_available_memory(static_cast<int64_t>(one / 2));
  try {
    run(plan, "none", 1);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model 'a': needs an estimated"));
    EXPECT_THAT(e.what(), HasSubstr("for batches of 32 rows"));
  }
}

// An allocation the system refuses read "std::bad_alloc"; now it names the model and the bytes,
// ends that model as failed, and the others finish and are recorded.
TEST_F(InputLimits, RefusedAllocationFailsThatModelOnly) {
  const std::string plan =
      plan_of("alloc", dense("small", 32) + dense("large", 32, 2048) + dense("small2", 32));
  set_arena_limit(int64_t{1} << 20);  // the small models take about 70 KB, the large 3 MB
  const FleetSummary s = run(plan, "out", 1);
  ASSERT_EQ(s.results.size(), 3u);
  EXPECT_EQ(s.results[0].status, JobStatus::kDone) << s.results[0].message;
  EXPECT_EQ(s.results[2].status, JobStatus::kDone) << s.results[2].message;
  const ModelResult& r = s.results[1];
  EXPECT_EQ(r.status, JobStatus::kFailed);
  EXPECT_THAT(r.message, HasSubstr("failed to allocate the memory of model 'large'"));
  EXPECT_THAT(r.message, HasSubstr(" bytes ("));
  EXPECT_THAT(r.message, Not(HasSubstr("bad_alloc")));
  const Json results = Json::parse(read_file(dir.path + "/out/results.json"));
  ASSERT_EQ(results["models"].size(), 3u);
  EXPECT_EQ(results["models"][1]["status"], "failed");
  EXPECT_EQ(testing_util::recorded_models(dir.path + "/out"),
            (std::set<std::string>{"small", "large", "small2"}));
}

// A million workers aborted with std::system_error (20,000 started 20,000 threads for one
// model): capped at the cores this process may use, and said in a warning.
TEST_F(InputLimits, WorkersBeyondTheCoresAreCappedWithAWarning) {
  const std::string plan = plan_of("w", dense("m", 32));
  const FleetSummary s = run(plan, "out", 1'000'000);
  const int cores = static_cast<int>(allowed_cpus().size());
  EXPECT_EQ(s.workers, cores);
  EXPECT_EQ(s.results.at(0).status, JobStatus::kDone) << s.results[0].message;
  const std::string log = testing_util::read_text(dir.path + "/out/run.log");
  EXPECT_THAT(log, HasSubstr("warning: 1000000 workers asked for, but this process may use " +
                             std::to_string(cores) + " core(s)"));
  run(plan, "fits", cores);
  EXPECT_THAT(testing_util::read_text(dir.path + "/fits/run.log"), Not(HasSubstr("warning")));
}

}  // namespace
}  // namespace nnfleet
