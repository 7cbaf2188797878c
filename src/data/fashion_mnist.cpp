// Fashion-MNIST as installed by Debian's dataset-fashion-mnist (the four IDX files, gzipped),
// or from the directory named by $NNFLEET_FASHION_MNIST.
#include <cstdlib>
#include <cstring>

#include "data/dataset.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
constexpr int kClasses = 10;

// The file for `stem` in `dir`: the .gz the package ships, else an uncompressed copy.
std::string find_file(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz";
  if (file_exists(gz)) return gz;
  if (file_exists(dir + "/" + stem)) return dir + "/" + stem;
  throw DataError("failed to read data file '" + gz + "': Fashion-MNIST is not installed in '" +
                  dir + "'; expected " + stem + ".gz there, got no such file\n" +
                  "hint: run `apt-get install dataset-fashion-mnist` (or scripts/setup), or set "
                  "NNFLEET_FASHION_MNIST to a directory holding the four IDX files");
}

}  // namespace

std::string fashion_mnist_dir() {
  const char* env = std::getenv("NNFLEET_FASHION_MNIST");
  return (env && *env) ? std::string(env) : std::string(kDefaultDir);
}

std::vector<std::string> fashion_mnist_files(const std::string& split) {
  if (split != "train" && split != "test")
    throw DataError(
        "failed to load Fashion-MNIST: unknown split; expected 'train' or 'test', got '" + split +
        "'");
  const std::string dir = fashion_mnist_dir();
  const std::string prefix = split == "train" ? "train" : "t10k";
  return {find_file(dir, prefix + "-images-idx3-ubyte"),
          find_file(dir, prefix + "-labels-idx1-ubyte")};
}

XY load_fashion_mnist(const std::string& split) {
  const std::vector<std::string> files = fashion_mnist_files(split);
  const std::string& images = files[0];
  const std::string& labels = files[1];

  XY xy{load_idx(images), load_idx(labels)};
  const Shape& xs = xy.x.shape();
  if (xs.rank() != 4 || xs[1] != 28 || xs[2] != 28)
    throw_data_error(images,
                     "not Fashion-MNIST images; expected shape [n,28,28,1], got " + xs.str());
  if (xy.y.shape().rank() != 1 || xy.y.rows() != xy.x.rows())
    throw_data_error(labels, "labels do not match the images; expected shape [" +
                                 std::to_string(xy.x.rows()) + "], got " + xy.y.shape().str());
  const auto* y = static_cast<const uint8_t*>(xy.y.data());
  for (int64_t i = 0; i < xy.y.rows(); ++i)
    if (y[i] >= kClasses)
      throw_data_error(labels, "label out of range at sample " + std::to_string(i) +
                                   "; expected 0 to 9, got " + std::to_string(y[i]));
  return xy;
}

}  // namespace nnfleet
