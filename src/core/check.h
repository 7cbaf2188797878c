// Internal consistency checks: our own bugs, never a user's input (those throw the nnfleet::Error
// subclasses of include/nnfleet/error.h). NNFLEET_CHECK is always on; NNFLEET_DCHECK only in
// debug and sanitizer builds. Both print file:line and abort.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "nnfleet/error.h"

namespace nnfleet {

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "nnfleet: internal check failed at %s:%d: %s\n", file, line, cond);
  std::abort();
}

}  // namespace nnfleet

#define NNFLEET_CHECK(cond) ((cond) ? (void)0 : ::nnfleet::check_failed(__FILE__, __LINE__, #cond))
#if defined(NDEBUG) && !defined(NNFLEET_SANITIZED)
#define NNFLEET_DCHECK(cond) ((void)0)
#else
#define NNFLEET_DCHECK(cond) NNFLEET_CHECK(cond)
#endif
