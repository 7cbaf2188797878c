// A small RAII layer over the HDF5 C API, for reading and writing Keras weight files.
//
// Every failure (a missing object, a corrupt or truncated file, a wrong type) throws FileError
// naming the file and the object path: "failed to read HDF5 file 'm.h5': no group
// 'model_weights/dense_1'". HDF5's own error-stack printing is switched off once, process-wide.
// Reads are bounded: a dataset is only read after its shape matched what the caller expects, and
// attributes larger than kMaxAttrBytes are refused, so a corrupt header cannot make us allocate
// without limit.
//
// Thread-safety: the Debian serial libhdf5 is not thread-safe. Every entry point of this module
// takes hdf5_lock() (a process-wide recursive mutex) while it holds handles; callers that keep
// objects across calls must hold it too (the Keras reader and writer hold it for a whole file).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/limits.h"

namespace nnfleet::h5 {

// A dataset with no bytes in the file.
inline constexpr uint64_t kNoAddress = ~uint64_t{0};

// Attributes and string lists beyond this size are treated as corrupt.
inline constexpr size_t kMaxAttrBytes = limits::kMaxAttrBytes;

std::unique_lock<std::recursive_mutex> hdf5_lock();

// A hid_t with its close function; move-only.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// How a string attribute is stored; h5py writes all of these (str -> vlen UTF-8, bytes -> vlen
// ASCII, numpy |S arrays -> fixed-length ASCII).
enum class StrType { kVlenUtf8, kVlenAscii, kFixedAscii };

class Dataset;

// Raw access to the file's bytes, for reading variable-length strings without HDF5's global-heap
// code (which trusts sizes read from the file and can crash on a corrupt one): the heap IDs are
// read through HDF5, the heap collection is validated and the string copied here.
class RawSource;

// A group (or a file's root group). Carries the file name and its own path for messages.
class Group {
 public:
  Group() = default;
  Group(Handle h, std::string file, std::string path, std::shared_ptr<RawSource> raw)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)), raw_(std::move(raw)) {}

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }  // "/" for the root
  hid_t id() const { return h_.get(); }

  // Whether `name` (a path relative to this group; '/' separates components, so a single
  // component may contain '\') exists, and what it is.
  bool has(const std::string& name) const;
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  Group group(const std::string& name) const;
  Dataset dataset(const std::string& name) const;
  // Names of the direct children, in name order.
  std::vector<std::string> children() const;

  bool has_attr(const std::string& name) const;
  // Names of this group's attributes, in name order.
  std::vector<std::string> attr_names() const;
  // A string attribute in any form h5py writes (scalar or a one-element array).
  std::string string_attr(const std::string& name) const;
  // A list of strings: a string array attribute, an empty array of any type (h5py's `[]`), or
  // Keras's split form name0, name1, ... when `name` itself is absent. Throws when none exists.
  std::vector<std::string> string_list_attr(const std::string& name) const;

  Group create_group(const std::string& name);
  void write_string_attr(const std::string& name, const std::string& value, StrType type);
  // Strings as one array attribute, or h5py's float64 empty array when `values` is empty.
  void write_string_list_attr(const std::string& name, const std::vector<std::string>& values,
                              StrType type);
  // float32 dataset of the given shape (empty dims = scalar). Both return where the dataset's
  // bytes start in the file (kNoAddress for an empty one). Datasets carry no modification time,
  // so a file's bytes depend only on what was written, not on when.
  uint64_t write_floats(const std::string& name, const std::vector<int64_t>& dims,
                        const float* data);
  uint64_t write_int64_scalar(const std::string& name, int64_t v);

  // Throws FileError("failed to <verb> HDF5 file '<file>': <what> '<path>/<name>'").
  [[noreturn]] void fail(const std::string& what, const std::string& name = "") const;
  std::string child_path(const std::string& name) const;

 private:
  Handle h_;
  std::string file_, path_;
  std::shared_ptr<RawSource> raw_;
};

class Dataset {
 public:
  Dataset(Handle h, std::string file, std::string path, std::shared_ptr<RawSource> raw)
      : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)), raw_(std::move(raw)) {}
  const std::string& path() const { return path_; }
  // The dataset's dimensions (empty for a scalar).
  std::vector<int64_t> dims() const;
  // Reads every element converted to float32. The dataset must be numeric (integer or float)
  // and hold exactly n elements.
  void read_floats(float* out, size_t n) const;
  // A numeric scalar (or one-element) dataset as int64.
  int64_t read_int64() const;
  bool has_attr(const std::string& name) const;
  std::string string_attr(const std::string& name) const;
  // HDF5 type class of the elements (H5T_FLOAT, H5T_INTEGER, ...) and their size in bytes.
  H5T_class_t type_class() const;
  size_t type_size() const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  Handle h_;
  std::string file_, path_;
  std::shared_ptr<RawSource> raw_;
};

class File {
 public:
  // Opens an existing file read-only. Throws FileError when it is missing or not HDF5.
  static File open(const std::string& path);
  // Opens an in-memory image (e.g. model.weights.h5 read out of a .keras zip) read-only;
  // `name` is used in messages. The bytes must outlive the File.
  static File open_image(const std::string& name, const std::string& bytes);
  // Creates a file in memory (HDF5's core driver, no backing file); `name` is used in messages.
  // HDF5 itself never writes to disk: in HDF5 1.10, a write that fails there (a full disk) leaves
  // the library holding a half-closed file that crashes the process at exit (H5F__close_cb from
  // H5_term_library). The caller writes the image (close_image()) with its own file code.
  // `expected_bytes`: about how large the file will be (memory is taken in steps of that much).
  static File create(const std::string& name, size_t expected_bytes = 0);

  Group& root() { return root_; }
  const Group& root() const { return root_; }
  // Flushes, closes, and returns the file's bytes; throws FileError. For a file expected over
  // 48 KB the bytes are the core driver's own memory, handed over (its image is a string of this
  // File's from the start), never copied: m8's 8 MB of weights and Adam state were held twice at
  // its save, W1's peak resident memory. A smaller one is copied out (close_image_copy).
  std::string close_image();
  // The same bytes copied out through H5Fget_file_image before the file is closed, as
  // close_image() did before it owned the image: the oracle its tests compare with.
  std::string close_image_copy();

 private:
  File(Handle f, std::string name, std::shared_ptr<RawSource> raw);
  // A created file's memory (the core driver's, through file-image callbacks); declared before
  // file_ so that it outlives the file's close, which may still write to it.
  std::unique_ptr<std::string> image_;
  Handle file_;
  Group root_;
  std::string name_;
};

}  // namespace nnfleet::h5
