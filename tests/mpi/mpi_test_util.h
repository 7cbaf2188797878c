// Helpers for the tests that run the nnfleet tool under mpirun (mpi_test, mpi_hosts_test):
// starting and waiting for processes, the tool's --json events, trained weights, and mpirun's
// options as CI can use them.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../fleet/fleet_test_util.h"
#include "io/keras/keras_reader.h"
#include "platform/files.h"

extern char** environ;

namespace nnfleet::mpi_test_util {

using Clock = std::chrono::steady_clock;

inline const std::string kTool = std::string(NNFLEET_BINARY_DIR) + "/nnfleet";

// Sanitizer builds train about ten times slower; they get proportionally less data where the
// tests need a run of a few seconds.
#ifdef NNFLEET_SANITIZED
constexpr int kSlowdown = 8;
#else
constexpr int kSlowdown = 1;
#endif

// mpirun as CI can run it: as root, with `mca` options ("key=value"), then the tool.
inline std::vector<std::string> mpirun(std::vector<std::string> options,
                                       const std::vector<std::string>& mca) {
  std::vector<std::string> args = {NNFLEET_MPIEXEC, "--allow-run-as-root"};
  args.insert(args.end(), options.begin(), options.end());
  for (const std::string& kv : mca)
    args.insert(args.end(), {"--mca", kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1)});
#ifdef NNFLEET_SANITIZED
  // Open MPI itself leaks at exit; nnfleet's own leaks are checked by mpi_fleet_test.
  const char* asan = std::getenv("ASAN_OPTIONS");
  args.insert(args.end(),
              {"-x", std::string("ASAN_OPTIONS=") + (asan ? asan : "") + ":detect_leaks=0"});
#endif
  args.push_back(kTool);
  return args;
}

struct Proc {
  pid_t pid = -1;
  std::string out, err;
};

// Starts `args` (argv[0] a path) with stdout and stderr in dir/<tag>.out and .err.
inline Proc start(std::vector<std::string> args, const std::string& dir, const std::string& tag) {
  Proc p;
  p.out = dir + "/" + tag + ".out";
  p.err = dir + "/" + tag + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  EXPECT_EQ(posix_spawn(&p.pid, argv[0], &fa, nullptr, argv.data(), environ), 0) << argv[0];
  posix_spawn_file_actions_destroy(&fa);
  return p;
}

// Exit code (128 + signal when killed); a run still going after `seconds` is ended and fails
// the test.
inline int wait_for(const Proc& p, int seconds = 600) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  int st = 0;
  while (waitpid(p.pid, &st, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ADD_FAILURE() << "still running after " << seconds << " s; stderr:\n"
                    << testing_util::read_text(p.err);
      kill(p.pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(3));
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Waits for `what` to hold. The bound only keeps a regression from hanging the suite: the events
// waited for are made certain by test holds, never by a core being slow enough.
inline bool eventually(const std::function<bool()>& what, int seconds = 300) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until) {
    if (what()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Test holds (src/platform/test_hold.h) in the processes mpirun starts, so that an order of
// events a test needs (a rank mid-model when it is killed, every rank holding a job) happens by
// construction rather than by timing: mpirun's options that give every rank the holds `points`
// ("epoch_end": the end of its first epoch that is not its model's last; "checkpoint_shipped": a
// worker rank's first checkpoint handed to its sender for rank 0), ...
inline std::vector<std::string> hold_options(const std::string& folder,
                                             const std::string& points = "epoch_end") {
  return {"-x", "NNFLEET_TEST_HOLD=" + points + ":" + folder};
}
// ... the processes held at `point` so far (pid -> the model each holds), ...
inline std::map<pid_t, std::string> held(const std::string& folder,
                                         const std::string& point = "epoch_end") {
  std::map<pid_t, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = point + ".", suffix = ".held";
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out[static_cast<pid_t>(std::stol(name.substr(prefix.size())))] =
          testing_util::read_text(e.path().string());
  }
  return out;
}
// ... and the release of every process held at `point`.
inline void release_holds(const std::string& folder, const std::string& point = "epoch_end") {
  testing_util::write_text(folder + "/" + point + ".go", "");
}

// The --json events written so far to `out_file` (a line being written is left out).
inline std::vector<Json> events(const std::string& out_file) {
  std::vector<Json> v;
  const std::string text = testing_util::read_text(out_file);
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) break;
    if (text[a] == '{') v.push_back(Json::parse(text.substr(a, b - a)));
  }
  return v;
}

// The trained weights of every model in the folder, as raw bytes.
inline std::map<std::string, std::string> weights(const std::string& out_dir) {
  std::map<std::string, std::string> w;
  Json r = Json::parse(read_file(out_dir + "/results.json"));
  for (auto& m : r["models"]) {
    const std::string name = m["name"].get<std::string>();
    const LoadedModel k = load_keras_model(out_dir + "/models/" + name + ".keras");
    w[name] = std::string(reinterpret_cast<const char*>(k.params.data()),
                          k.params.size() * sizeof(float));
  }
  return w;
}

// Whether `model`'s checkpoint is in the output folder: rank 0 has it, whichever rank trains it.
inline bool has_checkpoint(const std::string& out_dir, const std::string& model) {
  return file_exists(out_dir + "/checkpoints/" + model + ".ckpt");
}

// Six small CNNs, long enough (about a second each on blobs of 12,000 rows, 20 epochs) to be
// interrupted.
inline std::string cnn_plan(int epochs = 20) {
  return R"(seed: 7
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
defaults:
  epochs: )" +
         std::to_string(epochs) +
         R"(
  batch_size: 32
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.001}}
models:
  - name: cnn-{filters}
    grid: {filters: [8, 12, 16, 20, 24, 32]}
    layers:
      - Conv2D: {filters: "{filters}", kernel_size: 3, activation: relu}
      - Flatten: {}
      - Dense: {units: 32, activation: relu}
      - Dense: {units: 3, activation: softmax}
)";
}

// Features [rows, cols] (float32, 4 bytes each) and sparse labels of 3 classes in dir/x.npy and
// dir/y.npy, with a plan (returned) of six linear models training one epoch on them: a run
// whose memory is dominated by the data. Returns the data's bytes through `data_bytes`.
inline std::string write_wide_data(const std::string& dir, int rows, int cols, double& data_bytes) {
  Array x = Array::zeros(DType::kF32, Shape{rows, cols});
  Array y = Array::zeros(DType::kI32, Shape{rows});
  Rng r(5);
  auto* xs = static_cast<float*>(x.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  for (int i = 0; i < rows; ++i) {
    ys[i] = static_cast<int32_t>(r.below(3));
    for (int c = 0; c < cols; ++c)
      xs[int64_t{i} * cols + c] = r.uniform() + (c % 3 == ys[i] ? 0.5f : 0.0f);
  }
  save_npy(dir + "/x.npy", x);
  save_npy(dir + "/y.npy", y);
  data_bytes = static_cast<double>(x.size_bytes() + y.size_bytes());
  return R"(seed: 3
data:
  train: {x: x.npy, y: y.npy}
defaults:
  epochs: 1
  batch_size: 64
  loss: sparse_categorical_crossentropy
  optimizer: {SGD: {learning_rate: 0.01}}
models:
  - name: linear-{n}
    grid: {n: [1, 2, 3, 4, 5, 6]}
    layers:
      - Dense: {units: 3, activation: softmax}
)";
}

}  // namespace nnfleet::mpi_test_util
