// A zip bomb in a .keras archive's model.weights.h5 (issue 31, item 7): a 2.1 MB file whose
// weights member inflated to 2 GiB cost 6.3 GB and 32 s for a model of 195 parameters. The member
// is now bounded by what its config's parameters need (limits.h) and by a compression ratio, on
// the sizes the archive declares, before anything is inflated; a member whose data inflates past
// its declared size is refused at that size. Each archive here is generated (tens of MB at most).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "core/limits.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

// A Sequential Dense model on `inputs` features: (inputs + 1) * units parameters.
std::string dense_json(int inputs, int units) {
  return R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_shape": [null, )" +
         std::to_string(inputs) + R"(], "name": "in"}},
    {"class_name": "Dense", "config": {"name": "d", "units": )" +
         std::to_string(units) + "}}]}}";
}

// A valid .keras archive of that model as nnfleet saves it, as members.
struct Archive {
  std::string config, metadata, weights;
  uint64_t params = 0;
};

Archive valid_archive(const std::string& dir, int inputs, int units) {
  test::write_text(dir + "/arch.json", dense_json(inputs, units));
  const LoadedModel lm = load_keras_model(dir + "/arch.json");
  save_keras(dir + "/valid.keras", *lm.model, lm.params.data());
  ZipReader z(dir + "/valid.keras");
  return {z.read("config.json", 1 << 20), z.read("metadata.json", 1 << 20),
          z.read("model.weights.h5", 1 << 24), lm.params.size()};
}

// The archive with `weights` as its weights member, deflated.
std::string write_archive(const std::string& path, const Archive& a, const std::string& weights) {
  write_zip(path, {{"metadata.json", a.metadata, "", false},
                   {"config.json", a.config, "", false},
                   {"model.weights.h5", weights, "", true}});
  return path;
}

std::string load_error(const std::string& path, const std::string& weights = "") {
  try {
    load_keras_model(path, weights);
  } catch (const FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_keras_model('" << path << "') did not throw FileError";
  return "";
}

uint64_t bound_for(uint64_t params, uint64_t layers) {
  return params * limits::kWeightsBytesPerParam + layers * limits::kWeightsBytesPerLayer +
         limits::kWeightsFixedBytes;
}

TEST(KerasWeightsBound, BombedWeightsMemberIsRefusedOnItsDeclaredSize) {
  const std::string dir = test::scratch_dir("weights_bomb");
  const Archive a = valid_archive(dir, 4, 39);
  ASSERT_EQ(a.params, 195u);
  // The valid weights padded with zeros to 32 MiB: about 32 KB once deflated.
  std::string bomb = a.weights;
  bomb.resize(size_t{32} << 20, '\0');
  const std::string path = write_archive(dir + "/bomb.keras", a, bomb);
  ASSERT_LT(test::read_text(path).size(), size_t{64} << 10);
  const std::string expected = "model.weights.h5 inflates to " + std::to_string(bomb.size()) +
                               " bytes; expected at most " + std::to_string(bound_for(195, 1)) +
                               " for the 195 parameters in 1 layer(s) of its config";
  EXPECT_THAT(load_error(path),
              HasSubstr("failed to read Keras model '" + path + "': " + expected));
  // The same member given as --weights for an architecture file.
  EXPECT_THAT(load_error(dir + "/arch.json", path), HasSubstr(expected));
}

TEST(KerasWeightsBound, DeflatedAndStoredWeightsWithinTheBoundStillLoad) {
  const std::string dir = test::scratch_dir("weights_ok");
  const Archive a = valid_archive(dir, 4, 39);
  const LoadedModel stored = load_keras_model(dir + "/valid.keras");
  EXPECT_TRUE(stored.has_weights);
  const LoadedModel deflated = load_keras_model(write_archive(dir + "/d.keras", a, a.weights));
  EXPECT_TRUE(deflated.has_weights);
  EXPECT_EQ(deflated.params, stored.params);
}

// Sets the inflated size an archive declares for `member` (local and central headers) to `size`
// and its CRC to `crc`, so that only the size lies.
void declare(std::string& zip, const std::string& member, uint32_t size, uint32_t crc) {
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) zip[at + static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  };
  int patched = 0;
  for (size_t at = 0; at + 46 < zip.size(); ++at) {
    if (zip.compare(at, 4, "PK\x03\x04") == 0 && zip.compare(at + 30, member.size(), member) == 0) {
      put32(at + 14, crc);
      put32(at + 22, size);
      ++patched;
    } else if (zip.compare(at, 4, "PK\x01\x02") == 0 &&
               zip.compare(at + 46, member.size(), member) == 0) {
      put32(at + 16, crc);
      put32(at + 24, size);
      ++patched;
    }
  }
  ASSERT_EQ(patched, 2);
}

TEST(KerasWeightsBound, MemberInflatingPastItsDeclaredSizeIsRefusedAtThatSize) {
  const std::string dir = test::scratch_dir("weights_lie");
  const Archive a = valid_archive(dir, 4, 39);
  std::string bomb = a.weights;
  bomb.resize(size_t{32} << 20, '\0');
  std::string zip = test::read_text(write_archive(dir + "/lie.keras", a, bomb));
  // It declares 64 KiB (within the bound), with the CRC of those first 64 KiB.
  const uint32_t small = 64 << 10;
  const auto crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bomb.data()), static_cast<uInt>(small)));
  declare(zip, "model.weights.h5", small, crc);
  const std::string path = dir + "/lie.keras";
  test::write_text(path, zip);
  EXPECT_THAT(load_error(path),
              HasSubstr("failed to read zip archive '" + path +
                        "': member 'model.weights.h5' inflates to more than the 65536 bytes its "
                        "header declares"));
}

TEST(KerasWeightsBound, HighlyCompressedLargeMemberIsRefusedByItsRatio) {
  const std::string dir = test::scratch_dir("weights_ratio");
  // 1,049,600 parameters: a bound of about 50 MB, above the ratio's floor.
  const Archive a = valid_archive(dir, 1024, 1024);
  ASSERT_GT(bound_for(a.params, 1), limits::kWeightsRatioFloorBytes + (uint64_t{8} << 20));
  std::string bomb = a.weights;
  bomb.resize(limits::kWeightsRatioFloorBytes + (uint64_t{4} << 20), '\0');
  const std::string path = write_archive(dir + "/ratio.keras", a, bomb);
  EXPECT_THAT(load_error(path), HasSubstr("model.weights.h5 inflates from "));
  EXPECT_THAT(load_error(path),
              HasSubstr(" to " + std::to_string(bomb.size()) + " bytes; expected at most " +
                        std::to_string(limits::kMaxWeightsRatio) + " times its compressed size"));
}

}  // namespace
}  // namespace nnfleet
