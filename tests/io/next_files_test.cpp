// Issue 35's "done when" in one place: every file of the next/ real set (../shared/keras-models/
// next, described by its MANIFEST.md; never copied into the repository) loads through the public
// API and predicts its expected/ outputs within 1e-4, whatever its inputs are (float tensors,
// unicode strings, three inputs). The per-topic tests (next_*_files_test.cpp) add round trips,
// training and the details of each kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "io_test_util.h"
#include "nnfleet/data.h"
#include "nnfleet/model.h"

namespace nnfleet::test {
namespace {

std::string next_dir() { return real_models_dir() + "/next"; }

// The stems with an expected output, each with its input files (.input.npy, or .input0.npy ...).
std::set<std::string> next_stems() {
  std::set<std::string> stems;
  for (const auto& e : std::filesystem::directory_iterator(next_dir() + "/expected")) {
    const std::string f = e.path().filename().string();
    const size_t dot = f.find(".output.npy");
    if (dot != std::string::npos) stems.insert(f.substr(0, dot));
  }
  return stems;
}

std::vector<std::string> inputs_of(const std::string& stem) {
  const std::string base = next_dir() + "/expected/" + stem;
  if (std::filesystem::exists(base + ".input.npy")) return {base + ".input.npy"};
  std::vector<std::string> v;
  for (int k = 0; std::filesystem::exists(base + ".input" + std::to_string(k) + ".npy"); ++k)
    v.push_back(base + ".input" + std::to_string(k) + ".npy");
  return v;
}

std::string model_file(const std::string& stem) {
  for (const char* ext : {".keras", ".h5"})
    if (std::filesystem::exists(next_dir() + "/" + stem + ext))
      return next_dir() + "/" + stem + ext;
  return "";
}

// The largest absolute difference of `stem`'s predictions from its expected output.
double error_of(const std::string& stem) {
  std::vector<api::Array> xs;
  std::vector<api::ArrayView> views;
  for (const std::string& f : inputs_of(stem)) xs.push_back(api::read_array(f));
  for (const api::Array& a : xs) views.push_back(a.view());
  const api::Model m = api::Model::load(model_file(stem));
  const Array want = load_npy(next_dir() + "/expected/" + stem + ".output.npy");
  std::vector<float> got(static_cast<size_t>(want.shape().size()));
  m.predict(views, {std::span<float>(got)});
  return max_abs_diff(got, static_cast<const float*>(want.data()), got.size());
}

TEST(RealFileNext, EveryFileLoadsAndPredictsItsExpectedOutputs) {
  const std::set<std::string> stems = next_stems();
  EXPECT_EQ(stems.size(), 10u);
  for (const std::string& stem : stems) {
    SCOPED_TRACE(stem);
    ASSERT_FALSE(model_file(stem).empty());
    ASSERT_FALSE(inputs_of(stem).empty());
    double err = INFINITY;
    try {
      err = error_of(stem);
    } catch (const std::exception& e) {
      ADD_FAILURE() << stem << ": " << e.what();
      continue;
    }
    std::printf("[ parity   ] %-40s max abs error %.3g\n", stem.c_str(), err);
    EXPECT_LE(err, 1e-4);
  }
}

}  // namespace
}  // namespace nnfleet::test
