// IDX loading, plain and gzip, against the fixture files, and every malformed variant.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "data/dataset.h"
#include "test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using namespace nnfleet::testing;

TEST(Idx, LoadsPlainAndGzipFixturesWithTheirValues) {
  int checked = 0;
  for (const ExpectedArray& e : expected_arrays()) {
    if (e.file.find(".idx") == std::string::npos) continue;
    expect_matches(load_idx(fixture(e.file)), e);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(Idx, ImagesGainAChannelAxis) {
  Array a = load_idx(fixture("images_3x4x5.idx.gz"));
  EXPECT_EQ(a.dtype(), DType::kU8);
  EXPECT_EQ(a.shape(), (Shape{3, 4, 5, 1}));
  EXPECT_EQ(a.sample_shape(), (Shape{4, 5, 1}));
  EXPECT_EQ(a.row_size(), 20);
}

TEST(Idx, DetectsGzipByMagicBytesNotByName) {
  Array a = load_idx(fixture("labels_gzip_without_suffix.idx"));
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.at(2), 9);
}

TEST(Idx, TruncatedPlainFileReportsExpectedAndActualBytes) {
  TempDir dir;
  write_bytes(dir.file("cut.idx"), read_bytes(fixture("images_3x4x5.idx")).substr(0, 50));
  std::string msg = data_error_of([&] { load_idx(dir.file("cut.idx")); });
  EXPECT_THAT(msg, HasSubstr("failed to read data file '" + dir.file("cut.idx") +
                             "': file is truncated; expected 76 bytes, got 50"));
}

TEST(Idx, TruncatedGzipFileReportsDecompressedBytes) {
  TempDir dir;
  // A gzip stream of a truncated file: complete gzip, short IDX payload.
  const std::string gz = read_bytes(fixture("images_3x4x5.idx.gz"));
  write_bytes(dir.file("cut.idx.gz"), gz.substr(0, gz.size() - 30));
  std::string msg = data_error_of([&] { load_idx(dir.file("cut.idx.gz")); });
  EXPECT_THAT(msg, HasSubstr("file is truncated; expected"));
}

TEST(Idx, EveryTruncatedPrefixIsRejectedCleanly) {
  TempDir dir;
  for (const char* name :
       {"images_3x4x5.idx", "images_3x4x5.idx.gz", "labels_3.idx", "labels_3.idx.gz"}) {
    const std::string bytes = read_bytes(fixture(name));
    for_each_truncation(dir.file("cut"), bytes, [&](size_t n) {
      std::string msg = data_error_of([&] { load_idx(dir.file("cut")); });
      EXPECT_THAT(msg, HasSubstr("truncated")) << name << " cut at " << n;
    });
  }
}

TEST(Idx, GzipStreamMissingItsTrailerIsTruncated) {
  TempDir dir;
  const std::string gz = read_bytes(fixture("labels_3.idx.gz"));
  write_bytes(dir.file("cut.gz"), gz.substr(0, gz.size() - 4));  // drop ISIZE
  std::string msg = data_error_of([&] { load_idx(dir.file("cut.gz")); });
  EXPECT_THAT(msg, HasSubstr("file is truncated; expected a complete gzip stream"));
}

TEST(Idx, CorruptedGzipIsRejectedCleanly) {
  TempDir dir;
  const std::string gz = read_bytes(fixture("images_3x4x5.idx.gz"));
  int rejected = 0;
  PatchableFile file(dir.file("bad.gz"), gz);
  for (size_t i = 2; i < gz.size(); ++i) {
    file.set(i, static_cast<char>(gz[i] ^ 0x21));
    try {
      load_idx(dir.file("bad.gz"));
    } catch (const DataError&) {
      ++rejected;
    }
    file.restore(i);
  }
  EXPECT_GT(rejected, 50);  // the CRC catches payload damage; header flags may be harmless
}

TEST(Idx, CorruptGzipDataNamesZlibsReason) {
  TempDir dir;
  std::string gz = read_bytes(fixture("images_3x4x5.idx.gz"));
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0xff);  // inside the CRC32
  write_bytes(dir.file("bad.gz"), gz);
  std::string msg = data_error_of([&] { load_idx(dir.file("bad.gz")); });
  EXPECT_THAT(msg, HasSubstr("gzip data is corrupt (incorrect data check)"));
}

