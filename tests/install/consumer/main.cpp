// A C++ program against an installed nnfleet: the public headers and nnfleet::nnfleet only.
// Prints "nnfleet <version>" and the size of a float32, and asks for a model file that is not
// there: the FileError proves the whole engine (Keras I/O, ONNX export, kernels) links from the
// installed static libraries and their dependencies.
#include <nnfleet/nnfleet.h>
#include <nnfleet/version.h>

#include <cstdio>

// The internal headers (src/) stay inside nnfleet's own build.
#if __has_include("core/config.h")
#error "the installed nnfleet exposes its internal headers (core/config.h)"
#endif

int main() {
  std::printf("nnfleet %s\n", NNFLEET_VERSION_STRING);
  const size_t bytes = nnfleet::api::element_size(nnfleet::api::ElementType::kFloat32);
  std::printf("float32: %zu bytes\n", bytes);
  try {
    (void)nnfleet::api::Model::load("/nonexistent/model.keras");
    std::printf("loaded a model that is not there\n");
    return 1;
  } catch (const nnfleet::FileError& e) {
    std::printf("refused as expected: %s\n", e.what());
  }
  return bytes == 4 ? 0 : 1;
}
