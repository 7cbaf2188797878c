// libFuzzer harness: an .npy file through load_npy (header parser, dtype widening, size checks).
#include "core/check.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("input.npy");
  try {
    nnfleet::load_npy(file.write(data, size));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
