// The error hierarchy of nnfleet and the internal consistency checks.
//
// Anything a user can cause (a plan, a flag, a data or model file, a shape) throws a subclass of
// nnfleet::Error whose message reads
//   failed to <verb> <object>: <rule>; expected <x>, got <y>
// plus where it happened (file, line, model, layer) and an optional "hint:" line.
// Our own bugs are not errors: NNFLEET_CHECK (always on) and NNFLEET_DCHECK (debug and sanitizer
// builds) print file:line and abort. No exception crosses a worker thread; only main() turns an
// Error into an exit code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace nnfleet {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};
// A bad plan file or plan field.
class PlanError : public Error {
  using Error::Error;
};
// A missing, unreadable or malformed data file, or data that does not fit a model.
class DataError : public Error {
  using Error::Error;
};
// A model that cannot be built: unknown layer, incompatible shapes, bad layer option.
class ModelError : public Error {
  using Error::Error;
};
// A model file (Keras .h5/.keras/.json or native) that cannot be read or written.
class FileError : public Error {
  using Error::Error;
};
// A bad command-line flag or argument.
class UsageError : public Error {
  using Error::Error;
};
// A bad value in a layer (or optimizer, loss) config. key() is the config key ("units"); the
// message is "<rule>; expected <x>, got <y>" without location, which callers add (plan file and
// line, or Keras file and layer).
class ConfigError : public ModelError {
 public:
  ConfigError(std::string key, const std::string& what) : ModelError(what), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};
// Thrown on an MPI rank other than 0 when a collective step failed somewhere. Rank 0 reports the
// problem and exits with its code; this rank leaves quietly, with 0, so that mpirun does not end
// the job before rank 0 has said why.
class PeerExit : public Error {
 public:
  PeerExit() : Error("stopped because another rank failed; rank 0 reports why") {}
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "nnfleet: internal check failed at %s:%d: %s\n", file, line, cond);
  std::abort();
}

}  // namespace nnfleet

#define NNFLEET_CHECK(cond) \
  ((cond) ? (void)0 : ::nnfleet::check_failed(__FILE__, __LINE__, #cond))
#if defined(NDEBUG) && !defined(NNFLEET_SANITIZED)
#define NNFLEET_DCHECK(cond) ((void)0)
#else
#define NNFLEET_DCHECK(cond) NNFLEET_CHECK(cond)
#endif
