// The errors nnfleet throws for anything a user can cause.
//
// Anything a user can cause (a plan, a flag, a data or model file, a shape) throws a subclass of
// nnfleet::Error whose message reads
//   failed to <verb> <object>: <rule>; expected <x>, got <y>
// plus where it happened (file, line, model, layer) and an optional "hint:" line.
// Our own bugs are not errors (they abort; src/core/check.h). No exception crosses a worker
// thread; the front ends (the CLI, Python) turn an Error into an exit code or a Python exception.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

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

// Text from a file (a layer or model name, a path) as a terminal may be shown it: control
// characters (C0, DEL, C1) and bytes that are not UTF-8 become escapes (\x1b, \0, \n, \u009b),
// so that a name can neither drive the terminal (clear the screen, set its title) nor end the
// output at a NUL. With `keep_lines`, line feeds and tabs stay (messages of several lines).
// Printable UTF-8, backslashes included, is kept as it is.
std::string terminal_safe(std::string_view s, bool keep_lines = false);

}  // namespace nnfleet
