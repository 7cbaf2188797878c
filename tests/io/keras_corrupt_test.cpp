// Fault injection: truncated and bit-flipped copies of Keras files either load (a flipped bit in
// a weight only changes that weight) or end in a FileError; never a crash, a hang or another
// exception type. Fixed seeds make every run check the same copies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

#include "io/keras/keras_reader.h"
#include "io_test_util.h"
#include "platform/zip_archive.h"
#include "tensor/rng.h"

// libhdf5 1.10 itself leaks a few small blocks when H5Fopen gives up on some corrupt files
// (H5G_mkroot's error path); LeakSanitizer builds ignore leaks allocated inside libhdf5.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }
// A corrupt size can make libhdf5 ask malloc for terabytes; a normal malloc returns null (and
// HDF5 reports an error), which AddressSanitizer only does with this option.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace nnfleet {
namespace {

using test::fixture;

struct Outcome {
  int loaded = 0, refused = 0;
};

// Loads `path` (with `weights`, if any) and runs it once when it loads.
void try_load(const std::string& path, const std::string& weights, const Array& x, Outcome& out) {
  try {
    const LoadedModel lm = load_keras_model(path, weights);
    if (lm.has_weights) (void)test::run_model(lm, x);
    ++out.loaded;
  } catch (const FileError& e) {
    ++out.refused;
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("failed to ", 0), 0u) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": expected FileError, got: " << e.what();
  }
}

struct CorruptCase {
  const char* file;   // the file that gets damaged
  const char* model;  // "" = the damaged file is the model; else the architecture
  const char* input;  // an input batch for a forward pass
};

class KerasCorrupt : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(KerasCorrupt, TruncatedCopiesEndInFileError) {
  const CorruptCase& c = GetParam();
  const std::string bytes = test::read_text(fixture(c.file));
  const Array x = load_npy(fixture(c.input));
  const std::string dir = test::scratch_dir(std::string("truncated_") +
                                            std::to_string(std::hash<std::string>()(c.file)));
  const size_t n = bytes.size();
  Outcome out;
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{100}, size_t{512},
                     size_t{2048}, n / 8, n / 4, n / 2, 3 * n / 4, n - 4096, n - 100, n - 1}) {
    if (len >= n) continue;
    const std::string path = dir + "/t" + std::to_string(len) + "_" +
                             std::string(c.file).substr(std::string(c.file).find_last_of('/') + 1);
    test::write_text(path, bytes.substr(0, len));
    if (*c.model)
      try_load(fixture(c.model), path, x, out);
    else
      try_load(path, "", x, out);
  }
  std::printf("[ truncate ] %-32s refused %d, loaded %d\n", c.file, out.refused, out.loaded);
  EXPECT_GT(out.refused, 0);
}

TEST_P(KerasCorrupt, BitFlippedCopiesLoadOrEndInFileError) {
  const CorruptCase& c = GetParam();
  const std::string bytes = test::read_text(fixture(c.file));
  const Array x = load_npy(fixture(c.input));
  const std::string name = std::string(c.file).substr(std::string(c.file).find_last_of('/') + 1);
  const std::string dir = test::scratch_dir("flipped_" + name);
  // NNFLEET_BITFLIP_COPIES / NNFLEET_BITFLIP_SEED run a longer or different search by hand.
  const char* env_copies = std::getenv("NNFLEET_BITFLIP_COPIES");
  const char* env_seed = std::getenv("NNFLEET_BITFLIP_SEED");
  Rng rng(env_seed ? std::strtoull(env_seed, nullptr, 10) : 12345, c.file, "bitflip");
  Outcome out;
  const int copies = env_copies ? std::atoi(env_copies) : 150;
  for (int k = 0; k < copies; ++k) {
    std::string damaged = bytes;
    // Half the copies hit the first 8 KB (superblock, headers, zip local header), the rest land
    // anywhere; some get several flips.
    const int flips = 1 + static_cast<int>(rng.below(3));
    for (int f = 0; f < flips; ++f) {
      const size_t span = k % 2 == 0 ? std::min<size_t>(bytes.size(), 8192) : bytes.size();
      const size_t pos = static_cast<size_t>(rng.below(span));
      damaged[pos] = static_cast<char>(damaged[pos] ^ (1 << rng.below(8)));
    }
    const std::string path = dir + "/" + name;
    test::write_text(path, damaged);
    if (*c.model)
      try_load(fixture(c.model), path, x, out);
    else
      try_load(path, "", x, out);
  }
  std::printf("[ bitflip  ] %-32s refused %d, loaded %d of %d\n", c.file, out.refused, out.loaded,
              copies);
  EXPECT_EQ(out.refused + out.loaded, copies);
}

