// Array storage, dtype helpers, batch gathering (rows into a float buffer, labels into int32) and
// the file-reading helpers every loader shares.
#include "data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

template <typename T>
void gather_rows_as(const Array& src, const int64_t* idx, int n, float scale, float* dst) {
  const int64_t row = src.row_size();
  const int64_t rows = src.rows();
  const T* base = static_cast<const T*>(src.data());
  for (int i = 0; i < n; ++i) {
    NNFLEET_CHECK(idx[i] >= 0 && idx[i] < rows);
    const T* s = base + idx[i] * row;
    float* d = dst + static_cast<int64_t>(i) * row;
    for (int64_t j = 0; j < row; ++j) d[j] = static_cast<float>(s[j]) * scale;
  }
}

// int32(v) when it holds v's integer part; kBadLabel otherwise (the casts below are defined).
template <typename T>
int32_t to_label(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = static_cast<double>(v);
    return d >= -2147483648.0 && d < 2147483648.0 ? static_cast<int32_t>(d) : kBadLabel;
  } else if constexpr (sizeof(T) > sizeof(int32_t)) {
    return v >= INT32_MIN && v <= INT32_MAX ? static_cast<int32_t>(v) : kBadLabel;
  } else {
    return static_cast<int32_t>(v);
  }
}

template <typename T>
void gather_labels_as(const Array& src, const int64_t* idx, int n, int32_t* dst) {
  const int64_t rows = src.rows(), r = src.row_size();
  const T* base = static_cast<const T*>(src.data());
  for (int i = 0; i < n; ++i) {
    NNFLEET_CHECK(idx[i] >= 0 && idx[i] < rows);
    for (int64_t j = 0; j < r; ++j) dst[i * r + j] = to_label(base[idx[i] * r + j]);
  }
}

}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kU8:
      return "uint8";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kF32:
      return "float32";
    case DType::kF64:
      return "float64";
    case DType::kStr:
      return "string";
  }
  return "unknown";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kStr:
      return sizeof(std::string);
  }
  return 0;
}

Array::Array(DType t, Shape shape, std::shared_ptr<const void> storage, const void* data)
    : dtype_(t), shape_(shape), storage_(std::move(storage)), data_(data) {
  NNFLEET_CHECK(data_ != nullptr);
}

Array Array::zeros(DType t, Shape shape) {
  NNFLEET_CHECK(shape.size() >= 0);
  // calloc: large blocks come straight from the OS already zeroed, so a loader that overwrites
  // every byte pays nothing for the zeroing. At least one byte so data() is never null.
  const size_t bytes = dtype_size(t) * static_cast<size_t>(shape.size());
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p) throw std::bad_alloc();
  std::shared_ptr<const void> storage(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return Array(t, shape, storage, p);
}

Array Array::strings(Shape shape, std::vector<std::string> values) {
  NNFLEET_CHECK(static_cast<int64_t>(values.size()) == shape.size());
  auto keep = std::make_shared<const std::vector<std::string>>(std::move(values));
  // data() is never null, even for no strings: point at the vector object itself then.
  const void* p = keep->empty() ? static_cast<const void*>(keep.get()) : keep->data();
  return Array(DType::kStr, shape, std::shared_ptr<const void>(keep, p), p);
}

int64_t Array::row_size() const {
  int64_t n = 1;
  for (int i = 1; i < shape_.rank(); ++i) n *= shape_[i];
  return n;
}

Shape Array::sample_shape() const {
  Shape s;
  for (int i = 1; i < shape_.rank(); ++i) s.push_back(shape_[i]);
  return s;
}

double Array::at(int64_t flat_index) const {
  NNFLEET_CHECK(data_ != nullptr && flat_index >= 0 && flat_index < shape_.size());
  switch (dtype_) {
    case DType::kU8:
      return static_cast<const uint8_t*>(data_)[flat_index];
    case DType::kI32:
      return static_cast<const int32_t*>(data_)[flat_index];
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(data_)[flat_index]);
    case DType::kF32:
      return static_cast<const float*>(data_)[flat_index];
    case DType::kF64:
      return static_cast<const double*>(data_)[flat_index];
    case DType::kStr:
      return std::nan("");
  }
  return 0.0;
}

Array Array::slice_rows(int64_t begin, int64_t end) const {
  NNFLEET_CHECK(shape_.rank() >= 1 && 0 <= begin && begin <= end && end <= rows());
  Shape s = shape_;
  s[0] = end - begin;
  const auto* p = static_cast<const char*>(data_) +
                  static_cast<size_t>(begin * row_size()) * dtype_size(dtype_);
  return Array(dtype_, s, storage_, p);
}

