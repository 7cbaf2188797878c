// libFuzzer harness: an .npz archive through npz_keys and load_npz of (up to 4 of) its members.
#include "core/check.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("input.npz");
  const std::string& path = file.write(data, size);
  try {
    const auto keys = nnfleet::npz_keys(path);
    for (size_t i = 0; i < keys.size() && i < 4; ++i) {
      try {
        nnfleet::load_npz(path, keys[i]);
      } catch (const nnfleet::Error&) {
      }
    }
    nnfleet::load_npz(path, "x");  // a key that is usually missing
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
