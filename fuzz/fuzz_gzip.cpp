// libFuzzer harness: a gzip-compressed IDX file through load_idx. The first two bytes are always
// the gzip magic (1f 8b), so every input reaches the inflating reader (members, trailers, the
// deflate ratio bound) rather than the plain IDX path.
#include <vector>

#include "core/check.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("input.idx.gz");
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() < 2) bytes.resize(2);
  bytes[0] = 0x1f;
  bytes[1] = 0x8b;
  try {
    nnfleet::load_idx(file.write(bytes.data(), bytes.size()));
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