TEST(Idx, RejectsBadMagic) {
  std::string msg = data_error_of([] { load_idx(fixture("u1_2x3.npy")); });
  EXPECT_THAT(msg, HasSubstr("bad magic number, not an IDX file; expected 00 00 08 <rank>, got "
                             "93 4e 55 4d"));
}

TEST(Idx, RejectsNonByteElementType) {
  TempDir dir;
  std::string bytes = read_bytes(fixture("labels_3.idx"));
  bytes[2] = 0x0d;  // float
  write_bytes(dir.file("f.idx"), bytes);
  std::string msg = data_error_of([&] { load_idx(dir.file("f.idx")); });
  EXPECT_THAT(msg, HasSubstr("unsupported IDX element type; expected 08 (unsigned byte), got 0d"));
}

TEST(Idx, RejectsRankZero) {
  TempDir dir;
  write_bytes(dir.file("r0.idx"), std::string("\0\0\x08\0", 4));
  std::string msg = data_error_of([&] { load_idx(dir.file("r0.idx")); });
  EXPECT_THAT(msg, HasSubstr("unsupported IDX rank; expected 1 to 6 dimensions, got 0"));
}

TEST(Idx, RejectsTrailingBytes) {
  TempDir dir;
  write_bytes(dir.file("long.idx"), read_bytes(fixture("labels_3.idx")) + "abc");
  std::string msg = data_error_of([&] { load_idx(dir.file("long.idx")); });
  EXPECT_THAT(msg, HasSubstr("file is longer than its IDX header declares; expected 11 bytes, "
                             "got 14"));
}

TEST(Idx, HugeDeclaredSizeIsTruncationNotAnAllocation) {
  TempDir dir;
  // Header claims 65535 x 65535 x 255 bytes but holds none.
  write_bytes(dir.file("huge.idx"),
              std::string("\0\0\x08\x03\0\0\xff\xff\0\0\xff\xff\0\0\0\xff", 16));
  std::string msg = data_error_of([&] { load_idx(dir.file("huge.idx")); });
  EXPECT_THAT(msg, HasSubstr("file is truncated; expected 1095183237391 bytes, got 16"));
}

TEST(Idx, EmptyFileIsTruncated) {
  TempDir dir;
  write_bytes(dir.file("empty.idx"), "");
  std::string msg = data_error_of([&] { load_idx(dir.file("empty.idx")); });
  EXPECT_THAT(msg, HasSubstr("file is truncated; expected at least 4 bytes, got 0"));
}

TEST(Idx, ConcatenatedGzipMembersAreOneStream) {
  Array a = load_idx(fixture("labels_two_members.idx.gz"));
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.at(0), 7);
}

TEST(Idx, GzipPayloadLongerThanTheHeaderIsRejected) {
  TempDir dir;
  const std::string gz = read_bytes(fixture("labels_3.idx.gz"));
  write_bytes(dir.file("twice.gz"), gz + gz);  // the second member is extra data
  std::string msg = data_error_of([&] { load_idx(dir.file("twice.gz")); });
  EXPECT_THAT(msg, HasSubstr("file is longer than its IDX header declares; expected 11 bytes "
                             "after gzip decompression, got 22"));
}

TEST(Idx, GarbageAfterTheGzipStreamIsRejected) {
  TempDir dir;
  write_bytes(dir.file("junk.gz"), read_bytes(fixture("labels_3.idx.gz")) + "junk");
  std::string msg = data_error_of([&] { load_idx(dir.file("junk.gz")); });
  EXPECT_THAT(msg, HasSubstr("unexpected bytes after the end of the gzip stream; expected end of "
                             "file, got 4 more bytes"));
}

