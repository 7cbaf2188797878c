// Helpers for fleet tests: small synthetic datasets written as .npy, plan files, temp folders.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "core/check.h"
#include "core/config.h"
#include "data/dataset.h"
#include "fleet/fleet.h"
#include "model/network.h"
#include "platform/files.h"
#include "platform/test_hold.h"
#include "tensor/rng.h"

namespace nnfleet::testing_util {

// A stop (as SIGINT asks for one) that lands while a run of this process is held at the n-th end
// of an epoch that is not its model's last (platform/test_hold.h, hold folder `folder`): surely
// mid-run, at a point that does not depend on how fast the cores are. Pass &stop as the run's
// stop flag; the hold ends with this object.
class StopAtEpochEnd {
 public:
  StopAtEpochEnd(const std::string& folder, int nth) : folder_(folder) {
    std::filesystem::create_directories(folder);
    test_hold::set_for_tests("epoch_end#" + std::to_string(nth) + ":" + folder);
    thread_ = std::thread([this] {
      const std::string held = folder_ + "/epoch_end." + std::to_string(::getpid()) + ".held";
      while (!file_exists(held) && !ended_)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stop = true;
    });
  }
  ~StopAtEpochEnd() {
    ended_ = true;  // a run that never reached the point ends the wait too
    thread_.join();
    test_hold::set_for_tests("");
  }
  StopAtEpochEnd(const StopAtEpochEnd&) = delete;
  StopAtEpochEnd& operator=(const StopAtEpochEnd&) = delete;

  std::atomic<bool> stop{false};

 private:
  std::string folder_;
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

// A fresh folder under the system temp dir, removed by the destructor.
struct TempDir {
  std::string path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("nnfleet-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// Images [n,8,8,1] (float32) whose class (0..2) decides where a bright blob sits, plus noise.
inline void write_blobs(const std::string& dir, const std::string& stem, int n, uint64_t seed) {
  Array x = Array::zeros(DType::kF32, Shape{n, 8, 8, 1});
  Array y = Array::zeros(DType::kI32, Shape{n});
  Rng r(seed);
  auto* xs = static_cast<float*>(x.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(r.below(3));
    ys[i] = c;
    for (int p = 0; p < 64; ++p) xs[i * 64 + p] = 0.3f * r.uniform();
    for (int dy = 0; dy < 3; ++dy)
      for (int dx = 0; dx < 3; ++dx) xs[i * 64 + (1 + dy) * 8 + 1 + c * 2 + dx] += 1.0f;
  }
  save_npy(dir + "/" + stem + "_x.npy", x);
  save_npy(dir + "/" + stem + "_y.npy", y);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Model I/O that saves raw parameters (<path>.bin), so tests can compare weights bit for bit.
inline ModelIo raw_io(Durability d = Durability::kSystemCrash) {
  ModelIo io;
  io.save = [d](const Network& net, const ModelSpec&, const std::string& path) {
    const std::string bytes(reinterpret_cast<const char*>(net.params()),
                            net.num_params() * sizeof(float));
    write_file_atomic(path + ".bin", bytes, d);
    return SavedModel{path + ".bin", hash_bytes(bytes)};
  };
  return io;
}

// A plan with five small, different models on the blobs data (train_x/y, test_x/y in `dir`).
inline std::string small_plan(const std::string& extra_models = "") {
  return R"(seed: 7
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
defaults:
  epochs: 3
  batch_size: 16
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.01}}
models:
  - name: mlp-{units}
    grid: {units: [8, 32]}
    batch_split: 3  # pieces computed by whichever worker is free: results must not change
    layers:
      - Flatten: {}
      - Dense: {units: "{units}", activation: relu}
      - Dropout: {rate: 0.3}
      - Dense: {units: 3, activation: softmax}
  - name: cnn
    epochs: 4
    early_stopping: {monitor: val_loss, patience: 1, restore_best_weights: true}
    layers:
      - Conv2D: {filters: 4, kernel_size: 3, activation: relu}
      - BatchNormalization: {}
      - MaxPooling2D: {pool_size: 2}
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
  - name: tanh-sgd
    optimizer: {SGD: {learning_rate: 0.1, momentum: 0.9, nesterov: true}}
    layers:
      - Flatten: {}
      - Dense: {units: 16, activation: tanh}
      - Dense: {units: 3, activation: softmax}
)" + extra_models;
}

// A search (README "Search"): eight trials drawn from a conditional space, halving by 2 over 1, 2
// and 4 epochs.
inline std::string search_plan() {
  return R"(seed: 3
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
search:
  trials: 8
  space:
    family: {choice: [mlp, cnn]}
    depth: {int: [1, 2], when: {family: mlp}}
    width: {int: [4, 32], log: true, per: depth, when: {family: mlp}}
    filters: {int: [2, 8], log: true, when: {family: cnn}}
    lr: {loguniform: [1.0e-3, 3.0e-2]}
    batch_size: {choice: [32, 64]}
  scheduler: {successive_halving: {reduction_factor: 2, min_epochs: 1, max_epochs: 4}}
  metric: val_accuracy
defaults:
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: "{lr}"}}
  batch_size: "{batch_size}"
models:
  - name: "trial-{trial}"
    when: {family: mlp}
    layers:
      - Flatten: {}
      - repeat: "{depth}"
        layers:
          - Dense: {units: "{width_{i}}", activation: relu}
      - Dense: {units: 3, activation: softmax}
  - name: "trial-{trial}"
    when: {family: cnn}
    layers:
      - Conv2D: {filters: "{filters}", kernel_size: 3, activation: relu}
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
)";
}

