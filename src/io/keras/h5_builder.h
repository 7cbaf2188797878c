// Writing small HDF5 files many times over, fast: a Builder takes a file's groups, attributes
// and datasets as a script and makes the file's bytes from it.
//
// Two files written by the same script but for the numbers inside their datasets (the same
// groups, attributes, dataset names, types and shapes, in the same order) are byte for byte
// alike outside those numbers. So the first file of a structure is made by libhdf5 (which costs
// more than training a tiny model: a ~0.5 MB metadata cache set up and zeroed per file), and it
// is kept, with where each dataset's bytes lie, as that structure's template; the next file of
// the structure is the template with its numbers written in place, without calling libhdf5 at
// all. The script, names and attribute values included, is the template's key, so nothing but
// numbers is ever taken from a template. A template is only kept when each dataset's bytes were
// found where libhdf5 said it put them. A varying string (write_varying_string_attr) is written
// to the template as a marker of its length, found again in the image (exactly once, or no
// template is kept), and its bytes are written there like a dataset's.
//
// Thread-safety: a Builder is used by one thread. Templates are kept per thread (a few, a few MB
// at most) and die with it; only the libhdf5 path takes hdf5_lock().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/keras/hdf5.h"

namespace nnfleet::h5 {

class Builder {
 public:
  // A group of the file being built (the root or one made by create_group).
  class Node {
   public:
    Node create_group(const std::string& name);
    // Whether the group `path` ('/'-separated, relative to this one) was created, and that group.
    bool has_group(const std::string& path) const;
    Node group(const std::string& path) const;
    void write_string_attr(const std::string& name, const std::string& value, StrType type);
    // A string that differs between files of one structure (a model's name): its bytes are
    // treated as numbers, its length as structure.
    void write_varying_string_attr(const std::string& name, const std::string& value, StrType type);
    void write_string_list_attr(const std::string& name, const std::vector<std::string>& values,
                                StrType type);
    // The numbers are copied: `data` need not outlive the call.
    void write_floats(const std::string& name, const std::vector<int64_t>& dims, const float* data);
    void write_int64_scalar(const std::string& name, int64_t v);

   private:
    friend class Builder;
    Node(Builder* b, int id) : b_(b), id_(id) {}
    Builder* b_;
    int id_;
  };

  // `name` is used in messages; `expected_bytes` as in File::create.
  explicit Builder(std::string name, size_t expected_bytes = 0);
  Node root() { return Node(this, 0); }
  // The file's bytes; called once (it may free the script's numbers). Throws FileError (from
  // libhdf5's path only).
  std::string finish();

  // How many files this process's Builders made through libhdf5 and from a template.
  struct Counts {
    size_t by_hdf5 = 0, from_template = 0;
  };
  static Counts counts();

 private:
  enum class Op : uint8_t { kGroup, kStringAttr, kVaryingAttr, kStringListAttr, kFloats, kInt64 };
  struct Step {
    Op op;
    StrType type;
    int node;
    std::string name;
    std::vector<int64_t> dims;
    std::vector<std::string> values;
    size_t data_at = 0, data_bytes = 0;  // in data_
    // What a template takes from each file: dataset numbers and varying strings.
    bool patched() const { return op == Op::kFloats || op == Op::kInt64 || op == Op::kVaryingAttr; }
  };
  void add(Step s, const void* data = nullptr, size_t bytes = 0);
  int find_group(int node, const std::string& path) const;
  // Runs the script through libhdf5; `addresses` gets each dataset's place in the image (and
  // kNoAddress for each varying string, written as its marker when `markers`). With `last_use`
  // (the Builder's last use of its numbers) data_ is freed before the image is taken.
  std::string build_with_hdf5(bool markers, std::vector<uint64_t>* addresses,
                              bool last_use = false);
  // Where each patched step's bytes lie in `image`, made by build_with_hdf5(true, &addresses);
  // false when one is not found, or found more than once.
  bool locate(const std::string& image, std::vector<uint64_t>& addresses) const;
  // Writes each patched step's bytes into `image` at `addresses`.
  void patch(std::string& image, const std::vector<uint64_t>& addresses) const;

  std::string name_;
  size_t expected_bytes_;
  std::vector<Step> steps_;
  std::string key_;   // the script, numbers left out
  std::string data_;  // the datasets' bytes, in script order
  std::map<std::pair<int, std::string>, int> children_;
  int nodes_ = 1;
};

}  // namespace nnfleet::h5
