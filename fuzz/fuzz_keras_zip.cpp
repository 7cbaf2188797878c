// libFuzzer harness: a Keras 3 .keras archive (config.json, metadata.json, model.weights.h5 in a
// zip) through load_keras_model.
#include "core/check.h"
#include "fuzz_input.h"
#include "io/keras/keras_reader.h"

NNFLEET_FUZZ_HDF5_SETTINGS

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("model.keras");
  try {
    nnfleet::load_keras_model(file.write(data, size));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