// A temp folder holding the blobs data (train_x/y: 1,200 rows, test_x/y: 300) and small_plan()
// as plan.yaml.
class BlobsPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_blobs(dir.path, "train", 1200, 1);
    write_blobs(dir.path, "test", 300, 2);
    plan = dir.path + "/plan.yaml";
    write_text(plan, small_plan());
  }
  TempDir dir;
  std::string plan;
};

// Splits a CSV line without quoted fields.
inline std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  for (size_t a = 0, b;; a = b + 1) {
    b = line.find(',', a);
    cells.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return cells;
  }
}

// The rows of history.csv for `model`, as column -> cell (the model column included).
inline std::vector<std::map<std::string, std::string>> history_rows(const std::string& out_dir,
                                                                    const std::string& model) {
  const std::string text = read_file(out_dir + "/history.csv");
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    const std::vector<std::string> cells = csv_cells(text.substr(a, b - a));
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (cells.empty() || cells[0] != model) continue;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < cells.size() && i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// Names of the models with a whole record in jobs.log ("<length> <hash> <json>" lines; a run may
// be appending the last one).
inline std::set<std::string> recorded_models(const std::string& out_dir) {
  std::set<std::string> names;
  std::ifstream f(out_dir + "/jobs.log");
  for (std::string line; std::getline(f, line) && !f.eof();) {
    const size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
    if (b == std::string::npos) continue;
    const Json j = Json::parse(line.substr(b + 1), nullptr, false);
    if (j.is_object() && j.contains("name")) names.insert(j["name"].get<std::string>());
  }
  return names;
}

// What must match between two runs of a plan: every model's status, epochs, metrics, best epoch
// and per-epoch history (the seconds column excepted), in plan order.
inline std::string comparable(const std::string& out_dir) {
  Json r = Json::parse(read_file(out_dir + "/results.json"));
  std::string s;
  for (auto& m : r["models"]) {
    const std::string name = m["name"].get<std::string>();
    s += name + " " + m["status"].get<std::string>() + " " + m["epochs"].dump() + " " +
         m["metrics"].dump() + " " + m["best"].dump() + "\n";
    for (auto row : history_rows(out_dir, name)) {
      row.erase("seconds");
      for (const auto& [k, v] : row) s += k + "=" + v + " ";
      s += "\n";
    }
  }
  return s;
}

}  // namespace nnfleet::testing_util
