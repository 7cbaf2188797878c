// libFuzzer harness: a plain IDX file through load_idx (header, dimensions, size checks).
#include "core/check.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("input.idx");
  try {
    nnfleet::load_idx(file.write(data, size));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
