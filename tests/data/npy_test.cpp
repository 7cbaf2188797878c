// NPY and NPZ loading against files numpy wrote (tools/make_data_fixtures.py), the rejection of
// every unsupported variant with its message, truncation at every length, and save_npy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data/dataset.h"
#include "test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using namespace nnfleet::testing;

TEST(Npy, LoadsEveryNumpyFixtureWithItsValuesAndShape) {
  int checked = 0;
  for (const ExpectedArray& e : expected_arrays()) {
    if (!ends_with(e.file, ".npy")) continue;
    expect_matches(load_npy(fixture(e.file)), e);
    ++checked;
  }
  EXPECT_GE(checked, 14);
}

TEST(Npy, ScalarHasRankZeroAndOneElement) {
  Array a = load_npy(fixture("f8_scalar.npy"));
  EXPECT_EQ(a.shape().rank(), 0);
  EXPECT_EQ(a.shape().size(), 1);
  EXPECT_EQ(a.at(0), 3.25);
}

TEST(Npy, EmptyArrayLoadsWithZeroRows) {
  Array a = load_npy(fixture("f4_0x3.npy"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.rows(), 0);
  EXPECT_EQ(a.row_size(), 3);
}

TEST(Npy, NarrowTypesAreWidenedWithoutChangingValues) {
  EXPECT_EQ(load_npy(fixture("b1_3.npy")).dtype(), DType::kU8);
  EXPECT_EQ(load_npy(fixture("i1_4.npy")).dtype(), DType::kI32);
  EXPECT_EQ(load_npy(fixture("u2_3.npy")).dtype(), DType::kI32);
  EXPECT_EQ(load_npy(fixture("i2_4.npy")).at(0), -32768);
}

TEST(Npy, ReadsVersion2And3Headers) {
  EXPECT_EQ(load_npy(fixture("f4_v2.npy")).at(3), 3.25);
  EXPECT_EQ(load_npy(fixture("u1_v3.npy")).at(2), 9);
}

TEST(Npy, RejectsFortranOrderNamingTheRule) {
  std::string msg = data_error_of([] { load_npy(fixture("f8_fortran.npy")); });
  EXPECT_THAT(msg, HasSubstr("failed to read data file '" + fixture("f8_fortran.npy") + "'"));
  EXPECT_THAT(msg, HasSubstr("Fortran-order arrays are not supported; expected fortran_order "
                             "False (C order), got True"));
}

TEST(Npy, RejectsBigEndianNamingTheDtype) {
  std::string msg = data_error_of([] { load_npy(fixture("i4_bigendian.npy")); });
  EXPECT_THAT(msg, HasSubstr("big-endian data is not supported; expected '<i4', got '>i4'"));
}

TEST(Npy, RejectsUnsupportedDtypeListingSupportedOnes) {
  std::string msg = data_error_of([] { load_npy(fixture("c8.npy")); });
  EXPECT_THAT(msg, HasSubstr("unsupported dtype '<c8'; expected one of |u1, |b1, |i1, <u2, <i2, "
                             "<i4, <i8, <f4, <f8"));
}

TEST(Npy, RejectsStructuredDtype) {
  std::string msg = data_error_of([] { load_npy(fixture("structured.npy")); });
  EXPECT_THAT(msg, HasSubstr("unsupported dtype (structured or record array); expected one of"));
}

TEST(Npy, RejectsBadMagic) {
  std::string msg = data_error_of([] { load_npy(fixture("table.csv")); });
  EXPECT_THAT(msg, HasSubstr("bad magic, not an NPY file; expected '\\x93NUMPY', got 'a,b,la'"));
}

TEST(Npy, RejectsMissingFileWithOsReason) {
  std::string msg = data_error_of([] { load_npy(fixture("no_such_file.npy")); });
  EXPECT_THAT(msg, HasSubstr("no_such_file.npy': No such file or directory"));
}

TEST(Npy, RejectsMalformedHeaderQuotingIt) {
  TempDir dir;
  std::string bytes = read_bytes(fixture("u1_2x3.npy"));
  const size_t at = bytes.find("'shape'");
  bytes.replace(at, 7, "'shapX'");
  write_bytes(dir.file("bad.npy"), bytes);
  std::string msg = data_error_of([&] { load_npy(dir.file("bad.npy")); });
  EXPECT_THAT(msg, HasSubstr("malformed NPY header; expected a dict with 'descr'"));
  EXPECT_THAT(msg, HasSubstr("'shapX': (2, 3)"));
}

TEST(Npy, RejectsTrailingBytesAfterTheData) {
  TempDir dir;
  write_bytes(dir.file("long.npy"), read_bytes(fixture("u1_2x3.npy")) + "xx");
  std::string msg = data_error_of([&] { load_npy(dir.file("long.npy")); });
  EXPECT_THAT(msg, HasSubstr("file is longer than its NPY header declares; expected 134 bytes, "
                             "got 136"));
}

TEST(Npy, TruncatedDataReportsExpectedAndActualSize) {
  TempDir dir;
  const std::string bytes = read_bytes(fixture("f4_2x3x2x2.npy"));  // 128 header + 96 data
  write_bytes(dir.file("cut.npy"), bytes.substr(0, 200));
  std::string msg = data_error_of([&] { load_npy(dir.file("cut.npy")); });
  EXPECT_THAT(msg, HasSubstr("file is truncated; expected 224 bytes, got 200"));
}

TEST(Npy, EveryTruncatedPrefixIsRejectedCleanly) {
  TempDir dir;
  for (const char* name : {"u1_2x3.npy", "f4_v2.npy", "u1_v3.npy", "i2_4.npy", "b1_3.npy"}) {
    const std::string bytes = read_bytes(fixture(name));
    for_each_truncation(dir.file("cut.npy"), bytes, [&](size_t n) {
      std::string msg = data_error_of([&] { load_npy(dir.file("cut.npy")); });
      EXPECT_THAT(msg, HasSubstr("file is truncated; expected")) << name << " cut at " << n;
    });
  }
}

TEST(Npy, CorruptedHeaderBytesNeverCrash) {
  TempDir dir;
  const std::string bytes = read_bytes(fixture("f4_2x3x2x2.npy"));
  PatchableFile file(dir.file("bad.npy"), bytes);
  for (size_t i = 0; i < 128; ++i) {
    for (char c : {'\0', '(', '9', '\'', '\xff'}) {
      file.set(i, c);
      try {
        Array a = load_npy(dir.file("bad.npy"));
        EXPECT_EQ(a.size_bytes() + 128, bytes.size());  // a harmless edit (padding) still loads
      } catch (const DataError&) {
      }
    }
    file.restore(i);
  }
}

TEST(Npy, SaveThenLoadRoundTripsEveryDtype) {
  TempDir dir;
  for (const char* name :
       {"u1_2x3.npy", "i4_4.npy", "i8_2x2.npy", "f4_2x3x2x2.npy", "f8_scalar.npy", "f4_0x3.npy"}) {
    Array a = load_npy(fixture(name));
    save_npy(dir.file("out.npy"), a);
    Array b = load_npy(dir.file("out.npy"));
    EXPECT_EQ(b.dtype(), a.dtype()) << name;
    EXPECT_EQ(b.shape(), a.shape()) << name;
    for (int64_t i = 0; i < a.shape().size(); ++i) EXPECT_EQ(b.at(i), a.at(i)) << name;
  }
}

TEST(Npy, SaveWritesTheSameBytesAsNumpy) {
  TempDir dir;
  for (const char* name : {"u1_2x3.npy", "i4_4.npy", "f4_2x3x2x2.npy", "f8_scalar.npy"}) {
    save_npy(dir.file("out.npy"), load_npy(fixture(name)));
    EXPECT_EQ(read_bytes(dir.file("out.npy")), read_bytes(fixture(name))) << name;
  }
}

TEST(Npy, SaveOfARowSliceWritesOnlyThoseRows) {
  TempDir dir;
  Array a = load_npy(fixture("u1_2x3.npy"));
  save_npy(dir.file("row1.npy"), a.slice_rows(1, 2));
  Array b = load_npy(dir.file("row1.npy"));
  EXPECT_EQ(b.shape(), (Shape{1, 3}));
  EXPECT_EQ(b.at(0), 150);
}

TEST(Npy, SaveIsAtomicAndLeavesNoTemporaryFile) {
  TempDir dir;
  Array a = load_npy(fixture("i4_4.npy"));
  save_npy(dir.file("out.npy"), a);
  save_npy(dir.file("out.npy"), a);  // overwrite in place
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "out.npy");
  }
  EXPECT_EQ(files, 1);
}

