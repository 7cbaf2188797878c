// nnfleet's public API: data files in and out (NumPy .npy/.npz, IDX, CSV), as the command line
// reads them, and arrays nnfleet owns.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/array.h"
#include "nnfleet/error.h"

namespace nnfleet::api {

// An array nnfleet read (read_array): it owns its bytes, which copies share (cheap) and nobody
// writes. view() is valid for as long as a copy lives.
class Array {
 public:
  Array() = default;
  Array(ArrayView view, std::shared_ptr<const void> owner)
      : view_(std::move(view)), owner_(std::move(owner)) {}

  const ArrayView& view() const { return view_; }
  ElementType type() const { return view_.type; }
  const std::vector<int64_t>& shape() const { return view_.shape; }
  int64_t rows() const { return view_.rows(); }
  bool empty() const { return view_.data == nullptr; }

 private:
  ArrayView view_;
  std::shared_ptr<const void> owner_;
};

// How a read names the option that gives a CSV file's label column in its messages ("--label "
// for the command line).
struct ReadOptions {
  std::string label;                    // a CSV file's label column (the one that is not an input)
  std::string label_option = "label=";  // its spelling in messages
};

// A data file as `nnfleet predict --x` reads it: "file.npy", "file.npz:key", "file.npz" (an
// archive of one array), an IDX file (by its magic bytes, gzipped or not), or "file.csv" (with
// ReadOptions::label; the label column goes to *label_column when it is given). Throws DataError
// (unreadable, malformed, beyond the input limits) and UsageError (an archive of several arrays
// without ":key", a CSV file without a label column).
[[nodiscard]] Array read_array(const std::string& spec, const ReadOptions& options = {},
                               Array* label_column = nullptr);
// Array `key` of an .npz archive (its member "<key>.npy"). Throws DataError.
[[nodiscard]] Array read_npz(const std::string& path, const std::string& key);
// The arrays of an .npz archive (np.savez's keys), in archive order. Throws DataError.
[[nodiscard]] std::vector<std::string> npz_keys(const std::string& path);

// Writes `a` as a NumPy .npy file (float32, int32, ...; C order). Throws FileError, DataError.
void write_npy(const std::string& path, const ArrayView& a);
// Writes an .npz archive of the named arrays ("<name>.npy" members, stored uncompressed),
// whole or not at all (a temporary file renamed into place). Throws FileError, DataError.
void write_npz(const std::string& path,
               const std::vector<std::pair<std::string, ArrayView>>& arrays);

// The Fashion-MNIST IDX files of Debian's dataset-fashion-mnist for `split` ("train" or
// "test"): images, then labels. Throws DataError when the package is not installed.
[[nodiscard]] std::vector<std::string> fashion_mnist_files(const std::string& split);

}  // namespace nnfleet::api
