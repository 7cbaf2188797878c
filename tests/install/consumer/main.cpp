// A C++ program against an installed nnfleet: the public headers and nnfleet::nnfleet only.
// Prints "nnfleet <version>" and the size of a float32, and loads nothing.
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
  return bytes == 4 ? 0 : 1;
}
