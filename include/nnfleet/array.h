// nnfleet's public API: views of caller-owned arrays.
//
// An ArrayView names bytes the caller owns (a C++ buffer, a NumPy array): nnfleet reads them in
// place and never copies, frees or writes them. The bytes must stay valid and unchanged for as
// long as the call that receives the view runs. Rows are the first axis; data is C-contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nnfleet::api {

// Axes an array may have, samples first.
inline constexpr int kMaxRank = 6;

// kString: each element a std::string (UTF-8), so `data` points at std::string objects; only a
// model's string input (a Keras InputLayer of dtype string) takes it.
enum class ElementType { kUint8, kInt32, kInt64, kFloat32, kFloat64, kString };

// Bytes of one element: 1, 4, 8, 4, 8, sizeof(std::string).
size_t element_size(ElementType t);
// "uint8", "int32", "int64", "float32", "float64", "string".
const char* element_type_name(ElementType t);

struct ArrayView {
  const void* data = nullptr;  // not owned; C order
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;  // first axis: samples

  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t elements() const;
  size_t bytes() const { return static_cast<size_t>(elements()) * element_size(type); }
};

}  // namespace nnfleet::api
