// Array basics and batch gathering: gather_rows per dtype (fast paths and generic), scaling,
// gather_labels, and row slices sharing storage.
#include "data/dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace nnfleet {
namespace {

// An array of `t` and `shape` whose flat element i holds value(i).
template <typename T>
Array make(DType t, Shape shape, double (*value)(int64_t)) {
  Array a = Array::zeros(t, shape);
  auto* p = static_cast<T*>(a.mutable_data());
  for (int64_t i = 0; i < shape.size(); ++i) p[i] = static_cast<T>(value(i));
  return a;
}

double small_int(int64_t i) { return static_cast<double>((i * 7) % 251); }
double signed_frac(int64_t i) { return static_cast<double>(i) * 0.25 - 10.0; }

TEST(Array, DtypeNamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::kU8), "uint8");
  EXPECT_STREQ(dtype_name(DType::kI32), "int32");
  EXPECT_STREQ(dtype_name(DType::kI64), "int64");
  EXPECT_STREQ(dtype_name(DType::kF32), "float32");
  EXPECT_STREQ(dtype_name(DType::kF64), "float64");
  EXPECT_EQ(dtype_size(DType::kU8), 1u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
}

TEST(Array, ZerosHasShapeRowsAndZeroBytes) {
  Array a = Array::zeros(DType::kF32, Shape{5, 2, 3});
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.rows(), 5);
  EXPECT_EQ(a.row_size(), 6);
  EXPECT_EQ(a.sample_shape(), (Shape{2, 3}));
  EXPECT_EQ(a.size_bytes(), 5u * 6u * 4u);
  for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(a.at(i), 0.0);
}

TEST(Array, DefaultIsEmpty) {
  Array a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.rows(), 0);
}

TEST(Array, SliceRowsSharesStorageAndOffsetsData) {
  Array a = make<int32_t>(DType::kI32, Shape{4, 3}, small_int);
  Array s = a.slice_rows(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.data(), static_cast<const int32_t*>(a.data()) + 3);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(s.at(i), a.at(i + 3));
  Array empty = a.slice_rows(4, 4);
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_FALSE(empty.empty());
}

TEST(Array, SliceOutlivesTheOriginal) {
  Array s;
  {
    Array a = make<double>(DType::kF64, Shape{3, 2}, signed_frac);
    s = a.slice_rows(2, 3);
  }
  EXPECT_EQ(s.at(1), signed_frac(5));
}