TEST(Npy, SaveIntoMissingDirectoryThrowsAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.file("missing/out.npy");
  std::string msg;
  try {
    save_npy(path, load_npy(fixture("i4_4.npy")));
  } catch (const DataError& e) {
    msg = e.what();
  }
  EXPECT_THAT(msg, HasSubstr("failed to write data file '" + path + "'"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Npz, LoadsStoredAndDeflatedMembersWithTheirValues) {
  int checked = 0;
  for (const ExpectedArray& e : expected_arrays()) {
    if (!ends_with(e.file, ".npz")) continue;
    expect_matches(load_npz(fixture(e.file), e.key), e);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(Npz, ListsKeysInArchiveOrderWithoutSuffix) {
  EXPECT_EQ(npz_keys(fixture("stored.npz")), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(npz_keys(fixture("deflated.npz")), (std::vector<std::string>{"x", "y"}));
}

TEST(Npz, AcceptsTheMemberNameWithNpySuffix) {
  EXPECT_EQ(load_npz(fixture("stored.npz"), "y.npy").at(1), -4);
}

TEST(Npz, MissingKeyListsTheKeysPresent) {
  std::string msg = data_error_of([] { load_npz(fixture("deflated.npz"), "labels"); });
  EXPECT_THAT(msg, HasSubstr("no array named 'labels' in the archive; expected one of 'x', 'y', "
                             "got 'labels'"));
}

TEST(Npz, RejectsAFileThatIsNotAZipArchive) {
  std::string msg = data_error_of([] { load_npz(fixture("u1_2x3.npy"), "x"); });
  EXPECT_THAT(msg, HasSubstr("not a valid NPZ archive; expected a zip file"));
}

TEST(Npz, EveryTruncatedPrefixIsRejectedCleanly) {
  TempDir dir;
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const std::string bytes = read_bytes(fixture(name));
    for_each_truncation(dir.file("cut.npz"), bytes, [&](size_t) {
      data_error_of([&] { load_npz(dir.file("cut.npz"), "x"); });
    });
  }
}

TEST(Npz, CorruptedBytesAnywhereAreRejectedOrHarmless) {
  TempDir dir;
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const std::string bytes = read_bytes(fixture(name));
    PatchableFile file(dir.file("bad.npz"), bytes);
    for (size_t i = 0; i < bytes.size(); ++i) {
      file.set(i, static_cast<char>(bytes[i] ^ 0x5a));
      for (const char* key : {"x", "y"}) {
        try {
          Array a = load_npz(dir.file("bad.npz"), key);
          EXPECT_FALSE(a.empty());
        } catch (const DataError&) {
        }
      }
      file.restore(i);
    }
  }
}

TEST(Npz, MemberErrorsNameTheMember) {
  // A member whose header is broken: the message names the archive and the member.
  TempDir dir;
  std::string bytes = read_bytes(fixture("stored.npz"));
  const size_t at = bytes.find("'descr': '<f4'");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 14, "'descr': '<c8'");
  write_bytes(dir.file("bad.npz"), bytes);
  // The stored member's CRC no longer matches; either way the error names the member.
  std::string msg = data_error_of([&] { load_npz(dir.file("bad.npz"), "x"); });
  EXPECT_THAT(msg, HasSubstr("member 'x.npy'"));
}

}  // namespace
}  // namespace nnfleet
