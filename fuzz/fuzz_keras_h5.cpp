// libFuzzer harness: a Keras HDF5 model file (.h5: model_config, legacy weights) through
// load_keras_model; libhdf5 parses the container.
#include "core/check.h"
#include "fuzz_input.h"
#include "io/keras/keras_reader.h"

NNFLEET_FUZZ_HDF5_SETTINGS

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("model.h5");
  try {
    nnfleet::load_keras_model(file.write(data, size));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
