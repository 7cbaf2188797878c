// Hostile Keras configs (issue 10, items 4 and 5): JSON nested 300,000 levels deep in each of the
// three places a config is read (a to_json() file, a .keras archive's config.json, an .h5
// file's model_config attribute) and 64-bit integers in layer configs and input shapes. Each file
// is generated here and ends in a FileError naming the file and the limit; `predict --y` refuses
// int64 labels that do not fit instead of wrapping them into another class.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "commands.h"
#include "core/limits.h"
#include "io/keras/hdf5.h"
#include "io/keras/keras_reader.h"
#include "io_test_util.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using test::fixture;
using ::testing::HasSubstr;

// A Sequential config whose layer list holds `levels` nested lists.
std::string deep_config(int levels) {
  return "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": " +
         std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']') + "}}";
}

std::string load_error(const std::string& path) {
  try {
    load_keras_model(path);
  } catch (const FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_keras_model('" << path << "') did not throw FileError";
  return "";
}

const std::string kTooDeep = "is nested more than " + std::to_string(limits::kMaxNestingDepth) +
                             " levels deep; expected at most " +
                             std::to_string(limits::kMaxNestingDepth);

TEST(KerasLimits, DeeplyNestedToJsonFileIsRefusedNotACrash) {
  const std::string path = test::scratch_dir("limits_json") + "/deep.json";
  test::write_text(path, deep_config(300000));
  EXPECT_THAT(load_error(path),
              HasSubstr("failed to read Keras model '" + path + "': the file " + kTooDeep));
}

TEST(KerasLimits, DeeplyNestedKerasConfigJsonIsRefusedNotACrash) {
  const std::string path = test::scratch_dir("limits_keras") + "/deep.keras";
  write_zip(path, {{"metadata.json", "{\"keras_version\": \"3.10.0\"}", ""},
                   {"config.json", deep_config(300000), ""}});
  EXPECT_THAT(load_error(path),
              HasSubstr("failed to read Keras model '" + path + "': config.json " + kTooDeep));
}

TEST(KerasLimits, DeeplyNestedH5ModelConfigIsRefusedNotACrash) {
  const std::string path = test::scratch_dir("limits_h5") + "/deep.h5";
  {
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::create(path);
    f.root().write_string_attr("model_config", deep_config(300000), h5::StrType::kVlenUtf8);
    test::write_text(path, f.close_image());
  }
  EXPECT_THAT(load_error(path),
              HasSubstr("failed to read Keras model '" + path + "': model_config " + kTooDeep));
}

TEST(KerasLimits, NestingUpToTheLimitStillParses) {
  // Within the limit the config is read, and refused for what it is (a list is not a layer).
  const std::string path = test::scratch_dir("limits_ok") + "/ok.json";
  test::write_text(path, deep_config(limits::kMaxNestingDepth - 3));
  EXPECT_THAT(load_error(path), HasSubstr("a layer entry has no class_name"));
}

std::string dense_model(const std::string& units, const std::string& shape) {
  return R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": )" +
         shape + R"(, "name": "in"}},
    {"class_name": "Dense", "config": {"name": "d", "units": )" +
         units + "}}]}}";
}

TEST(KerasLimits, LayerIntegersBeyond32BitsAreRefusedNamingTheLayer) {
  const std::string dir = test::scratch_dir("limits_ints");
  for (const char* units : {"2147483648", "4294967299", "18446744073709551615", "1e300"}) {
    const std::string path = dir + "/units.json";
    test::write_text(path, dense_model(units, "[null, 4]"));
    EXPECT_THAT(load_error(path),
                HasSubstr("layer 'd' (Dense): bad value for 'units'; expected a positive "
                          "integer at most 2147483647"))
        << units;
  }
}

TEST(KerasLimits, InputDimensionsBeyond32BitsAreRefused) {
  const std::string dir = test::scratch_dir("limits_dims");
  for (const char* shape : {"[null, 4294967300]", "[null, 18446744073709551615]",
                            "[null, 65536, 65536, 65536]", "[null, 4.0]"}) {
    const std::string path = dir + "/dims.json";
    test::write_text(path, dense_model("3", shape));
    EXPECT_THAT(load_error(path), HasSubstr("input of 'in' has shape")) << shape;
  }
}

int run_predict(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  std::vector<const char*> argv = {"nnfleet", "predict"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

TEST(RealFileLimits, PredictRefusesInt64LabelsThatDoNotFitNamingTheFile) {
  const std::string dir = test::scratch_dir("limits_labels");
  const std::string x = fixture("expected/fmnist_mlp_k390.input.npy");
  const int64_t n = load_npy(x).rows();
  // 2^32 + 3 used to wrap to class 3 and 2^31 to a negative label.
  for (const int64_t bad : {(int64_t{1} << 32) + 3, int64_t{1} << 31, int64_t{10}}) {
    Array y = Array::zeros(DType::kI64, Shape{n});
    static_cast<int64_t*>(y.mutable_data())[n - 1] = bad;
    const std::string yp = dir + "/labels.npy";
    save_npy(yp, y);
    try {
      run_predict({fixture("fmnist_mlp_k390.h5"), "--x", x, "--y", yp, "--loss",
                   "sparse_categorical_crossentropy", "--out", dir + "/p.npy"});
      ADD_FAILURE() << "predict accepted the label " << bad;
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("'" + yp + "' has the label " + std::to_string(bad) + " at sample " +
                            std::to_string(n - 1) + "; expected integer class labels 0..9"));
    }
  }
}

TEST(RealFileLimits, PredictRefusesFloatLabelsBeyondInt32) {
  const std::string dir = test::scratch_dir("limits_float_labels");
  const std::string x = fixture("expected/fmnist_mlp_k390.input.npy");
  const int64_t n = load_npy(x).rows();
  Array y = Array::zeros(DType::kF64, Shape{n});
  static_cast<double*>(y.mutable_data())[0] = 1e300;
  save_npy(dir + "/y.npy", y);
  try {
    run_predict({fixture("fmnist_mlp_k390.h5"), "--x", x, "--y", dir + "/y.npy", "--loss",
                 "sparse_categorical_crossentropy", "--out", dir + "/p.npy"});
    ADD_FAILURE() << "predict accepted the label 1e300";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has the label 1.0000000000000001e+300 at sample 0"));
  }
}

}  // namespace
}  // namespace nnfleet
