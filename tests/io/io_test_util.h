// Helpers shared by the Keras I/O tests: fixture paths, running a loaded model, comparing outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "io/keras/keras_reader.h"
#include "model/network.h"

namespace nnfleet::test {

// The shared set of real Keras files (made by others, never copied into this repository): the
// NNFLEET_KERAS_MODELS environment variable when set, else the folder CMake found at configure
// time (../shared/keras-models beside the clone). Tests that read it are named *RealFile* and
// are registered with CTest only when the folder exists (tests/io/CMakeLists.txt).
inline std::string real_models_dir() {
  const char* env = std::getenv("NNFLEET_KERAS_MODELS");
  return env && *env ? std::string(env) : std::string(NNFLEET_KERAS_MODELS);
}

// "synthetic/..." names a file of this repository (tests/io/fixtures/synthetic, written by
// tools/make_keras_fixtures.py); any other name is a file of the shared real set, "expected/..."
// included.
inline std::string fixture(const std::string& name) {
  if (name.rfind("synthetic/", 0) == 0)
    return std::string(NNFLEET_SOURCE_DIR) + "/tests/io/fixtures/" + name;
  return real_models_dir() + "/" + name;
}

// A fresh scratch directory under the build tree, removed first if it exists.
inline std::string scratch_dir(const std::string& name) {
  const std::string d = std::string(NNFLEET_BINARY_DIR) + "/io_test_scratch/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Runs the model on every row of `x` (float32, first axis = samples) in one batch.
inline std::vector<float> run_model(std::shared_ptr<const Model> model, const float* params,
                                    const Array& x) {
  const int n = static_cast<int>(x.rows());
  Network net(model, n, params);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  gather_rows(x, idx.data(), n, 1.0f, net.input());
  net.forward(n, false);
  const size_t k = static_cast<size_t>(net.output_features());
  return std::vector<float>(net.output(), net.output() + static_cast<size_t>(n) * k);
}

inline std::vector<float> run_model(const LoadedModel& lm, const Array& x) {
  return run_model(lm.model, lm.params.data(), x);
}

inline double max_abs_diff(const std::vector<float>& a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void write_text(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// The message of the FileError `f` throws (fails the test when it throws nothing or another type).
template <typename F>
std::string file_error_of(F&& f) {
  try {
    f();
  } catch (const FileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected FileError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected FileError, nothing was thrown";
  return "";
}

}  // namespace nnfleet::test
