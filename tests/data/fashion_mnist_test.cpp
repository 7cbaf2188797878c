// Fashion-MNIST from the installed Debian package. These tests fail (never skip) when the files
// are missing: scripts/setup installs dataset-fashion-mnist.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cstdlib>

#include "data/dataset.h"
#include "test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using namespace nnfleet::testing;

// Sets an environment variable for one scope and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

XY load_or_fail(const std::string& split) {
  try {
    return load_fashion_mnist(split);
  } catch (const Error& e) {
    ADD_FAILURE() << "Fashion-MNIST must be installed for these tests (scripts/setup installs "
                     "dataset-fashion-mnist): "
                  << e.what();
    return {};
  }
}

// The first 8 + `n` decompressed bytes of a gzip file, read independently of load_idx.
std::string gunzip_prefix(const std::string& path, size_t n) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out(n, '\0');
  const int got = gzread(f, out.data(), static_cast<unsigned>(n));
  gzclose(f);
  out.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return out;
}

TEST(FashionMnist, TrainSplitHas60000ImagesOf28x28x1AndLabels) {
  XY xy = load_or_fail("train");
  ASSERT_FALSE(xy.x.empty());
  EXPECT_EQ(xy.x.dtype(), DType::kU8);
  EXPECT_EQ(xy.x.shape(), (Shape{60000, 28, 28, 1}));
  EXPECT_EQ(xy.x.size_bytes(), 47040000u);  // held once, as bytes
  EXPECT_EQ(xy.y.dtype(), DType::kU8);
  EXPECT_EQ(xy.y.shape(), (Shape{60000}));
}

TEST(FashionMnist, TestSplitHas10000Images) {
  XY xy = load_or_fail("test");
  ASSERT_FALSE(xy.x.empty());
  EXPECT_EQ(xy.x.shape(), (Shape{10000, 28, 28, 1}));
  EXPECT_EQ(xy.y.shape(), (Shape{10000}));
}

TEST(FashionMnist, LabelsMatchTheRawIdxFileAndAreBalanced) {
  XY xy = load_or_fail("train");
  ASSERT_FALSE(xy.y.empty());
  // The label file's header (magic 0x00000801, count 60000) and first labels, read with zlib.
  const std::string raw = gunzip_prefix(fashion_mnist_dir() + "/train-labels-idx1-ubyte.gz", 16);
  ASSERT_EQ(raw.size(), 16u);
  EXPECT_EQ(raw.substr(0, 8), std::string("\x00\x00\x08\x01\x00\x00\xea\x60", 8));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(xy.y.at(i), static_cast<uint8_t>(raw[8 + i])) << i;
  EXPECT_EQ(xy.y.at(0), 9);  // the first training image is an ankle boot
  std::array<int, 10> count{};
  for (int64_t i = 0; i < xy.y.rows(); ++i) ++count[static_cast<int>(xy.y.at(i))];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(count[c], 6000) << "class " << c;
}

TEST(FashionMnist, ImagesMatchTheRawIdxFile) {
  XY xy = load_or_fail("test");
  ASSERT_FALSE(xy.x.empty());
  const std::string raw =
      gunzip_prefix(fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz", 16 + 2 * 784);
  ASSERT_EQ(raw.size(), 16u + 2 * 784);
  EXPECT_EQ(raw.substr(0, 4), std::string("\x00\x00\x08\x03", 4));
  for (int64_t i = 0; i < 2 * 784; ++i)
    ASSERT_EQ(xy.x.at(i), static_cast<uint8_t>(raw[16 + i])) << i;
}

TEST(FashionMnist, MissingDirectoryNamesItAndSuggestsTheDebianPackage) {
  TempDir dir;
  ScopedEnv env("NNFLEET_FASHION_MNIST", dir.file("nowhere"));
  EXPECT_EQ(fashion_mnist_dir(), dir.file("nowhere"));
  std::string msg = data_error_of([] { load_fashion_mnist("train"); });
  EXPECT_THAT(msg, HasSubstr("Fashion-MNIST is not installed in '" + dir.file("nowhere") + "'"));
  EXPECT_THAT(msg, HasSubstr("apt-get install dataset-fashion-mnist"));
}

TEST(FashionMnist, UnknownSplitIsRejected) {
  std::string msg = data_error_of([] { load_fashion_mnist("validation"); });
  EXPECT_THAT(msg, HasSubstr("unknown split; expected 'train' or 'test', got 'validation'"));
}

TEST(FashionMnist, DirectoryComesFromTheEnvironment) {
  // The fixture directory holds no Fashion-MNIST; a missing variable means the Debian path.
  {
    ScopedEnv env("NNFLEET_FASHION_MNIST", "");
    EXPECT_EQ(fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  }
  ScopedEnv env("NNFLEET_FASHION_MNIST", "/some/dir");
  EXPECT_EQ(fashion_mnist_dir(), "/some/dir");
}

}  // namespace
}  // namespace nnfleet