// Damage inside a well-formed zip (its CRCs rewritten): the HDF5 weights and the JSON config
// reach the parsers instead of being stopped by libzip's CRC check.
class KerasCorruptMember
    : public ::testing::TestWithParam<std::tuple<const char*, const char*, const char*>> {};

TEST_P(KerasCorruptMember, BitFlippedMembersLoadOrEndInFileError) {
  const auto [file, member, input] = GetParam();
  const Array x = load_npy(fixture(input));
  std::vector<ZipMember> members;
  {
    ZipReader z(fixture(file));
    for (const auto& name : z.names())
      members.push_back({name, z.read(name, uint64_t{1} << 32), ""});
  }
  const std::string name = std::string(file).substr(std::string(file).find_last_of('/') + 1);
  const std::string path = test::scratch_dir("member_" + name + "_" + member) + "/" + name;
  const char* env_copies = std::getenv("NNFLEET_BITFLIP_COPIES");
  const char* env_seed = std::getenv("NNFLEET_BITFLIP_SEED");
  Rng rng(env_seed ? std::strtoull(env_seed, nullptr, 10) : 777, std::string(file) + member,
          "bitflip");
  Outcome out;
  const int copies = env_copies ? std::atoi(env_copies) : 120;
  for (int k = 0; k < copies; ++k) {
    auto damaged = members;
    for (auto& [n, bytes, unused_file, unused_deflate] : damaged) {
      if (n != member || bytes.empty()) continue;
      const int flips = 1 + static_cast<int>(rng.below(3));
      for (int f = 0; f < flips; ++f) {
        const size_t span = k % 2 == 0 ? std::min<size_t>(bytes.size(), 8192) : bytes.size();
        const size_t pos = static_cast<size_t>(rng.below(span));
        bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << rng.below(8)));
      }
    }
    write_zip(path, damaged);
    try_load(path, "", x, out);
  }
  std::printf("[ member   ] %-32s %-18s refused %d, loaded %d of %d\n", file, member, out.refused,
              out.loaded, copies);
  EXPECT_EQ(out.refused + out.loaded, copies);
}

INSTANTIATE_TEST_SUITE_P(
    RealFiles, KerasCorruptMember,
    ::testing::Values(std::make_tuple("fmnist_cnn_k310.keras", "model.weights.h5",
                                      "expected/fmnist_cnn_k310.input.npy"),
                      std::make_tuple("fmnist_cnn_k310.keras", "config.json",
                                      "expected/fmnist_cnn_k310.input.npy"),
                      std::make_tuple("fmnist_mlp_nested_tf214.keras", "model.weights.h5",
                                      "expected/fmnist_mlp_nested_tf214.input.npy")));

INSTANTIATE_TEST_SUITE_P(
    Synthetic, KerasCorruptMember,
    ::testing::Values(std::make_tuple("synthetic/functional_k3.keras", "model.weights.h5",
                                      "synthetic/functional_k3.input.npy"),
                      std::make_tuple("synthetic/functional_k3.keras", "config.json",
                                      "synthetic/functional_k3.input.npy")));

std::string corrupt_case_name(const ::testing::TestParamInfo<CorruptCase>& info) {
  std::string s = std::string(info.param.file);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    RealFiles, KerasCorrupt,
    ::testing::Values(
        CorruptCase{"mnist_mlp_functional_tf224.h5", "",
                    "expected/mnist_mlp_functional_tf224.input.npy"},
        CorruptCase{"fmnist_mlp_k390.h5", "", "expected/fmnist_mlp_k390.input.npy"},
        CorruptCase{"fmnist_cnn_k310.keras", "", "expected/fmnist_cnn_k310.input.npy"},
        CorruptCase{"fmnist_mlp_nested_tf214.keras", "",
                    "expected/fmnist_mlp_nested_tf214.input.npy"},
        CorruptCase{"lenet5_weights_k224.h5", "lenet5_k224.json",
                    "expected/lenet5_weights_k224.input.npy"},
        CorruptCase{"lenet5_k224.json", "", "expected/lenet5_weights_k224.input.npy"}),
    corrupt_case_name);

INSTANTIATE_TEST_SUITE_P(
    Synthetic, KerasCorrupt,
    ::testing::Values(CorruptCase{"synthetic/mlp_vlen_utf8.h5", "", "synthetic/mlp.input.npy"},
                      CorruptCase{"synthetic/mlp_split.h5", "", "synthetic/mlp.input.npy"},
                      CorruptCase{"synthetic/functional_k3.keras", "",
                                  "synthetic/functional_k3.input.npy"}),
    corrupt_case_name);

}  // namespace
}  // namespace nnfleet