// `raw` as one gzip member, compressed by zlib (independently of the loader's libdeflate).
std::string gzip(const std::string& raw) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// An IDX file of [n, 64, 64] bytes whose values vary (so they compress but not to nothing):
// 3 MB for n = 750, past the size whose buffers are on huge pages.
std::string large_idx(int n) {
  std::string idx = {0, 0, 8, 3};
  for (const uint32_t d : {static_cast<uint32_t>(n), 64u, 64u})
    for (int shift = 24; shift >= 0; shift -= 8) idx += static_cast<char>((d >> shift) & 0xff);
  for (int64_t i = 0; i < int64_t{n} * 64 * 64; ++i)
    idx += static_cast<char>((i * 7 + i / 4096 * 13 + (i % 977 == 0 ? 101 : 0)) % 256);
  return idx;
}

TEST(Idx, LargeGzipFileInflatedWholeHoldsThePlainFilesValues) {
  TempDir dir;
  const std::string raw = large_idx(750);
  write_bytes(dir.file("plain.idx"), raw);
  write_bytes(dir.file("one.idx.gz"), gzip(raw));
  // Two members split inside the elements: libdeflate's member-by-member path.
  write_bytes(dir.file("two.idx.gz"), gzip(raw.substr(0, 1234567)) + gzip(raw.substr(1234567)));
  const Array plain = load_idx(dir.file("plain.idx"));
  ASSERT_EQ(plain.shape(), (Shape{750, 64, 64, 1}));
  ASSERT_EQ(plain.size_bytes(), raw.size() - 16);
  EXPECT_EQ(std::memcmp(plain.data(), raw.data() + 16, plain.size_bytes()), 0);
  for (const char* name : {"one.idx.gz", "two.idx.gz"}) {
    const Array a = load_idx(dir.file(name));
    ASSERT_EQ(a.shape(), plain.shape()) << name;
    EXPECT_EQ(std::memcmp(a.data(), plain.data(), plain.size_bytes()), 0) << name;
    // Aligned elements: only the whole-buffer inflate places them so (the streaming path's calloc
    // block is 16 bytes past a page), so this also shows which path loaded the file.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u) << name;
  }
}

TEST(Idx, LargeGzipFileWithAFaultIsDiagnosedAsASmallOneIs) {
  TempDir dir;
  const std::string raw = large_idx(750);
  const std::string gz = gzip(raw);
  write_bytes(dir.file("cut.gz"), gz.substr(0, gz.size() - 8));  // no CRC trailer
  EXPECT_THAT(data_error_of([&] { load_idx(dir.file("cut.gz")); }),
              HasSubstr("file is truncated; expected a complete gzip stream, got one that ends "
                        "before its checksum trailer"));
  std::string bad_crc = gz;
  bad_crc[gz.size() - 8] = static_cast<char>(bad_crc[gz.size() - 8] ^ 0x55);
  write_bytes(dir.file("crc.gz"), bad_crc);
  EXPECT_THAT(data_error_of([&] { load_idx(dir.file("crc.gz")); }),
              HasSubstr("gzip data is corrupt (incorrect data check)"));
  write_bytes(dir.file("short.gz"), gzip(raw.substr(0, raw.size() - 100)));
  EXPECT_THAT(
      data_error_of([&] { load_idx(dir.file("short.gz")); }),
      HasSubstr("file is truncated; expected " + std::to_string(raw.size()) +
                " bytes after gzip decompression, got " + std::to_string(raw.size() - 100)));
  write_bytes(dir.file("long.gz"), gzip(raw + "xyz"));
  EXPECT_THAT(data_error_of([&] { load_idx(dir.file("long.gz")); }),
              HasSubstr("file is longer than its IDX header declares; expected " +
                        std::to_string(raw.size()) + " bytes after gzip decompression, got " +
                        std::to_string(raw.size() + 3)));
}

}  // namespace
}  // namespace nnfleet