Array concat_rows(const Array& a, const Array& b, const std::string& what) {
  if (!(a.sample_shape() == b.sample_shape()))
    throw DataError("failed to load data " + what + ": samples of shape " + b.sample_shape().str() +
                    "; expected the train sample shape " + a.sample_shape().str());
  if (a.dtype() == DType::kStr || b.dtype() == DType::kStr) {
    if (a.dtype() != b.dtype())
      throw DataError("failed to load data " + what + ": " + dtype_name(b.dtype()) +
                      " samples; expected " + dtype_name(a.dtype()) + " as the train samples");
    std::vector<std::string> all(a.strings(), a.strings() + a.shape().size());
    all.insert(all.end(), b.strings(), b.strings() + b.shape().size());
    Shape s = a.shape();
    s[0] = a.rows() + b.rows();
    return Array::strings(s, std::move(all));
  }
  const auto is_float = [](DType t) { return t == DType::kF32 || t == DType::kF64; };
  DType t = a.dtype();
  if (b.dtype() != a.dtype())  // the narrowest dtype that holds both without rounding
    t = is_float(a.dtype()) || is_float(b.dtype()) ? DType::kF64 : DType::kI64;
  Shape s = a.shape();
  s[0] = a.rows() + b.rows();
  Array out = Array::zeros(t, s);
  char* dst = static_cast<char*>(out.mutable_data());
  for (const Array* part : {&a, &b}) {
    if (part->dtype() == t) {
      std::memcpy(dst, part->data(), part->size_bytes());
    } else {
      const int64_t n = part->shape().size();
      for (int64_t i = 0; i < n; ++i) {
        const double v = part->at(i);
        if (t == DType::kF64)
          reinterpret_cast<double*>(dst)[i] = v;
        else  // both integer: at() is exact below 2^53, beyond any label or id
          reinterpret_cast<int64_t*>(dst)[i] = static_cast<int64_t>(v);
      }
    }
    dst += dtype_size(t) * static_cast<size_t>(part->shape().size());
  }
  return out;
}

void gather_rows(const Array& src, const int64_t* idx, int n, float scale, float* dst) {
  NNFLEET_CHECK(!src.empty() && src.shape().rank() >= 1 && n >= 0);
  const int64_t row = src.row_size();
  switch (src.dtype()) {
    case DType::kU8:
      // Image data: a widening convert-and-scale per row that the compiler vectorizes.
      return gather_rows_as<uint8_t>(src, idx, n, scale, dst);
    case DType::kF32: {
      const float* base = static_cast<const float*>(src.data());
      for (int i = 0; i < n; ++i) {
        NNFLEET_CHECK(idx[i] >= 0 && idx[i] < src.rows());
        const float* s = base + idx[i] * row;
        float* d = dst + static_cast<int64_t>(i) * row;
        if (scale == 1.0f) {
          std::memcpy(d, s, static_cast<size_t>(row) * sizeof(float));
        } else {
          for (int64_t j = 0; j < row; ++j) d[j] = s[j] * scale;
        }
      }
      return;
    }
    case DType::kI32:
      return gather_rows_as<int32_t>(src, idx, n, scale, dst);
    case DType::kI64:
      return gather_rows_as<int64_t>(src, idx, n, scale, dst);
    case DType::kF64:
      return gather_rows_as<double>(src, idx, n, scale, dst);
    case DType::kStr:
      NNFLEET_CHECK(!"strings are encoded by the model's string layers before batching");
  }
}

namespace {
template <typename T>
std::optional<BadId> first_bad_id_as(const Array& src, int64_t limit) {
  const T* v = static_cast<const T*>(src.data());
  const int64_t total = src.shape().size(), row = std::max<int64_t>(src.row_size(), 1);
  for (int64_t i = 0; i < total; ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      const double d = static_cast<double>(v[i]);
      ok = d >= 0 && d < static_cast<double>(limit) && d == std::floor(d);
    } else if constexpr (std::is_signed_v<T>) {
      ok = v[i] >= 0 && static_cast<int64_t>(v[i]) < limit;
    } else {
      ok = static_cast<int64_t>(v[i]) < limit;
    }
    if (!ok) return BadId{i / row, static_cast<double>(v[i])};
  }
  return std::nullopt;
}
}  // namespace

std::optional<BadId> first_bad_id(const Array& src, int64_t limit) {
  if (src.empty()) return std::nullopt;
  switch (src.dtype()) {
    case DType::kU8:
      return first_bad_id_as<uint8_t>(src, limit);
    case DType::kI32:
      return first_bad_id_as<int32_t>(src, limit);
    case DType::kI64:
      return first_bad_id_as<int64_t>(src, limit);
    case DType::kF32:
      return first_bad_id_as<float>(src, limit);
    case DType::kF64:
      return first_bad_id_as<double>(src, limit);
    case DType::kStr:
      return BadId{0, std::nan("")};
  }
  return std::nullopt;
}

void gather_labels(const Array& src, const int64_t* idx, int n, int32_t* dst) {
  NNFLEET_CHECK(!src.empty() && src.shape().rank() >= 1 && n >= 0);
  switch (src.dtype()) {
    case DType::kU8:
      return gather_labels_as<uint8_t>(src, idx, n, dst);
    case DType::kI32:
      return gather_labels_as<int32_t>(src, idx, n, dst);
    case DType::kI64:
      return gather_labels_as<int64_t>(src, idx, n, dst);
    case DType::kF32:
      return gather_labels_as<float>(src, idx, n, dst);
    case DType::kF64:
      return gather_labels_as<double>(src, idx, n, dst);
    case DType::kStr:
      NNFLEET_CHECK(!"string labels are not class labels");
  }
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

void throw_data_error(const std::string& path, const std::string& rule) {
  throw DataError("failed to read data file '" + path + "': " + rule);
}

std::string read_data_file(const std::string& path) {
  std::string bytes, why;
  if (!read_regular_file(path, bytes, why)) throw_data_error(path, why);
  return bytes;
}

FileBytes read_data_bytes(const std::string& path) {
  FileBytes bytes;
  std::string why;
  if (!read_regular_file(path, bytes, why)) throw_data_error(path, why);
  return bytes;
}

}  // namespace nnfleet
