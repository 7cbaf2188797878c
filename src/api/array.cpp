// ArrayView helpers (nnfleet/array.h) and the conversions between public and engine arrays, both
// ways (convert.h).
#include "nnfleet/array.h"

#include <memory>
#include <string>
#include <utility>

#include "api/convert.h"
#include "api/public_array.h"
#include "core/check.h"

namespace nnfleet::api {

static_assert(kMaxRank == Shape::kMaxRank, "the public rank limit is the engine's");

size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::kUint8:
      return 1;
    case ElementType::kInt32:
    case ElementType::kFloat32:
      return 4;
    case ElementType::kInt64:
    case ElementType::kFloat64:
      return 8;
    case ElementType::kString:
      return sizeof(std::string);
  }
  return 0;
}

const char* element_type_name(ElementType t) {
  switch (t) {
    case ElementType::kUint8:
      return "uint8";
    case ElementType::kInt32:
      return "int32";
    case ElementType::kInt64:
      return "int64";
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kFloat64:
      return "float64";
    case ElementType::kString:
      return "string";
  }
  return "?";
}

int64_t ArrayView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace nnfleet::api

namespace nnfleet::api_detail {
namespace {

// The public element types and the engine's, one to one.
constexpr std::pair<api::ElementType, DType> kTypes[] = {
    {api::ElementType::kUint8, DType::kU8},    {api::ElementType::kInt32, DType::kI32},
    {api::ElementType::kInt64, DType::kI64},   {api::ElementType::kFloat32, DType::kF32},
    {api::ElementType::kFloat64, DType::kF64}, {api::ElementType::kString, DType::kStr}};

DType engine_type(api::ElementType t) {
  for (const auto& [pub, eng] : kTypes)
    if (pub == t) return eng;
  return DType::kF32;
}

api::ElementType public_type(DType t) {
  for (const auto& [pub, eng] : kTypes)
    if (eng == t) return pub;
  return api::ElementType::kFloat32;
}

}  // namespace

Array to_array(const api::ArrayView& v, const std::string& what) {
  if (v.shape.empty() || static_cast<int>(v.shape.size()) > Shape::kMaxRank)
    throw DataError("failed to read " + what + ": expected an array of rank 1 to " +
                    std::to_string(Shape::kMaxRank) + " (samples first), got rank " +
                    std::to_string(v.shape.size()));
  Shape s;
  for (int64_t d : v.shape) {
    if (d < 0)
      throw DataError("failed to read " + what + ": expected dimensions of 0 or more, got " +
                      std::to_string(d));
    s.push_back(d);
  }
  if (!v.data && s.size() > 0)
    throw DataError("failed to read " + what + ": expected data, got a null pointer");
  const DType t = engine_type(v.type);
  // An empty array still needs a non-null data pointer: Array::empty() means "no array".
  static const double kNothing = 0;
  return Array(t, s, nullptr, v.data ? v.data : &kNothing);
}

api::Array to_public(const Array& a) {
  auto keep = std::make_shared<const Array>(a);
  api::ArrayView v;
  v.data = a.data();
  v.type = public_type(a.dtype());
  v.shape = dims(a.shape());
  return api::Array(std::move(v), std::shared_ptr<const void>(keep, keep.get()));
}

std::vector<int64_t> dims(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

}  // namespace nnfleet::api_detail