// Keras's validation_data after the training rows: the same dtype kept, mixed ones widened to a
// dtype that holds both exactly, other sample shapes refused.
TEST(Array, ConcatRowsAppendsAndWidensMixedDtypes) {
  const Array a = make<int32_t>(DType::kI32, Shape{4, 3}, small_int);
  const Array b = make<int32_t>(DType::kI32, Shape{2, 3}, small_int);
  const Array c = concat_rows(a, b, "v");
  EXPECT_EQ(c.dtype(), DType::kI32);
  EXPECT_EQ(c.shape(), (Shape{6, 3}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(c.at(i), a.at(i));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c.at(12 + i), b.at(i));
  const Array u = make<uint8_t>(DType::kU8, Shape{1, 3}, small_int);
  EXPECT_EQ(concat_rows(a, u, "v").dtype(), DType::kI64);
  const Array f = make<double>(DType::kF64, Shape{1, 3}, signed_frac);
  const Array m = concat_rows(u, f, "v");
  EXPECT_EQ(m.dtype(), DType::kF64);
  EXPECT_EQ(m.at(4), signed_frac(1));
  EXPECT_EQ(m.at(0), u.at(0));
  EXPECT_THROW((void)concat_rows(a, make<int32_t>(DType::kI32, Shape{2, 2}, small_int), "v"),
               DataError);
}

// gather_rows must equal at(row * row_size + j) * scale, for every dtype.
template <typename T>
void check_gather_rows(DType t, double (*value)(int64_t), float scale) {
  SCOPED_TRACE(dtype_name(t));
  Array a = make<T>(t, Shape{7, 2, 3, 1}, value);
  const std::vector<int64_t> idx = {6, 0, 3, 3, 1};
  std::vector<float> dst(idx.size() * 6, -1.0f);
  gather_rows(a, idx.data(), static_cast<int>(idx.size()), scale, dst.data());
  for (size_t i = 0; i < idx.size(); ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(dst[i * 6 + j], static_cast<float>(a.at(idx[i] * 6 + j)) * scale)
          << "row " << i << " element " << j;
}

TEST(GatherRows, MatchesElementwiseForEveryDtype) {
  for (float scale : {1.0f, 1.0f / 255.0f, -2.0f}) {
    check_gather_rows<uint8_t>(DType::kU8, small_int, scale);
    check_gather_rows<int32_t>(DType::kI32, signed_frac, scale);
    check_gather_rows<int64_t>(DType::kI64, small_int, scale);
    check_gather_rows<float>(DType::kF32, signed_frac, scale);
    check_gather_rows<double>(DType::kF64, signed_frac, scale);
  }
}

TEST(GatherRows, Uint8ScaledToUnitRange) {
  Array a = Array::zeros(DType::kU8, Shape{2, 4});
  std::memcpy(a.mutable_data(), "\x00\x80\xff\x01\x02\x03\x04\x05", 8);
  const int64_t idx[] = {0};
  float dst[4];
  gather_rows(a, idx, 1, 1.0f / 255.0f, dst);
  EXPECT_EQ(dst[0], 0.0f);
  EXPECT_FLOAT_EQ(dst[1], 128.0f / 255.0f);
  EXPECT_EQ(dst[2], 1.0f);
}

TEST(GatherRows, GathersFromASlice) {
  Array a = make<float>(DType::kF32, Shape{5, 2}, signed_frac);
  Array s = a.slice_rows(2, 5);
  const int64_t idx[] = {2, 0};
  float dst[4];
  gather_rows(s, idx, 2, 1.0f, dst);
  EXPECT_EQ(dst[0], static_cast<float>(signed_frac(8)));
  EXPECT_EQ(dst[2], static_cast<float>(signed_frac(4)));
}

TEST(GatherRows, ZeroRowsWritesNothing) {
  Array a = make<uint8_t>(DType::kU8, Shape{3, 2}, small_int);
  float dst[1] = {42.0f};
  gather_rows(a, nullptr, 0, 1.0f, dst);
  EXPECT_EQ(dst[0], 42.0f);
}

TEST(GatherLabels, ConvertsEveryDtypeToInt32) {
  auto label = [](int64_t i) { return static_cast<double>((i * 3) % 10); };
  const std::vector<int64_t> idx = {4, 0, 9, 2};
  for (DType t : {DType::kU8, DType::kI32, DType::kI64, DType::kF32, DType::kF64}) {
    Array a = Array::zeros(t, Shape{10});
    for (int64_t i = 0; i < 10; ++i) {
      switch (t) {
        case DType::kU8:
          static_cast<uint8_t*>(a.mutable_data())[i] = label(i);
          break;
        case DType::kI32:
          static_cast<int32_t*>(a.mutable_data())[i] = label(i);
          break;
        case DType::kI64:
          static_cast<int64_t*>(a.mutable_data())[i] = label(i);
          break;
        case DType::kF32:
          static_cast<float*>(a.mutable_data())[i] = label(i);
          break;
        case DType::kF64:
          static_cast<double*>(a.mutable_data())[i] = label(i);
          break;
        case DType::kStr:  // text is no label (not in the list above)
          break;
      }
    }
    int32_t dst[4];
    gather_labels(a, idx.data(), 4, dst);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(dst[i], label(idx[i])) << dtype_name(t);
  }
}

TEST(GatherLabels, AcceptsOneValuePerRowWithTrailingUnitAxis) {
  Array a = Array::zeros(DType::kI32, Shape{3, 1});
  static_cast<int32_t*>(a.mutable_data())[2] = -7;
  const int64_t idx[] = {2};
  int32_t dst[1];
  gather_labels(a, idx, 1, dst);
  EXPECT_EQ(dst[0], -7);
}

using ArrayDeathTest = ::testing::Test;
TEST_F(ArrayDeathTest, GatherWithAnIndexOutOfRangeIsACheckFailure) {
  Array a = Array::zeros(DType::kU8, Shape{3, 2});
  const int64_t idx[] = {3};
  float dst[2];
  EXPECT_DEATH(gather_rows(a, idx, 1, 1.0f, dst), "internal check failed");
}

TEST(GatherLabels, ValuesInt32CannotHoldBecomeTheBadLabelNeverAnotherClass) {
  // int64 2^32 + 3 would wrap to class 3 and 2^31 to a negative number; floats beyond int32 and
  // NaN have no defined conversion at all.
  Array i64 = Array::zeros(DType::kI64, Shape{4});
  auto* l = static_cast<int64_t*>(i64.mutable_data());
  l[0] = (int64_t{1} << 32) + 3;
  l[1] = int64_t{1} << 31;
  l[2] = -(int64_t{1} << 40);
  l[3] = 2;
  Array f64 = Array::zeros(DType::kF64, Shape{4});
  auto* d = static_cast<double*>(f64.mutable_data());
  d[0] = 1e300;
  d[1] = std::nan("");
  d[2] = 2147483648.0;
  d[3] = 2.0;
  const int64_t idx[] = {0, 1, 2, 3};
  for (const Array* a : {&i64, &f64}) {
    int32_t dst[4];
    gather_labels(*a, idx, 4, dst);
    EXPECT_EQ(dst[0], kBadLabel) << dtype_name(a->dtype());
    EXPECT_EQ(dst[1], kBadLabel) << dtype_name(a->dtype());
    EXPECT_EQ(dst[2], kBadLabel) << dtype_name(a->dtype());
    EXPECT_EQ(dst[3], 2) << dtype_name(a->dtype());
  }
}

}  // namespace
}  // namespace nnfleet
