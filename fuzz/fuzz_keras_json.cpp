// libFuzzer harness: a to_json() architecture (.json) through load_keras_model: the JSON limits and
// the Keras graph builder.
#include "core/check.h"
#include "fuzz_input.h"
#include "io/keras/keras_reader.h"

NNFLEET_FUZZ_HDF5_SETTINGS

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("model.json");
  try {
    nnfleet::load_keras_model(file.write(data, size));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
