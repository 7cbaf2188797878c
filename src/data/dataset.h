// Arrays and datasets, loaded once and shared read-only by every worker.
//
// An Array holds one numeric array as read from a file (uint8 images stay uint8, so Fashion-MNIST
// costs 47 MB, not 188 MB); the first axis is the sample axis. Batches are gathered from it
// through an index list straight into a model's float input buffer, scaling on the fly.
// Arrays are immutable after loading and safe to read from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/shape.h"

namespace nnfleet {

struct FileBytes;  // platform/files.h

// kStr: one std::string per element (a text column, a NumPy unicode array), read only by a
// model's string layers (fleet/fit/string_front.h), which turn it into floats before any batch is
// gathered; the numeric paths (at, gather_rows, first_bad_id, gather_labels) never see it.
enum class DType { kU8, kI32, kI64, kF32, kF64, kStr };
const char* dtype_name(DType t);  // "uint8", "int32", ..., "string"
size_t dtype_size(DType t);

class Array {
 public:
  Array() = default;
  // Takes ownership of `bytes` (dtype_size(t) * shape.size() bytes).
  Array(DType t, Shape shape, std::shared_ptr<const void> storage, const void* data);
  // Allocates a zeroed array.
  static Array zeros(DType t, Shape shape);
  // A kStr array holding `values` (shape.size() of them, C order).
  static Array strings(Shape shape, std::vector<std::string> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }  // full shape, first axis = samples
  int64_t rows() const { return shape_.rank() ? shape_[0] : 0; }
  int64_t row_size() const;    // elements per sample
  Shape sample_shape() const;  // shape without the first axis
  const void* data() const { return data_; }
  void* mutable_data() const { return const_cast<void*>(data_); }  // only while loading
  double at(int64_t flat_index) const;  // any numeric dtype as double (slow path); kStr: NaN
  // kStr only: the elements, C order.
  const std::string* strings() const { return static_cast<const std::string*>(data_); }
  // Rows [begin, end) as a view sharing the storage.
  Array slice_rows(int64_t begin, int64_t end) const;
  bool empty() const { return data_ == nullptr; }
  size_t size_bytes() const { return dtype_size(dtype_) * static_cast<size_t>(shape_.size()); }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::shared_ptr<const void> storage_;
  const void* data_ = nullptr;
};

// The rows of `a` followed by those of `b` (Keras's validation_data after the training rows),
// in a new array: of their dtype, or, when they differ, the narrowest that holds both exactly
// (float64 with a float among them, else int64). Throws DataError naming `what` when their
// sample shapes differ.
Array concat_rows(const Array& a, const Array& b, const std::string& what);
// dst[n, row_size] = float(src row idx[i]) * scale, for i < n.
void gather_rows(const Array& src, const int64_t* idx, int n, float scale, float* dst);
// The first value of `src` that is not an integer id in [0, limit) (a model whose input feeds an
// Embedding): its row (first axis) and value; nullopt when every value is one. Floats must hold
// integers exactly (3.0, not 2.9999); with gather_rows at scale 1 every valid id below 2^24 then
// arrives exactly. Run once when the data is loaded, so the model's hot path needs no check.
struct BadId {
  int64_t row = 0;
  double value = 0;
};
std::optional<BadId> first_bad_id(const Array& src, int64_t limit);

// Integer class labels: dst[n, R] = int32(src[idx[i]]) (src an integer or integral array of R
// values per row: one label per sample, or one per timestep). A value int32 cannot hold (int64
// beyond it, a float that is NaN,
// infinite or out of range) becomes kBadLabel, which no class index equals, so it is never
// wrapped into a valid class (callers check the range with the file's name first).
inline constexpr int32_t kBadLabel = INT32_MIN;
void gather_labels(const Array& src, const int64_t* idx, int n, int32_t* dst);

// Loaders. Each throws DataError naming the file and the problem
// ("failed to read data file 'x.npy': unsupported dtype '<c8'; expected one of |u1, <i4, ...").
// A loader either returns a complete Array or throws; nothing is left half-read.
Array load_idx(const std::string& path);  // plain or gzip, ubyte images/labels
// NPY v1/v2/v3, little-endian, C order. |u1 <i4 <i8 <f4 <f8 load as-is; <U (NumPy unicode
// strings, UTF-32 code points) loads as kStr in UTF-8, each element without its trailing NULs;
// narrower types are widened so no value changes: |b1 -> uint8 (0 or 1), |i1 <i2 <u2 -> int32.
// Fortran order (rank
// >= 2), big-endian ('>') and every other dtype are rejected.
Array load_npy(const std::string& path);
// Member "<key>.npy" of an NPZ archive (np.savez or np.savez_compressed), read as load_npy does.
Array load_npz(const std::string& path, const std::string& key);
// The keys of an NPZ archive's .npy members (suffix removed), in archive order.
std::vector<std::string> npz_keys(const std::string& path);
// CSV with a header row and numeric columns (comma separated; cells trimmed of blanks; "\r\n"
// accepted; blank lines skipped; at least one data row). Returns x [rows, cols-1] as float32 in
// column order without the label, and y [rows] from the column named `label` (int32 when every
// label is integral and fits, else float32). A file whose only feature is a text column (a cell
// that is not a number, or a quoted cell; "" inside quotes is one quote) gives x as kStr [rows]
// with the cells as written (quotes removed, not trimmed inside them).
struct CsvData {
  Array x, y;
  std::vector<std::string> feature_names;
};
CsvData load_csv(const std::string& path, const std::string& label);

// Writers used by `nnfleet predict` and tests (atomic: temporary name, then rename).
// Writes `a` as NPY v1.0 in its own dtype (|u1 <i4 <i8 <f4 <f8; kStr as <U), C order. Throws
// DataError; on failure `path` is left untouched and the temporary file is removed.
void save_npy(const std::string& path, const Array& a);

// Helpers shared by the loaders (and usable by other readers of data files).
// Throws DataError("failed to read data file '<path>': <rule>").
[[noreturn]] void throw_data_error(const std::string& path, const std::string& rule);
// Bytes of a file as an error message may quote them: printable ASCII as is, every other byte
// as \xNN (a NUL or an escape sequence never reaches the terminal), at most `max` bytes of
// `s` and then "...".
std::string printable(std::string_view s, size_t max = 60);
// Reads a whole data file into memory; throws DataError naming the path and the OS reason.
std::string read_data_file(const std::string& path);
// The same into a buffer that is not zero-filled first (for files parsed in place: IDX).
FileBytes read_data_bytes(const std::string& path);

// Fashion-MNIST from the Debian package dataset-fashion-mnist (or $NNFLEET_FASHION_MNIST):
// split "train" (60,000) or "test" (10,000). x is uint8 [n,28,28,1], y uint8 [n].
struct XY {
  Array x, y;
};
XY load_fashion_mnist(const std::string& split);
std::string fashion_mnist_dir();
// The two files load_fashion_mnist(split) reads (images, labels). Throws DataError.
std::vector<std::string> fashion_mnist_files(const std::string& split);

}  // namespace nnfleet
