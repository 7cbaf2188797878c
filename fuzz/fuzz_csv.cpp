// libFuzzer harness: a CSV file through load_csv. The label column is the input's first header
// cell (so most inputs get past the header), or a name no column has when the input is empty.
#include "core/check.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("input.csv");
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string label = text.substr(0, text.find_first_of(",\r\n"));
  const size_t b = label.find_first_not_of(" \t"), e = label.find_last_not_of(" \t");
  label = b == std::string::npos ? "label" : label.substr(b, e - b + 1);
  try {
    nnfleet::load_csv(file.write(data, size), label);
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
