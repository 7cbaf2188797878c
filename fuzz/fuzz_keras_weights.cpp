// libFuzzer harness: a valid .keras config (a small Dense model, 195 parameters) with a fuzzed
// model.weights.h5, through load_keras_model. The first byte chooses how the member is stored:
// bit 0 deflated (so the bound on what a member may inflate to is reached: limits.h); bits 1 and
// 2 both set, the member padded with zeros to 2 MiB, past the bound of about 1.1 MB (a bomb, which
// must be refused before it is inflated). The rest is the member's bytes (seeds: the weights of
// real .keras files).
#include <cstdlib>

#include "core/check.h"
#include "fuzz_input.h"
#include "io/keras/keras_reader.h"
#include "platform/zip_archive.h"

NNFLEET_FUZZ_HDF5_SETTINGS

namespace {

const char* kConfig = R"({"module": "keras", "class_name": "Sequential", "config": {"name": "s",
  "layers": [{"module": "keras.layers", "class_name": "InputLayer",
              "config": {"batch_shape": [null, 4], "name": "in"}},
             {"module": "keras.layers", "class_name": "Dense",
              "config": {"name": "d", "units": 39, "activation": "relu"}}]}})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("model.keras");
  if (size == 0) return 0;
  const bool deflate = data[0] & 1, bomb = (data[0] & 6) == 6;
  std::string weights(reinterpret_cast<const char*>(data + 1), size - 1);
  if (bomb) weights.resize(size_t{2} << 20, '\0');
  try {
    nnfleet::write_zip(file.path(), {{"metadata.json", R"({"keras_version": "3.10.0"})", "", false},
                                     {"config.json", kConfig, "", false},
                                     {"model.weights.h5", weights, "", deflate}});
    nnfleet::load_keras_model(file.path());
    if (bomb) std::abort();  // 2 MiB for 195 parameters: above the bound, never loaded
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
